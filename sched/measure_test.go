package sched

import (
	"math"
	"testing"
	"time"
)

// The drivers' deadline rule, by hand: factor × exec + rtt, the grid's
// exec for a worker not measured, the first deadline while nothing is,
// never under the floor, none with a negative factor.
func TestDeadlines(t *testing.T) {
	ms := func(n float64) float64 { return n * float64(time.Millisecond) }
	d := Deadlines{}.WithDefaults()
	if d != (Deadlines{Factor: 4, Floor: time.Second, First: 30 * time.Second}) {
		t.Fatalf("defaults %+v", d)
	}
	for _, c := range []struct {
		d                   Deadlines
		exec, gridExec, rtt float64
		want                time.Duration
	}{
		{d, ms(500), ms(100), ms(20), 2020 * time.Millisecond},
		{d, 0, ms(400), ms(20), 1620 * time.Millisecond},
		{d, 0, 0, ms(20), 30 * time.Second},
		{d, ms(10), ms(10), ms(5), time.Second},
		{Deadlines{Factor: 2, Floor: time.Millisecond}.WithDefaults(), 0, 0, 0, 30 * time.Millisecond},
		{Deadlines{Factor: -1}.WithDefaults(), ms(500), ms(500), 0, 0},
	} {
		if got := c.d.Of(c.exec, c.gridExec, c.rtt); got != c.want {
			t.Errorf("%+v.Of(%v, %v, %v) = %v, want %v", c.d, c.exec, c.gridExec, c.rtt, got, c.want)
		}
	}
}

// Smooth: the first measurement sets the mean, later ones move it by an
// eighth, and "not measured" leaves it.
func TestSmooth(t *testing.T) {
	var m float64
	Smooth(&m, 0)
	Smooth(&m, 800)
	Smooth(&m, 1600)
	Smooth(&m, -5)
	if m != 900 {
		t.Errorf("mean %v, want 900", m)
	}
}

// Again: each overrun doubles the deadline, at most ten times.
func TestDeadlinesAgain(t *testing.T) {
	d := Deadlines{}.WithDefaults()
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{-1, time.Second}, {0, time.Second}, {1, 2 * time.Second}, {3, 8 * time.Second}, {10, 1024 * time.Second}, {200, 1024 * time.Second}} {
		if got := d.Again(time.Second, c.n, false); got != c.want {
			t.Errorf("Again(1s, %d) = %v, want %v", c.n, got, c.want)
		}
		// Without a ceiling, no mark of one.
		if got := d.Again(time.Second, c.n, true); got != c.want {
			t.Errorf("without a ceiling, Again(1s, %d, ceilinged) = %v, want %v", c.n, got, c.want)
		}
	}
	// With a ceiling (the master's: half its task timeout), the doubling
	// stops there; a base already past it stands. Once an instance of the
	// task was cut short at the ceiling (AtCeiling), its next ones get no
	// deadline (0), whatever their base: the task timeout alone ends
	// them. They were cut at the ceiling again and again, so that a task
	// between half the timeout and the timeout, or one that always hangs,
	// never ended.
	d.Ceiling = 5 * time.Minute
	for _, c := range []struct {
		base time.Duration
		n    int
		want time.Duration
	}{
		{time.Second, 3, 8 * time.Second}, {time.Second, 9, 5 * time.Minute}, {30 * time.Second, 4, 5 * time.Minute},
		{10 * time.Minute, 0, 10 * time.Minute}, {10 * time.Minute, 2, 10 * time.Minute}, {4 * time.Second, 8, 5 * time.Minute},
	} {
		if got := d.Again(c.base, c.n, false); got != c.want {
			t.Errorf("with a ceiling of 5m, Again(%v, %d) = %v, want %v", c.base, c.n, got, c.want)
		}
		if !d.AtCeiling(c.base, c.n) != (c.want < d.Ceiling) {
			t.Errorf("AtCeiling(%v, %d) = %v with a ceiling of %v", c.base, c.n, d.AtCeiling(c.base, c.n), d.Ceiling)
		}
		if got := d.Again(c.base, c.n, true); got != 0 {
			t.Errorf("with a ceiling of 5m, cut short there once, Again(%v, %d) = %v, want none", c.base, c.n, got)
		}
	}
}

// AtCeiling marks a task cut where its doubling stops: at the ceiling,
// or at 2^10 times the base below a ceiling longer than that (a task
// timeout of 3 hours, a deadline of 4 s: 68 min 16 s), where a task was
// cut for ever. Without a ceiling, never.
func TestDeadlinesAtCeiling(t *testing.T) {
	d := Deadlines{Ceiling: 90 * time.Minute}.WithDefaults()
	for _, c := range []struct {
		base time.Duration
		n    int
		want bool
	}{{4 * time.Second, 9, false}, {4 * time.Second, 10, true}, {4 * time.Second, 200, true}, {time.Hour, 0, false}, {time.Hour, 1, true}, {2 * time.Hour, 0, true}} {
		if got := d.AtCeiling(c.base, c.n); got != c.want {
			t.Errorf("with a ceiling of 90m, AtCeiling(%v, %d) = %v, want %v", c.base, c.n, got, c.want)
		}
	}
	d.Ceiling = 0
	if d.AtCeiling(4*time.Second, 200) {
		t.Error("without a ceiling, AtCeiling(4s, 200) = true")
	}
}

// Doubled is Again's doubling alone: it stops at the ceiling and stays
// there, for a deadline that grows with each thing cut off and never
// ends (a child master stalled: grid's stallDeadline).
func TestDeadlinesDoubled(t *testing.T) {
	d := Deadlines{Ceiling: 5 * time.Minute}.WithDefaults()
	for _, c := range []struct {
		base time.Duration
		n    int
		want time.Duration
	}{{time.Second, 3, 8 * time.Second}, {4 * time.Second, 8, 5 * time.Minute}, {4 * time.Second, 200, 5 * time.Minute}, {10 * time.Minute, 2, 10 * time.Minute}} {
		if got := d.Doubled(c.base, c.n); got != c.want {
			t.Errorf("with a ceiling of 5m, Doubled(%v, %d) = %v, want %v", c.base, c.n, got, c.want)
		}
	}
	d.Ceiling = 0
	if got := d.Doubled(time.Second, 200); got != 1024*time.Second {
		t.Errorf("without a ceiling, Doubled(1s, 200) = %v, want 1024s", got)
	}
}

// OfWorker: a worker never measured whose tasks outlast the floor is cut
// short at the floor by Of for ever; each overrun it is cut at says its
// execution time is at least that, so its deadline grows by the factor
// and it finishes a task within log_4(task/floor) + 1 overruns. A worker
// measured keeps its own mean (a stall of a fast one is cut short).
func TestDeadlinesOfWorker(t *testing.T) {
	d := Deadlines{}.WithDefaults()
	grid, rtt := float64(10*time.Millisecond), float64(time.Millisecond)
	for _, task := range []time.Duration{1500 * time.Millisecond, 2 * time.Second, 30 * time.Second, 5 * time.Minute} {
		if old := d.Of(0, grid, rtt); old >= task {
			t.Fatalf("the floor's deadline %v already covers a %v task", old, task)
		}
		var overran time.Duration
		n := 0
		for ; ; n++ {
			deadline := d.OfWorker(0, grid, rtt, overran)
			if deadline > task {
				break
			}
			overran = deadline // cut short there
			if n > 20 {
				t.Fatalf("%v task: still cut short after %d overruns (deadline %v)", task, n, deadline)
			}
		}
		bound := int(math.Ceil(math.Log(float64(task)/float64(d.Floor))/math.Log(d.Factor))) + 1
		t.Logf("%v task: finished after %d overruns (bound %d)", task, n, bound)
		if n > bound {
			t.Errorf("%v task: %d overruns before a deadline covers it, more than %d", task, n, bound)
		}
	}
	// Measured: its own mean, whatever it overran.
	if got, want := d.OfWorker(float64(500*time.Millisecond), grid, rtt, time.Minute), d.Of(float64(500*time.Millisecond), grid, rtt); got != want {
		t.Errorf("a measured worker's deadline %v, want its own %v", got, want)
	}
	// Nothing overran: Of.
	if got, want := d.OfWorker(0, grid, rtt, 0), d.Of(0, grid, rtt); got != want {
		t.Errorf("OfWorker without overruns %v, want %v", got, want)
	}
}

// OfWorker's growth stops at Ceiling, and waits for a measurement
// somewhere: while nothing is measured, First stands.
func TestDeadlinesOfWorkerBounds(t *testing.T) {
	d := Deadlines{Ceiling: 5 * time.Minute}.WithDefaults()
	if got := d.OfWorker(0, float64(10*time.Millisecond), 0, time.Hour); got != 5*time.Minute {
		t.Errorf("grown past the ceiling: %v", got)
	}
	if got := d.OfWorker(0, 0, 0, time.Minute); got != d.First {
		t.Errorf("nothing measured: %v, want First %v", got, d.First)
	}
}
