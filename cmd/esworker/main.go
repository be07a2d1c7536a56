// Command esworker is the esgrid worker agent for lab machines: it joins a
// run's cluster, evaluates the tasks the master sends on one slot per CPU,
// reconnects when the master restarts, and leaves gracefully on SIGTERM.
//
// Run esworker -h for the flags, examples and exit statuses (exit.go).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/problems/plugin"
)

// signalConsole is where run writes, for the line of a second signal:
// JSON under -log-json, like every other line.
var signalConsole atomic.Pointer[logx.Console]

// subreapErr is why esworker could not adopt its plugins' orphans
// (plugin.Subreap), which run logs.
var subreapErr error

// exiting is held by whoever exits: a second signal, or run's end.
var exiting sync.Mutex

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A plugin's descendant that leaves its process group (setsid)
	// becomes esworker's when orphaned, is reaped when it exits, and is
	// killed once no plugin process runs any more (Linux); nothing else
	// in esworker starts a process.
	subreapErr = plugin.Subreap(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	drain := make(chan struct{})
	go func() {
		<-sigs
		close(drain) // first signal: finish what runs, give back what is held
		<-sigs
		// The exit is this one's: run, which may end meanwhile (its
		// plugins killed), must not exit first, with its status, before
		// what the plugins started is killed too.
		exiting.Lock()
		// Each plugin runs in a process group of its own, which no signal
		// to esworker reaches: kill them, or they outlive it.
		n := plugin.KillAll()
		text := fmt.Sprintf("esworker: second signal: killed %d plugin process group(s); exiting now", n)
		if con := signalConsole.Load(); con != nil {
			con.Say(slog.LevelError, text, "second signal: killed the plugin process groups; exiting now", "groups", n)
		} else {
			fmt.Fprintln(os.Stderr, text)
		}
		os.Exit(exitFailure)
	}()
	code := run(ctx, os.Args[1:], drain, os.Stdout, os.Stderr)
	exiting.Lock()
	os.Exit(code)
}
