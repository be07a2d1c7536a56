// Command esrun runs the (μ+λ) Evolution Strategy on one machine: a built-in
// problem (by default the paper's 30-dimensional Ridge function), evaluated
// by a pool of goroutines, with an optional LU load per evaluation,
// checkpoints, resume and a JSON report.
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
