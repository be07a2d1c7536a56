package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched/plan"
	"github.com/esgrid/esgrid/worker"
)

// The calibration asks a live grid, through the normal protocol: three
// worker agents (two identical fast ones, one slow one with fewer slots)
// connect to esplan's master, which is replaced by a new one on the same
// address for every size; each batch sets every worker's slots, and the
// times recorded are those the workers report.
func TestCalibrateLiveGrid(t *testing.T) {
	leaktest.Check(t)
	secret, err := grid.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := grid.NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := &calOptions{workers: 3, listen: "127.0.0.1:0", sizes: []int{8, 12, 16, 24, 32}, slots: []int{1, 2}, reps: 2, wait: time.Minute, groupBy: "prefix"}
	var progress bytes.Buffer
	c := &calibrator{opt: o, key: key, log: quiet, progress: &progress}
	type agentRun struct {
		name string
		err  chan error
	}
	var runs []agentRun
	c.onListen = func(addr string) {
		for _, w := range []struct {
			name  string
			slots int
			slow  float64
		}{{"fast-1", 2, 1}, {"fast-2", 2, 1}, {"slow-1", 1, 3}} {
			a, err := worker.New(worker.Config{Master: addr, Key: key, Name: w.name, Slots: w.slots, Slowdown: w.slow,
				Logger: quiet, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			r := agentRun{w.name, make(chan error, 1)}
			go func() { r.err <- a.Run(ctx) }()
			runs = append(runs, r)
		}
	}
	cal, err := c.run(ctx)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	for _, r := range runs {
		if err := <-r.err; !errors.Is(err, worker.ErrShutdown) {
			t.Errorf("agent %s: %v, want the run over", r.name, err)
		}
	}
	if len(cal.Machines) != 3 {
		t.Fatalf("machines %+v", cal.Machines)
	}
	groups := cal.Groups()
	if len(groups) != 2 || groups[0].Name != "fast" || len(groups[0].Machines) != 2 || groups[1].Name != "slow" || groups[1].CPUs != 1 {
		t.Fatalf("groups %+v", groups)
	}
	// Every size; each group alone (P = M) with M = 1, fast alone with 2;
	// and P > M: the slow one never above its one slot.
	type key3 struct {
		g       string
		p, m, n int
	}
	seen := map[key3]int{}
	for _, s := range cal.Samples {
		seen[key3{s.Group, s.P, s.M, s.N}]++
		if s.Worker == "slow-1" && s.M != 1 {
			t.Errorf("slow-1 measured with %d slots: %+v", s.M, s)
		}
	}
	for _, n := range o.sizes {
		for _, k := range []key3{{"fast", 1, 1, n}, {"slow", 1, 1, n}, {"fast", 2, 2, n}, {"fast", 2, 1, n}, {"slow", 2, 1, n}, {"fast", 3, 1, n}, {"slow", 5, 1, n}, {"fast", 5, 2, n}} {
			if seen[k] == 0 {
				t.Errorf("no sample %+v\n%s", k, progress.String())
			}
		}
	}
	// Alone means alone: a batch of one machine has one sample.
	bySource := map[string]int{}
	for _, s := range cal.Samples {
		bySource[s.Source]++
	}
	for _, s := range cal.Samples {
		if s.P == s.M && bySource[s.Source] != 1 {
			t.Errorf("batch %s with one machine alone has %d samples", s.Source, bySource[s.Source])
		}
	}
	if err := cal.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Fit(cal, plan.Options{}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A calibration can be read from earlier esrun -report files: one sample
// per worker that returned results.
func TestCalibrationFromReports(t *testing.T) {
	report := func(n int, slow float64) map[string]any {
		return map[string]any{
			"config": map[string]any{"load_n": n},
			"schedule": map[string]any{"per_worker": []map[string]any{
				{"name": "fast-1", "slots": 2, "accepted": 50, "mean_exec": 0.01},
				{"name": "slow-1", "slots": 1, "accepted": 20, "mean_exec": slow},
				{"name": "gone-1", "slots": 1, "accepted": 0, "mean_exec": 0},
			}},
		}
	}
	a, b := writeFile(t, "a.json", report(100, 0.04)), writeFile(t, "b.json", report(200, 0.3))
	cal, err := calibrationFromReports([]string{a, b}, "prefix")
	if err != nil {
		t.Fatal(err)
	}
	if len(cal.Samples) != 4 || len(cal.Machines) != 2 {
		t.Fatalf("samples %+v machines %+v", cal.Samples, cal.Machines)
	}
	s := cal.Samples[1]
	if s.Worker != "slow-1" || s.Group != "slow" || s.N != 100 || s.P != 3 || s.M != 1 || s.Exec != 0.04 || s.Count != 20 {
		t.Errorf("sample %+v", s)
	}
	bad := writeFile(t, "bad.json", map[string]any{"config": map[string]any{"load_n": 0}})
	if _, err := calibrationFromReports([]string{bad}, "prefix"); err == nil {
		t.Error("a report without a load was accepted")
	}
}

// esplan plan on a calibration with known models: the slow machine is
// left out, the fast ones get more slots than it, and the plan file is
// one that the master and esworker read.
func TestPlanCommand(t *testing.T) {
	truth := plan.Cubic{0.002, 1e-6, 2e-9, 5e-11}
	cal := &plan.Calibration{Version: plan.CalibrationVersion, Source: "test", Machines: []plan.Machine{
		{Name: "fast-1", Group: "fast", CPUs: 2}, {Name: "fast-2", Group: "fast", CPUs: 2}, {Name: "slow-1", Group: "slow", CPUs: 2},
	}}
	add := func(g, w string, n, p, m int, x float64) {
		cal.Samples = append(cal.Samples, plan.Sample{Group: g, Worker: w, N: n, P: p, M: m, Exec: x, Count: 3})
	}
	for _, n := range []int{100, 200, 400, 800, 1600, 3200} {
		for _, m := range []int{1, 2} {
			t1 := truth.At(float64(n)) * (1 + 0.1*float64(m-1))
			add("fast", "fast-1", n, m, m, t1)
			add("slow", "slow-1", n, m, m, 30*t1)
			for _, p := range []int{m + 1, m + 2, m + 4, m + 6} {
				add("fast", "fast-2", n, p, m, t1*(1+0.08*float64(p)))
			}
		}
	}
	calPath := writeFile(t, "cal.json", cal)
	out := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"plan", "-cal", calPath, "-lu", "1600", "-tasks", "70", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	t.Log(stdout.String())
	if !strings.Contains(stdout.String(), "faster") || !strings.Contains(stdout.String(), "base") {
		t.Errorf("no comparison with the baseline:\n%s", stdout.String())
	}
	p, err := grid.ReadPlan(out)
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := p.SlotsFor("fast-1")
	slow, ok := p.SlotsFor("slow-1")
	if !ok || slow != 0 || fast < 2 {
		t.Errorf("plan gives fast-1 %d and slow-1 %d slots; want the slow one set aside:\n%s", fast, slow, stdout.String())
	}
	if d, ok := p.ExecFor("fast-1", 1600); !ok || d <= 0 {
		t.Errorf("no task-time prior for fast-1: %v %v", d, ok)
	}
	if p.BaselineBatch <= p.PredictedBatch || p.PredictedGainPc <= 0 {
		t.Errorf("plan predicts %+v", p)
	}
	// -load-ms picks the size from the fastest group alone.
	stdout.Reset()
	if code := run(t.Context(), []string{"plan", "-cal", calPath, "-load-ms", "100"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-load-ms: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "on group fast alone with 1 slot: N = ") {
		t.Errorf("-task-ms:\n%s", stdout.String())
	}
	// Outside what was measured, -load-ms refuses.
	stderr.Reset()
	if code := run(t.Context(), []string{"plan", "-cal", calPath, "-load-ms", "1e6"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "outside the measured range") {
		t.Errorf("-load-ms 1e6: exit %d: %s", code, stderr.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nonsense"},
		{"plan"},
		{"plan", "-cal", "x.json"},
		{"plan", "-cal", "x.json", "-lu", "10", "-load-ms", "5"},
		{"calibrate", "-o", "x.json"},
		{"calibrate", "-workers", "2", "-o", "x.json", "-sizes", "10,20,30,40"},
		{"calibrate", "-workers", "2", "-o", "x.json", "-group-by", "colour"},
		{"models"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}
