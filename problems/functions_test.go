package problems_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/problems"
)

func eval(t *testing.T, p problems.Problem, x []float64) float64 {
	t.Helper()
	f, err := p.Eval(context.Background(), x)
	if err != nil {
		t.Fatalf("%s.Eval(%v): %v", p.Name(), x, err)
	}
	return f
}

func filled(n int, v float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = v
	}
	return x
}

func TestBuiltinsAtOptimum(t *testing.T) {
	tests := []struct {
		name    string
		optimum float64 // every coordinate
		lo, hi  float64
		tol     float64
	}{
		{"ridge", 0, -100, 100, 0},
		{"sphere", 0, -5.12, 5.12, 0},
		{"rastrigin", 0, -5.12, 5.12, 0},
		{"rosenbrock", 1, -2.048, 2.048, 0},
		{"ackley", 0, -32.768, 32.768, 1e-14},
		{"griewank", 0, -600, 600, 0},
		{"ellipsoid", 0, -5.12, 5.12, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, dim := range []int{2, 10, 30} {
				p, err := problems.New(tt.name, dim)
				if err != nil {
					t.Fatal(err)
				}
				if p.Name() != tt.name {
					t.Errorf("Name() = %q", p.Name())
				}
				if lo, hi := p.Bounds(); lo != tt.lo || hi != tt.hi {
					t.Errorf("Bounds() = %v, %v, want %v, %v", lo, hi, tt.lo, tt.hi)
				}
				x := filled(dim, tt.optimum)
				if f := eval(t, p, x); math.Abs(f) > tt.tol {
					t.Errorf("dim %d: f(optimum) = %v, want 0", dim, f)
				}
				// Every step away from the optimum is worse.
				for i := range x {
					y := slices.Clone(x)
					y[i] += 0.01
					if f := eval(t, p, y); !(f > tt.tol) {
						t.Errorf("dim %d: moving coordinate %d off the optimum gives %v", dim, i, f)
					}
				}
			}
		})
	}
}

func TestBuiltinValues(t *testing.T) {
	tests := []struct {
		name string
		x    []float64
		want float64
	}{
		// Ridge is the paper's eq. 1: (1)² + (1+2)² + (1+2+3)².
		{"ridge", []float64{1, 2, 3}, 46},
		{"ridge", []float64{5, -5, 5}, 50}, // partial sums 5, 0, 5
		{"sphere", []float64{1, -2, 3}, 14},
		{"rastrigin", []float64{1, 0}, 1},
		{"rosenbrock", []float64{0, 0}, 1},
		{"rosenbrock", []float64{1, 2}, 100},
		// Ellipsoid: coefficients 1, 10³, 10⁶ in 3-D; 1 in 1-D.
		{"ellipsoid", []float64{1, 1, 1}, 1 + 1e3 + 1e6},
		{"ellipsoid", []float64{2, 0, -1}, 4 + 1e6},
		{"ellipsoid", []float64{3}, 9},
		// Griewank: 1 + 4π²/4000 − cos(2π)·cos(0).
		{"griewank", []float64{2 * math.Pi, 0}, math.Pi * math.Pi / 1000},
	}
	for _, tt := range tests {
		p, err := problems.New(tt.name, len(tt.x))
		if err != nil {
			t.Fatal(err)
		}
		if got := eval(t, p, tt.x); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s(%v) = %v, want %v", tt.name, tt.x, got, tt.want)
		}
	}
}

func TestBuiltinsRejectBadInput(t *testing.T) {
	for _, name := range []string{"ridge", "sphere", "rastrigin", "rosenbrock", "ackley", "griewank", "ellipsoid"} {
		if _, err := problems.New(name, 0); err == nil {
			t.Errorf("%s: dimension 0 accepted", name)
		}
		p, err := problems.New(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Eval(context.Background(), []float64{1, 2}); err == nil {
			t.Errorf("%s: a vector of the wrong length was accepted", name)
		}
	}
	if _, err := problems.New("rosenbrock", 1); err == nil {
		t.Error("rosenbrock: dimension 1 accepted")
	}
}

func TestRegistry(t *testing.T) {
	names := problems.Names()
	for _, want := range []string{"ackley", "griewank", "mandelbrot", "rastrigin", "ridge", "rosenbrock", "sphere"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() = %v lacks %q", names, want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("Names() = %v is not sorted", names)
	}
	_, err := problems.New("nosuch", 3)
	if err == nil || !strings.Contains(err.Error(), "ridge") {
		t.Errorf("New(nosuch) = %v, want an error listing the known names", err)
	}

	problems.Register("test-constant", func(dim int) (problems.Problem, error) {
		p, err := problems.New("sphere", dim)
		return p, err
	})
	if _, err := problems.New("test-constant", 2); err != nil {
		t.Errorf("a registered factory was not used: %v", err)
	}
	for _, tt := range []struct {
		name string
		f    problems.Factory
	}{
		{"test-constant", func(int) (problems.Problem, error) { return nil, nil }}, // duplicate
		{"", func(int) (problems.Problem, error) { return nil, nil }},
		{"test-nil", nil},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", tt.name)
				}
			}()
			problems.Register(tt.name, tt.f)
		}()
	}
}
