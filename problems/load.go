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

	"gonum.org/v1/gonum/floats"
)

// MaxLoadN is the largest LU load size WithLoad and Calibrate accept. An
// evaluation holds its own n×n copy of the load matrix besides the shared
// one, so a process with s slots needs about LoadBytes(n, s) of memory:
// 128 MiB per slot at the cap. One decomposition at the cap is some
// 2/3·4096³ ≈ 4.6·10¹⁰ flops, seconds on one core, far beyond the
// paper's 100–1000 ms loads. Flag checks compare -lu with it.
const MaxLoadN = 4096

// LoadBytes estimates the memory an LU load of size n needs in a process
// that runs slots evaluations at once: the shared matrix plus one
// factorisation copy per slot.
func LoadBytes(n, slots int) int64 {
	if n <= 0 {
		return 0
	}
	return int64(n) * int64(n) * 8 * (int64(max(slots, 0)) + 1)
}

// WithLoad returns p with an n×n LU decomposition added to every
// evaluation: the paper's extra load that turns a cheap function into a
// medium-grained task. The matrix is the same for every n on every
// machine, and the decomposition never changes the fitness. It runs on
// the calling goroutine alone, so one evaluation uses one CPU, and it
// looks at ctx often enough that a cancelled evaluation returns
// ctx.Err() well within a millisecond. n ≤ 0 returns p itself; n above
// MaxLoadN (which may come off the network) gives a Problem whose every
// evaluation fails, rather than a process that runs out of memory.
func WithLoad(p Problem, n int) Problem {
	switch {
	case n <= 0:
		return p
	case n > MaxLoadN:
		return &loaded{Problem: p, err: fmt.Errorf("problems: LU load %d×%d is larger than the maximum %d×%d", n, n, MaxLoadN, MaxLoadN)}
	}
	return &loaded{Problem: p, lu: newLUWork(n)}
}

// loaded is a Problem plus LU work per evaluation.
type loaded struct {
	Problem
	lu  *luWork
	err error // set instead of lu when the size was refused
}

func (l *loaded) Eval(ctx context.Context, x []float64) (float64, error) {
	if l.err != nil {
		return 0, l.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if _, err := l.lu.run(ctx); err != nil {
		return 0, err
	}
	// The decomposition may have finished just as ctx was cancelled.
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.Problem.Eval(ctx, x)
}

// luSink receives a value derived from every decomposition, so the
// compiler cannot prove the work unused and drop it.
var luSink atomic.Uint64

// luWork is one n×n decomposition, repeatable and safe for concurrent
// use: the matrix is only read, and each goroutine factorises a copy held
// in scratch from a pool, so steady state allocates nothing.
type luWork struct {
	n    int
	a    []float64 // row-major, read-only after newLUWork
	pool sync.Pool // of *luScratch

	// onCheck, if set (by tests, before any run), is called at every
	// cancellation check with the work done so far.
	onCheck func(work int64)
}

// luScratch is one goroutine's factorisation space.
type luScratch struct {
	lu  []float64
	piv []int
}

func newLUWork(n int) *luWork {
	// A fixed stream and a dominant diagonal: the same nonsingular matrix
	// everywhere, so every evaluation costs the same. (The same matrix as
	// the gonum-based load had, so work per n stays comparable.)
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]float64, n*n)
	for i := range data {
		data[i] = 2*rng.Float64() - 1
	}
	for i := 0; i < n; i++ {
		data[i*n+i] += float64(n)
	}
	w := &luWork{n: n, a: data}
	w.pool.New = func() any {
		return &luScratch{lu: make([]float64, n*n), piv: make([]int, n)}
	}
	return w
}

// run decomposes the matrix once and returns log|det A|. It returns
// ctx.Err() if ctx was cancelled before the decomposition ended.
func (w *luWork) run(ctx context.Context) (float64, error) {
	s := w.pool.Get().(*luScratch)
	defer w.pool.Put(s)
	r := luRun{done: ctx.Done(), next: luCheckEvery, onCheck: w.onCheck}
	logDet, ok := r.factorize(s.lu, w.a, w.n, s.piv)
	if !ok {
		return 0, ctx.Err()
	}
	luSink.Add(math.Float64bits(logDet))
	return logDet, nil
}

// luCheckEvery is how much work the decomposition does between two looks
// at its context. Work is counted in flops, with the copy and the
// panel's row visits weighted by what they cost (luCopyCost, luRowCost),
// so the looks come at about even intervals: some 25 µs of one core
// (p99 under 0.1 ms, BenchmarkLoadCheckGap), and a cancel frees the slot
// well within a millisecond, while the looks (a non-blocking receive)
// cost nothing measurable. A count rather than the clock keeps the
// decomposition deterministic and free of time calls.
const luCheckEvery = 1 << 18

// luCopyCost is the work an element copied into scratch counts for.
// Copying is memory-bound, and into scratch that the OS has just handed
// over it also pays page faults: measured at 1–5 ns an element, against
// about 0.1 ns a flop, so counted as one flop the copy of a large matrix
// went over a millisecond between checks.
const luCopyCost = 32

// luRowCost is the work a visit to one row of the panel counts for
// besides its flops: the panel walks down a column, one cache line per
// row for a few flops each, so counted by flops alone its stretches
// between checks took several times longer than the trailing update's.
const luRowCost = 16

// luBlock is the panel width of the blocked decomposition: the trailing
// update then reads each row once per luBlock columns instead of once
// per column.
const luBlock = 32

// luTile is the width of the column tiles of the trailing update, so the
// luBlock×luTile slab of U being applied (128 KiB) stays in cache while
// the rows below stream past it.
const luTile = 512

// luRun is the state of one decomposition: its work counter and the
// channel that says stop.
type luRun struct {
	done    <-chan struct{} // ctx.Done(); nil never stops
	work    int64           // work done so far
	next    int64           // work at which to look at done again
	onCheck func(work int64)
}

// tick counts work and, every luCheckEvery units, reports whether the
// decomposition must stop.
func (r *luRun) tick(work int) (stop bool) {
	r.work += int64(work)
	if r.work < r.next {
		return false
	}
	r.next = r.work + luCheckEvery
	if r.onCheck != nil {
		r.onCheck(r.work)
	}
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// factorize copies the n×n row-major matrix src into a and decomposes it
// in place into P·A = L·U with partial pivoting, as LAPACK's dgetrf does:
// on return a holds U on and above the diagonal and the unit lower L
// below it, and row i was swapped with row piv[i] at step i. It returns
// log|det A| (−Inf if A is singular) and false if it was stopped. It is
// right-looking and blocked: a panel of luBlock columns is factorised,
// the rows of U to its right are solved for, and the trailing matrix is
// updated in column tiles, every update loop running along a row.
func (r *luRun) factorize(a, src []float64, n int, piv []int) (logDet float64, ok bool) {
	// The copy is checked as well: 128 MiB at MaxLoadN.
	for i := 0; i < n; i++ {
		copy(a[i*n:(i+1)*n], src[i*n:(i+1)*n])
		if r.tick(luCopyCost * n) {
			return 0, false
		}
	}
	for k0 := 0; k0 < n; k0 += luBlock {
		k1 := min(k0+luBlock, n)
		if !r.panel(a, n, piv, k0, k1) {
			return 0, false
		}
		if k1 == n {
			break
		}
		// U12: rows k0..k1 right of the panel, by forward substitution
		// with the panel's unit lower triangle.
		for i := k0 + 1; i < k1; i++ {
			ri := a[i*n+k1 : (i+1)*n]
			for p := k0; p < i; p++ {
				axpy(ri, -a[i*n+p], a[p*n+k1:(p+1)*n])
			}
			if r.tick(2 * (i - k0) * (n - k1)) {
				return 0, false
			}
		}
		// A22 -= L21·U12, one column tile at a time.
		for j0 := k1; j0 < n; j0 += luTile {
			j1 := min(j0+luTile, n)
			for i := k1; i < n; i++ {
				row := a[i*n : (i+1)*n]
				ri := row[j0:j1]
				for p := k0; p < k1; p++ {
					axpy(ri, -row[p], a[p*n+j0:p*n+j1])
				}
				if r.tick(2 * (k1 - k0) * (j1 - j0)) {
					return 0, false
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		logDet += math.Log(math.Abs(a[i*n+i]))
	}
	return logDet, true
}

// panel factorises columns k0..k1 of rows k0..n unblocked, swapping
// whole rows (so that L left of the panel and the trailing matrix to its
// right follow the pivots), and updates only within the panel.
func (r *luRun) panel(a []float64, n int, piv []int, k0, k1 int) bool {
	for j := k0; j < k1; j++ {
		p, big := j, math.Abs(a[j*n+j])
		for i := j + 1; i < n; i++ {
			if v := math.Abs(a[i*n+j]); v > big {
				p, big = i, v
			}
		}
		piv[j] = p
		if p != j {
			rj, rp := a[j*n:(j+1)*n], a[p*n:(p+1)*n]
			for c := range rj {
				rj[c], rp[c] = rp[c], rj[c]
			}
		}
		if r.tick(luRowCost*(n-j) + 2*n) {
			return false
		}
		d := a[j*n+j]
		if d == 0 {
			continue // singular: this column of L stays as it is, like dgetf2
		}
		uj := a[j*n+j+1 : j*n+k1]
		for i := j + 1; i < n; i++ {
			l := a[i*n+j] / d
			a[i*n+j] = l
			axpy(a[i*n+j+1:i*n+k1], -l, uj)
			if r.tick(luRowCost + 2*len(uj)) {
				return false
			}
		}
	}
	return true
}

// axpy does y += alpha·x[:len(y)] with gonum's single-threaded vector
// kernel (SIMD where the platform has it, about twice the plain loop).
func axpy(y []float64, alpha float64, x []float64) {
	floats.AddScaled(y, alpha, x[:len(y)])
}

// Calibrate returns the n for which one n×n LU decomposition takes about
// target on this machine (the paper sized its load for 100, 500 and
// 1000 ms). The decomposition is single-threaded, so the n found holds
// for any number of slots as long as each has a CPU of its own. It times
// growing sizes until one takes a quarter of the target (at most
// 100 ms), then times the size predicted for the target (at most 400 ms)
// and scales from there by the n³ cost of LU, so the last step is short
// and the whole calibration takes about a second at most. Timing is only
// as steady as the machine: on a busy one, n comes out smaller. A target
// that needs n above MaxLoadN is an error.
func Calibrate(target time.Duration) (int, error) {
	if target <= 0 {
		return 0, errors.New("problems: calibrate: target must be > 0")
	}
	goal := min(target/4, 100*time.Millisecond)
	n, t := 16, timeLU(16)
	for t < goal && n < MaxLoadN {
		n = min(n*3/2, MaxLoadN)
		t = timeLU(n)
	}
	if probe := extrapolate(n, t, min(target, 400*time.Millisecond)); probe > n && probe <= MaxLoadN {
		n, t = probe, timeLU(probe)
	}
	guess := extrapolate(n, t, target)
	if guess > MaxLoadN {
		return 0, fmt.Errorf("problems: calibrate: %v needs a matrix larger than %d×%d, the maximum", target, MaxLoadN, MaxLoadN)
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
		_, _ = w.run(context.Background()) // Background never stops it
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
