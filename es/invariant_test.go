package es_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// shuffled evaluates every task in its own goroutine, started in a random
// order after a random delay, so results arrive in an order that changes
// from batch to batch.
type shuffled struct {
	p   problems.Problem
	rng *rand.Rand
}

func (s *shuffled) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	fitness := make([]float64, len(xs))
	errs := make([]error, len(xs))
	var wg sync.WaitGroup
	for _, i := range s.rng.Perm(len(xs)) {
		delay := time.Duration(s.rng.IntN(300)) * time.Microsecond
		wg.Go(func() {
			time.Sleep(delay)
			fitness[i], errs[i] = s.p.Eval(ctx, xs[i])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return fitness, nil
}

// The invariant: with the same seed, the trajectory (every generation's
// statistics, the final population and the best individual) is the same bit
// for bit whatever evaluates the batches.
func TestTrajectoryIndependentOfEvaluator(t *testing.T) {
	ridge, err := problems.New("ridge", 30)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := ridge.Bounds()
	cfg := es.Config{Problem: "ridge", Mu: 30, Lambda: 70, Dim: 30, Lower: lo, Upper: hi, Seed: 42, Stop: es.Stop{Generations: 40}}

	evaluators := []struct {
		name string
		ev   es.Evaluator
	}{
		{"pool 1 slot", problems.NewPool(ridge, 1)},
		{"pool 2 slots", problems.NewPool(ridge, 2)},
		{"pool 16 slots", problems.NewPool(ridge, 16)},
		{"pool 100 slots", problems.NewPool(ridge, 100)},
		{"shuffled with delays", &shuffled{p: ridge, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))}},
	}
	var want trajectory
	for i, tt := range evaluators {
		got := record(t, newEngine(t, cfg), tt.ev, es.RunOptions{})
		if i == 0 {
			want = got
			continue
		}
		t.Run(tt.name, func(t *testing.T) { requireSame(t, want, got) })
	}

	// A different seed is a different run, or the comparison above proves
	// nothing.
	other := cfg
	other.Seed++
	if got := record(t, newEngine(t, other), problems.NewPool(ridge, 1), es.RunOptions{}); sameStats(got.stats[40], want.stats[40]) {
		t.Fatal("seeds 42 and 43 gave the same run")
	}
}
