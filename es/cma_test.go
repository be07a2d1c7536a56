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

func TestFold(t *testing.T) {
	e, err := New(Config{Strategy: StrategyCMA, Dim: 2, Lower: -1, Upper: 3, Stop: Stop{Generations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want float64 }{
		{0, 0}, {-1, -1}, {3, 3}, {2.5, 2.5},
		{-1.5, -0.5}, // reflected at the lower bound
		{4, 2},       // reflected at the upper bound
		{7, -1},      // a whole width past the upper bound: the lower bound
		{8, 0},       // folded twice
		{-9, -1},     // a whole period below: back at the lower bound
		{-10, 0},
		{1e300, -1}, // far out: still in the box
		{math.Inf(1), 3},
		{math.Inf(-1), -1},
		{math.NaN(), -1},
	}
	for _, tt := range tests {
		got := e.fold(tt.in)
		if tt.in == 1e300 {
			if got < -1 || got > 3 {
				t.Errorf("fold(%v) = %v, outside the box", tt.in, got)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("fold(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
