package es

import (
	"math"
	"slices"
	"testing"
)

// engineWithParents returns an engine whose parents are given, as if
// generation 0 had selected them.
func engineWithParents(t *testing.T, cfg Config, parents []Individual) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.parents, e.gen = parents, 1
	return e
}

// fourParents have coordinates and step sizes whose sums and means are
// exact in binary floating point, so intermediate recombination has an
// exact expected value.
func fourParents() []Individual {
	return []Individual{
		{X: []float64{1, 2, 3}, Sigma: []float64{0.5, 1, 2}},
		{X: []float64{-1, 0, 3}, Sigma: []float64{0.25, 1, 4}},
		{X: []float64{3, -2, -1}, Sigma: []float64{0.25, 2, 2}},
		{X: []float64{1, 4, 3}, Sigma: []float64{1, 4, 8}},
	}
}

func recombConfig(x, s Recombination, rho int) Config {
	return Config{Mu: 4, Lambda: 8, Dim: 3, Lower: -5, Upper: 5, Seed: 3, Recombination: x, SigmaRecombination: s, Rho: rho, Stop: Stop{Generations: 5}}
}

// Global intermediate recombination (ρ = μ) gives every child the centroid
// of the parents and the mean of their step sizes: the (μ/μ_I) recombinant
// of Beyer and Schwefel (2002), §4.1.
func TestIntermediateRecombinationIsTheCentroid(t *testing.T) {
	e := engineWithParents(t, recombConfig(RecombineIntermediate, RecombineIntermediate, 0), fourParents())
	if e.cfg.Rho != 4 {
		t.Fatalf("default ρ with recombination = %d, want μ = 4", e.cfg.Rho)
	}
	rng := genRNG(1, 1)
	mates := make([]int, 4)
	for range 20 {
		x, s := make([]float64, 3), make([]float64, 3)
		e.recombine(rng, mates, x, s)
		if want := []float64{1, 1, 2}; !slices.Equal(x, want) {
			t.Fatalf("x = %v, want the centroid %v", x, want)
		}
		if want := []float64{0.5, 2, 4}; !slices.Equal(s, want) {
			t.Fatalf("σ = %v, want the mean %v", s, want)
		}
	}
}

// Discrete recombination takes every coordinate from one of the ρ parents
// chosen for the child, which are distinct; with ρ = 2 and μ = 4, over
// many children every parent and every pair is used.
func TestDiscreteRecombinationTakesCoordinatesFromTheMates(t *testing.T) {
	parents := fourParents()
	e := engineWithParents(t, recombConfig(RecombineDiscrete, RecombineNone, 2), parents)
	rng := genRNG(2, 1)
	mates := make([]int, 4)
	used := map[int]int{}
	for range 400 {
		x, s := make([]float64, 3), make([]float64, 3)
		e.recombine(rng, mates, x, s)
		chosen := mates[:2]
		if chosen[0] == chosen[1] {
			t.Fatalf("the same parent chosen twice: %v", chosen)
		}
		for i := range x {
			if x[i] != parents[chosen[0]].X[i] && x[i] != parents[chosen[1]].X[i] {
				t.Fatalf("coordinate %d = %v comes from neither mate %v", i, x[i], chosen)
			}
		}
		// σ is not recombined: the first mate's.
		if !slices.Equal(s, parents[chosen[0]].Sigma) {
			t.Fatalf("σ = %v, want the first mate's %v", s, parents[chosen[0]].Sigma)
		}
		used[chosen[0]]++
		used[chosen[1]]++
	}
	for p := range 4 {
		// 400 children × 2 mates / 4 parents = 200 each on average.
		if used[p] < 140 || used[p] > 260 {
			t.Errorf("parent %d was a mate %d times in 400 children, want about 200", p, used[p])
		}
	}
}

// Recombining σ alone keeps a parent's x whole and gives the mean step
// sizes of ρ distinct parents.
func TestSigmaOnlyRecombination(t *testing.T) {
	parents := fourParents()
	e := engineWithParents(t, recombConfig(RecombineNone, RecombineIntermediate, 2), parents)
	rng := genRNG(3, 1)
	mates := make([]int, 4)
	for range 50 {
		x, s := make([]float64, 3), make([]float64, 3)
		e.recombine(rng, mates, x, s)
		a, b := parents[mates[0]], parents[mates[1]]
		if !slices.Equal(x, a.X) {
			t.Fatalf("x = %v, want the first mate's %v", x, a.X)
		}
		for i := range s {
			if s[i] != (a.Sigma[i]+b.Sigma[i])/2 {
				t.Fatalf("σ_%d = %v, want the mean of %v and %v", i, s[i], a.Sigma[i], b.Sigma[i])
			}
		}
	}
}

// When all parents are the same individual, recombination changes
// nothing: the offspring's spread is the mutation's alone, and every
// child stays in the box.
func TestRecombinationOfClonesIsTheClone(t *testing.T) {
	clone := Individual{X: []float64{4.5, -4.5, 0}, Sigma: []float64{1, 1, 1}}
	parents := []Individual{clone.clone(), clone.clone(), clone.clone(), clone.clone()}
	for _, x := range Recombinations {
		e := engineWithParents(t, recombConfig(x, RecombineIntermediate, 3), parents)
		rng := genRNG(4, 1)
		mates := make([]int, 4)
		xs, s := make([]float64, 3), make([]float64, 3)
		e.recombine(rng, mates, xs, s)
		if !slices.Equal(xs, clone.X) || !slices.Equal(s, clone.Sigma) {
			t.Fatalf("%s: recombinant of clones is %v/%v", x, xs, s)
		}
		_, batch := e.Ask()
		for _, child := range batch {
			for _, v := range child {
				if v < -5 || v > 5 {
					t.Fatalf("%s: child %v leaves the box", x, child)
				}
			}
		}
	}
}

func TestConfigDefaultsAndNotation(t *testing.T) {
	tests := []struct {
		cfg              Config
		mu, lambda, rho  int
		notation         string
		sigma0           float64
		x, sigmaRecombin Recombination
	}{
		{Config{Mu: 30, Lambda: 70, Dim: 30, Lower: -100, Upper: 100}, 30, 70, 1, "(30+70)-ES", 20, RecombineNone, RecombineNone},
		{Config{Mu: 10, Lambda: 70, Dim: 30, Lower: -1, Upper: 1, Recombination: RecombineIntermediate}, 10, 70, 10, "(10/10+70)-ES", 0.2, RecombineIntermediate, RecombineNone},
		{Config{Mu: 15, Lambda: 100, Dim: 30, Lower: -1, Upper: 1, Comma: true, SigmaRecombination: RecombineIntermediate, Rho: 2}, 15, 100, 2, "(15/2,100)-ES", 0.2, RecombineNone, RecombineIntermediate},
		// CMA-ES: λ = 4 + ⌊3 ln n⌋, μ = ⌊λ/2⌋, σ₀ = 0.3 × the box width.
		{Config{Strategy: StrategyCMA, Dim: 10, Lower: -5, Upper: 5}, 5, 10, 0, "(5/5_W,10)-CMA-ES", 3, "", ""},
		{Config{Strategy: StrategyCMA, Dim: 30, Lower: -5, Upper: 5}, 7, 14, 0, "(7/7_W,14)-CMA-ES", 3, "", ""},
		{Config{Strategy: StrategyCMA, Dim: 2, Lower: -5, Upper: 5, Lambda: 70}, 35, 70, 0, "(35/35_W,70)-CMA-ES", 3, "", ""},
		{Config{Strategy: StrategyCMA, Dim: 10, Lower: -5, Upper: 5, Restarts: RestartIPOP}, 5, 10, 0, "IPOP-(5/5_W,10)-CMA-ES", 3, "", ""},
		{Config{Strategy: StrategyCMA, Dim: 10, Lower: -5, Upper: 5, Restarts: RestartBIPOP}, 5, 10, 0, "BIPOP-(5/5_W,10)-CMA-ES", 3, "", ""},
	}
	for _, tt := range tests {
		tt.cfg.Stop.Generations = 1
		e, err := New(tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := e.Config()
		if c.Mu != tt.mu || c.Lambda != tt.lambda || c.Rho != tt.rho || c.Recombination != tt.x || c.SigmaRecombination != tt.sigmaRecombin {
			t.Errorf("%+v: defaults μ %d λ %d ρ %d %q %q, want %d %d %d %q %q", tt.cfg, c.Mu, c.Lambda, c.Rho, c.Recombination, c.SigmaRecombination, tt.mu, tt.lambda, tt.rho, tt.x, tt.sigmaRecombin)
		}
		if got := tt.cfg.Notation(); got != tt.notation {
			t.Errorf("Notation() = %q, want %q", got, tt.notation)
		}
		if got := c.sigma0(); math.Abs(got-tt.sigma0) > 1e-15 {
			t.Errorf("%s: σ₀ = %v, want %v", tt.notation, got, tt.sigma0)
		}
		if c.Strategy == "" {
			t.Errorf("%s: Strategy not filled in", tt.notation)
		}
	}
}
