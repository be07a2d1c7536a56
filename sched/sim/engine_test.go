package sim

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// queuePolicy is a minimal work queue for testing the engine alone: each
// worker holds up to depth tasks per slot, tasks go out in id order, a
// result refills the worker that returned it.
type queuePolicy struct {
	depth int
	cap   map[sched.WorkerID]int
	load  map[sched.WorkerID]int
	order []sched.WorkerID
	next  int
	n     int
	got   []bool
	left  int
}

func newQueuePolicy(depth int) *queuePolicy {
	return &queuePolicy{depth: depth, cap: map[sched.WorkerID]int{}, load: map[sched.WorkerID]int{}}
}

func (p *queuePolicy) Name() string { return "test-queue" }
func (p *queuePolicy) Done() bool   { return p.left == 0 }

func (p *queuePolicy) Step(ev sched.Event, out []sched.Action) []sched.Action {
	switch ev.Kind {
	case sched.WorkerJoined:
		p.cap[ev.Worker] = ev.Slots * p.depth
		p.order = append(p.order, ev.Worker)
	case sched.BatchStarted:
		p.n, p.next, p.left = ev.N, 0, ev.N
		p.got = make([]bool, ev.N)
		for _, w := range p.order {
			p.load[w] = 0
		}
	case sched.ResultArrived:
		p.load[ev.Worker]--
		if !p.got[ev.Task] {
			p.got[ev.Task] = true
			p.left--
			out = append(out, sched.Action{Kind: sched.Accept, Worker: ev.Worker, Task: ev.Task})
		}
	}
	for _, w := range p.order {
		for p.next < p.n && p.load[w] < p.cap[w] {
			out = append(out, sched.Action{Kind: sched.Send, Worker: w, Task: sched.TaskID(p.next)})
			p.next++
			p.load[w]++
		}
	}
	return out
}

// scriptPolicy sends a fixed list of actions at the start of the batch and
// another list when the first result arrives; it accepts results and is
// done when every task has one.
type scriptPolicy struct {
	start, onFirst []sched.Action
	fired          bool
	got            map[sched.TaskID]bool
	n              int
}

func (p *scriptPolicy) Name() string { return "test-script" }
func (p *scriptPolicy) Done() bool   { return p.n > 0 && len(p.got) == p.n }

func (p *scriptPolicy) Step(ev sched.Event, out []sched.Action) []sched.Action {
	switch ev.Kind {
	case sched.BatchStarted:
		p.n, p.got = ev.N, map[sched.TaskID]bool{}
		out = append(out, p.start...)
	case sched.ResultArrived:
		if !p.got[ev.Task] {
			p.got[ev.Task] = true
			out = append(out, sched.Action{Kind: sched.Accept, Worker: ev.Worker, Task: ev.Task})
		}
		if !p.fired {
			p.fired = true
			out = append(out, p.onFirst...)
		}
	}
	return out
}

// recorder is an accountant that writes down every call with its time.
type recorder struct {
	e       *engine
	log     []string
	results []sched.Event // every ResultArrived, with its measurements
}

func (r *recorder) add(format string, a ...any) {
	r.log = append(r.log, fmt.Sprintf("%v ", r.e.now)+fmt.Sprintf(format, a...))
}
func (r *recorder) step(at time.Duration, ev sched.Event, acts []sched.Action) {
	switch ev.Kind {
	case sched.BatchStarted:
		r.add("batch n=%d", ev.N)
	case sched.ResultArrived:
		r.add("result w%d t%d", ev.Worker, ev.Task)
		r.results = append(r.results, ev)
	}
	for _, a := range acts {
		switch a.Kind {
		case sched.Send:
			r.add("send w%d t%d replica=%v", a.Worker, a.Task, a.Replica)
		case sched.Cancel:
			r.add("cancel w%d t%d held=%v", a.Worker, a.Task, a.Held)
		case sched.Accept:
			r.add("accept w%d t%d", a.Worker, a.Task)
		}
	}
}

func (r *recorder) ran(x sched.Execution) {
	if x.Cancelled {
		r.add("stop-running w%d t%d ran=%v", x.Worker, x.Task, x.End-x.Start)
		return
	}
	r.add("exec w%d t%d %v-%v", x.Worker, x.Task, x.Start, x.End)
}

func (r *recorder) dropped(at time.Duration, w sched.WorkerID, t sched.TaskID) {
	r.add("drop-held w%d t%d", w, t)
}

// runRecorded runs cfg with a recorder and returns the result and the log.
func runRecorded(t *testing.T, cfg Config) (Result, []string) {
	t.Helper()
	res, rec := runRecorder(t, cfg)
	return res, rec.log
}

func runRecorder(t *testing.T, cfg Config) (Result, *recorder) {
	t.Helper()
	e, err := newEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{e: e}
	e.acct = rec
	if err := e.run(); err != nil {
		t.Fatal(err)
	}
	return Result{End: e.end, Stats: e.stats}, rec
}

func mustSet(t *testing.T, text string) *Set {
	t.Helper()
	s, err := ParseSet("test", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func policyOf(p sched.Policy) func() (sched.Policy, error) {
	return func() (sched.Policy, error) { return p, nil }
}

// TestOneMachineExactTotals checks hand-computed end times of a bag of
// three 100 ms tasks on one machine with a 10 ms link.
func TestOneMachineExactTotals(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		set   string
		depth int
		want  time.Duration
	}{
		// Depth 1: each task pays a round trip: 3 × (10 + 100 + 10).
		{"one in flight", "machine A delay=10ms speed=1", 1, 360 * ms},
		// Depth 2: the held task hides the round trip after the first:
		// t0 10-110, t1 110-210, t2 sent at 120 runs 210-310, back at 320.
		{"one held", "machine A delay=10ms speed=1", 2, 320 * ms},
		// Half speed: task time 200 ms.
		{"slow machine", "machine A delay=10ms speed=0.5", 1, 660 * ms},
		// Table entry beats speed: 50 ms tasks, 3 × (10+50+10).
		{"time table", "machine A delay=10ms t100ms=50ms", 1, 210 * ms},
		// Costs: master 1 ms per message, worker recv 2 ms and send 3 ms:
		// per task 1 + 10 + 2 + 100 + 3 + 10 + 1 = 127.
		{"message costs", "master cost=1ms\nmachine A delay=10ms speed=1 recv=2ms send=3ms", 1, 381 * ms},
		// Local machine: no delay at all: 3 × 100.
		{"local", "machine A local speed=1", 1, 300 * ms},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, log := runRecorded(t, Config{
				Set:       mustSet(t, tc.set),
				NewPolicy: policyOf(newQueuePolicy(tc.depth)),
				Workload:  BagUniform(3, 100*ms),
			})
			if res.End != tc.want {
				t.Fatalf("end = %v, want %v\n%s", res.End, tc.want, strings.Join(log, "\n"))
			}
		})
	}
}

// TestAddedDelaySkipsLocal: the added delay applies to a remote link, not
// to the master's own host.
func TestAddedDelaySkipsLocal(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		set  string
		want time.Duration
	}{
		{"machine A local speed=1", 100 * ms},
		{"machine A delay=5ms speed=1", 100*ms + 2*(5+20)*ms},
	} {
		res, _ := runRecorded(t, Config{
			Set: mustSet(t, tc.set), NewPolicy: policyOf(newQueuePolicy(1)),
			Workload: BagUniform(1, 100*ms), AddedDelay: 20 * ms,
		})
		if res.End != tc.want {
			t.Errorf("%s: end = %v, want %v", tc.set, res.End, tc.want)
		}
	}
}

// TestRelayPath: a machine behind a relay pays the relay's link (with the
// added delay) plus its own, and the relay's forwarding cost each way.
func TestRelayPath(t *testing.T) {
	ms := time.Millisecond
	set := mustSet(t, `
machine R delay=10ms relay=1ms speed=1
machine W via=R delay=3ms speed=1
machine X via=W delay=2ms speed=1
`)
	if d := set.PathDelay(1, 5*ms); d != 18*ms {
		t.Errorf("W path delay = %v, want 18ms", d)
	}
	if d := set.PathDelay(2, 5*ms); d != 20*ms {
		t.Errorf("X path delay = %v, want 20ms", d)
	}
	// One task sent to W only: down 15 + 1 (relay) + 3, run 100, up 3 + 1 + 15.
	res, log := runRecorded(t, Config{
		Set: set,
		NewPolicy: policyOf(&scriptPolicy{start: []sched.Action{
			{Kind: sched.Send, Worker: 1, Task: 0},
		}}),
		Workload:   BagUniform(1, 100*ms),
		AddedDelay: 5 * ms,
	})
	if want := 138 * ms; res.End != want {
		t.Fatalf("end = %v, want %v\n%s", res.End, want, strings.Join(log, "\n"))
	}
	// Through two relays: X pays R's and W's forwarding costs? W has no
	// relay cost, so 15+1+3+2 down, 100, 2+3+1+15 up.
	res, log = runRecorded(t, Config{
		Set: set,
		NewPolicy: policyOf(&scriptPolicy{start: []sched.Action{
			{Kind: sched.Send, Worker: 2, Task: 0},
		}}),
		Workload:   BagUniform(1, 100*ms),
		AddedDelay: 5 * ms,
	})
	if want := 142 * ms; res.End != want {
		t.Fatalf("end = %v, want %v\n%s", res.End, want, strings.Join(log, "\n"))
	}
}

// TestRelayIsSingleServer: two messages reaching a relay together are
// forwarded one after the other.
func TestRelayIsSingleServer(t *testing.T) {
	ms := time.Millisecond
	set := mustSet(t, `
machine R delay=10ms relay=4ms speed=1
machine W via=R delay=0ms cpus=2 speed=1
`)
	_, log := runRecorded(t, Config{
		Set: set,
		NewPolicy: policyOf(&scriptPolicy{start: []sched.Action{
			{Kind: sched.Send, Worker: 1, Task: 0},
			{Kind: sched.Send, Worker: 1, Task: 1},
		}}),
		Workload: BagUniform(2, 100*ms),
	})
	want := []string{"114ms exec w1 t0 14ms-114ms", "118ms exec w1 t1 18ms-118ms"}
	for _, w := range want {
		if !contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, strings.Join(log, "\n"))
		}
	}
}

// TestMasterIsSingleServer: with a master cost, sends of one batch leave
// one after the other, and results queue behind them.
func TestMasterIsSingleServer(t *testing.T) {
	ms := time.Millisecond
	set := mustSet(t, "master cost=5ms\nmachine A local cpus=3 speed=1")
	_, log := runRecorded(t, Config{
		Set: set, NewPolicy: policyOf(newQueuePolicy(1)),
		Workload: BagUniform(3, 100*ms),
	})
	for _, w := range []string{"105ms exec w0 t0 5ms-105ms", "110ms exec w0 t1 10ms-110ms", "115ms exec w0 t2 15ms-115ms",
		"110ms result w0 t0", "115ms result w0 t1", "120ms result w0 t2"} {
		if !contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, strings.Join(log, "\n"))
		}
	}
}

func contains(log []string, s string) bool {
	for _, l := range log {
		if l == s {
			return true
		}
	}
	return false
}

// TestCancelSemantics: a cancel of a held task removes it and wastes
// nothing; a cancel of a running task stops it and wastes what it ran; a
// cancel that arrives after the task finished does nothing.
func TestCancelSemantics(t *testing.T) {
	ms := time.Millisecond
	// Worker 0 (fast, local) runs task 0; worker 1 (remote, 10 ms) holds
	// task 1 behind a running task 2... The first result (t0 at 50 ms)
	// triggers the scripted cancels.
	set := mustSet(t, `
machine F local speed=2
machine S delay=10ms speed=0.5
`)
	tests := []struct {
		name    string
		start   []sched.Action
		onFirst []sched.Action
		want    []string
		late    int
	}{
		{
			name: "held",
			// S runs t1 (10..210) and holds t2; cancel of t2 at 50 reaches S at 60.
			start: []sched.Action{
				{Kind: sched.Send, Worker: 0, Task: 0},
				{Kind: sched.Send, Worker: 1, Task: 1},
				{Kind: sched.Send, Worker: 1, Task: 2},
				{Kind: sched.Send, Worker: 0, Task: 2, Replica: true},
			},
			onFirst: []sched.Action{{Kind: sched.Cancel, Worker: 1, Task: 2, Held: true}},
			want:    []string{"60ms drop-held w1 t2"},
		},
		{
			name: "running",
			// S runs t1 from 10; cancel sent at 50 stops it at 60 after 50 ms.
			start: []sched.Action{
				{Kind: sched.Send, Worker: 0, Task: 0},
				{Kind: sched.Send, Worker: 1, Task: 1},
				{Kind: sched.Send, Worker: 0, Task: 1, Replica: true},
			},
			onFirst: []sched.Action{{Kind: sched.Cancel, Worker: 1, Task: 1}},
			want:    []string{"60ms stop-running w1 t1 ran=50ms"},
		},
		{
			name: "running then held starts",
			// Stopping t1 frees the slot: held t2 starts at once.
			start: []sched.Action{
				{Kind: sched.Send, Worker: 0, Task: 0},
				{Kind: sched.Send, Worker: 1, Task: 1},
				{Kind: sched.Send, Worker: 1, Task: 2},
				{Kind: sched.Send, Worker: 0, Task: 1, Replica: true},
			},
			onFirst: []sched.Action{{Kind: sched.Cancel, Worker: 1, Task: 1}},
			want:    []string{"60ms stop-running w1 t1 ran=50ms", "260ms exec w1 t2 60ms-260ms"},
		},
		{
			name: "late",
			// The cancel names a task S never had: nothing happens.
			start: []sched.Action{
				{Kind: sched.Send, Worker: 0, Task: 0},
				{Kind: sched.Send, Worker: 0, Task: 1},
			},
			onFirst: []sched.Action{{Kind: sched.Cancel, Worker: 1, Task: 0}},
			late:    1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			for _, a := range tc.start {
				if !a.Replica {
					n++
				}
			}
			res, log := runRecorded(t, Config{
				Set:       set,
				NewPolicy: policyOf(&scriptPolicy{start: tc.start, onFirst: tc.onFirst}),
				Workload:  BagUniform(n, 100*ms),
			})
			for _, w := range tc.want {
				if !contains(log, w) {
					t.Errorf("log lacks %q:\n%s", w, strings.Join(log, "\n"))
				}
			}
			for _, l := range log {
				if strings.Contains(l, "w1") && (strings.Contains(l, "drop-held") || strings.Contains(l, "stop-running")) && !containsAny(tc.want, l) {
					t.Errorf("unexpected %q", l)
				}
			}
			if res.Stats.LateCancels != tc.late {
				t.Errorf("late cancels = %d, want %d", res.Stats.LateCancels, tc.late)
			}
		})
	}
}

func containsAny(want []string, l string) bool {
	for _, w := range want {
		if w == l {
			return true
		}
	}
	return false
}

// TestSlowdown: a machine that becomes 3× slower halfway through a task
// finishes the remaining half at the new pace.
func TestSlowdown(t *testing.T) {
	ms := time.Millisecond
	res, log := runRecorded(t, Config{
		Set:       mustSet(t, "machine A local speed=1"),
		NewPolicy: policyOf(newQueuePolicy(1)),
		Workload:  BagUniform(2, 100*ms),
		Slowdowns: []Slowdown{{Machine: "A", At: 50 * ms, Factor: 3}},
	})
	// Task 0: 50 ms at pace 1, the other 50 at pace 3 → ends at 200; task 1: 300 ms.
	if want := 500 * ms; res.End != want {
		t.Fatalf("end = %v, want %v\n%s", res.End, want, strings.Join(log, "\n"))
	}
}

// TestEngineCost: the engine's own time separates batches.
func TestEngineCost(t *testing.T) {
	ms := time.Millisecond
	w := ES(1, 2, 3, 100*ms)
	w.EngineCost = 7 * ms
	res, _ := runRecorded(t, Config{
		Set:       mustSet(t, "machine A local speed=1"),
		NewPolicy: policyOf(newQueuePolicy(1)),
		Workload:  w,
	})
	// 1 + 3×2 tasks of 100 ms, 3 engine pauses between 4 batches.
	if want := 721 * ms; res.End != want {
		t.Fatalf("end = %v, want %v", res.End, want)
	}
}

// TestNoiseDeterministic: same seed, same log; another seed, another log;
// noise keeps the mean task time.
func TestNoiseDeterministic(t *testing.T) {
	ms := time.Millisecond
	cfg := func(seed uint64) Config {
		return Config{
			Set:       mustSet(t, "machine A delay=1ms speed=1\nmachine B delay=2ms speed=2 cpus=2"),
			NewPolicy: policyOf(newQueuePolicy(2)),
			Workload:  ES(3, 7, 20, 100*ms),
			Noise:     0.3,
			Seed:      seed,
		}
	}
	r1, l1 := runRecorded(t, cfg(1))
	r2, l2 := runRecorded(t, cfg(1))
	r3, _ := runRecorded(t, cfg(2))
	if !reflect.DeepEqual(r1, r2) || strings.Join(l1, "\n") != strings.Join(l2, "\n") {
		t.Fatal("same seed gave different runs")
	}
	if r1.End == r3.End {
		t.Fatal("different seeds gave the same end time")
	}
}

// TestMeasurements: results carry what a real master can measure. One
// machine, one CPU, depth 2, master 1 ms per message, link 10 ms, worker
// receive 2 ms and send 3 ms, 100 ms tasks. t0 goes to an idle slot: sent
// at 0, it runs 13–113 and its result is handled at 127, so RTT = 127 −
// 100 = 27 ms (1 + 10 + 2 + 3 + 10 + 1). t1 and t2 are sent while the slot
// is taken (to be held): Exec only, no RTT.
func TestMeasurements(t *testing.T) {
	ms := time.Millisecond
	_, rec := runRecorder(t, Config{
		Set:       mustSet(t, "master cost=1ms\nmachine A delay=10ms speed=1 recv=2ms send=3ms"),
		NewPolicy: policyOf(newQueuePolicy(2)),
		Workload:  BagUniform(3, 100*ms),
	})
	var got []string
	for _, ev := range rec.results {
		got = append(got, fmt.Sprintf("t%d rtt=%v exec=%v", ev.Task, ev.RTT, ev.Exec))
	}
	want := []string{"t0 rtt=27ms exec=100ms", "t1 rtt=0s exec=100ms", "t2 rtt=0s exec=100ms"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("measurements %v, want %v", got, want)
	}
}

// TestAdaptiveHelpsFineTasks: on the LAN set with 100 ms tasks and 50 ms
// added delay, L1 (42 ms a task) empties a remote queue of 2 within one
// round trip; sized from measurements, r3q's and rwq's queues keep it busy
// and the run is shorter. At 1000 ms tasks every depth stays 2: the same
// run exactly.
func TestAdaptiveHelpsFineTasks(t *testing.T) {
	lan, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rwq", "r3q"} {
		run := func(grain time.Duration, adaptive bool) time.Duration {
			res, err := Run(Config{Set: lan, Policy: p, PolicyConfig: sched.Config{Adaptive: adaptive},
				Workload: ES(30, 70, 10, grain), AddedDelay: 50 * time.Millisecond, Noise: 0.1, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			return res.Report.Total
		}
		fixed, adaptive := run(100*time.Millisecond, false), run(100*time.Millisecond, true)
		t.Logf("%s 100 ms: fixed %v adaptive %v", p, fixed, adaptive)
		if adaptive >= fixed {
			t.Errorf("%s 100 ms: adaptive %v, fixed depth %v", p, adaptive, fixed)
		}
		if a, b := run(time.Second, false), run(time.Second, true); a != b {
			t.Errorf("%s 1 s: adaptive %v, fixed depth %v: depths should all be 2", p, b, a)
		}
	}
}
