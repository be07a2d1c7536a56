package soak

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
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
