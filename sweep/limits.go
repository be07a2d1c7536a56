package sweep

import (
	"fmt"
	"math"
	"runtime"
	"time"
)

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
// after the other on the slowest machine, with every delay and cost. A
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
		ratio = max(ratio, r)
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
