package worker

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/esgrid/esgrid/problems"
)

// Faults emulates a misbehaving machine, as Slowdown and Delay emulate a
// slow one: for tests and demonstrations of how the grid copes. The zero
// value is a healthy worker.
type Faults struct {
	// FailEvery K > 0 makes every K-th evaluation fail with an error.
	FailEvery int
	// HangEvery K > 0 makes every K-th evaluation hang, ignoring its
	// cancel, until the agent stops: a fitness function stuck in a loop.
	HangEvery int
	// Silent makes the worker accept tasks and never run or answer them,
	// while its connection stays alive: a machine whose process is wedged.
	Silent bool
}

func (f Faults) check() error {
	if f.FailEvery < 0 || f.HangEvery < 0 {
		return fmt.Errorf("worker: faults: negative period in %+v", f)
	}
	return nil
}

// any says some fault is set.
func (f Faults) any() bool { return f.FailEvery > 0 || f.HangEvery > 0 || f.Silent }

// faulty wraps a problem with FailEvery and HangEvery.
type faulty struct {
	problems.Problem
	f     Faults
	n     *atomic.Int64   // evaluations so far, over the agent's life
	until <-chan struct{} // a hung evaluation returns when this closes
}

// withFaults returns p with the evaluation faults of f; n counts the
// agent's evaluations across sessions.
func withFaults(p problems.Problem, f Faults, n *atomic.Int64, until <-chan struct{}) problems.Problem {
	if f.FailEvery <= 0 && f.HangEvery <= 0 {
		return p
	}
	return &faulty{Problem: p, f: f, n: n, until: until}
}

func (p *faulty) Eval(ctx context.Context, x []float64) (float64, error) {
	k := p.n.Add(1)
	if p.f.HangEvery > 0 && k%int64(p.f.HangEvery) == 0 {
		<-p.until // deaf to ctx on purpose
		return 0, fmt.Errorf("emulated hang (evaluation %d) ended with the agent", k)
	}
	if p.f.FailEvery > 0 && k%int64(p.f.FailEvery) == 0 {
		return 0, fmt.Errorf("emulated failure of evaluation %d (fails every %d)", k, p.f.FailEvery)
	}
	return p.Problem.Eval(ctx, x)
}
