package plugin

import (
	"errors"
	"os/exec"
	"sync"
)

// live is every plugin process this program has started and not yet
// killed, so that KillAll can reach them all: each runs in a process
// group of its own (proc_unix.go), which no signal to the program
// reaches.
var live struct {
	mu     sync.Mutex
	procs  map[*proc]struct{}
	killed bool // KillAll was called: no more starts
}

// errKilledAll refuses a start after KillAll.
var errKilledAll = errors.New("every plugin process was killed (the program is exiting)")

// startLive starts cmd and registers pr as live, unless KillAll has been
// called: a process started after it would outlive the program.
func startLive(cmd *exec.Cmd, pr *proc) error {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.killed {
		return errKilledAll
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if live.procs == nil {
		live.procs = make(map[*proc]struct{})
	}
	live.procs[pr] = struct{}{}
	return nil
}

// forget removes a killed process from the live ones.
func forget(pr *proc) {
	live.mu.Lock()
	delete(live.procs, pr)
	live.mu.Unlock()
}

// KillAll kills the process group of every plugin process this program
// has started and not yet stopped, and refuses further starts; it
// returns how many groups it killed. It is for a program that exits at
// once (esworker's second signal) and has no time to Close its plugin
// Problems: their processes, and whatever those started, must not
// outlive it. It does not wait for the processes to exit.
func KillAll() int {
	live.mu.Lock()
	defer live.mu.Unlock()
	live.killed = true
	for pr := range live.procs {
		killGroup(pr.cmd)
	}
	return len(live.procs)
}
