package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/calibrate/calibratetest"
	"github.com/esgrid/esgrid/grid"
)

// esplan plan reads -cal, plans for -lu and -tasks and writes the plan
// file -o names, one that the master and esworker read; -load-ms plans
// for a task time, and one outside what was measured exits 1. What the
// plan is, calibrate's TestSearch checks.
func TestPlanCommand(t *testing.T) {
	b, err := json.Marshal(calibratetest.Known())
	if err != nil {
		t.Fatal(err)
	}
	calPath := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(calPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"plan", "-cal", calPath, "-lu", "1600", "-tasks", "70", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	t.Log(stdout.String())
	if !strings.Contains(stdout.String(), "plan written to "+out) {
		t.Errorf("no line naming the plan file:\n%s", stdout.String())
	}
	p, err := grid.ReadPlan(out)
	if err != nil {
		t.Fatal(err)
	}
	if slow, ok := p.SlotsFor("slow-1"); !ok || slow != 0 {
		t.Errorf("plan gives slow-1 %d slots (%v); want the slow one set aside:\n%s", slow, ok, stdout.String())
	}
	// -load-ms picks the size from the fastest group alone.
	stdout.Reset()
	if code := run(t.Context(), []string{"plan", "-cal", calPath, "-load-ms", "100"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-load-ms: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "on group fast alone with 1 slot: N = ") {
		t.Errorf("-load-ms:\n%s", stdout.String())
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
