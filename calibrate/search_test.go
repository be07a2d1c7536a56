package calibrate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched/plan"
)

// knownCalibration is a calibration of two fast machines and a slow one
// (30 times slower) whose times follow a known N–T model.
func knownCalibration() *plan.Calibration {
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
	return cal
}

// Search sets the slow machine aside in the plan it returns, prints the
// models when asked, and the size a task time stands for; WriteJSON
// writes the plan as a file grid.ReadPlan reads.
func TestSearch(t *testing.T) {
	cal := knownCalibration()
	var out bytes.Buffer
	p, err := Search(&out, cal, Request{N: 1600, Tasks: 70, Policy: "r3q", Top: 5, Models: true})
	if err != nil {
		t.Fatal(err)
	}
	if slow, ok := p.SlotsFor("slow-1"); !ok || slow != 0 {
		t.Errorf("slow-1 gets %d slots (%v); want it set aside", slow, ok)
	}
	if !strings.Contains(out.String(), "fast") || !strings.Contains(out.String(), "base") {
		t.Errorf("printed:\n%s", out.String())
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := WriteJSON(path, p, nil); err != nil {
		t.Fatal(err)
	}
	back, err := grid.ReadPlan(path)
	if err != nil || back.PredictedBatch != p.PredictedBatch {
		t.Errorf("read back %+v, %v", back, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("plan file: %v, %v", fi, err)
	}
	out.Reset()
	if _, err := Search(&out, cal, Request{TaskMS: 100, Tasks: 70, Policy: "wq", Top: 1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "tasks of 100 ms on group fast alone with 1 slot: N = ") {
		t.Errorf("TaskMS 100:\n%s", out.String())
	}
}
