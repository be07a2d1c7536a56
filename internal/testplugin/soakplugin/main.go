// Command soakplugin is the problem plugin of the soak (cmd/essoak): the
// built-in Rastrigin function, served as the plugin "soak" for any
// dimension, that crashes or hangs on chosen evaluations so that the soak
// exercises real plugin processes that fail. Its faults are set by the
// environment, which esworker passes on to its plugins:
//
//	ESSOAK_CRASH_EVERY=K  the process exits (status 3) on its K-th evaluation
//	ESSOAK_HANG_EVERY=K   its K-th evaluation hangs, deaf to cancels
//	ESSOAK_EVENTS=FILE    each crash and hang is appended to FILE as a line
//
// Evaluations are counted per process from its start, so a crashed slot's
// new process evaluates the task again without crashing (K ≥ 2). A hung
// evaluation lasts until the host kills the process or goes away: the
// process exits once its parent is gone, so that a killed esworker leaves
// no plugin behind. Without these variables it is an ordinary plugin whose
// values equal the built-in rastrigin's, bit for bit.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// Name is the problem's name: esrun -problem soak -plugin soak=PATH.
const Name = "soak"

func main() {
	p, err := plugin.PerDim(Name, 1, func(dim int) (problems.Problem, error) {
		return problems.New("rastrigin", dim)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakplugin:", err)
		os.Exit(1)
	}
	plugin.Main(&chaotic{Problem: p, crashEvery: every("ESSOAK_CRASH_EVERY"), hangEvery: every("ESSOAK_HANG_EVERY"),
		events: os.Getenv("ESSOAK_EVENTS"), parent: os.Getppid()}, plugin.Dims(1, 0))
}

// every reads a fault's period from the environment: 0 (none) unless it
// is a whole number ≥ 2.
func every(name string) int64 {
	k, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil || k < 2 {
		return 0
	}
	return k
}

// chaotic is the problem with the faults of the environment.
type chaotic struct {
	problems.Problem
	crashEvery, hangEvery int64
	events                string
	parent                int
	n                     atomic.Int64
}

func (c *chaotic) Eval(ctx context.Context, x []float64) (float64, error) {
	k := c.n.Add(1)
	switch {
	case c.hangEvery > 0 && k%c.hangEvery == 0:
		c.event("hang", k)
		c.hang()
	case c.crashEvery > 0 && k%c.crashEvery == 0:
		c.event("crash", k)
		os.Exit(3)
	}
	return c.Problem.Eval(ctx, x)
}

// hang never returns: the process ends when its host kills it, or by
// itself once the host is gone (its parent changed).
func (c *chaotic) hang() {
	for {
		time.Sleep(100 * time.Millisecond)
		if os.Getppid() != c.parent {
			os.Exit(4)
		}
	}
}

// event appends one line for the soak's count of faults injected.
func (c *chaotic) event(kind string, k int64) {
	if c.events == "" {
		return
	}
	f, err := os.OpenFile(c.events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "plugin-%s pid=%d eval=%d\n", kind, os.Getpid(), k)
	f.Close()
}
