package problems

import (
	"context"
	"fmt"
	"math"
)

// The built-in test functions. Sums write float64(a*b) where a product is
// added: the explicit conversion forbids the compiler from fusing it into
// an FMA, which some architectures would round differently, so a value is
// the same on every worker whatever its CPU. (Rastrigin and Ackley also
// call math.Cos and math.Exp, whose last bit may still differ across
// architectures.)
func init() {
	Register("ridge", builtin("ridge", 1, -100, 100, ridge))
	Register("sphere", builtin("sphere", 1, -5.12, 5.12, sphere))
	Register("rastrigin", builtin("rastrigin", 1, -5.12, 5.12, rastrigin))
	Register("rosenbrock", builtin("rosenbrock", 2, -2.048, 2.048, rosenbrock))
	Register("ackley", builtin("ackley", 1, -32.768, 32.768, ackley))
	Register("griewank", builtin("griewank", 1, -600, 600, griewank))
	Register("ellipsoid", newEllipsoid)
}

// function is a closed-form test function.
type function struct {
	name   string
	dim    int
	lo, hi float64
	f      func(x []float64) float64
}

// builtin returns the factory of a test function that needs dim ≥ minDim.
func builtin(name string, minDim int, lo, hi float64, f func([]float64) float64) Factory {
	return func(dim int) (Problem, error) {
		if dim < minDim {
			return nil, fmt.Errorf("dimension must be ≥ %d, got %d", minDim, dim)
		}
		return &function{name: name, dim: dim, lo: lo, hi: hi, f: f}, nil
	}
}

func (p *function) Name() string                   { return p.name }
func (p *function) Bounds() (lower, upper float64) { return p.lo, p.hi }

// Eval returns f(x); x must have the problem's dimension. The functions are
// cheap, so ctx is not consulted.
func (p *function) Eval(_ context.Context, x []float64) (float64, error) {
	if len(x) != p.dim {
		return 0, fmt.Errorf("%s: vector of length %d, want %d", p.name, len(x), p.dim)
	}
	return p.f(x), nil
}

// ridge is the paper's eq. 1, f(x) = Σ_{i=1..n} (Σ_{j=1..i} x_j)²; minimum
// 0 at x = 0.
func ridge(x []float64) float64 {
	var partial, sum float64
	for _, v := range x {
		partial += v
		sum += float64(partial * partial)
	}
	return sum
}

// sphere is Σ x_i²; minimum 0 at x = 0.
func sphere(x []float64) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	return sum
}

// rastrigin is 10n + Σ (x_i² − 10 cos 2πx_i); minimum 0 at x = 0.
func rastrigin(x []float64) float64 {
	sum := 10 * float64(len(x))
	for _, v := range x {
		sum += float64(v*v) - float64(10*math.Cos(2*math.Pi*v))
	}
	return sum
}

// rosenbrock is Σ_{i<n} 100(x_{i+1} − x_i²)² + (1 − x_i)²; minimum 0 at
// x = (1, …, 1).
func rosenbrock(x []float64) float64 {
	var sum float64
	for i := 0; i+1 < len(x); i++ {
		a := x[i+1] - float64(x[i]*x[i])
		b := 1 - x[i]
		sum += float64(100*float64(a*a)) + float64(b*b)
	}
	return sum
}

// ackley is −20 exp(−0.2 √(Σx_i²/n)) − exp(Σ cos(2πx_i)/n) + 20 + e;
// minimum 0 at x = 0.
func ackley(x []float64) float64 {
	var squares, cosines float64
	for _, v := range x {
		squares += float64(v * v)
		cosines += math.Cos(2 * math.Pi * v)
	}
	n := float64(len(x))
	return float64(-20*math.Exp(-0.2*math.Sqrt(squares/n))) - math.Exp(cosines/n) + 20 + math.E
}

// griewank is 1 + Σx_i²/4000 − Π cos(x_i/√i) (i = 1..n); minimum 0 at
// x = 0, among a lattice of local minima whose depth grows towards it.
func griewank(x []float64) float64 {
	squares, product := 0.0, 1.0
	for i, v := range x {
		squares += float64(v * v)
		product *= math.Cos(v / math.Sqrt(float64(i+1)))
	}
	return 1 + squares/4000 - product
}

// newEllipsoid builds the ellipsoid Σ 10^(6(i−1)/(n−1)) x_i² (i = 1..n; the
// coefficient is 1 for n = 1) on ±5.12: a separable quadratic with
// condition number 10⁶, the usual test of step-size and covariance
// learning (Hansen and Ostermeier 2001, f_elli). Minimum 0 at x = 0.
func newEllipsoid(dim int) (Problem, error) {
	if dim < 1 {
		return nil, fmt.Errorf("dimension must be ≥ 1, got %d", dim)
	}
	coef := make([]float64, dim)
	for i := range coef {
		coef[i] = 1
		if dim > 1 {
			coef[i] = math.Pow(1e6, float64(i)/float64(dim-1))
		}
	}
	f := func(x []float64) float64 {
		var sum float64
		for i, v := range x {
			sum += float64(coef[i] * float64(v*v))
		}
		return sum
	}
	return &function{name: "ellipsoid", dim: dim, lo: -5.12, hi: 5.12, f: f}, nil
}
