package es_test

import (
	"context"
	"math"
	"testing"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// problemEvaluator evaluates serially on a registered problem.
func problemEvaluator(t *testing.T, name string, dim int) (es.Evaluator, float64, float64) {
	t.Helper()
	p, err := problems.New(name, dim)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := p.Bounds()
	return es.EvaluatorFunc(func(ctx context.Context, _ int, xs [][]float64) ([]float64, error) {
		fs := make([]float64, len(xs))
		for i, x := range xs {
			f, err := p.Eval(ctx, x)
			if err != nil {
				return nil, err
			}
			fs[i] = f
		}
		return fs, nil
	}), lo, hi
}

// The strategies optimise: on the 10-D sphere and ellipsoid (condition
// 10⁶), and on the Ridge, the recommended ES and CMA-ES reach 1e-8 within
// budgets of the order of the published CMA-ES figures, and the paper's ES
// does not on the ellipsoid. The budgets leave a margin of 1.7 to 4 over
// what seeds 1..3 need (docs/optimising.md, "Benchmarks", has the medians of 10 seeds).
func TestStrategiesReachTarget(t *testing.T) {
	recommended := es.Config{Mu: 10, Lambda: 70, Recombination: es.RecombineIntermediate, SigmaRecombination: es.RecombineIntermediate}
	cma := es.Config{Strategy: es.StrategyCMA}
	tests := []struct {
		name    string
		base    es.Config
		problem string
		budget  int
	}{
		{"recommended sphere", recommended, "sphere", 15000},
		{"recommended ellipsoid", recommended, "ellipsoid", 60000},
		{"cma sphere", cma, "sphere", 3000},
		{"cma ellipsoid", cma, "ellipsoid", 12000},
		{"cma ridge", cma, "ridge", 6000},
		{"cma rosenbrock", cma, "rosenbrock", 15000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, lo, hi := problemEvaluator(t, tt.problem, 10)
			for seed := uint64(1); seed <= 3; seed++ {
				target := 1e-8
				cfg := tt.base
				cfg.Problem, cfg.Dim, cfg.Lower, cfg.Upper, cfg.Seed = tt.problem, 10, lo, hi, seed
				cfg.Stop = es.Stop{Target: &target, MaxEvals: tt.budget}
				e := newEngine(t, cfg)
				tr := record(t, e, ev, es.RunOptions{})
				if tr.reason != es.StopTarget {
					t.Fatalf("seed %d: stopped by %s after %d evaluations at f = %g", seed, tr.reason, e.Evals(), tr.best.F)
				}
				t.Logf("seed %d: f = %.3g after %d evaluations", seed, tr.best.F, e.Evals())
			}
		})
	}
	t.Run("paper ellipsoid", func(t *testing.T) {
		ev, lo, hi := problemEvaluator(t, "ellipsoid", 10)
		target := 1e-8
		cfg := es.Config{Problem: "ellipsoid", Mu: 30, Lambda: 70, Dim: 10, Lower: lo, Upper: hi, Seed: 1, Stop: es.Stop{Target: &target, MaxEvals: 12000}}
		if tr := record(t, newEngine(t, cfg), ev, es.RunOptions{}); tr.reason == es.StopTarget {
			t.Fatalf("the paper's ES reached the target in 12,000 evaluations: the comparison above is too lax")
		}
	})
}

// CMA-ES keeps every task inside the box, however hard the function pushes
// outward, and its parents' X and the best individual too.
func TestCMABoundsHold(t *testing.T) {
	cfg := es.Config{Strategy: es.StrategyCMA, Dim: 8, Lower: 2, Upper: 2.5, Seed: 9, Stop: es.Stop{Generations: 200}}
	e := newEngine(t, cfg)
	outward := es.EvaluatorFunc(func(_ context.Context, _ int, xs [][]float64) ([]float64, error) {
		fs := make([]float64, len(xs))
		for i, x := range xs {
			for _, v := range x {
				if !(v >= 2 && v <= 2.5) {
					t.Fatalf("task %v outside the box", x)
				}
			}
			fs[i] = -x[0] + x[1] - 100*x[2]
		}
		return fs, nil
	})
	tr := record(t, e, outward, es.RunOptions{})
	// The minimum is at the corner x0 = 2.5, x1 = 2, x2 = 2.5.
	if b := tr.best.X; math.Abs(b[0]-2.5) > 1e-3 || math.Abs(b[1]-2) > 1e-3 || math.Abs(b[2]-2.5) > 1e-3 {
		t.Errorf("best %v, want the corner (2.5, 2, 2.5, …)", b)
	}
}

// NaN fitness values rank last and are counted; a flat function leaves
// CMA-ES's state finite: the run goes on, and its checkpoint loads.
func TestCMANaNAndFlatFitness(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    func(i int, x []float64) float64
	}{
		{"every other NaN", func(i int, x []float64) float64 {
			if i%2 == 0 {
				return math.NaN()
			}
			return x[0] * x[0]
		}},
		{"all NaN", func(int, []float64) float64 { return math.NaN() }},
		{"flat", func(int, []float64) float64 { return 1 }},
		{"+Inf", func(int, []float64) float64 { return math.Inf(1) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := es.Config{Strategy: es.StrategyCMA, Dim: 4, Lower: -1, Upper: 1, Seed: 5, Stop: es.Stop{Generations: 600}}
			e := newEngine(t, cfg)
			ev := es.EvaluatorFunc(func(_ context.Context, _ int, xs [][]float64) ([]float64, error) {
				fs := make([]float64, len(xs))
				for i, x := range xs {
					for _, v := range x {
						if !(v >= -1 && v <= 1) {
							t.Fatalf("task %v outside the box", x)
						}
					}
					fs[i] = tt.f(i, x)
				}
				return fs, nil
			})
			record(t, e, ev, es.RunOptions{})
			data, err := e.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var back es.Engine
			if err := back.UnmarshalBinary(data); err != nil {
				t.Fatalf("the checkpoint after 600 generations does not load: %v", err)
			}
		})
	}
}

// The smallest shapes work: one coordinate, two offspring, one parent.
// (μ = λ selects nothing: the mean is a weighted mean of every sample, and
// (2/2_W,2) reaches the target on about half the seeds, by chance.)
func TestCMASmallShapes(t *testing.T) {
	for _, c := range []struct{ dim, mu, lambda int }{{1, 0, 0}, {1, 1, 2}, {2, 1, 3}, {2, 2, 3}, {3, 0, 5}} {
		target := 1e-10
		cfg := es.Config{Strategy: es.StrategyCMA, Dim: c.dim, Mu: c.mu, Lambda: c.lambda, Lower: -1, Upper: 2, Seed: 3,
			Stop: es.Stop{Generations: 3000, Target: &target}}
		e := newEngine(t, cfg)
		tr := record(t, e, sphere, es.RunOptions{})
		if tr.reason != es.StopTarget {
			t.Errorf("%+v: stopped by %s at f = %g", c, tr.reason, tr.best.F)
		}
	}
}

// Restarts solve multimodal functions that one run of CMA-ES does not: on
// the 10-D Rastrigin function IPOP and BIPOP reach 1e-8 with seeds 1..3
// (docs/optimising.md, "Restarts": IPOP needs 53,000 to 90,000 evaluations, BIPOP
// up to 200,000), CMA-ES without restarts stalls in a local minimum with
// the same budget (seed 1); on the 10-D Griewank function (box ±600) IPOP needs
// at most 27,000 evaluations with seeds 1..10.
func TestRestartsSolveMultimodal(t *testing.T) {
	tests := []struct {
		problem  string
		restarts es.Restart
		seeds    uint64
		budget   int
		solves   bool
	}{
		{"rastrigin", es.RestartNone, 1, 250000, false},
		{"rastrigin", es.RestartIPOP, 3, 250000, true},
		{"rastrigin", es.RestartBIPOP, 3, 250000, true},
		{"griewank", es.RestartIPOP, 10, 40000, true},
	}
	for _, tt := range tests {
		t.Run(tt.problem+" "+string(tt.restarts), func(t *testing.T) {
			ev, lo, hi := problemEvaluator(t, tt.problem, 10)
			for seed := uint64(1); seed <= tt.seeds; seed++ {
				target := 1e-8
				cfg := es.Config{Problem: tt.problem, Strategy: es.StrategyCMA, Restarts: tt.restarts, Dim: 10, Lower: lo, Upper: hi, Seed: seed,
					Stop: es.Stop{Target: &target, MaxEvals: tt.budget}}
				e := newEngine(t, cfg)
				tr := record(t, e, ev, es.RunOptions{})
				restarts, why := e.Restarts()
				if solved := tr.reason == es.StopTarget; solved != tt.solves {
					t.Fatalf("seed %d: stopped by %s after %d evaluations and %d restarts at f = %g", seed, tr.reason, e.Evals(), restarts, tr.best.F)
				}
				if tt.restarts == es.RestartNone && restarts != 0 {
					t.Fatalf("seed %d: %d restarts without -restarts", seed, restarts)
				}
				t.Logf("seed %d: f = %.3g after %d evaluations, %d restarts (the last after %s)", seed, tr.best.F, e.Evals(), restarts, why)
			}
		})
	}
}

// The mean stays by the box: on the 30-D sphere with λ = 70, seed 8 took
// 56,490 evaluations when samples were folded into the box without a
// penalty (the mean drifted to |m_i| = 73 in a box of ±5.12, where every
// sample folded back gave no signal), against 12,810 to 18,690 for seeds
// 1..10 but 8. With the bound penalty it needs the others' count.
func TestCMAMeanStaysInBox(t *testing.T) {
	ev, lo, hi := problemEvaluator(t, "sphere", 30)
	target := 1e-8
	cfg := es.Config{Problem: "sphere", Strategy: es.StrategyCMA, Lambda: 70, Dim: 30, Lower: lo, Upper: hi, Seed: 8,
		Stop: es.Stop{Target: &target, MaxEvals: 20000}}
	e := newEngine(t, cfg)
	if tr := record(t, e, ev, es.RunOptions{}); tr.reason != es.StopTarget {
		t.Fatalf("stopped by %s after %d evaluations at f = %g", tr.reason, e.Evals(), tr.best.F)
	}
	t.Logf("%d evaluations", e.Evals())
}
