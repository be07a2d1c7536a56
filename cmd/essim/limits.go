package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/sweep"
)

// Bounds on what one simulated run may hold. A run is not interruptible
// (Ctrl-C stops the sweep between runs), so it is kept to seconds: the
// simulator does some 2·10⁶ tasks a second, and cyclic's cost grows with
// the square of a batch (10⁶ tasks in one batch: about 80 s, 10⁵: 0.9 s).
const (
	// maxBatchTasks bounds the tasks of one batch: -lambda, -mu, -tasks.
	maxBatchTasks = 1_000_000
	// maxRunTasks bounds the tasks of one run: -mu + -gens × -lambda.
	maxRunTasks = 10_000_000
	// maxFlagTime bounds every time given on the command line: grains,
	// delays, costs.
	maxFlagTime = time.Hour
	// maxSlowdown bounds a -slowdown factor.
	maxSlowdown = 1e6
	// maxParallel bounds -parallel.
	maxParallel = 1024
	// maxTrials bounds -trials.
	maxTrials = 10_000
	// maxPerSlot bounds the F of -lambda Fx.
	maxPerSlot = 1e6
	// maxCyclicWork bounds Σ batch² of a run under cyclic, whose cost in
	// the simulator grows with the square of a batch (it holds a worker's
	// whole share at once): about 8 s of real time.
	maxCyclicWork = 1e11
	// maxVirtualTime is the longest simulated run accepted: well inside
	// what a time.Duration holds (292 years), so no clock overflows.
	maxVirtualTime = 100 * 365 * 24 * time.Hour
)

// workloadSize is the shape of one run's workload, and the flags that
// set it.
type workloadSize struct {
	sweep.Size
	batchFlag, runFlags string // the flags to lower
}

func sizeOf(o *options) workloadSize {
	w := workloadSize{Size: o.sweep().Size(), batchFlag: "-tasks", runFlags: "-tasks"}
	if o.workload != "bag" {
		w.batchFlag, w.runFlags = "-lambda", "-gens, -lambda or -mu"
		if o.mu > 0 && o.mu > o.lambda {
			w.batchFlag = "-mu"
		}
	}
	return w
}

// checkLimits checks the parsed flags and the machine set against what
// one run may hold and what this machine's memory allows.
func checkLimits(o *options) error {
	for _, g := range o.grains {
		if g > maxFlagTime {
			return badf("-gran: %v is longer than %v", g, maxFlagTime)
		}
	}
	for _, d := range o.delays {
		if d > maxFlagTime {
			return badf("-delay: %v is longer than %v", d, maxFlagTime)
		}
	}
	if o.engineCost > maxFlagTime {
		return badf("-engine-cost: %v is longer than %v", o.engineCost, maxFlagTime)
	}
	for _, s := range o.slowdowns {
		if s.Factor > maxSlowdown {
			return badf("-slowdown %s: factor %g is larger than %g", s.Machine, s.Factor, maxSlowdown)
		}
	}
	// Each bound on its own first, so that the products below cannot
	// overflow.
	if o.workload == "es" {
		switch {
		case o.lambda > maxBatchTasks:
			return badf("-lambda must be at most %d, got %d", maxBatchTasks, o.lambda)
		case o.mu > maxBatchTasks:
			return badf("-mu must be at most %d, got %d", maxBatchTasks, o.mu)
		case o.gens > maxRunTasks:
			return badf("-gens must be at most %d, got %d", maxRunTasks, o.gens)
		}
	}
	w := sizeOf(o)
	switch {
	case w.MaxBatch > maxBatchTasks:
		return badf("%s must be at most %d, got %d", w.batchFlag, maxBatchTasks, w.MaxBatch)
	case w.Tasks > maxRunTasks:
		return badf("one run would have %d tasks, more than %d; lower %s", w.Tasks, maxRunTasks, w.runFlags)
	}
	if slices.Contains(o.policies, "cyclic") && float64(w.Batches)*float64(w.MaxBatch)*float64(w.MaxBatch) > maxCyclicWork {
		return badf("cyclic's simulation cost grows with the square of a batch: %d batches of %d tasks are more than a run does in seconds; lower %s, or leave cyclic out of -policy", w.Batches, w.MaxBatch, w.runFlags)
	}
	if err := checkVirtualTime(o, w); err != nil {
		return err
	}
	return checkMemory(o, w)
}

// checkVirtualTime refuses settings whose simulated time could overflow
// the virtual clock (sweep.Config.VirtualTime).
func checkVirtualTime(o *options, w workloadSize) error {
	total, err := o.sweep().VirtualTime()
	if err != nil {
		return usageError{fmt.Errorf("-machines: %w", err)}
	}
	if !(total <= float64(maxVirtualTime)) {
		return badf("one run could last %.3g years of simulated time, past the %d years the virtual clock is kept to; lower -gran, -delay, the costs, the slowdowns, the machines' task times or %s",
			total/float64(365*24*time.Hour), int(maxVirtualTime/(365*24*time.Hour)), w.runFlags)
	}
	return nil
}

// checkMemory refuses a sweep that needs more memory than the machine
// allows.
func checkMemory(o *options, w workloadSize) error {
	runs := len(o.policies) * len(o.grains) * len(o.delays)
	what := fmt.Sprintf("%d settings × %d trials of %d tasks in %d batches", runs, o.trials, w.Tasks, w.Batches)
	if err := sysmem.Limit().Check(what, o.sweep().MemoryEstimate()); err != nil {
		return usageError{fmt.Errorf("%w; lower -trials, the lists, -parallel or %s", err, w.runFlags)}
	}
	return nil
}
