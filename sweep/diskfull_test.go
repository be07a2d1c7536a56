package sweep

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"

	"github.com/esgrid/esgrid/internal/fulldisk"
	"github.com/esgrid/esgrid/sched/sim"
)

// The table and the picture are written whole or not at all: a disk that
// fills up halfway leaves the files that were there. The old code wrote
// them in place: it said why it failed, but left the first bytes of each
// ("s.csv: 100 bytes (\"machines,workload,gr\")"), the old files lost.
func TestOutputsOnAFullDisk(t *testing.T) {
	set, err := sim.LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{Set: set, Policies: []string{"wq", "r3q"}, Workload: "es", Mu: 5, Lambda: 14, Gens: 2,
		Grains: []time.Duration{100 * time.Millisecond}, Delays: []time.Duration{0},
		Noise: 0.1, Seed: 1, Trials: 1, Parallel: 1}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	csvPath, pngPath := filepath.Join(dir, "s.csv"), filepath.Join(dir, "s.png")
	for _, p := range []string{csvPath, pngPath} {
		if err := os.WriteFile(p, []byte("the last run's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fulldisk.After(t, 100)
	if err := res.WriteCSV(csvPath); err == nil {
		t.Error("the table was written on a full disk")
	}
	if err := res.DrawChart(pngPath); err == nil {
		t.Error("the picture was drawn on a full disk")
	}
	for _, p := range []string{csvPath, pngPath} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "the last run's" {
			t.Errorf("%s: %d bytes (%.20q), %v; want the old file", filepath.Base(p), len(b), b, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("files left: %v", entries)
	}
}

// The figures of essim masters too: the old code drew them in place
// (plot.Save), and a full disk left the first bytes of one ("f.png: 100
// bytes").
func TestFigureOnAFullDisk(t *testing.T) {
	p := plot.New()
	path := filepath.Join(t.TempDir(), "f.png")
	if err := os.WriteFile(path, []byte("the last run's"), 0o644); err != nil {
		t.Fatal(err)
	}
	fulldisk.After(t, 100)
	if err := savePlot(p, path); err == nil {
		t.Error("the figure was drawn on a full disk")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "the last run's" {
		t.Errorf("f.png: %d bytes, %v; want the old file", len(b), err)
	}
}
