package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched/plan"
)

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
