// Command nocancel is a test plugin that cannot be cancelled: the
// built-in Rastrigin function served as the plugin "nocancel" for any
// dimension, whose hello says cancel:false (plugin.NoCancel), so that the
// host may kill its process on a cancel of a running evaluation. Its
// values equal the built-in rastrigin's, bit for bit. The environment,
// which a worker passes on to its plugins, sets what it costs:
//
//	ESGRID_TEST_START_SLEEP=D  each process sleeps D (a Go duration)
//	                           before its hello: a plugin slow to start
//	ESGRID_TEST_EVAL_SLEEP=D   each evaluation takes D more, deaf to
//	                           cancels: tasks of one cost on every worker
//	ESGRID_TEST_STARTS=FILE    each process appends "start pid=N" to FILE
//	                           as it starts, and "ready pid=N" once it
//	                           has slept (tests count restarts)
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// Name is the problem's name.
const Name = "nocancel"

func main() {
	note("start")
	time.Sleep(duration("ESGRID_TEST_START_SLEEP"))
	note("ready")
	p, err := plugin.PerDim(Name, 1, func(dim int) (problems.Problem, error) {
		return problems.New("rastrigin", dim)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "nocancel:", err)
		os.Exit(1)
	}
	plugin.Main(&costly{Problem: p, cost: duration("ESGRID_TEST_EVAL_SLEEP")}, plugin.Dims(1, 0), plugin.NoCancel())
}

// note appends one line to ESGRID_TEST_STARTS, if set.
func note(what string) {
	if path := os.Getenv("ESGRID_TEST_STARTS"); path != "" {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			fmt.Fprintf(f, "%s pid=%d\n", what, os.Getpid())
			f.Close()
		}
	}
}

// duration reads a duration from the environment; 0 if unset or bad.
func duration(name string) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// costly is the problem with a fixed cost per evaluation.
type costly struct {
	problems.Problem
	cost time.Duration
}

func (c *costly) Eval(ctx context.Context, x []float64) (float64, error) {
	time.Sleep(c.cost) // deaf to ctx, as its hello says
	return c.Problem.Eval(ctx, x)
}
