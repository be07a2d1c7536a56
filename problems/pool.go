package problems

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool evaluates a batch of vectors on a Problem with a fixed number of
// goroutines (slots). It is the in-process Evaluator of the ES engine
// (it has es.Evaluator's method) and the reference that grid runs are
// compared against.
type Pool struct {
	p     Problem
	slots int
}

// NewPool returns a pool of slots goroutines over p; slots ≤ 0 means
// runtime.NumCPU().
func NewPool(p Problem, slots int) *Pool {
	if slots <= 0 {
		slots = runtime.NumCPU()
	}
	return &Pool{p: p, slots: slots}
}

// Slots returns the number of evaluations the pool runs at once.
func (pl *Pool) Slots() int { return pl.slots }

// Evaluate returns f(xs[i]) for every i. Tasks are handed to the slots in
// index order, but the result does not depend on which slot ran what. The
// first failure cancels the rest; the error returned is the failure of
// the lowest task index ("task 7: ..."), so it does not depend on timing
// either. All goroutines have ended when Evaluate returns.
func (pl *Pool) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	fitness := make([]float64, len(xs))
	errs := make([]error, len(xs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range min(pl.slots, len(xs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(xs) || ctx.Err() != nil {
					return
				}
				if fitness[i], errs[i] = pl.eval(ctx, xs[i]); errs[i] != nil {
					cancel()
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	if int(done.Load()) < len(xs) {
		// Cancelled from outside before every task was taken.
		return nil, ctx.Err()
	}
	return fitness, nil
}

// eval runs one evaluation, turning a panic in the problem into an error
// so that one bad vector does not take the process down.
func (pl *Pool) eval(ctx context.Context, x []float64) (f float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", pl.p.Name(), r)
		}
	}()
	return pl.p.Eval(ctx, x)
}

// firstError returns the lowest-index error that is not a cancellation
// (those are usually caused by another task's failure), else the
// lowest-index error, wrapped with its task index.
func firstError(errs []error) error {
	first := -1
	for i, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("task %d: %w", i, err)
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		return fmt.Errorf("task %d: %w", first, errs[first])
	}
	return nil
}
