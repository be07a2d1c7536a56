package sim

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// TestDeterminism: every policy, same config and seed, the same result bit
// for bit (ledger report included); another seed, another result.
func TestDeterminism(t *testing.T) {
	lan, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sched.Names {
		t.Run(p, func(t *testing.T) {
			cfg := Config{
				Set: lan, Policy: p, Workload: ES(30, 70, 5, 100*time.Millisecond),
				AddedDelay: 30 * time.Millisecond, Noise: 0.2, Seed: 7,
				Slowdowns: []Slowdown{{Machine: "L1", At: 2 * time.Second, Factor: 3}},
			}
			a, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatal("same seed, different results")
			}
			cfg.Seed = 8
			c, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if a.Report.Total == c.Report.Total {
				t.Fatal("different seeds, same total")
			}
			if a.Report.Total != a.End || a.Report.Total <= 0 {
				t.Fatalf("ledger total %v, simulator end %v", a.Report.Total, a.End)
			}
		})
	}
}

// TestRunTrialsParallel: the summaries do not depend on how many
// simulations run at once.
func TestRunTrialsParallel(t *testing.T) {
	lan, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []Config
	for _, p := range []string{"wq", "r3q"} {
		cfgs = append(cfgs, Config{Set: lan, Policy: p, Workload: ES(30, 70, 3, 500*time.Millisecond), Noise: 0.1, Seed: 3})
	}
	one, err := RunTrials(context.Background(), cfgs, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	three, err := RunTrials(context.Background(), cfgs, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, three) {
		t.Fatal("parallel runs changed the summaries")
	}
	if one[0].Trials != 4 || one[0].Tasks != 4*(30+3*70) {
		t.Fatalf("trials %d tasks %d", one[0].Trials, one[0].Tasks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunTrials(ctx, cfgs, 4, 1); err == nil {
		t.Fatal("cancelled context: no error")
	}
}

// TestLedgerExactOneMachine: one machine, 10 ms link, 100 ms tasks, wq:
// two generations of 3 tasks, each task a 120 ms round, so the ledger's
// books are checkable by hand.
func TestLedgerExactOneMachine(t *testing.T) {
	ms := time.Millisecond
	res, err := Run(Config{
		Set:      mustSet(t, "machine A delay=10ms speed=1"),
		Policy:   "wq",
		Workload: ES(0, 3, 2, 100*ms),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Report
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"total", r.Total, 720 * ms},          // 2 × 3 × (10 + 100 + 10)
		{"busy", r.Busy, 600 * ms},            // 6 × 100
		{"comm", r.Comm, 120 * ms},            // not executing: 6 × 20
		{"LB", r.LB, 600 * ms},                // 6 × 100 / speed 1
		{"barrier", r.BarrierBound, 640 * ms}, // 2 × (300 + 20)
		{"round trip", r.RoundTrip, 20 * ms},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Originals != 6 || r.Replicas != 0 || r.CancelsHeld+r.CancelsRunning != 0 {
		t.Errorf("counts %+v", r.Counts)
	}
	if len(r.Generations) != 2 {
		t.Errorf("%d generations", len(r.Generations))
	}
}

// ledgerTap records the stopped executions it passes to the ledger.
type ledgerTap struct {
	ledgerAccountant
	stopped []sched.Execution
}

func (l *ledgerTap) ran(x sched.Execution) {
	l.ledgerAccountant.ran(x)
	if x.Cancelled {
		l.stopped = append(l.stopped, x)
	}
}

// TestR3QCancelsReachLedger: under r3q, the instances the simulated workers
// stop while running are exactly the ledger's Aborted and Wasted, and most
// cancels find the replica still held (the point of reverse-order
// replication).
func TestR3QCancelsReachLedger(t *testing.T) {
	set, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Set: set, Policy: "r3q", Workload: ES(30, 70, 10, 500*time.Millisecond),
		AddedDelay: 50 * time.Millisecond, Noise: 0.1, Seed: 1}
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	led := newLedger(&e.cfg)
	tap := &ledgerTap{ledgerAccountant: ledgerAccountant{led}}
	e.acct = tap
	if err := e.run(); err != nil {
		t.Fatal(err)
	}
	r := led.Report()
	var wasted time.Duration
	for _, x := range tap.stopped {
		wasted += x.End - x.Start
	}
	if r.Aborted != len(tap.stopped) || r.Wasted != wasted {
		t.Fatalf("ledger aborted %d wasted %v; simulator stopped %d wasting %v", r.Aborted, r.Wasted, len(tap.stopped), wasted)
	}
	if e.stats.HeldDropped == 0 || r.Replicas == 0 {
		t.Fatalf("no held instance dropped (%d replicas)", r.Replicas)
	}
	// The ledger's cancel outcomes are the workers' facts.
	if r.CancelsHeld != e.stats.HeldDropped || r.Dropped != e.stats.HeldDropped || r.CancelsRunning != r.Aborted || r.CancelsLate != e.stats.LateCancels {
		t.Fatalf("ledger cancels held %d running %d late %d; simulator dropped %d, stopped %d, late %d",
			r.CancelsHeld, r.CancelsRunning, r.CancelsLate, e.stats.HeldDropped, r.Aborted, e.stats.LateCancels)
	}
}

// TestWorkloads checks the workload builders.
func TestWorkloads(t *testing.T) {
	ms := time.Millisecond
	w := ES(30, 70, 100, 100*ms)
	if len(w.Batches) != 101 || w.Batches[0].N != 30 || w.Batches[1].N != 70 || w.Tasks() != 7030 {
		t.Fatalf("ES batches: %d, first %d, tasks %d", len(w.Batches), w.Batches[0].N, w.Tasks())
	}
	if w := ES(0, 5, 2, ms); len(w.Batches) != 2 {
		t.Fatalf("mu 0: %d batches", len(w.Batches))
	}
	g := MandelbrotGrains(40, 100*ms)
	if len(g) != 40 {
		t.Fatalf("%d strips", len(g))
	}
	b := Bag(g)
	if mean := b.MeanGrain(); mean < 99*ms || mean > 101*ms {
		t.Errorf("mean grain %v, want 100ms", mean)
	}
	lo, hi := g[0], g[0]
	for _, x := range g {
		lo, hi = min(lo, x), max(hi, x)
	}
	if hi < 5*lo {
		t.Errorf("strips through the set should cost far more: min %v max %v", lo, hi)
	}
	bad := []Workload{
		{},
		{Batches: []Batch{{N: 0, Grain: ms}}},
		{Batches: []Batch{{N: 2, Grains: []time.Duration{ms}}}},
		{Batches: []Batch{{N: 1, Grain: 0}}},
	}
	for i, w := range bad {
		if err := w.Validate(); err == nil {
			t.Errorf("bad workload %d accepted", i)
		}
	}
}

// TestBagMandelbrotRuns: a bag of uneven strips runs to the end under
// every policy, and the ledger's LB, measured from the executions (each
// worker's mean task, not the bag's real work: Σ work / Σ speed would be
// 480 ms), stays a lower bound of the total.
func TestBagMandelbrotRuns(t *testing.T) {
	set := mustSet(t, "machine A local speed=1\nmachine B delay=5ms speed=2 cpus=2")
	grains := MandelbrotGrains(48, 50*time.Millisecond)
	for _, p := range sched.Names {
		res, err := Run(Config{Set: set, Policy: p, Workload: Bag(grains), Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if lb := res.Report.LB; lb <= 0 || lb > res.Report.Total {
			t.Errorf("%s: LB %v, total %v", p, lb, res.Report.Total)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	set := mustSet(t, "machine A speed=1")
	wl := BagUniform(1, time.Millisecond)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Policy: "wq", Workload: wl}, "no machine set"},
		{Config{Set: set, Policy: "nope", Workload: wl}, "unknown policy"},
		{Config{Set: set, Policy: "wq"}, "no batches"},
		{Config{Set: set, Policy: "wq", Workload: wl, Noise: -1}, "noise"},
		{Config{Set: set, Policy: "wq", Workload: wl, Slowdowns: []Slowdown{{Machine: "Z", Factor: 2}}}, "unknown machine"},
		{Config{Set: set, Policy: "wq", Workload: wl, Slowdowns: []Slowdown{{Machine: "A", Factor: 0}}}, "factor"},
	} {
		if _, err := Run(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// TestTimesAddUp: comm lies outside the sync wait, so for every policy the
// three parts split the total, per generation and for the run, with none
// negative; cyclic, whose fast workers idle through a long sync wait, is
// the case that used to make compute negative.
func TestTimesAddUp(t *testing.T) {
	lan, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sched.Names {
		res, err := Run(Config{Set: lan, Policy: p, Workload: ES(30, 70, 5, 100*time.Millisecond),
			AddedDelay: 50 * time.Millisecond, Noise: 0.1, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Report
		check := func(what string, total, sync, comm, compute time.Duration) {
			if sync < 0 || comm < 0 || compute < 0 || sync+comm+compute != total {
				t.Errorf("%s %s: total %v = sync %v + comm %v + compute %v?", p, what, total, sync, comm, compute)
			}
		}
		check("run", r.Total, r.SyncWait, r.Comm, r.Compute)
		for _, g := range r.Generations {
			check("generation", g.Total, g.SyncWait, g.Comm, g.Compute)
		}
		if r.Comm <= 0 {
			t.Errorf("%s: no comm at 50 ms delay", p)
		}
	}
}
