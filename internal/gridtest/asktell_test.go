package gridtest

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/worker"
)

// crossEntropy is an optimiser that is not esgrid's: the cross-entropy
// method with a diagonal Gaussian. Ask samples λ points, Tell refits the
// mean and the standard deviations to the best k. It is here to show that
// any ask/tell loop can use the grid; its randomness is its own, seeded.
type crossEntropy struct {
	mean, sd []float64
	lambda   int
	k        int
	rng      *rand.Rand
	xs       [][]float64
}

func (c *crossEntropy) Ask() [][]float64 {
	c.xs = make([][]float64, c.lambda)
	for i := range c.xs {
		x := make([]float64, len(c.mean))
		for j := range x {
			x[j] = min(max(c.mean[j]+c.sd[j]*c.rng.NormFloat64(), -5.12), 5.12)
		}
		c.xs[i] = x
	}
	return c.xs
}

func (c *crossEntropy) Tell(f []float64) {
	order := make([]int, len(f))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(f[a], f[b]) })
	for j := range c.mean {
		m, v := 0.0, 0.0
		for _, i := range order[:c.k] {
			m += c.xs[i][j] / float64(c.k)
		}
		for _, i := range order[:c.k] {
			v += (c.xs[i][j] - m) * (c.xs[i][j] - m) / float64(c.k)
		}
		c.mean[j], c.sd[j] = m, math.Sqrt(v)+1e-12
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func newCrossEntropy(dim int, seed uint64) *crossEntropy {
	c := &crossEntropy{mean: make([]float64, dim), sd: make([]float64, dim), lambda: 40, k: 10, rng: rand.New(rand.NewPCG(seed, 0))}
	for j := range c.mean {
		c.mean[j], c.sd[j] = 3, 2
	}
	return c
}

// optimise runs 30 generations of the cross-entropy method, evaluating
// each batch with ev, and returns the best fitness of every generation.
func optimise(ctx context.Context, t *testing.T, ev es.Evaluator) []float64 {
	t.Helper()
	opt := newCrossEntropy(5, 1)
	var bests []float64
	for gen := range 30 {
		xs := opt.Ask()
		f, err := ev.Evaluate(ctx, gen, xs)
		if err != nil {
			t.Fatal(err)
		}
		opt.Tell(f)
		bests = append(bests, slices.Min(f))
	}
	return bests
}

// docs/library.md, "Any optimiser on the grid": a program drives the grid master as
// an es.Evaluator from an ask/tell loop of its own. The master listens on
// loopback; two worker agents connect to it directly by address (on other
// machines they would be esworker -master ADDR). The run equals its
// in-process twin, and it optimises.
func TestAnyOptimiserOnTheGrid(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	key, err := grid.NewKey(testSecret + " any optimiser")
	if err != nil {
		t.Fatal(err)
	}
	master, err := grid.NewMaster(ctx, grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Logger: quiet,
		Problem: grid.ProblemSpec{Name: "sphere", Dim: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	var agents []chan error
	for range 2 {
		a, err := worker.New(worker.Config{Master: master.Addr(), Key: key, Slots: 2, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		agents = append(agents, done)
	}
	if err := master.WaitWorkers(ctx, 2); err != nil {
		t.Fatal(err)
	}

	got := optimise(ctx, t, master)

	master.Close() // tells the agents the run is over: they return
	for _, done := range agents {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("a worker did not stop after the master closed")
		}
	}

	sphere, err := problems.New("sphere", 5)
	if err != nil {
		t.Fatal(err)
	}
	want := optimise(ctx, t, problems.NewPool(sphere, 1))
	for gen := range want {
		if math.Float64bits(got[gen]) != math.Float64bits(want[gen]) {
			t.Fatalf("generation %d: best %v on the grid, %v in process", gen, got[gen], want[gen])
		}
	}
	if !(got[29] < got[0]/100) {
		t.Fatalf("the cross-entropy method did not optimise: %v → %v", got[0], got[29])
	}
}

// CMA-ES driven through the master equals CMA-ES in process, bit for bit,
// with workers of different speeds and replicas.
func TestCMAOnAgentsEqualsInProcess(t *testing.T) {
	cfg := es.Config{
		Problem: "rastrigin", Strategy: es.StrategyCMA, Lambda: 20, Dim: 8, Lower: -5.12, Upper: 5.12, Seed: 7,
		Stop: es.Stop{Generations: 6},
	}
	p, err := worker.BuildProblem(spec)
	if err != nil {
		t.Fatal(err)
	}
	want, ref := runEngine(t, cfg, problems.NewPool(p, 2))

	c := newCluster(t, "r3q")
	for i, slow := range []float64{1, 2, 4} {
		c.addWorker(t, "cma-"+string(rune('a'+i)), 1+i%2, slow, c.key)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.master.WaitWorkers(ctx, 3); err != nil {
		t.Fatal(err)
	}
	got, e := runEngine(t, cfg, c.master)
	compare(t, got, want)
	sameBest(t, e.Best(), ref.Best())
}

// CMA-ES with BIPOP restarts driven through the master equals its run in
// process, bit for bit, across restarts (new means, λ and σ₀ drawn from
// the seed alone).
func TestCMARestartsOnAgentsEqualsInProcess(t *testing.T) {
	cfg := es.Config{
		Problem: "rastrigin", Strategy: es.StrategyCMA, Restarts: es.RestartBIPOP, Dim: 8, Lower: -5.12, Upper: 5.12, Seed: 3,
		Stop: es.Stop{MaxEvals: 9000},
	}
	p, err := worker.BuildProblem(spec)
	if err != nil {
		t.Fatal(err)
	}
	want, ref := runEngine(t, cfg, problems.NewPool(p, 2))
	if restarts, _ := ref.Restarts(); restarts < 2 {
		t.Fatalf("%d restarts: the comparison proves little", restarts)
	}

	c := newCluster(t, "rwq")
	for i := range 2 {
		c.addWorker(t, "bipop-"+string(rune('a'+i)), 2, float64(1+i), c.key)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.master.WaitWorkers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	got, e := runEngine(t, cfg, c.master)
	compare(t, got, want)
	sameBest(t, e.Best(), ref.Best())
}

// runEngine runs cfg's ES to its end on ev and returns its statistics,
// a generation's each, and the engine.
func runEngine(t *testing.T, cfg es.Config, ev es.Evaluator) ([]es.Stats, *es.Engine) {
	t.Helper()
	e, err := es.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stats []es.Stats
	if _, err := e.Run(ctx, ev, es.RunOptions{OnGeneration: func(s es.Stats) error {
		stats = append(stats, s)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	return stats, e
}

// sameBest fails the test unless the grid's best is the in-process
// run's, bit for bit.
func sameBest(t *testing.T, got, want es.Individual) {
	t.Helper()
	if math.Float64bits(got.F) != math.Float64bits(want.F) || !slices.Equal(got.X, want.X) {
		t.Fatalf("best %v on the grid, %v in process", got.F, want.F)
	}
}
