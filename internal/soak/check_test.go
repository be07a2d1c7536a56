package soak

import (
	"cmp"
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	reportpkg "github.com/esgrid/esgrid/report"
)

// refOutcome is a small run of 3 generations as esrun reports it.
func refOutcome() outcome {
	o := outcome{
		lines: []string{
			"gen    0  evals       2  best 3.000000e+00  mean 4.000000e+00",
			"gen    1  evals       6  best 2.000000e+00  mean 3.000000e+00",
			"gen    2  evals      10  best 1.000000e+00  mean 2.000000e+00",
		},
		ckpt: []byte("state"),
	}
	o.rep.Stop, o.rep.Evals = "generations", 10
	o.rep.Generations = []genRecord{
		{Gen: 0, Evals: 2, Best: 3, Mean: 4, BestEver: 3},
		{Gen: 1, Evals: 6, Best: 2, Mean: 3, BestEver: 2},
		{Gen: 2, Evals: 10, Best: 1, Mean: 2, BestEver: 1},
	}
	o.rep.Best.F, o.rep.Best.X = 1, []num{0.5, -0.25}
	return o
}

func kinds(fs []finding) []string {
	var k []string
	for _, f := range fs {
		k = append(k, f.Kind)
	}
	return k
}

func TestCheckTrajectory(t *testing.T) {
	want := refOutcome()
	if got := checkTrajectory(refOutcome(), want); got != nil {
		t.Fatalf("the same run: %v", got)
	}
	// A resumed run reports from its first generation on, and printed the
	// lines of both its masters.
	resumed := refOutcome()
	resumed.rep.Config.StartGen = 2
	resumed.rep.Generations = resumed.rep.Generations[2:]
	resumed.lines = append(resumed.lines[:2], resumed.lines[1:]...)
	if got := checkTrajectory(resumed, want); got != nil {
		t.Fatalf("a resumed run: %v", got)
	}
	for name, spoil := range map[string]func(*outcome){
		"a best one ulp off": func(o *outcome) {
			o.rep.Generations[1].Best = num(math.Nextafter(2, 3))
		},
		"a printed line": func(o *outcome) { o.lines[2] = strings.Replace(o.lines[2], "best 1.0", "best 1.1", 1) },
		"a NaN mean":     func(o *outcome) { o.rep.Generations[0].Mean = num(math.NaN()) },
		"a missing generation": func(o *outcome) {
			o.rep.Generations = o.rep.Generations[:2]
		},
		"the final x":    func(o *outcome) { o.rep.Best.X[1] = -0.5 },
		"the checkpoint": func(o *outcome) { o.ckpt = []byte("other") },
		"an error":       func(o *outcome) { o.rep.Error, o.rep.Stop = "boom", "" },
	} {
		got := refOutcome()
		spoil(&got)
		if f := checkTrajectory(got, want); !reflect.DeepEqual(kinds(f), []string{kindTrajectory}) {
			t.Errorf("%s: %v, want one trajectory finding", name, f)
		}
	}
}

func TestNumReadsNullAsNaN(t *testing.T) {
	var n num
	if err := n.UnmarshalJSON([]byte("null")); err != nil || !math.IsNaN(float64(n)) {
		t.Fatalf("null: %v, %v", n, err)
	}
	if !same(n, num(math.NaN())) || same(n, 0) {
		t.Error("NaN from null is not the same as NaN, or is 0")
	}
	if err := n.UnmarshalJSON([]byte("0.1")); err != nil || n != 0.1 {
		t.Fatalf("0.1: %v, %v", n, err)
	}
}

// goodReport is a report whose schedule agrees with its ES (μ 2, λ 4, 2
// generations).
func goodReport() (report, esConfig) {
	c := esConfig{Mu: 2, Lambda: 4, Gens: 2}
	var r report
	r.Generations = make([]genRecord, 3)
	s := &schedule{Originals: 10, Replicas: 3, TasksSent: 13, Results: 12}
	for g, n := range []int{2, 4, 4} {
		s.Generations = append(s.Generations, struct {
			Gen       int `json:"gen"`
			Tasks     int `json:"tasks"`
			Originals int `json:"originals"`
			Replicas  int `json:"replicas"`
		}{g, n, n, 1})
	}
	s.PerWorker = []struct {
		Accepted int `json:"accepted"`
	}{{6}, {4}}
	r.Schedule = s
	return r, c
}

func TestCheckCounts(t *testing.T) {
	r, c := goodReport()
	if f := checkCounts(r, c); f != nil {
		t.Fatalf("agreeing counts: %v", f)
	}
	for _, tc := range []struct {
		name  string
		spoil func(*report)
		want  []string
	}{
		{"an original counted twice", func(r *report) {
			r.Schedule.Generations[1].Originals++
			r.Schedule.Originals++
			r.Schedule.TasksSent++
		}, []string{kindOrigOver}},
		{"a task without original", func(r *report) {
			r.Schedule.Generations[2].Originals--
			r.Schedule.Originals--
			r.Schedule.TasksSent--
		}, []string{kindOrigUnder}},
		{"a send not counted", func(r *report) { r.Schedule.TasksSent++ }, []string{kindSent}},
		{"a result accepted twice", func(r *report) { r.Schedule.PerWorker[0].Accepted++ }, []string{kindAccepted}},
		{"a generation short of tasks", func(r *report) {
			g := &r.Schedule.Generations[2]
			g.Tasks, g.Originals = 3, 3
			r.Schedule.Originals--
			r.Schedule.TasksSent--
			r.Schedule.PerWorker[0].Accepted--
		}, []string{kindSchedule}},
		{"no schedule", func(r *report) { r.Schedule = nil }, []string{kindSchedule}},
		// A master that split accepts the results its children computed
		// from no worker of its own (seed 102 of -split 1 -relay 1: "713
		// results accepted for 893 tasks", 180 from children).
		{"results from child masters", func(r *report) {
			r.Schedule.PerWorker[0].Accepted -= 4
			r.Schedule.Masters = &struct {
				FromChildren int `json:"from_children"`
			}{4}
		}, nil},
		{"a result from a child master counted twice", func(r *report) {
			r.Schedule.PerWorker[0].Accepted -= 4
			r.Schedule.Masters = &struct {
				FromChildren int `json:"from_children"`
			}{5}
		}, []string{kindAccepted}},
	} {
		r, c := goodReport()
		tc.spoil(&r)
		if f := checkCounts(r, c); !reflect.DeepEqual(kinds(f), tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, f, tc.want)
		}
	}
}

func TestCheckMemory(t *testing.T) {
	if f := checkMemory([]int64{10 << 20, 20 << 20}, 20<<20); f != nil {
		t.Errorf("within the bound: %v", f)
	}
	if f := checkMemory([]int64{10 << 20, 21 << 20}, 20<<20); !reflect.DeepEqual(kinds(f), []string{kindMemory}) {
		t.Errorf("over the bound: %v", f)
	}
}

func TestBoundFormula(t *testing.T) {
	s := scenario{
		ES:      esConfig{Mu: 2, Lambda: 5, Gens: 3, LoadMS: 10},
		Workers: []workerSpec{{Slots: 2, Slowdown: 1}, {Slots: 1, Slowdown: 2, Delay: 5 * time.Millisecond}},
	}
	// e = max(10 ms + 1 ms, 20 ms + 10 ms + 1 ms) = 31 ms on 1 slot:
	// W = (2 + 3×5) × 31 ms + 4 × 0.5 s.
	b := boundOf(s, 2, observed{Masters: 1})
	wantWork := 17*31*time.Millisecond + 4*genOverhead
	if b.Work != wantWork || b.Faults != 0 || b.Total != 2*(startup+wantWork) {
		t.Fatalf("no fault: %+v, want work %v and total %v", b, wantWork, 2*(startup+wantWork))
	}
	// D = max(1 s, 4 × 31 ms + 10 ms) = 1 s.
	ob := observed{Masters: 1, Failures: 2, Lates: 1, Kills: 1, Stops: 1, Stopped: 3 * time.Second}
	f := boundOf(s, 2, ob)
	wantF := firstDeadline + 2*time.Second + (time.Second + abandonGrace) + (time.Second + rejoin) + 3*time.Second + time.Second
	if f.D != time.Second || f.Faults != wantF || f.Total != 2*(startup+wantWork+wantF) {
		t.Fatalf("faults: %+v, want faults %v", f, wantF)
	}
	// A master killed: a second start and a generation again.
	ob.Masters = 2
	if m := boundOf(s, 2, ob); m.Masters != 2 || m.Work != wantWork+wantWork/4 {
		t.Errorf("a master killed: %+v", m)
	}
	// A master made slow (1 ms a message, two a task) behind a relay
	// that works too (one slot, no slowdown: e stays 31 ms), which split
	// 3 times, lost a child (its link), one never up and one before its
	// hello (its promoted worker's connection broke), cut one off (2 D)
	// then another (4 D), and saw a child silent at the end and the
	// relay stopped 2 s.
	s.MasterCost = time.Millisecond
	s.Relay = &relaySpec{Slots: 1}
	ob = observed{Masters: 1, Splits: 3, ChildLosses: 1, NeverUp: 1, Unready: 1, CutOffs: 2, EndUnheard: 1, Stops: 1, Stopped: 2 * time.Second, RelayStops: 1}
	sp := boundOf(s, 2, ob)
	wantWork += 17 * 2 * time.Millisecond
	wantF = firstDeadline + 2*time.Second + time.Second + rejoin +
		endWaits + 3*time.Second + lostChildWait + childHello + unreadyWait + unreadyWait +
		2*time.Second + 4*time.Second + endHeardWait + lostChildWait
	if sp.Startup != startup+relayHop || sp.Work != wantWork || sp.Faults != wantF || sp.Total != 2*(startup+relayHop+wantWork+wantF) {
		t.Fatalf("split and relay: %+v, want start %v, work %v, faults %v", sp, startup+relayHop, wantWork, wantF)
	}
}

func TestDrawScenario(t *testing.T) {
	l := Limits{Workers: 3, Gens: 6, Lambda: 8}
	for seed := uint64(1); seed < 200; seed++ {
		s := drawScenario(seed, l)
		if !reflect.DeepEqual(s, drawScenario(seed, l)) {
			t.Fatalf("seed %d draws two scenarios", seed)
		}
		switch {
		case len(s.Workers) < 1 || len(s.Workers) > l.Workers:
			t.Fatalf("seed %d: %d workers", seed, len(s.Workers))
		case s.ES.Gens < 4 || s.ES.Gens > l.Gens || s.ES.Lambda > l.Lambda || s.ES.Mu < 2 || s.ES.Lambda < s.ES.Mu+2:
			t.Fatalf("seed %d: ES %+v", seed, s.ES)
		case s.KillMaster < 0 || s.KillMaster >= s.ES.Gens:
			t.Fatalf("seed %d: master killed at %d of %d", seed, s.KillMaster, s.ES.Gens)
		}
		for _, f := range s.Faults {
			if f.AtGen >= s.ES.Gens || f.Worker >= len(s.Workers) || f.Stop > maxStop {
				t.Fatalf("seed %d: fault %+v", seed, f)
			}
		}
	}
}

// Splits and relays draw from streams of their own: a seed keeps the
// policy, ES, workers and faults it drew without them (a run that
// splits adds workers and tasks, cuts the generations to 8 and keeps its
// faults within them), and their own parts are within their limits.
func TestDrawSplitAndRelay(t *testing.T) {
	l0 := Limits{Workers: 3, Gens: 12, Lambda: 8}
	l1 := l0
	l1.Split, l1.Relay = 1, 1
	splits, relays := 0, 0
	for seed := uint64(1); seed < 300; seed++ {
		s0, s1 := drawScenario(seed, l0), drawScenario(seed, l1)
		if s0.Split != "" || s0.MasterCost != 0 || s0.Relay != nil {
			t.Fatalf("seed %d: split or relay drawn at chance 0: %s", seed, s0)
		}
		if !reflect.DeepEqual(s1, drawScenario(seed, l1)) {
			t.Fatalf("seed %d draws two scenarios", seed)
		}
		if s1.Split == "" || s1.Relay == nil {
			t.Fatalf("seed %d: no split or no relay at chance 1: %s", seed, s1)
		}
		splits++
		relays++
		if s1.ES.Dim != s0.ES.Dim || s1.ES.Mu != s0.ES.Mu || s1.ES.Seed != s0.ES.Seed || s1.ES.Gens != min(s0.ES.Gens, 8) {
			t.Fatalf("seed %d: ES %+v, without splits %+v", seed, s1.ES, s0.ES)
		}
		if s1.ES.Lambda < 2*l0.Lambda || s1.ES.Lambda > 6*l0.Lambda || s1.ES.LoadMS > 1 || s1.MasterCost < 200*time.Microsecond || s1.MasterCost > 2*time.Millisecond {
			t.Fatalf("seed %d: split run %s", seed, s1)
		}
		if s1.Policy == "cyclic" || (s0.Policy != "cyclic" && s1.Policy != s0.Policy) {
			t.Fatalf("seed %d: policy %s, without splits %s", seed, s1.Policy, s0.Policy)
		}
		if len(s1.Workers) < max(4, len(s0.Workers)) || len(s1.Workers) > 10 {
			t.Fatalf("seed %d: %d workers", seed, len(s1.Workers))
		}
		behind := 0
		for i, w := range s1.Workers {
			if w.Behind {
				behind++
				w.Behind = false
			}
			if i < len(s0.Workers) && !reflect.DeepEqual(w, s0.Workers[i]) {
				t.Fatalf("seed %d: worker %d %+v, without splits %+v", seed, i, w, s0.Workers[i])
			}
		}
		if behind == 0 || s1.Workers[0].Behind {
			t.Fatalf("seed %d: %d workers behind the relay, the first behind %v", seed, behind, s1.Workers[0].Behind)
		}
		var own []fault
		for _, f := range s1.Faults {
			if f.AtGen >= s1.ES.Gens || f.Stop > maxStop {
				t.Fatalf("seed %d: fault %+v in %d generations", seed, f, s1.ES.Gens)
			}
			if f.Kind == killWorker || f.Kind == stopWorker {
				own = append(own, f)
			}
		}
		if len(own) != len(s0.Faults) {
			t.Fatalf("seed %d: worker faults %+v, without splits %+v", seed, own, s0.Faults)
		}
		want := slices.Clone(s0.Faults)
		for i := range want {
			want[i].AtGen = min(want[i].AtGen, s1.ES.Gens-1)
		}
		// Faults of one generation may come in another order.
		order := func(a, b fault) int {
			return cmp.Or(a.AtGen-b.AtGen, strings.Compare(a.Kind, b.Kind), a.Worker-b.Worker, int(a.Stop-b.Stop))
		}
		slices.SortFunc(want, order)
		slices.SortFunc(own, order)
		if !slices.Equal(own, want) {
			t.Fatalf("seed %d: worker faults %+v, without splits %+v", seed, own, want)
		}
		if s1.KillMaster != min(s0.KillMaster, s1.ES.Gens-2) {
			t.Fatalf("seed %d: master killed at %d, without splits %d", seed, s1.KillMaster, s0.KillMaster)
		}
	}
}

// A run past its bound is cancelled as a stall.
func TestWatchCancelsAStall(t *testing.T) {
	r := &runState{s: &soak{cfg: &Config{Slack: 1}}, sc: drawScenario(1, DefaultLimits)}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := r.watch(time.Now().Add(-time.Hour), cancel)
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute): // not a margin: the first tick cancels
		t.Fatal("a run an hour past its bound was not cancelled")
	}
	if !errors.Is(context.Cause(ctx), errStall) {
		t.Fatalf("cause %v, want errStall", context.Cause(ctx))
	}
}

func nextUp(f float64) float64 { return math.Nextafter(f, math.Inf(1)) }

// The master rate-limits its "evaluation failed" lines; the soak counts
// the ones a passing line says were suppressed, or its bound would not
// count their cost.
func TestSawMasterLogCountsSuppressedFailures(t *testing.T) {
	r := &runState{faults: map[string]int{}}
	r.sawMasterLog(`time=x level=WARN msg="evaluation failed; retrying the task on another worker" component=master err="emulated failure"`)
	r.sawMasterLog(`time=x level=WARN msg="evaluation failed; retrying the task on another worker" component=master err="emulated failure" suppressed_since_last=41`)
	r.sawMasterLog(`time=x level=WARN msg="connection closed" suppressed_since_last=7`)
	if r.ob.Failures != 43 || r.faults[failEvery] != 43 {
		t.Errorf("counted %d failures, %d emulated; want 43 and 43", r.ob.Failures, r.faults[failEvery])
	}
}

// esrun's line with its last generation, rate and ETA compares as the line
// without them: the reference may have been run with other stopping flags.
func TestGenLinesDropLastGenAndTimes(t *testing.T) {
	got := genLines([]string{
		"gen    3/100  evals     240  best 7.684306e+04  mean 1.371619e+05  1.49ms  43889 evals/s  ETA 3.19ms",
		"gen    4  evals     310  best 7.684306e+04  mean 1.202279e+05  1.4ms  45138 evals/s  ETA unknown",
		"schedule r3q on 2 workers",
	})
	want := []string{
		"gen    3  evals     240  best 7.684306e+04  mean 1.371619e+05",
		"gen    4  evals     310  best 7.684306e+04  mean 1.202279e+05",
	}
	if !reflect.DeepEqual(got, want) || lineGen(got[0]) != 3 {
		t.Errorf("genLines = %q, want %q", got, want)
	}
}

// TestExhaustedOnlyByInjectedFailures checks which failed tasks of
// esrun's report count as a run that failed as designed: a task's every
// failure injected by a worker of the scenario that injects that kind,
// and nothing else.
func TestExhaustedOnlyByInjectedFailures(t *testing.T) {
	sc := scenario{Workers: []workerSpec{{Name: "w0", PluginCrashEvery: 5}, {Name: "w1", FailEvery: 10}, {Name: "w2"}}}
	type failure = [2]string // worker, error
	crash := func(w string) failure {
		return failure{w, "plugin soak (slot 2): plugin process exited during an evaluation (exit status 3); it restarts on the next one; stderr: "}
	}
	fail := func(w string) failure { return failure{w, "emulated failure of evaluation 20 (fails every 10)"} }
	task := func(fs ...failure) *failedTask {
		ft := &failedTask{Gen: 3, Task: 7, MaxRetries: 3}
		for _, f := range fs {
			ft.Failures = append(ft.Failures, struct {
				Worker string `json:"worker"`
				Error  string `json:"error"`
			}{f[0], f[1]})
		}
		return ft
	}
	for _, c := range []struct {
		name string
		ft   *failedTask
		want bool
	}{
		{"crashes", task(crash("w0"), crash("w0"), crash("w0-r1"), crash("w0")), true},
		{"crashes and failures", task(crash("w0"), fail("w1"), crash("w0"), fail("w1-r2")), true},
		{"a crash on a worker that injects none", task(crash("w0"), crash("w2"), crash("w0"), crash("w0")), false},
		{"a failure on a worker that injects crashes only", task(crash("w0"), fail("w0"), crash("w0"), crash("w0")), false},
		{"a failure not injected", task(crash("w0"), crash("w0"), failure{"w0", "plugin soak (slot 1): protocol error"}, crash("w0")), false},
		{"an injected text after another", task(crash("w0"), crash("w0"), failure{"w0", "oops; " + crash("w0")[1]}, crash("w0")), false},
		{"a worker not in the scenario", task(crash("w0"), crash("w9"), crash("w0"), crash("w0")), false},
		{"a name that only begins as a worker's", task(crash("w0"), crash("w0x"), crash("w0"), crash("w0")), false},
		{"no failures listed", task(), false},
		{"another error (no failed task)", nil, false},
	} {
		got := exhausted(sc, c.ft)
		if (got != "") != c.want {
			t.Errorf("%s: exhausted = %q, want a reason: %v", c.name, got, c.want)
		}
		if c.want && got != "generation 3, task 7 failed 4 times, each failure injected" {
			t.Errorf("%s: reason %q", c.name, got)
		}
	}
}

// The soak reads the failed task from esrun's report as esrun writes it
// (report.FailedTask), and finds none in a report without one, or in no
// report.
func TestReadFailedTask(t *testing.T) {
	dir := t.TempDir()
	rep := &reportpkg.Record{Error: "es: generation 3: grid: generation 3, task 7 failed 2 times (max retries 1): …",
		FailedTask: &reportpkg.FailedTask{Gen: 3, Task: 7, MaxRetries: 1,
			Failures: []reportpkg.TaskFailure{{Worker: "w1", Error: "emulated failure of evaluation 20 (fails every 10)"}, {Worker: "w1-r1", Error: "emulated failure of evaluation 3 (fails every 10)"}}}}
	path := filepath.Join(dir, "r.json")
	reportpkg.WritePartial(path, rep)
	ft := readFailedTask(path + reportpkg.PartialSuffix)
	if ft == nil || ft.Gen != 3 || ft.Task != 7 || ft.MaxRetries != 1 || len(ft.Failures) != 2 || ft.Failures[1].Worker != "w1-r1" || ft.Failures[1].Error != rep.FailedTask.Failures[1].Error {
		t.Fatalf("read %+v", ft)
	}
	sc := scenario{Workers: []workerSpec{{Name: "w1", FailEvery: 10}}}
	if got := exhausted(sc, ft); got != "generation 3, task 7 failed 2 times, each failure injected" {
		t.Errorf("exhausted = %q", got)
	}
	rep.FailedTask = nil
	reportpkg.WritePartial(path, rep)
	if ft := readFailedTask(path + reportpkg.PartialSuffix); ft != nil {
		t.Errorf("a report without failed_task: %+v", ft)
	}
	if ft := readFailedTask(filepath.Join(dir, "none.json")); ft != nil {
		t.Errorf("no report: %+v", ft)
	}
}

// A worker behind the relay, and the relay, are not judged on their exit
// when the master lost the relay and they had not joined it again: the
// word that the run was over could not reach them (seed 1013 of -split
// 0.7 -relay 0.5, its relay killed at generation 6 of 8: "w1 still
// running 1m0s once the run was over (-once)", and six more behind it).
// One that joined again since, and any worker not behind it, are.
func TestCutOffByRelayLoss(t *testing.T) {
	r := &runState{faults: map[string]int{}, joinedAt: map[string]int{}, index: map[*proc]int{},
		sc: scenario{Workers: []workerSpec{{Name: "w0"}, {Name: "w1", Behind: true}, {Name: "w2", Behind: true}}, Relay: &relaySpec{Name: "relay"}}}
	w0, w1, w2, relay := &proc{name: "w0"}, &proc{name: "w1"}, &proc{name: "w2"}, &proc{name: "relay"}
	r.index[w0], r.index[w1], r.index[w2] = 0, 1, 2
	for _, l := range []string{
		`time=x level=INFO msg="relay connected" component=master relay=relay addr=127.0.0.1:1`,
		`time=x level=INFO msg="worker joined" component=master worker=w0 worker_id=1 slots=1 addr=127.0.0.1:2`,
		`time=x level=INFO msg="worker joined" component=master worker=w1 worker_id=2 slots=1 addr=relay/relay:1`,
		`time=x level=INFO msg="worker joined" component=master worker=w2 worker_id=3 slots=1 addr=relay/relay:2`,
	} {
		r.sawRootLog(l)
	}
	for _, p := range []*proc{w0, w1, w2, relay} {
		if r.cutOff(p) {
			t.Errorf("%s cut off with its relay never lost", p.name)
		}
	}
	for _, l := range []string{
		`time=x level=WARN msg="relay lost; its workers' connections close and their tasks go back to the queue" component=master relay=relay cause=x`,
		`time=x level=INFO msg="relay connected" component=master relay=relay-r1 addr=127.0.0.1:3`,
		`time=x level=INFO msg="worker joined" component=master worker=w2 worker_id=4 slots=1 addr=relay/relay-r1:1`,
	} {
		r.sawRootLog(l)
	}
	relay.name = "relay-r1"
	for p, want := range map[*proc]bool{w0: false, w1: true, w2: false, relay: false, {name: "relay"}: true} {
		if got := r.cutOff(p); got != want {
			t.Errorf("%s cut off %v, want %v", p.name, got, want)
		}
	}
	// The soak kills the relay as the master ends, which logs no loss
	// (seed 2056: the relay continued after a stop, killed at once,
	// before it passed the end on; "w2 still running 1m0s once the run
	// was over (-once)", and three more behind it). w1 joins again after.
	r.relayKilled()
	r.sawRootLog(`time=x level=INFO msg="worker joined" component=master worker=w1 worker_id=5 slots=1 addr=relay/relay-r2:1`)
	for p, want := range map[*proc]bool{w0: false, w1: false, w2: true, relay: true} {
		if got := r.cutOff(p); got != want {
			t.Errorf("after the kill: %s cut off %v, want %v", p.name, got, want)
		}
	}
}

// A worker's log says when it is promoted to a child master and when
// that ends; its child master's lines count as a master's (a split of its
// own, a child of its own lost), and the other lines of the worker's are
// not a master's.
func TestSawWorkerLogFollowsPromotions(t *testing.T) {
	r := &runState{faults: map[string]int{}, promoted: map[string]bool{}, promoCh: make(chan struct{})}
	ch := r.promoCh
	r.sawWorkerLog("w3", `time=x level=INFO msg="promoted to a child master" worker=w3 tasks=62 gen=1 parent=127.0.0.1:1`)
	select {
	case <-ch:
	default:
		t.Error("a promotion woke no one")
	}
	if !r.promoted["w3"] {
		t.Error("w3 not promoted")
	}
	r.sawWorkerLog("w3", `time=x level=INFO msg="overloaded: promoting a worker to a child master (docs/papers.md §2)" child=w3 component=master gen=1 worker=w1`)
	r.sawWorkerLog("w3", `time=x level=WARN msg="child master's link lost" child=w3 component=master child=w1 err=EOF`)
	r.sawWorkerLog("w3", `time=x level=WARN msg="child master returned none of its tasks for a deadline; cut off as lost" child=w3 component=master child=w1`)
	r.sawWorkerLog("w3", `time=x level=WARN msg="promoted worker lost before its child master said hello; the child counts as lost" child=w3 component=master worker=w2`)
	r.sawWorkerLog("w3", `time=x level=INFO msg="child master done; its results went to the parent" child=w3 component=master gen=1 workers=2`)
	if r.promoted["w3"] || r.ob.Splits != 1 || r.ob.ChildLosses != 1 || r.ob.Unready != 1 || r.ob.CutOffs != 1 || r.faults[split] != 1 || r.faults[childLost] != 2 {
		t.Errorf("promoted %v, observed %+v, faults %v", r.promoted, r.ob, r.faults)
	}
}

// A process that has ended has ended, however late it is asked: the
// workers are checked one after the other under one timeout, and once
// the first had used it up, wait said "still running" at random of those
// long gone (seed 1056: w3, w5 and w6, not behind the relay, "still
// running 1m0s once the run was over (-once)" after each logged "the run
// is over").
func TestWaitSaysEndedAfterTimeout(t *testing.T) {
	p := &proc{done: make(chan struct{})}
	close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		if !p.wait(ctx) {
			t.Fatal("an ended process waited for past its timeout was still running")
		}
	}
	if q := (&proc{done: make(chan struct{})}); q.wait(ctx) {
		t.Fatal("a running process ended")
	}
}
