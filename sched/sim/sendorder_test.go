package sim

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// TestEFTSendOrder: with 1,024 workers, two tasks per CPU and 25 µs a
// message, the master is the bottleneck: a batch's 4,608 sends take 115 ms
// to leave, and its floor is the master's 2·n·m = 230 ms. Where eft sends
// each task is only half of it; the order of the sends decides whether the
// slowest machines' one long task (200 ms) leaves first or last.
// Longest chain first (sched/eft_order.go), every batch once the workers
// are measured ends within 3 % of its floor; in the order of expected
// finish they ended 28 % above it. No replicas (Copies 1) and no noise, so
// that the order alone decides. Virtual time only.
func TestEFTSendOrder(t *testing.T) {
	r := runScale(t, "machines/scale1024.txt", 25*time.Microsecond, 0, 4, 0, sched.Config{Copies: 1})
	gens := r.Report.Generations
	if len(gens) != 4 || len(r.Optimum.Batches) != 4 {
		t.Fatalf("%d generations, %d floors; want 4", len(gens), len(r.Optimum.Batches))
	}
	for i := 1; i < len(gens); i++ {
		floor := r.Optimum.Batches[i].LB
		t.Logf("batch %d: %v, floor %v (%.3f)", i, gens[i].Total, floor, float64(gens[i].Total)/float64(floor))
		if gens[i].Total > floor*103/100 {
			t.Errorf("batch %d took %v, more than 1.03 × its floor %v", i, gens[i].Total, floor)
		}
	}
}

// TestEFTMasterBound: 4,096 workers, two tasks per CPU, 10 µs a message,
// noisy 100 ms tasks: the master's 2·n messages (368.64 ms a batch) are the
// floor. eft learns the master's cost per message from how round trips grow
// with a send's place, and round trips also grow when results arrive faster
// than the master takes them; capped by what each batch allows (two
// messages per result taken since it started), the learnt cost stays right,
// and every batch from the second full one on ends within 3 % of its floor
// with few replicas. Uncapped, the first full batch taught eft a cost ten
// times too high and the next batch took 704 ms. Virtual time only.
func TestEFTMasterBound(t *testing.T) {
	if testing.Short() {
		t.Skip("4,096 simulated workers")
	}
	r := runScale(t, "machines/scale4096.txt", 10*time.Microsecond, 30, 6, 0.1, sched.Config{})
	gens := r.Report.Generations
	if len(gens) != 7 || len(r.Optimum.Batches) != 7 {
		t.Fatalf("%d generations, %d floors; want 7", len(gens), len(r.Optimum.Batches))
	}
	for i := 2; i < len(gens); i++ {
		g, floor := gens[i], r.Optimum.Batches[i].LB
		t.Logf("batch %d: %v, floor %v (%.3f), %d replicas", i, g.Total, floor, float64(g.Total)/float64(floor), g.Replicas)
		if g.Total > floor*103/100 {
			t.Errorf("batch %d took %v, more than 1.03 × its floor %v", i, g.Total, floor)
		}
		if g.Replicas > g.Originals/10 {
			t.Errorf("batch %d: %d replicas for %d tasks", i, g.Replicas, g.Originals)
		}
	}
}

// TestEFTMasterBoundExact: at 1,024 workers, 25 µs a message and 100 ms
// tasks without noise every result waits for the master, so a replica
// wins nothing and its messages delay the rest. Once eft has measured
// the master's pace (the first batch's drain), it sends few: the batches
// after the first take at most 1.03 × their floors together, with
// replicas for at most 1 % of their tasks (its drain counting the slope
// of round trips, which misses the master's own time, it sent ~160 a
// batch, and took 1.048 ×).
func TestEFTMasterBoundExact(t *testing.T) {
	r := runScale(t, "machines/scale1024.txt", 25*time.Microsecond, 0, 6, 0, sched.Config{})
	gens := r.Report.Generations
	if len(gens) != 6 || len(r.Optimum.Batches) != 6 {
		t.Fatalf("%d generations, %d floors; want 6", len(gens), len(r.Optimum.Batches))
	}
	var total, floor time.Duration
	replicas, tasks := 0, 0
	for i := 1; i < len(gens); i++ {
		g := gens[i]
		t.Logf("batch %d: %v, floor %v (%.3f), %d replicas", i, g.Total, r.Optimum.Batches[i].LB, float64(g.Total)/float64(r.Optimum.Batches[i].LB), g.Replicas)
		total += g.Total
		floor += r.Optimum.Batches[i].LB
		replicas += g.Replicas
		tasks += g.Originals
	}
	if total > floor*103/100 {
		t.Errorf("batches 1–5 took %v, more than 1.03 × their floor %v", total, floor)
	}
	if replicas > tasks/100 {
		t.Errorf("%d replicas for %d tasks", replicas, tasks)
	}
}

// runScale runs eft on a scaling set with the master's cost per message
// set to cost: mu parents, then gens generations of two 100 ms tasks per
// CPU, with noise sigma.
func runScale(t *testing.T, file string, cost time.Duration, mu, gens int, noise float64, pc sched.Config) Result {
	t.Helper()
	set, err := LoadSet(file)
	if err != nil {
		t.Fatal(err)
	}
	set.MasterCost = cost
	slots := 0
	for _, m := range set.Machines {
		slots += m.CPUs
	}
	// No policy cost (PolicyCost −1): these tests judge where and in
	// which order eft sends against the master's floor, which counts the
	// messages alone.
	r, err := Run(Config{Set: set, Policy: "eft", PolicyConfig: pc, Workload: ES(mu, 2*slots, gens, 100*time.Millisecond), Noise: noise, Seed: 1, PolicyCost: -1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
