package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
	"github.com/esgrid/esgrid/sched"
)

// propertySets is how many random machine sets TestRandomSetProperties
// runs: by default a few (seconds), more under the long tag, any number
// with -property-sets N (go test ./sched/sim -run RandomSetProperties
// -property-sets 500).
var propertySets = flag.Int("property-sets", 0, "random machine sets for TestRandomSetProperties (0: the default, 12; 60 with -tags long)")

// propertyMachines bounds the machines of a random set: up to 5,000 with
// -property-big (and under the long tag), else up to 300 so the default
// run stays short.
var propertyBig = flag.Bool("property-big", false, "TestRandomSetProperties: sets of up to 5,000 machines")

// genSet is one random machine set and what the file cannot say: leaves
// at time 0 (the parser takes leave= after the start only).
type genSet struct {
	text   string
	leaves []Leave
	// allLeave says every machine leaves at some point: the run may
	// rightly fail (the policy is left with nobody).
	allLeave bool
	// relays is the longest relay chain, for the events' bound.
	relays int
}

// genRandomSet writes a machine set of 1 to maxMachines machines: speeds
// spread up to 1,000×, 1 to 64 CPUs, one-way delays from 0 to 1 s, relays
// and chains of relays with their forwarding costs, task-time tables,
// slowdowns and leaves at odd times (at 0, within a nanosecond, mid-run,
// long after the end; now and then every machine leaving), and a master
// cost of 0 to 1 ms.
func genRandomSet(r *rand.Rand, maxMachines int) genSet {
	var g genSet
	var b strings.Builder
	switch r.IntN(4) {
	case 0:
	case 1:
		b.WriteString("master cost=0\n")
	case 2:
		fmt.Fprintf(&b, "master cost=%dns\n", r.IntN(1_000_001))
	default:
		fmt.Fprintf(&b, "master cost=%dus\n", []int{1, 10, 25, 100, 1000}[r.IntN(5)])
	}
	n := 1
	switch r.IntN(5) {
	case 0:
	case 1:
		n = 1 + r.IntN(4)
	case 2, 3:
		n = 1 + r.IntN(min(40, maxMachines))
	default:
		n = 1 + r.IntN(maxMachines)
	}
	spread := []float64{1, 2, 10, 100, 1000}[r.IntN(5)]
	cpus := func() int {
		switch r.IntN(6) {
		case 0:
			return 1 + r.IntN(64)
		case 1:
			return 64
		default:
			return []int{1, 1, 2, 4, 8}[r.IntN(5)]
		}
	}
	delay := func() time.Duration {
		switch r.IntN(6) {
		case 0:
			return 0
		case 1:
			return time.Duration(r.Int64N(int64(time.Second) + 1))
		case 2:
			return time.Second
		default:
			return time.Duration(r.Int64N(int64(50*time.Millisecond))) + 1
		}
	}
	allLeave := n <= 8 && r.IntN(6) == 0
	g.allLeave = allLeave
	oddTime := func() string {
		return []string{"1ns", "1us", "250ms", "1s", "3s", "10s", "1000h"}[r.IntN(7)]
	}
	depth := make([]int, 0, n) // relay chain depth of each machine
	for i := range n {
		fmt.Fprintf(&b, "machine X%d", i)
		d := 0
		switch {
		case i == 0 && r.IntN(2) == 0:
			b.WriteString(" local")
		case i > 0 && r.IntN(6) == 0:
			// Behind an earlier machine, which relays (a chain when
			// that one is behind a relay too).
			j := r.IntN(i)
			if !strings.Contains(lineOf(b.String(), j), " local") {
				fmt.Fprintf(&b, " via=X%d", j)
				d = depth[j] + 1
				g.relays = max(g.relays, d)
			}
			fmt.Fprintf(&b, " delay=%v", delay())
		default:
			fmt.Fprintf(&b, " delay=%v", delay())
		}
		depth = append(depth, d)
		fmt.Fprintf(&b, " cpus=%d", cpus())
		speed := math.Pow(spread, r.Float64()) / math.Sqrt(spread)
		if r.IntN(4) == 0 {
			// A task-time table: its time per grain varies with the grain.
			for _, grain := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second} {
				if r.IntN(3) > 0 {
					ratio := math.Pow(2, r.Float64()*2-1) / speed
					fmt.Fprintf(&b, " t%v=%v", grain, max(time.Duration(float64(grain)*ratio), 1))
				}
			}
			if !strings.Contains(lineOf(b.String(), i), " t") {
				fmt.Fprintf(&b, " t10ms=%v", max(time.Duration(1e7/speed), 1))
			}
		} else {
			fmt.Fprintf(&b, " speed=%.4g", speed)
		}
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, " send=%v recv=%v", time.Duration(r.IntN(1000))*time.Microsecond, time.Duration(r.IntN(1000))*time.Microsecond)
		}
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, " relay=%v", time.Duration(r.IntN(200))*time.Microsecond)
		}
		for range r.IntN(3) {
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, " slow=%s*%g", []string{"0", "1ns", "500ms", "2s", "1000h"}[r.IntN(5)], []float64{0.01, 0.5, 1, 3, 100}[r.IntN(5)])
			}
		}
		switch {
		case allLeave:
			if r.IntN(3) == 0 {
				g.leaves = append(g.leaves, Leave{Machine: fmt.Sprintf("X%d", i), At: 0})
			} else {
				fmt.Fprintf(&b, " leave=%s", []string{"1ns", "1us", "100ms", "2s"}[r.IntN(4)])
			}
		case r.IntN(8) == 0:
			fmt.Fprintf(&b, " leave=%s", oddTime())
		case r.IntN(40) == 0:
			g.leaves = append(g.leaves, Leave{Machine: fmt.Sprintf("X%d", i), At: 0})
		}
		b.WriteString("\n")
	}
	g.text = b.String()
	return g
}

// lineOf is the machine line of machine j in a set's text so far.
func lineOf(text string, j int) string {
	prefix := fmt.Sprintf("machine X%d ", j)
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// genWorkload is a small random workload: an ES, a bag of one grain or
// Mandelbrot strips, with grains from 10 µs to 2 s.
func genWorkload(r *rand.Rand, slots int) Workload {
	grain := []time.Duration{10 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second}[r.IntN(5)]
	var w Workload
	switch r.IntN(3) {
	case 0:
		lambda := 1 + r.IntN(min(2*slots, 400)+1)
		w = ES(r.IntN(8), lambda, 1+r.IntN(4), grain)
	case 1:
		w = BagUniform(1+r.IntN(min(3*slots, 600)+1), grain)
	default:
		w = Bag(MandelbrotGrains(1+r.IntN(200), grain))
	}
	if r.IntN(4) == 0 {
		w.EngineCost = time.Duration(r.IntN(1000)) * time.Microsecond
	}
	return w
}

// TestRandomSetProperties runs every policy on random machine sets and
// workloads (genRandomSet, genWorkload) and checks what must hold on any
// set: the run ends within a bound on its events; it is never shorter
// than the clairvoyant floor (a policy that beats the floor means a bug
// in the floor or in the simulator), and the floor's schedule is never
// below the floor; every task is sent once as an original and every batch
// completes with its tasks accepted, at two messages a task at least; and
// the same configuration gives the same result, bit for bit. A run may
// fail only when every machine leaves, and then with an error, not a
// hang.
func TestRandomSetProperties(t *testing.T) {
	sets := longtest.Pick(12, 60)
	if testing.Short() {
		sets = 6
	}
	if *propertySets > 0 {
		sets = *propertySets
	}
	maxMachines := longtest.Pick(300, 5000)
	if *propertyBig {
		maxMachines = 5000
	}
	for seed := range uint64(sets) {
		r := rand.New(rand.NewPCG(seed, 0xe551))
		g := genRandomSet(r, maxMachines)
		set, err := ParseSet(fmt.Sprintf("gen%d", seed), strings.NewReader(g.text))
		if err != nil {
			t.Fatalf("seed %d: the generator wrote a set the parser refuses: %v\n%s", seed, err, g.text)
		}
		w := genWorkload(r, set.Slots())
		noise := []float64{0, 0, 0.1, 0.5}[r.IntN(4)]
		delay := []time.Duration{0, 0, time.Millisecond, 50 * time.Millisecond}[r.IntN(4)]
		for _, policy := range sched.Names {
			cfg := Config{Set: set, Policy: policy, Workload: w, Noise: noise, AddedDelay: delay, Leaves: g.leaves, Seed: seed + 1}
			checkRun(t, fmt.Sprintf("seed %d, %d machines, %s, %s, noise %g, delay %v", seed, len(set.Machines), policy, w.Name, noise, delay), cfg, g)
		}
	}
}

// checkRun runs cfg twice and checks the properties of
// TestRandomSetProperties.
func checkRun(t *testing.T, name string, cfg Config, g genSet) {
	t.Helper()
	tasks := cfg.Workload.Tasks()
	slots := cfg.Set.Slots()
	limit := 200*(tasks+slots) + 1_000_000
	res, err := runLimited(context.Background(), cfg, limit)
	if err != nil {
		if strings.Contains(err.Error(), "every machine had left") && g.everyoneLeft(cfg) {
			return
		}
		t.Errorf("%s: %v\n%s", name, err, g.text)
		return
	}
	again, err := runLimited(context.Background(), cfg, limit)
	if err != nil {
		t.Errorf("%s: the same run again failed: %v", name, err)
		return
	}
	if !reflect.DeepEqual(res, again) {
		t.Errorf("%s: the same configuration gave two results: end %v and %v, %d and %d events", name, res.End, again.End, res.Stats.Events, again.Stats.Events)
	}

	// The events: each message arrives and is handled, once per relay
	// on its way too; each instance ends once, and again for every
	// slowdown it runs through; plus ticks, batches, slowdowns, leaves.
	st := res.Stats
	nslow := len(cfg.Slowdowns)
	for _, m := range cfg.Set.Machines {
		nslow += len(m.Slowdowns) * (1 + m.CPUs)
	}
	ticks := int(res.End/DefaultTick) + 2*len(cfg.Workload.Batches)
	bound := st.Messages*(2+g.relays) + st.Instances + nslow + len(cfg.Set.Machines) + len(g.leaves) + ticks + len(cfg.Workload.Batches) + 1
	if st.Events > bound {
		t.Errorf("%s: %d events, more than the %d its messages, instances, ticks and batches explain\n%s", name, st.Events, bound, g.text)
	}

	// The floor.
	opt := res.Optimum
	// Rounding: the floor is found to the nanosecond for small batches
	// and 100 ns for large ones, and the engine rounds each task's
	// end to the nanosecond.
	slack := time.Duration(len(cfg.Workload.Batches)) * time.Microsecond
	if res.End+slack < opt.LB {
		t.Errorf("%s: the run ended at %v, before the clairvoyant floor %v (effOpt %.4f)\n%s", name, res.End, opt.LB, float64(opt.LB)/float64(res.End), g.text)
	}
	if res.Report.Total+slack < opt.LB {
		t.Errorf("%s: the ledger's total %v is below the clairvoyant floor %v\n%s", name, res.Report.Total, opt.LB, g.text)
	}
	if opt.UB+slack < opt.LB {
		t.Errorf("%s: the clairvoyant schedule %v is below the floor %v\n%s", name, opt.UB, opt.LB, g.text)
	}
	if cfg.Noise == 0 && opt.Nominal != opt.LB {
		t.Errorf("%s: without noise the nominal optimum %v differs from the floor %v", name, opt.Nominal, opt.LB)
	}

	// The counts.
	rep := &res.Report
	if rep.Originals != tasks {
		t.Errorf("%s: %d originals for %d tasks", name, rep.Originals, tasks)
	}
	if len(rep.Generations) != len(cfg.Workload.Batches) {
		t.Errorf("%s: %d generations for %d batches", name, len(rep.Generations), len(cfg.Workload.Batches))
	}
	done := 0
	for i, gen := range rep.Generations {
		if !gen.Complete {
			t.Errorf("%s: generation %d not complete", name, i)
		}
		done += gen.Tasks
	}
	if done != tasks {
		t.Errorf("%s: the generations hold %d tasks, the workload %d", name, done, tasks)
	}
	if rep.Departed == 0 {
		accepted := 0
		for _, w := range rep.Workers {
			accepted += w.Accepted
		}
		if accepted != tasks {
			t.Errorf("%s: the workers' accepted results add up to %d, the tasks to %d", name, accepted, tasks)
		}
	}
	if st.Messages < 2*tasks {
		t.Errorf("%s: %d messages for %d tasks (at least a task and a result each)", name, st.Messages, tasks)
	}
	if sent := rep.Originals + rep.Resends + rep.Replicas; st.Instances > sent {
		t.Errorf("%s: %d instances ran, %d were sent", name, st.Instances, sent)
	}
}

// everyoneLeft says every machine of cfg leaves at some time.
func (g genSet) everyoneLeft(cfg Config) bool {
	left := map[string]bool{}
	for _, l := range leavesOf(&cfg) {
		left[l.Machine] = true
	}
	return len(left) == len(cfg.Set.Machines)
}

// TestEveryMachineLeaves: a run whose every machine leaves before its
// last batch ends fails at once with an error that says so. A slowdown
// (or a leave) still pending far in the future kept the master's Tick
// going, a tick every 250 ms of virtual time up to it: with one set an
// hour ahead, fourteen thousand ticks; with slow=800000h, hours of real
// time, a hang.
func TestEveryMachineLeaves(t *testing.T) {
	for _, c := range []struct {
		text   string
		leaves []Leave
	}{
		{"machine A local cpus=2 speed=1 slow=800000h*2 leave=50ms", nil},
		// C's own leave is far ahead; it leaves at 0 too (which only
		// Config can say), and the earlier leave counts.
		{"machine A local speed=1 leave=50ms\nmachine B delay=5ms speed=2 leave=1s\nmachine C delay=1ms speed=1 leave=800000h", []Leave{{Machine: "C", At: 0}}},
	} {
		set, err := ParseSet("leavers", strings.NewReader(c.text))
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range sched.Names {
			cfg := Config{Set: set, Policy: policy, Workload: BagUniform(40, 100*time.Millisecond), Leaves: c.leaves, Seed: 1}
			_, err := runLimited(context.Background(), cfg, 100_000)
			if err == nil || !strings.Contains(err.Error(), "every machine had left") {
				t.Errorf("%s on %q: %v, want an error that every machine had left", policy, c.text, err)
			}
		}
	}
}

// countingPolicy counts the steps of the policy it wraps.
type countingPolicy struct {
	sched.Policy
	steps *int
}

func (p countingPolicy) Step(ev sched.Event, out []sched.Action) []sched.Action {
	*p.steps++
	return p.Policy.Step(ev, out)
}

// TestTrialsStopMidRun: RunTrials stops a run under way once its
// context is done (essim at Ctrl-C). A run of one task of 1,000 hours
// is fourteen million of the master's ticks; the old code checked the
// context between runs only, and went on to the run's end: "the run
// went on for 14400005 steps after its context was cancelled".
func TestTrialsStopMidRun(t *testing.T) {
	set, err := ParseSet("slow", strings.NewReader("machine A local speed=0.001"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	steps := 0
	cfg := Config{Set: set, Workload: BagUniform(1, time.Hour), NoOptimum: true, NewPolicy: func() (sched.Policy, error) {
		p, err := sched.New("wq", sched.Config{})
		cancel() // as the run starts
		return countingPolicy{p, &steps}, err
	}}
	_, err = RunTrials(ctx, []Config{cfg}, 1, 1)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want the context's error", err)
	}
	if steps > 1<<16 {
		t.Errorf("the run went on for %d steps after its context was cancelled", steps)
	}
}

// TestTaskLongerThanEveryDeadline: a task longer than the longest
// deadline on every machine (10 h on machines not measured yet, whose
// deadline doubles from 30 s to 8.5 h and no further) fails the run
// with an error that says so. The old code cancelled it at each deadline
// and sent it again, for ever: "sim: policy wq still running after
// 5000000 events, at 347h12m30.75s in batch 0". With the master's
// ceiling (DefaultCeiling), a task cut short at 5 minutes once then runs
// to the task timeout, which fails a 10-hour task, and a task of 9
// minutes, within the timeout, ends. Without the ceiling the simulator
// was not the master's rule (it failed the 10-hour task after 20
// overruns, "the last 8h32m0.25s into its run"); with it, the 9-minute
// task was cut at the ceiling until it failed the same way ("went overdue
// 20 times, the last 5m0.248s into its run"), as the master cut it for
// ever.
func TestTaskLongerThanEveryDeadline(t *testing.T) {
	set, err := ParseSet("slow", strings.NewReader("machine A local speed=0.001\nmachine B delay=1ms speed=0.001 cpus=2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range sched.Names {
		_, err := runLimited(context.Background(), Config{Set: set, Policy: policy, Workload: BagUniform(1, 36*time.Second), NoOptimum: true}, 5_000_000)
		if err == nil || !strings.Contains(err.Error(), "past the task timeout of 10m0s") {
			t.Errorf("%s: %v, want an error that the task ran past the task timeout", policy, err)
		}
		_, err = runLimited(context.Background(), Config{Set: set, Policy: policy, Workload: BagUniform(3, 540*time.Millisecond), NoOptimum: true}, 5_000_000)
		if err != nil {
			t.Errorf("%s: tasks of 9 min, within the task timeout: %v", policy, err)
		}
		_, err = runLimited(context.Background(), Config{Set: set, Policy: policy, Workload: BagUniform(1, 36*time.Second), NoOptimum: true,
			Deadlines: sched.Deadlines{Ceiling: -1}}, 5_000_000)
		if err == nil || !strings.Contains(err.Error(), "longer than its deadlines") {
			t.Errorf("%s, no ceiling: %v, want an error that the task is longer than its deadlines", policy, err)
		}
	}
	// Without a ceiling, six hours is within the deadlines: the run ends.
	if _, err := runLimited(context.Background(), Config{Set: set, Policy: "wq", Workload: BagUniform(3, 21600*time.Millisecond), NoOptimum: true,
		Deadlines: sched.Deadlines{Ceiling: -1}}, 5_000_000); err != nil {
		t.Errorf("tasks of 6 h, no ceiling: %v", err)
	}
}
