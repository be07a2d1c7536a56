// Package problems holds esgrid's fitness functions and a registry of them,
// so that a master can name a problem and a worker can build it.
package problems

import "context"

// Problem is a fitness function to be minimised.
//
// A Problem that holds resources — a plugin's processes
// (problems/plugin) — also implements io.Closer, and whoever built it
// closes it when done: `if c, ok := p.(io.Closer); ok { c.Close() }`.
// A wrapper around such a problem must implement io.Closer too and close
// what it wraps. Problems built in hold nothing and have no Close.
type Problem interface {
	// Name is the name the problem is registered under.
	Name() string
	// Bounds is the box every coordinate must stay in.
	Bounds() (lower, upper float64)
	// Eval returns f(x). It must depend on x alone (never on time, order or
	// the machine) and be safe for concurrent use. Long evaluations should
	// return ctx.Err() soon after ctx is cancelled; the error is also the
	// seam for problems that live in another process.
	Eval(ctx context.Context, x []float64) (float64, error)
}
