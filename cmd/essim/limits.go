package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/sched/sim"
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
	// maxSetFile bounds a -machines file.
	maxSetFile = 1 << 20
	// maxVirtualTime is the longest simulated run accepted: well inside
	// what a time.Duration holds (292 years), so no clock overflows.
	maxVirtualTime = 100 * 365 * 24 * time.Hour
)

// loadSet is sim.LoadSet with the file read through a size cap.
func loadSet(nameOrPath string) (*sim.Set, error) {
	if b, err := sim.BuiltinText(nameOrPath); err == nil {
		return sim.ParseSet(nameOrPath, strings.NewReader(string(b)))
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("machine set: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSetFile+1))
	if err != nil {
		return nil, fmt.Errorf("machine set: %w", err)
	}
	if len(b) > maxSetFile {
		return nil, fmt.Errorf("machine set %s is larger than %d bytes", nameOrPath, maxSetFile)
	}
	return sim.ParseSet(nameOrPath, strings.NewReader(string(b)))
}

// workloadSize is the shape of one run's workload.
type workloadSize struct {
	batches, maxBatch, tasks int
	batchFlag, runFlags      string // the flags to lower
}

func sizeOf(o *options) workloadSize {
	if o.workload == "bag" {
		return workloadSize{batches: 1, maxBatch: o.tasks, tasks: o.tasks, batchFlag: "-tasks", runFlags: "-tasks"}
	}
	w := workloadSize{batches: o.gens, maxBatch: o.lambda, batchFlag: "-lambda", runFlags: "-gens, -lambda or -mu"}
	if o.mu > 0 {
		w.batches++
		w.maxBatch = max(w.maxBatch, o.mu)
		if o.mu > o.lambda {
			w.batchFlag = "-mu"
		}
	}
	// Checked to fit before: gens, lambda and mu are at most maxRunTasks.
	w.tasks = o.mu + o.gens*o.lambda
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
	case w.maxBatch > maxBatchTasks:
		return badf("%s must be at most %d, got %d", w.batchFlag, maxBatchTasks, w.maxBatch)
	case w.tasks > maxRunTasks:
		return badf("one run would have %d tasks, more than %d; lower %s", w.tasks, maxRunTasks, w.runFlags)
	}
	if slices.Contains(o.policies, "cyclic") && float64(w.batches)*float64(w.maxBatch)*float64(w.maxBatch) > maxCyclicWork {
		return badf("cyclic's simulation cost grows with the square of a batch: %d batches of %d tasks are more than a run does in seconds; lower %s, or leave cyclic out of -policy", w.batches, w.maxBatch, w.runFlags)
	}
	if err := checkVirtualTime(o, w); err != nil {
		return err
	}
	return checkMemory(o, w)
}

// checkVirtualTime refuses settings whose simulated time could overflow
// the virtual clock: a loose upper bound of one run, every task run one
// after the other on the slowest machine, with every delay and cost.
func checkVirtualTime(o *options, w workloadSize) error {
	s := o.set
	ratio, comm := 0.0, 2*float64(s.MasterCost)
	for _, m := range s.Machines {
		r := 1 / m.Speed
		if len(m.Times) > 0 {
			r = 0
			for _, t := range m.Times {
				r = max(r, float64(t.Time)/float64(t.Grain))
			}
		}
		if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return usageError{fmt.Errorf("-machines: machine %s: its speed or task times give a task time ratio of %v; want a positive number", m.Name, r)}
		}
		ratio = max(ratio, r)
		comm += 2*float64(m.Delay+m.RelayCost) + float64(m.SendCost+m.RecvCost)
	}
	grain, delay := time.Duration(0), time.Duration(0)
	for _, g := range o.grains {
		grain = max(grain, g)
	}
	for _, d := range o.delays {
		delay = max(delay, d)
	}
	slow := 1.0
	for _, sd := range o.slowdowns {
		slow = max(slow, sd.Factor)
	}
	noise := math.Exp(3 * o.noise) // a three-sigma draw of the log-normal noise
	perTask := float64(grain)*ratio*slow*noise + comm + 2*float64(delay)
	total := float64(w.tasks)*perTask + float64(w.batches)*float64(o.engineCost)
	if !(total <= float64(maxVirtualTime)) {
		return badf("one run could last %.3g years of simulated time, past the %d years the virtual clock is kept to; lower -gran, -delay, the costs, the slowdowns, the machines' task times or %s",
			total/float64(365*24*time.Hour), int(maxVirtualTime/(365*24*time.Hour)), w.runFlags)
	}
	return nil
}

// Rough costs behind memoryEstimate, in bytes, measured on the simulator:
// about 130 bytes a task of a batch in flight (400 with cyclic), 800 a
// batch with the lan set, and the ledger's records of a run.
const (
	baseBytes      = 32 << 20 // the process
	taskBytes      = 512      // a task of the batch in flight
	batchBytes     = 1024     // a batch of a run in flight
	slotBytes      = 256      // a slot of a machine, per run in flight
	resultBytes    = 256      // a finished run's result, kept until the end
	resultGenBytes = 152      // a batch's record in a finished run's result
	resultWkrBytes = 160      // a machine's record in a finished run's result
)

// memoryEstimate is about the most memory the sweep needs, in bytes: the
// results of every run are kept until the table is made, and up to
// -parallel runs are in flight.
func memoryEstimate(o *options, w workloadSize) float64 {
	machines, slots := float64(len(o.set.Machines)), 0.0
	for _, m := range o.set.Machines {
		slots += float64(m.CPUs)
	}
	runs := float64(len(o.policies)) * float64(len(o.grains)) * float64(len(o.delays)) * float64(o.trials)
	parallel := float64(o.parallel)
	if parallel == 0 {
		parallel = float64(runtime.GOMAXPROCS(0))
	}
	parallel = min(parallel, runs)
	batches := float64(w.batches)
	b := float64(baseBytes)
	b += runs * (resultBytes + resultGenBytes*batches + resultWkrBytes*machines)
	b += parallel * (taskBytes*float64(w.maxBatch) + batchBytes*batches + slotBytes*slots)
	// Each grain's workload: its batches, and a bag's own grains.
	b += float64(len(o.grains)) * (48*batches + 16*float64(w.tasks))
	return b
}

// checkMemory refuses a sweep that needs more memory than the machine
// allows.
func checkMemory(o *options, w workloadSize) error {
	runs := len(o.policies) * len(o.grains) * len(o.delays)
	what := fmt.Sprintf("%d settings × %d trials of %d tasks in %d batches", runs, o.trials, w.tasks, w.batches)
	if err := sysmem.Limit().Check(what, memoryEstimate(o, w)); err != nil {
		return usageError{fmt.Errorf("%w; lower -trials, the lists, -parallel or %s", err, w.runFlags)}
	}
	return nil
}
