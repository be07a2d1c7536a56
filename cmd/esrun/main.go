// Command esrun runs the (μ+λ) Evolution Strategy on a built-in problem (by
// default the paper's 30-dimensional Ridge function) with an optional LU
// load per evaluation, checkpoints, resume and a JSON report. It is the
// grid's master: each generation's evaluations are scheduled (WQ, RR, RWQ,
// R3Q or cyclic) over worker agents started in this process and esworker
// processes on other machines, all speaking the same protocol; -inprocess
// evaluates with a pool of goroutines instead.
//
// Run esrun -h for the flags and examples.
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
