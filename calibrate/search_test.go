package calibrate

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/calibrate/calibratetest"
	"github.com/esgrid/esgrid/grid"
)

// Search sets the slow machine aside in the plan it returns, with more
// slots for the fast ones, a task-time prior and a predicted gain over
// the baseline; it prints the comparison with the baseline, the models
// when asked, and the size a task time stands for, and refuses a task
// time outside what was measured; WriteJSON writes the plan as a file
// grid.ReadPlan reads.
func TestSearch(t *testing.T) {
	cal := calibratetest.Known()
	var out bytes.Buffer
	p, err := Search(&out, cal, Request{N: 1600, Tasks: 70, Policy: "r3q", Top: 5, Models: true})
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := p.SlotsFor("fast-1")
	if slow, ok := p.SlotsFor("slow-1"); !ok || slow != 0 || fast < 2 {
		t.Errorf("fast-1 gets %d slots, slow-1 %d (%v); want the slow one set aside", fast, slow, ok)
	}
	if d, ok := p.ExecFor("fast-1", 1600); !ok || d <= 0 {
		t.Errorf("no task-time prior for fast-1: %v %v", d, ok)
	}
	if p.BaselineBatch <= p.PredictedBatch || p.PredictedGainPc <= 0 {
		t.Errorf("plan predicts %+v", p)
	}
	if !strings.Contains(out.String(), "faster") || !strings.Contains(out.String(), "base") {
		t.Errorf("no comparison with the baseline:\n%s", out.String())
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
	if _, err := Search(io.Discard, cal, Request{TaskMS: 1e6, Tasks: 70, Policy: "wq", Top: 1}); err == nil || !strings.Contains(err.Error(), "outside the measured range") {
		t.Errorf("TaskMS 1e6: %v, want outside the measured range", err)
	}
}
