package sweep

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched/sim"
)

// A sweep of two grains, two delays and the paper's four policies has a
// summary per setting and policy, in order, and prints, writes and draws
// them all.
func TestSweep(t *testing.T) {
	set, err := sim.LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{Set: set, Policies: []string{"wq", "rr", "rwq", "r3q"}, Workload: "es", Mu: 5, Lambda: 14, Gens: 2,
		Grains: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond},
		Delays: []time.Duration{0, 50 * time.Millisecond},
		Noise:  0.1, Seed: 1, Trials: 2, Parallel: 2}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Settings) != 4 || len(res.Sums) != 16 || res.Settings[1] != (Setting{100 * time.Millisecond, 50 * time.Millisecond}) {
		t.Fatalf("settings %v, %d summaries", res.Settings, len(res.Sums))
	}
	for i, s := range res.Sums {
		if want := c.Policies[i%4]; s.Config.Policy != want || s.Trials != 2 {
			t.Errorf("summary %d: policy %s of %d trials, want %s of 2", i, s.Config.Policy, s.Trials, want)
		}
	}
	var out bytes.Buffer
	Describe(&out, c)
	res.PrintTable(&out)
	res.PrintShape(&out)
	for _, want := range []string{"machines lan: 7 machines", "effLB", " r3q ", "paper's shape", "opt: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	dir := t.TempDir()
	csvPath, pngPath := filepath.Join(dir, "s.csv"), filepath.Join(dir, "s.png")
	if err := res.WriteCSV(csvPath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 17 || rows[2][4] != "rr" || rows[5][3] != "50" {
		t.Fatalf("csv: %d rows, %v", len(rows), err)
	}
	if err := res.DrawChart(pngPath); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(pngPath); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("png: %v", err)
	}
}

// The scale experiment prints a row per worker count and cost.
func TestMastersScale(t *testing.T) {
	var out bytes.Buffer
	m := &Masters{Workers: []int{16, 32}, Costs: []time.Duration{10 * time.Microsecond}, PerWorker: 5,
		Grain: time.Millisecond, Latency: 100 * time.Microsecond, Noise: 0.3, Policy: "wq", Seed: 1}
	if err := MastersScale(context.Background(), m, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "16") || !strings.Contains(out.String(), "32") {
		t.Errorf("output:\n%s", out.String())
	}
}
