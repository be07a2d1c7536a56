package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/worker"
)

// esworker -relay HOST:PORT: a relay for workers the master cannot reach
// (docs/papers.md §1's R1 in front of W1–W3). It accepts their connections at
// HOST:PORT and carries each, as a stream, over one connection to its
// upstream: the master (-master, or found through gossip with -join), or
// another relay's address (relays chain into a tree). The workers behind
// it are started with -master HOST:PORT (and, if they have one, another
// path after a comma) and without -join: the relay is the gossip member
// that speaks for them (see grid/relay.go). Unless -relay-only, this
// esworker also works, behind its own relay, as R1 does in the paper.

type relayOptions struct {
	addr        string // -relay
	only        bool   // -relay-only
	bufferedMiB int    // -relay-max-buffered
}

// maxRelayBufferedMiB bounds -relay-max-buffered: 64 GiB, less where an
// int cannot count its bytes.
const maxRelayBufferedMiB = min(1<<16, math.MaxInt>>20)

func addRelayFlags(fs *flag.FlagSet, o *relayOptions) {
	fs.StringVar(&o.addr, "relay", "", "run a relay: accept workers (and relays) the master cannot reach at `HOST:PORT` (port 0: any free port) and carry them to the master over one connection; start them with -master HOST:PORT, without -join")
	fs.BoolVar(&o.only, "relay-only", false, "with -relay: only relay, do not evaluate tasks here")
	flagx.IntVar(fs, &o.bufferedMiB, "relay-max-buffered", grid.DefaultRelayBuffered>>20, 1, maxRelayBufferedMiB, "with -relay: the `MiB` the relay holds at most, for all the workers behind it together, of what their master sent and they have not read yet (one worker's 64 MiB at most); the worker whose bytes would pass it is cut off and reconnects")
}

// check checks the relay's flags; given says which flags the command
// line set.
func (o *relayOptions) check(given map[string]bool) error {
	if o.addr == "" {
		switch {
		case o.only:
			return usagef("-relay-only needs -relay HOST:PORT")
		case given["relay-max-buffered"]:
			return usagef("-relay-max-buffered needs -relay HOST:PORT")
		}
		return nil
	}
	if err := flagx.CheckHostPort(o.addr, 0); err != nil {
		return usagef("-relay %q: %v", o.addr, err)
	}
	return nil
}

// checkMasters checks -master, a comma-separated list of HOST:PORT.
func checkMasters(list string) error {
	n := 0
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := flagx.CheckHostPort(a, 1); err != nil {
			return usagef("-master %q: %v", a, err)
		}
		n++
	}
	if n == 0 {
		return usagef("-master %q names no address", list)
	}
	return nil
}

// relayGrace bounds how long a -once esworker whose own agent was told
// the run is over waits for its relay to pass the word to the workers
// behind it and end.
const relayGrace = 10 * time.Second

// startRelay starts the relay of -relay, if any (nil if none), under
// this esworker's name.
func startRelay(ctx context.Context, o *options, key *grid.Key, log *slog.Logger, stderr io.Writer, logJSON bool) (*worker.Relay, error) {
	if o.relay.addr == "" {
		return nil, nil
	}
	if o.name == "" {
		o.name = worker.DefaultName() // the agent behind it has the same name: one machine, one member
	}
	r, err := worker.StartRelay(ctx, o.relayConfig(key, log))
	if err != nil {
		return nil, err
	}
	if !logJSON { // the Info record below says it in JSON
		fmt.Fprintf(stderr, "esworker: relay listening %s\n", r.Addr())
	}
	log.Info("relay listening for workers the master cannot reach", "addr", r.Addr(), "upstream", o.master, "join", o.join)
	return r, nil
}

// relayConfig is the configuration of the relay of -relay.
func (o *options) relayConfig(key *grid.Key, log *slog.Logger) worker.RelayConfig {
	return worker.RelayConfig{Listen: o.relay.addr, Master: o.master, Join: flagx.HostPorts(o.join, grid.DefaultGossipPort),
		Gossip: o.gossip, Key: key, Name: o.name, Once: o.once, MaxBuffered: o.relay.bufferedMiB << 20, Logger: log}
}

// relayOnly serves the relay alone until a signal (or ctx) ends it, or,
// with -once, the master ends the run.
func relayOnly(ctx context.Context, drain <-chan struct{}, rr *worker.Relay, log *slog.Logger) int {
	signalled := false
	select {
	case <-ctx.Done():
	case <-drain:
		log.Info("signal: stopping the relay")
		signalled = true
	case <-rr.Ended():
	}
	rr.Stop()
	// A relay stopped on a signal ends cancelled: that is the stop asked
	// for, and it exits 0 as a worker that drains does.
	err := rr.Err()
	if signalled && errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil && !errors.Is(err, grid.ErrRelayRunOver) && ctx.Err() == nil {
		log.Error("the relay stopped", "err", err)
		return exitFailure
	}
	return exitOK
}
