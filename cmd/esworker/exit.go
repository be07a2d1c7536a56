package main

import (
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
)

// esworker's exit statuses: the commands' rule (flagx: 0 done, 1 failed),
// but for a bad command line, 78, not 2. They are chosen for the systemd unit
// (deploy/esworker.service, Restart=on-failure), which must restart what
// a restart may cure and nothing else; systemd_test.go checks the unit
// against them.
const (
	// exitOK: it stopped as asked, with nothing lost. A drain after the
	// first signal finished, the run ended with -once, or -idle-timeout
	// passed without a master: none is a failure, so none is restarted.
	exitOK = flagx.ExitOK
	// exitFailure: it could not go on, and a restart may cure it: a
	// plugin that fails its start-up check (a network mount not there
	// yet), a port taken, a master given up on, or a second signal that
	// cut a drain short. Restarted.
	exitFailure = flagx.ExitFailure
	// exitCrash is what the Go runtime exits with on a panic or a fatal
	// error (esworker never chooses it): a bug, which a restart gets
	// round. Restarted.
	exitCrash = 2
	// exitConfig: a bad command line or configuration file (EX_CONFIG of
	// sysexits.h), which no restart cures: the unit's
	// RestartPreventExitStatus, so a service fails once, clearly,
	// instead of every RestartSec for ever.
	exitConfig = flagx.ExitConfig
)

// exitTable is the table above as esworker -h and docs/install.md give it.
const exitTable = `Exit status (the systemd unit, deploy/esworker.service, restarts 1 and 2):
  0   stopped as asked: drained after a signal, the run over (-once), or
      -idle-timeout passed; not a failure
  1   a failure a restart may cure: a plugin that fails its start-up check,
      a port taken, the master given up on, a second signal
  2   a crash: a Go panic or fatal error
  78  a bad command line or configuration file: fix it
`

// drainTail bounds what a drain does after its last evaluation returns:
// write the results (a connection's write timeout, 10 s), stop the
// plugins (2 s for each to exit once its standard input ends, then a
// kill and up to 2 s for its exit status) and leave gossip (up to twice
// its 2 s leave timeout). The unit's TimeoutStopSec must leave the
// running evaluations time beyond it.
const drainTail = 20 * time.Second
