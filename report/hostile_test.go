package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// A report of a few hundred bytes that claims a worker of 2⁴⁰ slots (a
// hand-edited or hostile file) is refused on reading, in one line that
// names the field, before the timeline sizes its lanes by it (a panic,
// or terabytes, before).
func TestReadRefusesAbsurdSlots(t *testing.T) {
	const rep = `{"schedule": {"total": 1,
		"generations": [{"gen": 0, "start": 0, "end": 1}],
		"per_worker": [{"worker": 1, "name": "w", "slots": 1099511627776}],
		"timeline": {"instances": [{"worker": 1, "gen": 0, "kind": "result", "start": 0, "end": 1}]}}}`
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Read(path)
	if err == nil {
		_, err = panels(r)
	}
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "slots") || strings.Contains(err.Error(), "\n") {
		t.Errorf("got %v, want one line about the slots", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("a %d-byte report allocated %d MiB", len(rep), n>>20)
	}
}

// An axis whose range is narrow for its magnitude (fitness values of
// −10¹⁷ that differ by 64, as a run of a problem with huge values may
// report) gets a few ticks: the tick loop stepped i++ past 2⁵³, where
// i+1 == i, and grew its list until memory ran out.
func TestTicksOfANarrowRangeEnd(t *testing.T) {
	for _, r := range [][2]float64{{1e17, 1e17 + 64}, {-1e17 - 64, -1e17}, {1e300, 1e300 * (1 + 1e-15)}, {0, 1}} {
		got := make(chan int, 1)
		go func() { got <- len(readableTicks{}.Ticks(r[0], r[1])) }()
		select {
		case n := <-got:
			if n > 20 {
				t.Errorf("range %v: %d ticks", r, n)
			}
		case <-time.After(time.Minute): // the loop never ends; a minute is patience, not a margin
			t.Fatalf("range %v: the ticks never came", r)
		}
	}
}

// An axis wider than a float64 can span (a damaged or hostile report's
// best 1e308 beside a mean of −1e308) gets a few ticks: the old code
// handed it to gonum's DefaultTicks, which never returned, and esreport
// -png hung ("the ticks never came"). So does the whole picture.
func TestTicksOfAnOverflowingRangeEnd(t *testing.T) {
	for _, r := range [][2]float64{{-1e308, 1e308}, {-math.MaxFloat64, math.MaxFloat64}, {math.Inf(-1), 1}} {
		got := make(chan []plot.Tick, 1)
		go func() { got <- readableTicks{}.Ticks(r[0], r[1]) }()
		select {
		case ticks := <-got:
			if len(ticks) > 20 {
				t.Errorf("range %v: %d ticks", r, len(ticks))
			}
			for _, tk := range ticks {
				if math.IsInf(tk.Value, 0) || math.IsNaN(tk.Value) {
					t.Errorf("range %v: tick %v", r, tk.Value)
				}
			}
		case <-time.After(time.Minute): // the loop never ends; a minute is patience, not a margin
			t.Fatalf("range %v: the ticks never came", r)
		}
	}
	var rep Report
	if err := json.Unmarshal([]byte(`{"generations": [{"gen": 0, "evals": 10, "best": 1e308, "mean": -1e308}, {"gen": 1, "evals": 20, "best": 1e308, "mean": 1e308}]}`), &rep); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Draw(&rep, filepath.Join(t.TempDir(), "r.png"), PNG, 400, 700) }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the picture never came")
	}
}

// A report whose timeline spans more than a century (a generation, an
// instance, a join from −1e308 s to 1e308 s) is refused on reading, in
// one line: the old code read it, and drawing its timeline never ended
// (esreport -png of such a report spun until killed).
func TestReadRefusesAbsurdTimes(t *testing.T) {
	dir := t.TempDir()
	for i, tt := range []struct{ gens, workers, instances, want string }{
		{`{"gen": 0, "start": -1e308, "end": 1e308}`, `{"worker": 1, "slots": 1}`, `{"worker": 1, "gen": 0, "start": 0, "end": 1}`, "generation 0 runs from -1e+308 s to 1e+308 s"},
		{`{"gen": 0, "start": 0, "end": 1}`, `{"worker": 1, "slots": 1, "joined": 1e300}`, `{"worker": 1, "gen": 0, "start": 0, "end": 1}`, "worker 1 joined or left at a time outside"},
		{`{"gen": 0, "start": 0, "end": 1}`, `{"worker": 1, "slots": 1, "left": -1e300}`, `{"worker": 1, "gen": 0, "start": 0, "end": 1}`, "worker 1 joined or left at a time outside"},
		{`{"gen": 3, "start": 0, "end": 1}`, `{"worker": 1, "slots": 1}`, `{"worker": 1, "gen": 3, "start": 0, "end": 1e20}`, "an instance of generation 3 runs from 0 s to 1e+20 s"},
	} {
		path := filepath.Join(dir, fmt.Sprintf("r%d.json", i))
		rep := `{"schedule": {"total": 1, "generations": [` + tt.gens + `], "per_worker": [` + tt.workers + `], "timeline": {"instances": [` + tt.instances + `]}}}`
		if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%d: got %v, want one line with %q", i, err, tt.want)
		}
	}
}

// A convergence of one value, positive (one generation, or μ = 1 on a
// plateau: best and mean alike throughout), is drawn on a log axis a
// decade either side of it. The old code left the empty range to gonum,
// which widened it by ±1, to 0 for a fitness of 1 and below zero for any
// fitness under it, and its log scale panicked ("Values must be greater
// than 0 for a log scale"): esreport -png died on such a report.
func TestDrawOneFitnessValue(t *testing.T) {
	for _, v := range []string{"1", "0.5", "1e-300", "5e-324", "1e308", "1.7976931348623157e308"} {
		var rep Report
		text := `{"generations": [{"gen": 0, "evals": 1, "best": ` + v + `, "mean": ` + v + `}, {"gen": 1, "evals": 2, "best": ` + v + `, "mean": ` + v + `}]}`
		if err := json.Unmarshal([]byte(text), &rep); err != nil {
			t.Fatal(err)
		}
		if err := Draw(&rep, filepath.Join(t.TempDir(), "r.svg"), SVG, 400, 700); err != nil {
			t.Errorf("fitness %s: %v", v, err)
		}
	}
}
