package problems

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/mat"
)

// WithLoad returns p with an n×n LU decomposition added to every
// evaluation: the paper's extra load that turns a cheap function into a
// medium-grained task. The matrix is the same for every n on every machine,
// and the decomposition does not change the fitness. ctx is checked before
// and after the decomposition. n ≤ 0 returns p itself.
func WithLoad(p Problem, n int) Problem {
	if n <= 0 {
		return p
	}
	return &loaded{Problem: p, lu: newLUWork(n)}
}

// loaded is a Problem plus LU work per evaluation.
type loaded struct {
	Problem
	lu *luWork
}

func (l *loaded) Eval(ctx context.Context, x []float64) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l.lu.run()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.Problem.Eval(ctx, x)
}

// luSink receives a value derived from every decomposition, so the
// compiler cannot prove the work unused and drop it.
var luSink atomic.Uint64

// luWork is one n×n decomposition, repeatable and safe for concurrent use:
// the matrix is only read, and each goroutine factorises into an LU taken
// from a pool so that steady state allocates nothing.
type luWork struct {
	a    *mat.Dense
	pool sync.Pool
}

func newLUWork(n int) *luWork {
	// A fixed stream and a dominant diagonal: the same nonsingular matrix
	// everywhere, so every evaluation costs the same.
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float64, n*n)
	for i := range data {
		data[i] = 2*rng.Float64() - 1
	}
	for i := 0; i < n; i++ {
		data[i*n+i] += float64(n)
	}
	w := &luWork{a: mat.NewDense(n, n, data)}
	w.pool.New = func() any { return new(mat.LU) }
	return w
}

func (w *luWork) run() {
	lu := w.pool.Get().(*mat.LU)
	lu.Factorize(w.a)
	logDet, _ := lu.LogDet()
	luSink.Add(math.Float64bits(logDet))
	w.pool.Put(lu)
}

// Calibrate returns the n for which one n×n LU decomposition takes about
// target on this machine (the paper sized its load for 100, 500 and
// 1000 ms). It times growing sizes until one takes a quarter of the target
// (at most 100 ms), then times the size predicted for the target (at most
// 400 ms) and scales from there by the n³ cost of LU, so the last step is
// short and the whole calibration takes about a second at most. Timing is
// only as steady as the machine: on a busy one, n comes out smaller.
func Calibrate(target time.Duration) (int, error) {
	if target <= 0 {
		return 0, errors.New("problems: calibrate: target must be > 0")
	}
	const maxN = 1 << 14
	goal := min(target/4, 100*time.Millisecond)
	n, t := 16, timeLU(16)
	for t < goal && n < maxN {
		n = n * 3 / 2
		t = timeLU(n)
	}
	if probe := extrapolate(n, t, min(target, 400*time.Millisecond)); probe > n && probe <= maxN {
		n, t = probe, timeLU(probe)
	}
	guess := extrapolate(n, t, target)
	if guess > maxN {
		return 0, fmt.Errorf("problems: calibrate: %v needs a matrix larger than %d×%d", target, maxN, maxN)
	}
	return guess, nil
}

// timeLU times a decomposition of size n. A short one is timed twice and
// the faster kept, which also leaves out the first run's allocation.
func timeLU(n int) time.Duration {
	w := newLUWork(n)
	best := time.Duration(math.MaxInt64)
	for range 2 {
		start := time.Now()
		w.run()
		best = min(best, time.Since(start))
		if best > 20*time.Millisecond {
			break
		}
	}
	return best
}

// extrapolate scales n, which took t, to the size that takes target under
// the n³ cost of LU.
func extrapolate(n int, t, target time.Duration) int {
	t = max(t, 1)
	return max(1, int(math.Round(float64(n)*math.Cbrt(float64(target)/float64(t)))))
}
