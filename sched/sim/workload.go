package sim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Batch is one batch of tasks, run behind a barrier: the next batch starts
// only when every result of this one is back.
type Batch struct {
	// N is the number of tasks (ids 0..N-1).
	N int
	// Grain is every task's time on the reference machine, unless Grains
	// is set.
	Grain time.Duration
	// Grains, when not nil, holds each task's own grain (len N), e.g. the
	// strips of a Mandelbrot image.
	Grains []time.Duration
}

// grain is task i's grain.
func (b *Batch) grain(i int) time.Duration {
	if b.Grains != nil {
		return b.Grains[i]
	}
	return b.Grain
}

// Work is the batch's total work measured on the reference machine.
func (b *Batch) Work() time.Duration {
	if b.Grains == nil {
		return time.Duration(b.N) * b.Grain
	}
	var w time.Duration
	for _, g := range b.Grains {
		w += g
	}
	return w
}

// Workload is what the simulated master runs: batches in order, with the
// engine's own cost between them.
type Workload struct {
	// Name describes the workload in reports.
	Name string
	// Batches run one after the other.
	Batches []Batch
	// EngineCost is the master's own time between two batches (an ES
	// generation's selection and mutation); the next batch starts that long
	// after the last result of the previous one. Default 0.
	EngineCost time.Duration
}

// ES is the workload of a (mu+lambda)-ES: the initial parents (one batch of
// mu tasks, generation 0; none when mu is 0), then gens generations of
// lambda offspring each, every task of the given grain.
func ES(mu, lambda, gens int, grain time.Duration) Workload {
	w := Workload{Name: fmt.Sprintf("(%d+%d)-ES x %d gens, %v tasks", mu, lambda, gens, grain)}
	if mu > 0 {
		w.Batches = append(w.Batches, Batch{N: mu, Grain: grain})
	}
	for g := 0; g < gens; g++ {
		w.Batches = append(w.Batches, Batch{N: lambda, Grain: grain})
	}
	return w
}

// Bag is a bag of tasks: one batch with the given per-task grains.
func Bag(grains []time.Duration) Workload {
	return Workload{
		Name:    fmt.Sprintf("bag of %d tasks", len(grains)),
		Batches: []Batch{{N: len(grains), Grains: grains}},
	}
}

// BagUniform is a bag of n tasks of one grain.
func BagUniform(n int, grain time.Duration) Workload {
	return Workload{
		Name:    fmt.Sprintf("bag of %d tasks of %v", n, grain),
		Batches: []Batch{{N: n, Grain: grain}},
	}
}

// Tasks is the number of tasks over all batches.
func (w *Workload) Tasks() int {
	n := 0
	for i := range w.Batches {
		n += w.Batches[i].N
	}
	return n
}

// MeanGrain is the mean grain over all tasks: a task's work on the
// reference machine, for the ledger's lower bound (exact for the ES and bag
// workloads, whose total work it reproduces).
func (w *Workload) MeanGrain() time.Duration {
	var work time.Duration
	for i := range w.Batches {
		work += w.Batches[i].Work()
	}
	n := w.Tasks()
	if n == 0 {
		return 0
	}
	return time.Duration(math.Round(float64(work) / float64(n)))
}

// Validate checks that every batch has tasks of positive grain.
func (w *Workload) Validate() error {
	if len(w.Batches) == 0 {
		return errors.New("workload has no batches")
	}
	for i := range w.Batches {
		b := &w.Batches[i]
		if b.N <= 0 {
			return fmt.Errorf("batch %d: no tasks", i)
		}
		if b.Grains != nil && len(b.Grains) != b.N {
			return fmt.Errorf("batch %d: %d grains for %d tasks", i, len(b.Grains), b.N)
		}
		for j := 0; j < b.N; j++ {
			if b.grain(j) <= 0 {
				return fmt.Errorf("batch %d task %d: grain must be positive", i, j)
			}
		}
	}
	if w.EngineCost < 0 {
		return errors.New("negative engine cost")
	}
	return nil
}

// MandelbrotGrains returns the grains of a Mandelbrot image split into n
// column strips, as in Clop's evaluation: the region (-0.6,-1.0)-(1.0,0.0)
// of the complex plane, each strip's work proportional to the escape-time
// iterations of its points (sampled on a 480-column grid, 96 rows, at most
// 1000 iterations), scaled so the mean grain is mean. Strips through the set
// cost many times more than strips outside it.
func MandelbrotGrains(n int, mean time.Duration) []time.Duration {
	if n <= 0 || mean <= 0 {
		return nil
	}
	const (
		cols, rows = 480, 96
		maxIter    = 1000
		x0, x1     = -0.6, 1.0
		y0, y1     = -1.0, 0.0
	)
	work := make([]float64, n)
	total := 0.0
	for c := 0; c < cols; c++ {
		cr := x0 + (x1-x0)*(float64(c)+0.5)/cols
		sum := 0.0
		for r := 0; r < rows; r++ {
			ci := y0 + (y1-y0)*(float64(r)+0.5)/rows
			zr, zi := 0.0, 0.0
			it := 0
			for ; it < maxIter && zr*zr+zi*zi <= 4; it++ {
				zr, zi = zr*zr-zi*zi+cr, 2*zr*zi+ci
			}
			sum += float64(it + 1) // +1: every point costs something
		}
		// Column c falls in strip c*n/cols; with more strips than sampled
		// columns, strips share their column's work.
		if n <= cols {
			work[c*n/cols] += sum
		} else {
			lo, hi := c*n/cols, (c+1)*n/cols
			for s := lo; s < hi; s++ {
				work[s] += sum / float64(hi-lo)
			}
		}
		total += sum
	}
	out := make([]time.Duration, n)
	for i, w := range work {
		out[i] = max(time.Duration(math.Round(float64(mean)*float64(n)*w/total)), time.Microsecond)
	}
	return out
}
