// Command essoak is the soak test of esgrid: for a given time it runs run
// after run of real esrun and esworker processes on 127.0.0.1, with a
// problem plugin and seeded chaos (workers killed, stopped and continued,
// plugins that crash and hang, slow links, the master killed and resumed
// from its checkpoint), and after every run checks that it ended within
// its bound, that its trajectory is the in-process one bit for bit, that
// its counters agree, that every process exited as it should and that the
// master's memory stayed bounded. It ends with a summary: runs, faults
// injected and defects found, each with the command that replays it.
//
// Run essoak -h for the flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
