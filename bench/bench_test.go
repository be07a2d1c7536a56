package bench

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/es"
)

func TestParseStrategy(t *testing.T) {
	s, err := ParseStrategy(" recommended ")
	if err != nil || s.Name != "recommended" || s.Config.Mu != Recommended.Mu {
		t.Fatalf("%+v, %v", s, err)
	}
	s, err = ParseStrategy("es,lambda=100,comma,x=intermediate,rho=5")
	if err != nil || s.Config.Mu != Paper.Mu || s.Config.Lambda != 100 || !s.Config.Comma || s.Config.Rho != 5 || s.Config.Recombination != es.RecombineIntermediate {
		t.Fatalf("%+v, %v", s, err)
	}
	if s, err := ParseStrategy("cma,lambda=50"); err != nil || s.Config.Strategy != es.StrategyCMA || s.Config.Mu != 0 {
		t.Fatalf("%+v, %v", s, err)
	}
	for _, bad := range []string{"nope", "es,mu=x", "es,bogus=1"} {
		if _, err := ParseStrategy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A list of strategies takes names and specs, and a list of problems
// the test functions only.
func TestParseLists(t *testing.T) {
	ss, err := ParseStrategies("paper,cma; es,mu=5,lambda=20;cma,lambda=9")
	if err != nil || len(ss) != 4 || ss[0].Name != "paper" || ss[1].Name != "cma" || ss[2].Config.Mu != 5 || ss[3].Config.Lambda != 9 {
		t.Fatalf("%+v, %v", ss, err)
	}
	if _, err := ParseStrategies("paper,nope"); err == nil {
		t.Error("an unknown strategy accepted")
	}
	ps, err := ParseProblems("sphere,rastrigin")
	if err != nil || strings.Join(ps, " ") != "sphere rastrigin" {
		t.Fatalf("%v, %v", ps, err)
	}
	if _, err := ParseProblems("sphere,mandelbrot"); err == nil || !strings.HasPrefix(err.Error(), `"mandelbrot" is not a test function (known: `) || strings.Contains(err.Error(), "mandelbrot,") {
		t.Errorf("%v", err)
	}
}

// The median counts a missed target as infinitely many evaluations.
func TestSummarise(t *testing.T) {
	if m := medianOf([]float64{3, 1, 2, math.NaN()}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	med, ok, best := summarise([]outcome{{evals: 10, reached: true, best: 1e-9}, {evals: 30, reached: true, best: 1e-9}, {evals: 99, best: 1}})
	if med != "30" || ok != "2/3" || best != "1e-09" {
		t.Errorf("%s %s %s", med, ok, best)
	}
	if med, _, _ := summarise([]outcome{{evals: 10, reached: true}, {evals: 99}}); med != "–" {
		t.Errorf("half succeeded: median %s", med)
	}
}

// A table of one cell: the sphere reached by every seed, whatever the
// jobs.
func TestTable(t *testing.T) {
	var one, four bytes.Buffer
	c := Config{Problems: []string{"sphere"}, Dims: []int{2}, Seeds: 3, Target: 1e-3, Budget: 2000, Strategies: []Strategy{{"recommended", Recommended}}, Jobs: 1}
	if err := Table(context.Background(), c, &one); err != nil {
		t.Fatal(err)
	}
	c.Jobs = 4
	if err := Table(context.Background(), c, &four); err != nil {
		t.Fatal(err)
	}
	if one.String() != four.String() || !strings.Contains(one.String(), "| sphere  | 2 |") || !strings.Contains(one.String(), "3/3") {
		t.Errorf("tables:\n%s\n%s", one.String(), four.String())
	}
}

// A cell's runs take the seeds FirstSeed, FirstSeed+1, …; FirstSeed 0
// means 1, as before the first seed could be chosen.
func TestSeedOf(t *testing.T) {
	for _, c := range []struct {
		first     uint64
		run, want int
	}{{5, 1, 5}, {5, 3, 7}, {0, 1, 1}, {0, 10, 10}, {1, 2, 2}} {
		if got := (Config{FirstSeed: c.first}).seedOf(job{seed: c.run}); got != uint64(c.want) {
			t.Errorf("FirstSeed %d, run %d: seed %d, want %d", c.first, c.run, got, c.want)
		}
	}
}
