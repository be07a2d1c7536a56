package es

import (
	"math"
	"testing"
)

// The default strategy parameters for n = 10 are those of Hansen's
// tutorial (Table 1), as pycma 4.4 reports them: "(5_w,10)-CMA-ES
// (mu_w=3.2,w_1=45%)".
func TestCMADefaultParameters(t *testing.T) {
	e, err := New(Config{Strategy: StrategyCMA, Dim: 10, Lower: -1, Upper: 1, Stop: Stop{Generations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := e.cma
	if s.lambda != 10 || s.mu != 5 {
		t.Fatalf("λ = %d, μ = %d, want 10 and 5", s.lambda, s.mu)
	}
	sum := 0.0
	for i, w := range s.weights {
		sum += w
		if i > 0 && !(w < s.weights[i-1]) {
			t.Errorf("weights not decreasing: %v", s.weights)
		}
	}
	near := func(name string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.6g, want %.6g", name, got, want)
		}
	}
	near("Σw", sum, 1, 1e-15)
	near("μ_eff", s.mueff, 3.1672, 1e-4)
	near("w_1", s.weights[0], 0.4563, 1e-4)
	// c_σ = (μ_eff+2)/(n+μ_eff+5), c_c = (4+μ_eff/n)/(n+4+2μ_eff/n),
	// c_1 = 2/((n+1.3)²+μ_eff), c_μ = min(1−c_1, 2(μ_eff−2+1/μ_eff)/((n+2)²+μ_eff)),
	// d_σ = 1 + 2·max(0, √((μ_eff−1)/(n+1)) − 1) + c_σ.
	// The values, from the formulas evaluated separately in Python.
	near("c_σ", s.cs, 0.284429, 1e-6)
	near("c_c", s.cc, 0.294990, 1e-6)
	near("c_1", s.c1, 0.0152838, 1e-7)
	near("c_μ", s.cmu, 0.0201543, 1e-7)
	near("d_σ", s.ds, 1.284429, 1e-6)
	near("E‖N(0,I)‖", s.chiN, 3.084727, 1e-6)
	if s.sigma != 0.6 {
		t.Errorf("σ₀ = %v, want 0.3 × the box width 2", s.sigma)
	}
	for _, m := range s.mean {
		if m < -1 || m > 1 {
			t.Fatalf("initial mean %v outside the box", s.mean)
		}
	}
}

// A sample is evaluated at its nearest point of the box, and ranked with
// the bound penalty Σ γ_i (x_i − clip(x_i))²/n, γ_i = 1 until the weights
// are set.
func TestClipAndPenalty(t *testing.T) {
	e, err := New(Config{Strategy: StrategyCMA, Dim: 2, Lower: -1, Upper: 3, Stop: Stop{Generations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s := e.cma
	for _, tt := range []struct{ in, want float64 }{
		{0, 0}, {-1, -1}, {3, 3}, {2.5, 2.5}, {-1.5, -1}, {4, 3}, {1e300, 3},
		{math.Inf(1), 3}, {math.Inf(-1), -1}, {math.NaN(), -1},
	} {
		if got := s.clip(tt.in); got != tt.want {
			t.Errorf("clip(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	s.mean, s.sigma = []float64{2, 0}, 1
	if p := s.penalty([]float64{0.5, 0.5}); p != 0 {
		t.Errorf("penalty inside the box = %v", p)
	}
	// x = (4, −3): 1 past the upper bound, 2 below the lower one.
	if p := s.penalty([]float64{2, -3}); p != (1+4)/2.0 {
		t.Errorf("penalty = %v, want 2.5", p)
	}
	s.gamma = []float64{10, 0}
	if p := s.penalty([]float64{2, -3}); p != 10/2.0 {
		t.Errorf("weighted penalty = %v, want 5", p)
	}
}

// drive runs e on f until it stops, calling each after every generation.
func drive(t *testing.T, e *Engine, f func(x []float64) float64, each func()) {
	t.Helper()
	for e.Done() == "" {
		_, xs := e.Ask()
		fs := make([]float64, len(xs))
		for i, x := range xs {
			fs[i] = f(x)
		}
		if err := e.Tell(fs); err != nil {
			t.Fatal(err)
		}
		each()
	}
}

// On a flat function every run ends by EqualFunValues once its history
// (10 + ⌈30n/λ⌉ generations) is full; IPOP doubles λ at each restart, from
// a new uniform mean, with σ₀ again.
func TestIPOPRestarts(t *testing.T) {
	e, err := New(Config{Strategy: StrategyCMA, Restarts: RestartIPOP, Dim: 5, Lower: -1, Upper: 1, Seed: 2, Stop: Stop{MaxEvals: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	var runs []run
	drive(t, e, func([]float64) float64 { return 1 }, func() {
		if r := e.cma.run; len(runs) == 0 || r.Index != runs[len(runs)-1].Index {
			runs = append(runs, r)
		}
	})
	if len(runs) < 4 {
		t.Fatalf("%d runs", len(runs))
	}
	for i, r := range runs {
		if r.Lambda != 8<<i || r.Mu != r.Lambda/2 || r.Sigma0 != 0.6 || r.Small {
			t.Errorf("run %d: %+v, want λ = %d, μ = λ/2, σ₀ = 0.6", i, r, 8<<i)
		}
		if i == 0 {
			continue
		}
		if want := runs[i-1].Start + 10 + (30*5+runs[i-1].Lambda-1)/runs[i-1].Lambda; r.Stop != EqualFunValues || r.Start != want {
			t.Errorf("run %d started at generation %d after %s, want %d after EqualFunValues", i, r.Start, r.Stop, want)
		}
	}
}

// BIPOP runs next the regime that has used fewer evaluations: the large
// one with λ doubled per large run, the small one with λ between λ_def and
// half the next large λ and σ₀ between σ₀,def/100 and σ₀,def.
func TestBIPOPRegimes(t *testing.T) {
	e, err := New(Config{Strategy: StrategyCMA, Restarts: RestartBIPOP, Dim: 5, Lower: -1, Upper: 1, Seed: 4, Stop: Stop{MaxEvals: 20000}})
	if err != nil {
		t.Fatal(err)
	}
	small, large, index := 0, 1, 0
	drive(t, e, func([]float64) float64 { return 1 }, func() {
		s := e.cma
		if s.run.Index == index {
			return
		}
		// The Tell that ended a run counted its evaluations, then chose.
		index = s.run.Index
		r, b := s.run, s.regimes
		if r.Small != (b.SmallEvals < b.LargeEvals) {
			t.Fatalf("run %d (small %v) after budgets %+v", r.Index, r.Small, b)
		}
		if r.Small {
			small++
			if top := 8 << b.LargeRuns / 2; r.Lambda < 8 || r.Lambda > top || r.Sigma0 < 0.006 || r.Sigma0 > 0.6 {
				t.Fatalf("small run %+v, want λ in [8, %d], σ₀ in [0.006, 0.6]", r, top)
			}
		} else {
			large++
			if r.Lambda != 8<<(large-1) || r.Sigma0 != 0.6 || b.LargeRuns != large {
				t.Fatalf("large run %d: %+v, %+v", large, r, b)
			}
		}
	})
	if small < 3 || large < 3 {
		t.Fatalf("%d small and %d large runs", small, large)
	}
}
