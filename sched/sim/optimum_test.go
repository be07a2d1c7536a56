package sim

import (
	"math"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// TestOptimumByHand checks the clairvoyant floor against schedules worked
// out by hand.
func TestOptimumByHand(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		set      string
		workload Workload
		slow     []Slowdown
		leaves   []Leave
		lb, ub   time.Duration
		exact    bool
	}{
		{
			// A (local, 100 ms a task) finishes tasks at 100, 200, 300;
			// B (10 ms away, 50 ms a task) returns them at 10+50+10 = 70,
			// 120, 170, 220. The five earliest: 70 100 120 170 200.
			name:     "identical tasks: greedy earliest finish",
			set:      "machine A local speed=1\nmachine B delay=10ms speed=2",
			workload: BagUniform(5, 100*ms),
			lb:       200 * ms, ub: 200 * ms, exact: true,
		},
		{
			// Two slots alike, tasks of 3 3 2 2 2 (×100 ms): the best split
			// is {3,3} {2,2,2} = 600 ms; longest-first alone gives 3+2+2 =
			// 700, which the search improves to 600. The floor finds 600:
			// below it, the five tasks of at least 200 ms need three places
			// on one slot, 6 in all, and two slots hold only 2 + 2.
			name:     "uneven tasks: the search meets the floor",
			set:      "machine A local cpus=2 speed=1",
			workload: Bag([]time.Duration{300 * ms, 300 * ms, 200 * ms, 200 * ms, 200 * ms}),
			lb:       600 * ms, ub: 600 * ms, exact: true,
		},
		{
			// 30 ms a message: four 10 ms tasks on four slots take 30 +
			// 10 + 30 = 70 ms each, but the master handles 8 messages:
			// 240 ms.
			name:     "the master's messages",
			set:      "master cost=30ms\nmachine A local cpus=4 speed=1",
			workload: BagUniform(4, 10*ms),
			lb:       240 * ms, ub: 240 * ms, exact: true,
		},
		{
			// One slot, 100 ms tasks, twice as slow from 150 ms: 0-100,
			// 100-250 (50 ms of work at pace 1, the other 50 at pace 2),
			// 250-450.
			name:     "a slowdown",
			set:      "machine A local speed=1",
			workload: BagUniform(3, 100*ms),
			slow:     []Slowdown{{Machine: "A", At: 150 * ms, Factor: 2}},
			lb:       450 * ms, ub: 450 * ms, exact: true,
		},
		{
			// The same slowdown undone at 1 s: the floor takes the machine
			// as fast as it will be again, pace 1, so 300 ms; the
			// clairvoyant schedule still meets the slowdown: 450.
			name:     "a slowdown undone later",
			set:      "machine A local speed=1",
			workload: BagUniform(3, 100*ms),
			slow:     []Slowdown{{Machine: "A", At: 150 * ms, Factor: 2}, {Machine: "A", At: time.Second, Factor: 1}},
			lb:       300 * ms, ub: 450 * ms, exact: false,
		},
		{
			// Two generations of two 100 ms tasks on A and B, with 5 ms of
			// engine time between them; B leaves at 150 ms. Generation 1:
			// one each, 100 ms. Generation 2 starts at 105: B could not
			// finish by 150, so A runs both: 200 ms. 100 + 5 + 200.
			name:     "a machine that leaves",
			set:      "machine A local speed=1\nmachine B local speed=1",
			workload: Workload{Batches: []Batch{{N: 2, Grain: 100 * ms}, {N: 2, Grain: 100 * ms}}, EngineCost: 5 * ms},
			leaves:   []Leave{{Machine: "B", At: 150 * ms}},
			lb:       305 * ms, ub: 305 * ms, exact: true,
		},
		{
			// The set file's own slow= and leave= count as well: B (2 CPUs,
			// 50 ms tasks) leaves at 120 ms, so it does 4 tasks (two per
			// slot, ending at 100); A does the fifth: 100 ms.
			name:     "slow= and leave= in the set",
			set:      "machine A local speed=1 slow=1s*3\nmachine B local speed=2 cpus=2 leave=120ms",
			workload: BagUniform(5, 100*ms),
			lb:       100 * ms, ub: 100 * ms, exact: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Set: mustSet(t, tc.set), Policy: "wq", Workload: tc.workload, Slowdowns: tc.slow, Leaves: tc.leaves}
			opt := ComputeOptimum(cfg)
			if opt.LB != tc.lb || opt.UB != tc.ub || opt.Exact != tc.exact {
				t.Errorf("floor %v, clairvoyant %v, exact %v; want %v, %v, %v (%+v)", opt.LB, opt.UB, opt.Exact, tc.lb, tc.ub, tc.exact, opt.Batches)
			}
			// No policy beats the floor.
			for _, p := range sched.Names {
				cfg.Policy = p
				res, err := Run(cfg)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if res.Optimum.LB != opt.LB {
					t.Errorf("%s: Run's floor %v, ComputeOptimum's %v", p, res.Optimum.LB, opt.LB)
				}
				if res.Report.Total < opt.LB {
					t.Errorf("%s: total %v below the floor %v", p, res.Report.Total, opt.LB)
				}
			}
		})
	}
}

// TestOptimumIsAFloor: on the paper's sets, with noise, delays and a
// slowdown, no policy's total is below the floor, the floor is not above
// the clairvoyant schedule, and with tasks all alike the floor is exact.
func TestOptimumIsAFloor(t *testing.T) {
	for _, name := range []string{"lan", "wan"} {
		set, err := LoadSet(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, noise := range []float64{0, 0.2} {
			for _, p := range sched.Names {
				cfg := Config{Set: set, Policy: p, Workload: ES(30, 70, 4, 100*time.Millisecond),
					AddedDelay: 30 * time.Millisecond, Noise: noise, Seed: 11,
					Slowdowns: []Slowdown{{Machine: "L1", At: time.Second, Factor: 5}}}
				res, err := Run(cfg)
				if err != nil {
					t.Fatal(err)
				}
				o := res.Optimum
				if o.LB <= 0 || o.LB > o.UB || o.LB > res.Report.Total {
					t.Errorf("%s noise %v %s: floor %v clairvoyant %v total %v", name, noise, p, o.LB, o.UB, res.Report.Total)
				}
				if noise == 0 && !o.Exact {
					t.Errorf("%s %s: identical tasks but the floor is not exact: %+v", name, p, o.Batches)
				}
				if noise > 0 && float64(o.UB-o.LB) > 0.05*float64(o.LB) {
					t.Errorf("%s %s: floor %v and clairvoyant %v more than 5%% apart", name, p, o.LB, o.UB)
				}
			}
		}
	}
}

// TestNoiseFactor: the task's noise has mean 1 and the given sigma in the
// log, and depends on (seed, batch, task) only.
func TestNoiseFactor(t *testing.T) {
	const sigma = 0.2
	sum, sumLog, sumLog2 := 0.0, 0.0, 0.0
	const n = 200_000
	for i := range n {
		f := NoiseFactor(42, int32(i/1000), int32(i%1000), sigma)
		sum += f
		l := math.Log(f)
		sumLog += l
		sumLog2 += l * l
	}
	mean := sum / n
	sd := math.Sqrt(sumLog2/n - (sumLog/n)*(sumLog/n))
	if math.Abs(mean-1) > 0.005 || math.Abs(sd-sigma) > 0.005 {
		t.Errorf("mean %v sd of log %v, want 1 and %v", mean, sd, sigma)
	}
	if NoiseFactor(1, 2, 3, sigma) != NoiseFactor(1, 2, 3, sigma) || NoiseFactor(1, 2, 3, sigma) == NoiseFactor(1, 2, 4, sigma) {
		t.Error("noise is not a function of (seed, batch, task)")
	}
	if NoiseFactor(1, 2, 3, 0) != 1 {
		t.Error("no noise must be 1")
	}
}
