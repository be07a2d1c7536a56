package report

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
)

// The last generation is -gens, or the last whose batch fits in
// -max-evals (generation 0 evaluates μ, or λ for CMA-ES), whichever comes
// first; -target alone has none.
func TestLastGen(t *testing.T) {
	target := 1e-8
	for _, tt := range []struct {
		name  string
		c     es.Config
		last  int
		known bool
	}{
		{"gens", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{Generations: 100}}, 100, true},
		{"budget", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{MaxEvals: 400}}, 5, true}, // 30 + 5×70 = 380
		{"budget exact", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{MaxEvals: 380}}, 5, true},
		{"budget first", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{Generations: 100, MaxEvals: 400}}, 5, true},
		{"gens first", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{Generations: 3, MaxEvals: 400}}, 3, true},
		{"generation 0 only", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{MaxEvals: 99}}, 0, true},
		{"cma", es.Config{Mu: 7, Lambda: 14, Strategy: es.StrategyCMA, Stop: es.Stop{MaxEvals: 42}}, 2, true},
		{"cma ipop budget", es.Config{Mu: 7, Lambda: 14, Strategy: es.StrategyCMA, Restarts: es.RestartIPOP, Stop: es.Stop{MaxEvals: 42}}, 0, false},
		{"cma bipop gens", es.Config{Mu: 7, Lambda: 14, Strategy: es.StrategyCMA, Restarts: es.RestartBIPOP, Stop: es.Stop{Generations: 9, MaxEvals: 42}}, 9, true},
		{"target", es.Config{Mu: 30, Lambda: 70, Stop: es.Stop{Target: &target}}, 0, false},
	} {
		if last, known := lastGen(tt.c); last != tt.last || known != tt.known {
			t.Errorf("%s: lastGen = %d, %v; want %d, %v", tt.name, last, known, tt.last, tt.known)
		}
	}
}

// The rate is over the last progressWindow generations; the ETA is the
// generations left at that rate, 0 at the last, unknown without one.
func TestProgressRateAndETA(t *testing.T) {
	p := &Progress{of: 10, known: true, lambda: 70}
	if _, ok := p.ETA(0); ok {
		t.Error("an ETA before any time has passed")
	}
	p.Add(30, time.Second) // generation 0, slow: it leaves the window
	for range progressWindow {
		p.Add(70, 100*time.Millisecond)
	}
	if r := p.Rate(); r != 700 {
		t.Errorf("rate %v, want 700 evaluations/s", r)
	}
	if d, ok := p.ETA(6); !ok || d != 400*time.Millisecond {
		t.Errorf("ETA after generation 6 of 10: %v, %v; want 400ms", d, ok)
	}
	if d, ok := p.ETA(10); !ok || d != 0 {
		t.Errorf("ETA after the last generation: %v, %v; want 0", d, ok)
	}
	p.known = false
	if _, ok := p.ETA(6); ok {
		t.Error("an ETA without a last generation")
	}
}

// The progress line says gen N/M, the rate and the ETA, or gen N and ETA
// unknown.
func TestProgressLine(t *testing.T) {
	s := es.Stats{Gen: 6, Evals: 450, Best: 1.5, Mean: 2}
	p := &Progress{of: 10, known: true, lambda: 70}
	p.Add(70, 100*time.Millisecond)
	want := "gen    6/10  evals     450  best 1.500000e+00  mean 2.000000e+00  100ms  700 evals/s  ETA 400ms"
	if got := p.Line(s, 100*time.Millisecond); got != want {
		t.Errorf("line\n%q, want\n%q", got, want)
	}
	p.known = false
	want = "gen    6  evals     450  best 1.500000e+00  mean 2.000000e+00  100ms  700 evals/s  ETA unknown"
	if got := p.Line(s, 100*time.Millisecond); got != want {
		t.Errorf("line\n%q, want\n%q", got, want)
	}
}

func TestETAText(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{78*time.Hour + 34*time.Minute + 51384*time.Millisecond, "78h35m"},
		{2*time.Hour + 30*time.Second, "2h1m"},
		{5*time.Minute + 1500*time.Millisecond, "5m2s"},
		{1234 * time.Millisecond, "1.234s"},
		{3190 * time.Microsecond, "3.19ms"},
	} {
		if got := etaText(c.d); got != c.want {
			t.Errorf("etaText(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
