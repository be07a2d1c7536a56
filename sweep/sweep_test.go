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
	res.PrintSpeed(&out, 2*time.Second)
	for _, want := range []string{"machines lan: 7 machines", "effLB", " r3q ", "paper's shape", "opt: ", "simulated 32 runs, "} {
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

// A run's size, its virtual time bound and its memory grow with the
// workload.
func TestSizeAndBounds(t *testing.T) {
	set, err := sim.LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{Set: set, Policies: []string{"wq"}, Workload: "es", Mu: 30, Lambda: 70, Gens: 10,
		Grains: []time.Duration{time.Second}, Delays: []time.Duration{0}, Trials: 1}
	if s := c.Size(); s != (Size{Batches: 11, MaxBatch: 70, Tasks: 730}) {
		t.Errorf("es: %+v", s)
	}
	small, err := c.VirtualTime()
	if err != nil || !(small > 730*float64(time.Second)/2) {
		t.Fatalf("virtual time %v, %v", small, err)
	}
	mem := c.MemoryEstimate()
	c.Gens = 1000
	if big, _ := c.VirtualTime(); !(big > 50*small) || !(c.MemoryEstimate() > mem) {
		t.Errorf("a longer run's bounds did not grow: %v vs %v", big, small)
	}
	bag := &Config{Set: set, Workload: "bag", Tasks: 500}
	if s := bag.Size(); s != (Size{Batches: 1, MaxBatch: 500, Tasks: 500}) {
		t.Errorf("bag: %+v", s)
	}
	set.Machines[0].Speed = 0
	set.Machines[0].Times = nil
	if _, err := c.VirtualTime(); err == nil {
		t.Error("a machine of speed 0 accepted")
	}
}
