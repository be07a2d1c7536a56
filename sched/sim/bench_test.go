package sim

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/cputime"
	"github.com/esgrid/esgrid/sched"
)

// scaleSet is n workers of four kinds in equal numbers (as the built-in
// scale sets): speeds 0.5 to 2, 1 to 4 CPUs, 0.2 to 5 ms one way, 10 µs
// per message at the master and the workers.
func scaleSet(tb testing.TB, n int) *Set {
	tb.Helper()
	q := max(n/4, 1)
	text := fmt.Sprintf(`master cost=10us
machine A count=%d cpus=1 speed=0.5 delay=5ms   send=10us recv=10us
machine B count=%d cpus=2 speed=1   delay=1ms   send=10us recv=10us
machine C count=%d cpus=4 speed=1.5 delay=200us send=10us recv=10us
machine D count=%d cpus=2 speed=2   delay=2ms   send=10us recv=10us
`, q, q, q, q)
	s, err := ParseSet(fmt.Sprintf("scale%d", 4*q), strings.NewReader(text))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkSim measures the simulator at 16, 256 and 4,096 workers: a
// (0+λ)-ES with λ two tasks per CPU, 100 ms tasks, noise 0.1, under wq,
// r3q and eft, the clairvoyant optimum included, and prints tasks per
// second of real time.
func BenchmarkSim(b *testing.B) {
	for _, n := range []int{16, 256, 4096} {
		set := scaleSet(b, n)
		slots := 0
		for _, m := range set.Machines {
			slots += m.CPUs
		}
		gens := max(1, 20_000/(2*slots)) // about 20,000 tasks a run
		for _, p := range []string{"wq", "r3q", "eft"} {
			b.Run(fmt.Sprintf("%s/workers=%d", p, n), func(b *testing.B) {
				cfg := Config{Set: set, Policy: p, Workload: ES(0, 2*slots, gens, 100*time.Millisecond), Noise: 0.1, Seed: 1}
				tasks := 0
				for b.Loop() {
					if _, err := Run(cfg); err != nil {
						b.Fatal(err)
					}
					tasks += cfg.Workload.Tasks()
				}
				b.ReportMetric(float64(tasks)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}

// eventLog is a policy that notes the events it is stepped, so that they
// can be replayed: a policy is deterministic, so the same events make the
// same actions.
type eventLog struct {
	sched.Policy
	events []sched.Event
}

func (l *eventLog) Step(ev sched.Event, out []sched.Action) []sched.Action {
	ev.IDs = slices.Clone(ev.IDs)
	l.events = append(l.events, ev)
	return l.Policy.Step(ev, out)
}

// replay steps events into a new policy of that name and returns the time
// it took per event: the CPU time of its thread where the system tells
// it (so that other processes on a loaded machine do not count), else
// real time.
func replay(tb testing.TB, name string, events []sched.Event) float64 {
	p, err := sched.New(name, sched.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]sched.Action, 0, 1024)
	runtime.GC() // not another's garbage during the replay
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, cpu := cputime.Thread()
	t := time.Now()
	for _, ev := range events {
		out = p.Step(ev, out[:0])
	}
	d := time.Since(t)
	if c1, ok := cputime.Thread(); cpu && ok {
		d = c1 - c0
	}
	return float64(d.Nanoseconds()) / float64(len(events))
}

// costPolicies restricts BenchmarkPolicyCost to some policies.
var costPolicies = flag.String("sim.cost-policies", strings.Join(sched.Names, ","), "BenchmarkPolicyCost: the policies to time, `list`")

// BenchmarkPolicyCost measures what a policy's Step costs the master per
// event at 16 to 4,096 workers (scaleSet: 2.25 slots a worker on average,
// 10 µs a message, λ = 2 × slots, 100 ms tasks, noise 0.1; Ticks and
// deadlines as the master has them). Each policy's events over one
// simulated run of about 20,000 tasks (two generations at least) are
// noted, then replayed into a fresh policy of its kind, the policies in
// turn in each loop so that they share the machine's load, timed by the
// CPU time of the replaying thread (Linux; real time elsewhere). It reports,
// per policy, the median and the least ns per event over the loops, and
// the median of eft's cost over r3q's in the same loop. policycost.go
// holds a table of its figures.
//
// A last case, corner1024, times the events of eft's hard corner instead
// (the built-in scale1024 set at 25 µs a message, noise 0, five
// generations; docs/eft.md): what a step costs depends on the run's
// dynamics, not on the grid's size alone.
//
//	go test -run X -bench PolicyCost -benchtime 7x ./sched/sim
//	go test -run X -bench PolicyCost -benchtime 7x ./sched/sim -sim.cost-policies eft,r3q
func BenchmarkPolicyCost(b *testing.B) {
	type costCase struct {
		name  string
		set   *Set
		noise float64
		gens  int
	}
	var cases []costCase
	for _, n := range []int{16, 64, 256, 1024, 4096} {
		set := scaleSet(b, n)
		cases = append(cases, costCase{fmt.Sprintf("workers=%d", n), set, 0.1, max(2, 20_000/(2*set.Slots()))})
	}
	corner, err := LoadSet("scale1024")
	if err != nil {
		b.Fatal(err)
	}
	corner.MasterCost = 25 * time.Microsecond
	cases = append(cases, costCase{"corner1024", corner, 0, 5})
	names := strings.Split(*costPolicies, ",")
	for _, c := range cases {
		logs := make([][]sched.Event, len(names))
		for i, name := range names {
			l := &eventLog{}
			cfg := Config{Set: c.set, Workload: ES(0, 2*c.set.Slots(), c.gens, 100*time.Millisecond), Noise: c.noise, Seed: 1, NoOptimum: true,
				NewPolicy: func() (sched.Policy, error) {
					p, err := sched.New(name, sched.Config{})
					l.Policy = p
					return l, err
				}}
			if _, err := Run(cfg); err != nil {
				b.Fatal(err)
			}
			logs[i] = l.events
		}
		b.Run(c.name, func(b *testing.B) {
			per := make([][]float64, len(names)) // per policy, per loop: ns/event
			for b.Loop() {
				for i, name := range names {
					per[i] = append(per[i], replay(b, name, logs[i]))
				}
			}
			// eft over r3q loop by loop (before median sorts them).
			var ratio []float64
			if e, r := slices.Index(names, "eft"), slices.Index(names, "r3q"); e >= 0 && r >= 0 {
				for k := range per[e] {
					ratio = append(ratio, per[e][k]/per[r][k])
				}
			}
			for i, name := range names {
				b.ReportMetric(median(per[i]), name+"-ns/event")
				b.ReportMetric(slices.Min(per[i]), name+"-min")
			}
			if ratio != nil {
				b.ReportMetric(median(ratio), "eft/r3q")
			}
		})
	}
}

// median is the median of xs (not empty); it sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}
