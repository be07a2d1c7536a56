package calibrate

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/esgrid/esgrid/calibrate/calibratetest"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched/plan"
)

// FuzzCalibration feeds esplan's readers arbitrary files: a calibration
// (esplan models and plan read it, then fit and search), a plan (esrun
// -plan and esworker -plan read it) and an esrun report (esplan
// calibrate's other source), seeded with a calibration whose answer is
// known and the plan made of it. None may panic or hang; a calibration
// accepted is fitted and searched, and the plan file made of it reads
// back.
//
//	go test ./calibrate -run X -fuzz FuzzCalibration -fuzztime 3m
func FuzzCalibration(f *testing.F) {
	known := calibratetest.Known()
	b, err := json.Marshal(known)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	p, err := Search(io.Discard, known, Request{N: 1600, Tasks: 70, Policy: "r3q", Top: 3})
	if err != nil {
		f.Fatal(err)
	}
	pb, err := json.Marshal(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pb)
	f.Add([]byte(`{"config":{"load_n":600},"schedule":{"per_worker":[{"name":"fast-1","slots":2,"accepted":10,"mean_exec":0.5},{"name":"slow-1","slots":1,"accepted":3,"mean_exec":2}]}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "in.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if p, err := grid.ReadPlan(path); err == nil {
			for _, w := range p.Workers {
				p.SlotsFor(w.Name)
			}
		}
		if cal, err := FromReports([]string{path}, "prefix"); err == nil {
			search(t, cal)
		}
		if cal, err := ReadCalibration(path); err == nil {
			search(t, cal)
		}
	})
}

// search fits cal, searches it as esplan plan does and reads back the
// plan file it makes.
func search(t *testing.T, cal *plan.Calibration) {
	ms, err := plan.Fit(cal, plan.Options{})
	if err != nil {
		return
	}
	PrintModels(io.Discard, cal, ms)
	for _, req := range []Request{{N: 600, Tasks: 70, Policy: "r3q", Top: 3}, {TaskMS: 100, Tasks: 7, Policy: "wq", Top: 1}} {
		p, err := Search(io.Discard, cal, req)
		if err != nil {
			continue
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := grid.DecodePlan(bytes.NewReader(b)); err != nil {
			t.Fatalf("the plan made of an accepted calibration does not read back: %v\n%s", err, b)
		}
	}
}
