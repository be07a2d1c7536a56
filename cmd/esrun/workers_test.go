package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// The report's per-worker entries name each worker and its host.
func TestReportNamesWorkers(t *testing.T) {
	leaktest.Check(t)
	report := filepath.Join(t.TempDir(), "r.json")
	code, out, errOut := esrun(context.Background(), "-local", "2", "-slots", "1", "-gens", "3", "-quiet", "-report", report)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schedule struct {
			PerWorker []struct {
				Worker int    `json:"worker"`
				Name   string `json:"name"`
				Host   string `json:"host"`
			} `json:"per_worker"`
		} `json:"schedule"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range rep.Schedule.PerWorker {
		if w.Host != "127.0.0.1" {
			t.Errorf("worker %d (%s) host %q", w.Worker, w.Name, w.Host)
		}
		names = append(names, w.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"local-1", "local-2"}) {
		t.Errorf("workers %v, want local-1 and local-2", names)
	}
}
