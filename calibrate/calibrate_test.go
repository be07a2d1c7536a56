package calibrate

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
	var progress bytes.Buffer
	cfg := Config{Workers: 3, Listen: "127.0.0.1:0", Key: key, Sizes: []int{8, 12, 16, 24, 32}, Slots: []int{1, 2}, Reps: 2, Wait: time.Minute,
		GroupBy: "prefix", Logger: quiet, Progress: &progress}
	type agentRun struct {
		name string
		err  chan error
	}
	var runs []agentRun
	cfg.OnListen = func(addr string) {
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
	cal, err := Grid(ctx, cfg)
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
	for _, n := range cfg.Sizes {
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
	cal, err := FromReports([]string{a, b}, "prefix")
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
	if _, err := FromReports([]string{bad}, "prefix"); err == nil {
		t.Error("a report without a load was accepted")
	}
}

// TestFromReportsNotAFile: a report that is not a regular file is
// refused in one line. The old code read it whole first: esplan
// calibrate -o cal.json /dev/zero read until the memory ran out
// ("fatal error: out of memory" under a 4 GB limit).
func TestFromReportsNotAFile(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := FromReports([]string{"/dev/zero"}, "prefix")
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("%v, want: not a regular file", err)
	}
}
