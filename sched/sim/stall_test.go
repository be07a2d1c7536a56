package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// stallSet is three machines, the third of which becomes 100 times slower
// at 3 s: in effect it stalls.
func stallSet(t *testing.T) *Set {
	t.Helper()
	const text = `master cost=10us
machine F local   cpus=4 speed=2
machine M delay=2ms cpus=2 speed=1
machine S delay=2ms cpus=1 speed=1 slow=3s*100
`
	set, err := ParseSet("stall", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestEFTStalledMachine: a machine that becomes 100 times slower mid-run
// holds a running task that no result will bring back for a long time.
// With the master's Ticks (Config.Tick), eft sees it late beyond the
// spread of task times and replicates it, and the censored measurement of
// the copy it stops keeps the machine out of the plan after that; the run
// ends about when R3Q's does (which replicates blindly). Without Ticks,
// nothing wakes eft while the others wait at the barrier: every batch
// after the stall waits for the stalled task, so that run is far longer.
// Virtual time only: the figures are the simulator's.
func TestEFTStalledMachine(t *testing.T) {
	set := stallSet(t)
	run := func(policy string, tick time.Duration) time.Duration {
		t.Helper()
		cfg := Config{Set: set, Policy: policy, Workload: ES(0, 14, 12, 500*time.Millisecond), Seed: 1, Tick: tick, NoOptimum: true}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r.End
	}
	eft, r3q, noTick := run("eft", 0), run("r3q", 0), run("eft", -1)
	t.Logf("eft %v, r3q %v, eft without ticks %v", eft, r3q, noTick)
	if eft > r3q*11/10 {
		t.Errorf("eft took %v, more than 1.1 × r3q's %v", eft, r3q)
	}
	if noTick < 2*eft {
		t.Errorf("without ticks eft took %v, with them %v: the stall should cost far more without", noTick, eft)
	}
}

// TestDeadlinesStalledMachine: the simulator checks the master's
// deadlines at every Tick, as the master does, so under WQ (which never
// replicates) a stalled machine's running task is overdue after four
// times its worker's task time and goes to another worker, instead of
// holding every batch until it ends. With Deadlines.Factor < 0 there are
// none, and the run waits for the stalled tasks.
func TestDeadlinesStalledMachine(t *testing.T) {
	set := stallSet(t)
	run := func(factor float64) time.Duration {
		t.Helper()
		cfg := Config{Set: set, Policy: "wq", Workload: ES(0, 14, 12, 500*time.Millisecond), Seed: 1, Deadlines: sched.Deadlines{Factor: factor}, NoOptimum: true}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r.End
	}
	with, without := run(0), run(-1)
	t.Logf("wq with deadlines %v, without %v", with, without)
	if without < 2*with {
		t.Errorf("with deadlines %v, without %v: the stalled task should hold the run far longer without", with, without)
	}
}

// TestSlowerThanTheFloorIsMeasured: a worker 200 times slower than the
// others from the start, its tasks (2 s) longer than the floor of the
// deadlines (1 s). Never measured, its deadline was the floor: under wq
// it was found late and its task cut short in every generation, and it
// never finished one. Each overrun now says how long at least its tasks
// take (sched.Deadlines.OfWorker), so it finishes one after an overrun;
// under the policies that wait for no task (wq, rwq, cyclic) it then
// works on. Under every policy it runs tasks in every third generation
// at least (those that replicate cancel its copies: their races are lost,
// but run). Virtual time only.
func TestSlowerThanTheFloorIsMeasured(t *testing.T) {
	set := &Set{Name: "slow", Machines: []Machine{
		{Name: "A", CPUs: 1, Speed: 1}, {Name: "B", CPUs: 1, Speed: 1}, {Name: "C", CPUs: 1, Speed: 1},
		{Name: "S", CPUs: 1, Speed: 1.0 / 200},
	}}
	const gens = 20
	for _, policy := range sched.Names {
		r, err := Run(Config{Set: set, Policy: policy, Workload: ES(30, 70, gens, 10*time.Millisecond), AddedDelay: time.Millisecond, Seed: 1, NoOptimum: true})
		if err != nil {
			t.Fatal(err)
		}
		s := r.Report.Workers[3]
		t.Logf("%s: S accepted %d, executions %d (aborted %d), run %v", policy, s.Accepted, s.Executions, s.Aborted, r.End)
		if s.Executions < gens/3 {
			t.Errorf("%s: S ran %d tasks in %d generations", policy, s.Executions, gens)
		}
		if waits := policy == "wq" || policy == "rwq" || policy == "cyclic"; waits && s.Accepted < gens/2 {
			t.Errorf("%s: S finished %d tasks in %d generations: cut short at the floor", policy, s.Accepted, gens)
		}
	}
}
