package sweep

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/sched/sim"
)

// Bounds on what one simulated run may hold. A run is not interruptible
// (Ctrl-C stops the sweep between runs), so it is kept to seconds: the
// simulator does some 2·10⁶ tasks a second, and cyclic's cost grows with
// the square of a batch (10⁶ tasks in one batch: about 80 s, 10⁵: 0.9 s).
const (
	// MaxBatchTasks bounds the tasks of one batch: Lambda, Mu, Tasks.
	MaxBatchTasks = 1_000_000
	// MaxRunTasks bounds the tasks of one run: Mu + Gens × Lambda.
	MaxRunTasks = 10_000_000
	// MaxTime bounds every time of a Config: grains, delays, costs.
	MaxTime = time.Hour
	// MaxSlowdown bounds a slowdown's factor.
	MaxSlowdown = 1e6
	// MaxParallel bounds Parallel.
	MaxParallel = 1024
	// MaxTrials bounds Trials.
	MaxTrials = 10_000
	// MaxPerSlot bounds the F of essim's -lambda Fx (F tasks a slot).
	MaxPerSlot = 1e6
	// MaxCyclicWork bounds Σ batch² of a run under cyclic, whose cost in
	// the simulator grows with the square of a batch (it holds a worker's
	// whole share at once): about 8 s of real time.
	MaxCyclicWork = 1e11
	// MaxRunTicks bounds the master's ticks one run must at least step
	// (MinTicks): the simulator steps one every 250 ms of simulated time,
	// two or three million a second, and a run of a day's tasks on a
	// slow machine was hours of real time for ticks alone.
	MaxRunTicks = 1e8
	// MaxVirtualTime is the longest simulated run accepted: well inside
	// what a time.Duration holds (292 years), so no clock overflows.
	MaxVirtualTime = 100 * 365 * 24 * time.Hour
)

// CheckLimits checks c against what one run may hold (the bounds above)
// and what this machine's memory allows (sysmem.Limit). Its errors name
// c's fields as names gives them (essim: its flags, such as "Lambda":
// "-lambda"); a field missing from names is named as it is.
func (c *Config) CheckLimits(names map[string]string) error {
	name := func(field string) string {
		if n, ok := names[field]; ok {
			return n
		}
		return field
	}
	for _, g := range c.Grains {
		if g > MaxTime {
			return fmt.Errorf("%s: %v is longer than %v", name("Grains"), g, MaxTime)
		}
	}
	for _, d := range c.Delays {
		if d > MaxTime {
			return fmt.Errorf("%s: %v is longer than %v", name("Delays"), d, MaxTime)
		}
	}
	if c.EngineCost > MaxTime {
		return fmt.Errorf("%s: %v is longer than %v", name("EngineCost"), c.EngineCost, MaxTime)
	}
	for _, s := range c.Slowdowns {
		if s.Factor > MaxSlowdown {
			return fmt.Errorf("%s %s: factor %g is larger than %g", name("Slowdowns"), s.Machine, s.Factor, float64(MaxSlowdown))
		}
	}
	// Each bound on its own first, so that the products below cannot
	// overflow.
	batchField, runFields := "Tasks", name("Tasks")
	if c.Workload != "bag" {
		for _, b := range []struct {
			field  string
			v, max int
		}{{"Lambda", c.Lambda, MaxBatchTasks}, {"Mu", c.Mu, MaxBatchTasks}, {"Gens", c.Gens, MaxRunTasks}} {
			if c.Workload == "es" && b.v > b.max {
				return fmt.Errorf("%s must be at most %d, got %d", name(b.field), b.max, b.v)
			}
		}
		batchField, runFields = "Lambda", name("Gens")+", "+name("Lambda")+" or "+name("Mu")
		if c.Mu > 0 && c.Mu > c.Lambda {
			batchField = "Mu"
		}
	}
	w := c.Size()
	switch {
	case w.MaxBatch > MaxBatchTasks:
		return fmt.Errorf("%s must be at most %d, got %d", name(batchField), MaxBatchTasks, w.MaxBatch)
	case w.Tasks > MaxRunTasks:
		return fmt.Errorf("one run would have %d tasks, more than %d; lower %s", w.Tasks, MaxRunTasks, runFields)
	}
	if slices.Contains(c.Policies, "cyclic") && float64(w.Batches)*float64(w.MaxBatch)*float64(w.MaxBatch) > MaxCyclicWork {
		return fmt.Errorf("cyclic's simulation cost grows with the square of a batch: %d batches of %d tasks are more than a run does in seconds; lower %s, or leave cyclic out of %s", w.Batches, w.MaxBatch, runFields, name("Policies"))
	}
	total, err := c.VirtualTime()
	if err != nil {
		return fmt.Errorf("%s: %w", name("Set"), err)
	}
	if !(total <= float64(MaxVirtualTime)) {
		return fmt.Errorf("one run could last %.3g years of simulated time, past the %d years the virtual clock is kept to; lower %s, %s, the costs, the slowdowns, the machines' task times or %s",
			total/float64(365*24*time.Hour), int(MaxVirtualTime/(365*24*time.Hour)), name("Grains"), name("Delays"), runFields)
	}
	if ticks := c.MinTicks(); ticks > MaxRunTicks {
		return fmt.Errorf("one run would last at least %.3g days of simulated time (its work over the machines' speeds), %.3g of the master's ticks at one every %v, more than the %.0e a run is kept to; lower %s, the machines' task times or %s",
			ticks*float64(sim.DefaultTick)/float64(24*time.Hour), ticks, sim.DefaultTick, float64(MaxRunTicks), name("Grains"), runFields)
	}
	runs := len(c.Policies) * len(c.Grains) * len(c.Delays)
	what := fmt.Sprintf("%d settings × %d trials of %d tasks in %d batches", runs, c.Trials, w.Tasks, w.Batches)
	if err := sysmem.Limit().Check(what, c.MemoryEstimate()); err != nil {
		return fmt.Errorf("%w; lower %s, the lists, %s or %s", err, name("Trials"), name("Parallel"), runFields)
	}
	return nil
}

// Size is the shape of one run's workload.
type Size struct {
	Batches  int // batches of a run: generations (and the first, of Mu), or 1 for a bag
	MaxBatch int // tasks of the largest batch
	Tasks    int // tasks of a run
}

// Size is the shape of one run's workload. With an ES, Mu, Lambda and
// Gens are each at most a few million (checked before): Tasks does not
// overflow.
func (c *Config) Size() Size {
	if c.Workload == "bag" {
		return Size{Batches: 1, MaxBatch: c.Tasks, Tasks: c.Tasks}
	}
	w := Size{Batches: c.Gens, MaxBatch: c.Lambda}
	if c.Mu > 0 {
		w.Batches++
		w.MaxBatch = max(w.MaxBatch, c.Mu)
	}
	w.Tasks = c.Mu + c.Gens*c.Lambda
	return w
}

// VirtualTime is a loose upper bound of one run's simulated time, in
// nanoseconds (a float64, which does not overflow): every task run one
// after the other on the slowest machine at its slowest (the set's
// slowdowns and the Config's), with every delay and cost. A
// machine whose speed or task times give no positive ratio is an error.
func (c *Config) VirtualTime() (float64, error) {
	w := c.Size()
	s := c.Set
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
			return 0, fmt.Errorf("machine %s: its speed or task times give a task time ratio of %v; want a positive number", m.Name, r)
		}
		// The set's own slowdowns (slow=T*F) count as the flags' do: a
		// task of 1000 h slowed 10⁶ times overflowed the clock, and
		// the run ended in 0 s.
		// Each sets the pace, none compounds.
		f := 1.0
		for _, sd := range m.Slowdowns {
			f = max(f, sd.Factor)
		}
		ratio = max(ratio, r*f)
		comm += 2*float64(m.Delay+m.RelayCost) + float64(m.SendCost+m.RecvCost)
	}
	grain, delay := time.Duration(0), time.Duration(0)
	for _, g := range c.Grains {
		grain = max(grain, g)
	}
	for _, d := range c.Delays {
		delay = max(delay, d)
	}
	slow := 1.0
	for _, sd := range c.Slowdowns {
		slow = max(slow, sd.Factor)
	}
	noise := math.Exp(3 * c.Noise) // a three-sigma draw of the log-normal noise
	perTask := float64(grain)*ratio*slow*noise + comm + 2*float64(delay)
	total := float64(w.Tasks)*perTask + float64(w.Batches)*float64(c.EngineCost)
	return total, nil
}

// MinTicks is a lower bound of the ticks (sim.DefaultTick) of the
// longest run of c: at its largest grain, the run's work over the sum of
// its machines' speeds, no run being shorter.
func (c *Config) MinTicks() float64 {
	var grain time.Duration
	for _, g := range c.Grains {
		grain = max(grain, g)
	}
	speed := c.Set.SpeedSum(grain)
	if grain <= 0 || !(speed > 0) {
		return 0
	}
	work := float64(c.Size().Tasks) * float64(grain)
	return work / speed / float64(sim.DefaultTick)
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

// MemoryEstimate is about the most memory the sweep needs, in bytes: the
// results of every run are kept until the table is made, and up to
// Parallel runs are in flight.
func (c *Config) MemoryEstimate() float64 {
	w := c.Size()
	machines, slots := float64(len(c.Set.Machines)), 0.0
	for _, m := range c.Set.Machines {
		slots += float64(m.CPUs)
	}
	runs := float64(len(c.Policies)) * float64(len(c.Grains)) * float64(len(c.Delays)) * float64(c.Trials)
	parallel := float64(c.Parallel)
	if parallel == 0 {
		parallel = float64(runtime.GOMAXPROCS(0))
	}
	parallel = min(parallel, runs)
	batches := float64(w.Batches)
	b := float64(baseBytes)
	b += runs * (resultBytes + resultGenBytes*batches + resultWkrBytes*machines)
	b += parallel * (taskBytes*float64(w.MaxBatch) + batchBytes*batches + slotBytes*slots)
	// Each grain's workload: its batches, and a bag's own grains.
	b += float64(len(c.Grains)) * (48*batches + 16*float64(w.Tasks))
	return b
}
