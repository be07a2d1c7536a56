package es_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// sphere is a serial reference evaluator: f(x) = Σ x_i².
var sphere = es.EvaluatorFunc(func(_ context.Context, _ int, xs [][]float64) ([]float64, error) {
	fs := make([]float64, len(xs))
	for i, x := range xs {
		for _, v := range x {
			fs[i] += v * v
		}
	}
	return fs, nil
})

// trajectory is everything that must be identical between two runs with
// the same seed.
type trajectory struct {
	stats   []es.Stats
	parents []es.Individual
	best    es.Individual
	reason  es.StopReason
}

// record runs e to its end with ev and returns the trajectory.
func record(t *testing.T, e *es.Engine, ev es.Evaluator, opts es.RunOptions) trajectory {
	t.Helper()
	var tr trajectory
	inner := opts.OnGeneration
	opts.OnGeneration = func(s es.Stats) error {
		tr.stats = append(tr.stats, s)
		if inner != nil {
			return inner(s)
		}
		return nil
	}
	reason, err := e.Run(context.Background(), ev, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	tr.reason, tr.parents, tr.best = reason, e.Parents(), e.Best()
	return tr
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func sameVector(a, b []float64) bool {
	return slices.EqualFunc(a, b, sameBits)
}

func sameIndividual(a, b es.Individual) bool {
	return sameBits(a.F, b.F) && sameVector(a.X, b.X) && sameVector(a.Sigma, b.Sigma)
}

func sameStats(a, b es.Stats) bool {
	return a.Gen == b.Gen && a.Evals == b.Evals && a.NaNs == b.NaNs &&
		sameBits(a.Best, b.Best) && sameBits(a.Mean, b.Mean) && sameBits(a.BestEver, b.BestEver)
}

// requireSame fails unless a and b are bit-for-bit the same run.
func requireSame(t *testing.T, a, b trajectory) {
	t.Helper()
	if !slices.EqualFunc(a.stats, b.stats, sameStats) {
		for i := range min(len(a.stats), len(b.stats)) {
			if !sameStats(a.stats[i], b.stats[i]) {
				t.Fatalf("trajectories differ at generation %d: %+v vs %+v", a.stats[i].Gen, a.stats[i], b.stats[i])
			}
		}
		t.Fatalf("trajectories have %d and %d generations", len(a.stats), len(b.stats))
	}
	if !slices.EqualFunc(a.parents, b.parents, sameIndividual) {
		t.Fatal("final populations differ")
	}
	if !sameIndividual(a.best, b.best) || a.reason != b.reason {
		t.Fatalf("best or stop reason differ: %v/%v vs %v/%v", a.best.F, a.reason, b.best.F, b.reason)
	}
}

func newEngine(t *testing.T, cfg es.Config) *es.Engine {
	t.Helper()
	e, err := es.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func sphereConfig(gens int) es.Config {
	return es.Config{Problem: "sphere", Mu: 30, Lambda: 70, Dim: 10, Lower: -5.12, Upper: 5.12, Seed: 1, Stop: es.Stop{Generations: gens}}
}

// The engine works: a (30+70)-ES on the 10-D sphere gets below 1e-8 within
// 500 generations. (Seeds 1..20 need 182 to 326.)
func TestSphere10DReachesTarget(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		cfg := sphereConfig(500)
		cfg.Seed = seed
		target := 1e-8
		cfg.Stop.Target = &target
		e := newEngine(t, cfg)
		tr := record(t, e, sphere, es.RunOptions{})
		if tr.reason != es.StopTarget || tr.best.F >= 1e-8 {
			t.Fatalf("seed %d: stopped (%s) at generation %d with best %g", seed, tr.reason, e.Gen()-1, tr.best.F)
		}
		t.Logf("seed %d: f = %.3g after generation %d", seed, tr.best.F, e.Gen()-1)
	}
}

func TestStopCriteria(t *testing.T) {
	ten := 10.0
	tests := []struct {
		name      string
		stop      es.Stop
		reason    es.StopReason
		lastGen   int
		wantEvals int
	}{
		{"generations", es.Stop{Generations: 4}, es.StopGenerations, 4, 30 + 4*70},
		{"budget fits exactly", es.Stop{MaxEvals: 30 + 3*70}, es.StopBudget, 3, 30 + 3*70},
		{"budget not a multiple", es.Stop{MaxEvals: 30 + 3*70 + 69}, es.StopBudget, 3, 30 + 3*70},
		{"budget is generation 0", es.Stop{MaxEvals: 30}, es.StopBudget, 0, 30},
		{"generations before budget", es.Stop{Generations: 2, MaxEvals: 10000}, es.StopGenerations, 2, 30 + 2*70},
		{"target", es.Stop{Target: &ten, Generations: 1000}, es.StopTarget, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sphereConfig(0)
			cfg.Stop = tt.stop
			e := newEngine(t, cfg)
			tr := record(t, e, sphere, es.RunOptions{})
			if tr.reason != tt.reason {
				t.Fatalf("reason %q, want %q", tr.reason, tt.reason)
			}
			last := tr.stats[len(tr.stats)-1]
			if tt.reason == es.StopTarget {
				// It stops at the first generation that reaches the target.
				if last.BestEver > ten || tr.stats[len(tr.stats)-2].BestEver <= ten {
					t.Fatalf("stopped at generation %d with best %v", last.Gen, last.BestEver)
				}
				return
			}
			if last.Gen != tt.lastGen || e.Evals() != tt.wantEvals || last.Evals != tt.wantEvals {
				t.Fatalf("last generation %d with %d evals, want %d with %d", last.Gen, e.Evals(), tt.lastGen, tt.wantEvals)
			}
		})
	}
}

func TestAskTellContract(t *testing.T) {
	e := newEngine(t, sphereConfig(3))
	if err := e.Tell(nil); !errors.Is(err, es.ErrNoBatch) {
		t.Fatalf("Tell before Ask = %v, want ErrNoBatch", err)
	}
	g0, xs0 := e.Ask()
	g1, xs1 := e.Ask()
	if g0 != 0 || g1 != 0 || len(xs0) != 30 || &xs0[0][0] != &xs1[0][0] {
		t.Fatalf("Ask is not idempotent before Tell: gens %d %d, len %d", g0, g1, len(xs0))
	}
	if err := e.Tell(make([]float64, 29)); err == nil {
		t.Fatal("Tell accepted 29 values for 30 tasks")
	}
	if err := e.Tell(make([]float64, 30)); err != nil {
		t.Fatal(err)
	}
	g, xs := e.Ask()
	if g != 1 || len(xs) != 70 {
		t.Fatalf("after generation 0: Ask gives generation %d with %d tasks", g, len(xs))
	}
	for _, x := range xs {
		for _, v := range x {
			if v < -5.12 || v > 5.12 {
				t.Fatalf("offspring coordinate %v outside the box", v)
			}
		}
	}
}

// A tiny box and huge steps: every coordinate must stay in the box and every
// step size at most the box's width.
func TestBoundsHold(t *testing.T) {
	cfg := es.Config{Mu: 5, Lambda: 20, Dim: 8, Lower: 2, Upper: 2.5, InitSigma: 0.5, Seed: 9, Stop: es.Stop{Generations: 50}}
	e := newEngine(t, cfg)
	check := func(x, sigma []float64) {
		for i := range x {
			if !(x[i] >= 2 && x[i] <= 2.5) || !(sigma[i] >= 0 && sigma[i] <= 0.5) {
				t.Fatalf("x=%v sigma=%v escapes the box or the cap", x[i], sigma[i])
			}
		}
	}
	// A fitness that rewards leaving the box pushes mutation at the bounds.
	outward := es.EvaluatorFunc(func(_ context.Context, _ int, xs [][]float64) ([]float64, error) {
		fs := make([]float64, len(xs))
		for i, x := range xs {
			fs[i] = -x[0] + x[1]
		}
		return fs, nil
	})
	record(t, e, outward, es.RunOptions{OnGeneration: func(es.Stats) error {
		for _, p := range e.Parents() {
			check(p.X, p.Sigma)
		}
		return nil
	}})
}

func TestSelectionOrderAndNaN(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cfg := es.Config{Mu: 2, Lambda: 3, Dim: 2, Lower: -1, Upper: 1, Seed: 4, Stop: es.Stop{Generations: 5}}
	e := newEngine(t, cfg)
	tell := func(fs ...float64) [][]float64 {
		t.Helper()
		_, xs := e.Ask()
		xs = slices.Clone(xs)
		if err := e.Tell(fs); err != nil {
			t.Fatal(err)
		}
		return xs
	}
	parentX := func() [][]float64 {
		var out [][]float64
		for _, p := range e.Parents() {
			out = append(out, p.X)
		}
		return out
	}

	init := tell(nan, 5)
	if got := parentX(); !sameVector(got[0], init[1]) || !sameVector(got[1], init[0]) {
		t.Fatal("generation 0: the finite parent must rank before the NaN one")
	}
	if e.NaNs() != 1 || !math.IsNaN(e.Last().Mean) || e.Last().Best != 5 {
		t.Fatalf("generation 0: NaNs %d, stats %+v", e.NaNs(), e.Last())
	}

	// A tie between the parent (5) and offspring 0 (5): the parent wins
	// the first place, the offspring the second; +Inf beats NaN but does
	// not make the cut.
	off := tell(5, nan, inf)
	if got := parentX(); !sameVector(got[0], init[1]) || !sameVector(got[1], off[0]) {
		t.Fatal("generation 1: tie not broken parents-first, then by task index")
	}

	// All offspring tie with each other and beat the parents: task order.
	off = tell(1, 1, 1)
	if got := parentX(); !sameVector(got[0], off[0]) || !sameVector(got[1], off[1]) {
		t.Fatal("generation 2: equal offspring not taken in task order")
	}

	// NaN never beats a finite value, even +Inf.
	tell(nan, nan, nan)
	if e.Last().Best != 1 || e.Parents()[1].F != 1 || e.NaNs() != 5 {
		t.Fatalf("generation 3: a NaN was selected: %+v, NaNs %d", e.Last(), e.NaNs())
	}
}

func TestCommaSelectionForgetsParents(t *testing.T) {
	cfg := es.Config{Mu: 2, Lambda: 3, Dim: 2, Lower: -1, Upper: 1, Seed: 4, Comma: true, Stop: es.Stop{Generations: 1}}
	e := newEngine(t, cfg)
	record(t, e, es.EvaluatorFunc(func(_ context.Context, gen int, xs [][]float64) ([]float64, error) {
		if gen == 0 {
			return []float64{0, 0}, nil
		}
		return []float64{3, 2, 1}, nil
	}), es.RunOptions{})
	if l := e.Last(); l.Best != 1 || l.Mean != 1.5 || l.BestEver != 0 {
		t.Fatalf("comma selection: %+v, want best 1, mean 1.5, best ever 0", l)
	}
	if e.Best().F != 0 {
		t.Fatalf("Best() = %v, want the generation-0 parent (0)", e.Best().F)
	}
}

func TestRunEvaluationError(t *testing.T) {
	e := newEngine(t, sphereConfig(10))
	boom := errors.New("boom")
	ev := es.EvaluatorFunc(func(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
		if gen == 2 {
			return nil, fmt.Errorf("task 5: %w", boom)
		}
		return sphere.Evaluate(ctx, gen, xs)
	})
	_, err := e.Run(context.Background(), ev, es.RunOptions{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "generation 2") || !strings.Contains(err.Error(), "task 5") {
		t.Fatalf("Run = %v, want an error naming generation 2 and task 5", err)
	}
	if e.Gen() != 2 || e.Evals() != 100 {
		t.Fatalf("after the failure the engine is at generation %d with %d evals, want 2 and 100", e.Gen(), e.Evals())
	}
}

func TestRunRejectsShortAnswer(t *testing.T) {
	e := newEngine(t, sphereConfig(3))
	short := es.EvaluatorFunc(func(context.Context, int, [][]float64) ([]float64, error) { return []float64{1}, nil })
	if _, err := e.Run(context.Background(), short, es.RunOptions{}); err == nil || !strings.Contains(err.Error(), "generation 0") {
		t.Fatalf("Run with one value for 30 tasks = %v", err)
	}
}

// Cancelling during a generation returns the context's error and keeps the
// engine at the last completed generation; running on gives exactly the
// uninterrupted run.
func TestRunCancelKeepsState(t *testing.T) {
	want := record(t, newEngine(t, sphereConfig(20)), sphere, es.RunOptions{})

	e := newEngine(t, sphereConfig(20))
	ctx, cancel := context.WithCancel(context.Background())
	var got trajectory
	cancelling := es.EvaluatorFunc(func(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
		if gen == 6 {
			cancel()
			return nil, ctx.Err()
		}
		return sphere.Evaluate(ctx, gen, xs)
	})
	onGen := func(s es.Stats) error { got.stats = append(got.stats, s); return nil }
	_, err := e.Run(ctx, cancelling, es.RunOptions{OnGeneration: onGen})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "generation 6") {
		t.Fatalf("Run = %v, want context.Canceled at generation 6", err)
	}
	if e.Gen() != 6 || e.Last().Gen != 5 {
		t.Fatalf("engine at generation %d (last %d), want 6 (5)", e.Gen(), e.Last().Gen)
	}
	got.reason, err = e.Run(context.Background(), sphere, es.RunOptions{OnGeneration: onGen})
	if err != nil {
		t.Fatal(err)
	}
	got.parents, got.best = e.Parents(), e.Best()
	requireSame(t, want, got)
}

func TestOnGenerationErrorStops(t *testing.T) {
	e := newEngine(t, sphereConfig(20))
	stop := errors.New("enough")
	_, err := e.Run(context.Background(), sphere, es.RunOptions{OnGeneration: func(s es.Stats) error {
		if s.Gen == 3 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) || e.Gen() != 4 {
		t.Fatalf("Run = %v at generation %d, want the callback's error after generation 3", err, e.Gen())
	}
}

// resumeConfigs are the strategies whose checkpoints are tested: the
// paper's ES, the ES with recombination, and CMA-ES.
func resumeConfigs(gens int) []namedConfig {
	rec := sphereConfig(gens)
	rec.Mu, rec.Comma = 10, true
	rec.Recombination, rec.SigmaRecombination = es.RecombineDiscrete, es.RecombineIntermediate
	cma := sphereConfig(gens)
	cma.Strategy, cma.Mu, cma.Lambda = es.StrategyCMA, 0, 0
	ipop := cma
	ipop.Restarts = es.RestartIPOP
	return []namedConfig{{"paper", sphereConfig(gens)}, {"recombination", rec}, {"cma", cma}, {"cma ipop", ipop}}
}

// A run with restarts resumed from a checkpoint continues the same runs:
// stopped at the generation that ended a run (so the checkpoint holds the
// next run's fresh state), or a few generations into a later run.
func TestCheckpointResumeAcrossRestarts(t *testing.T) {
	rastrigin, err := problems.New("rastrigin", 4)
	if err != nil {
		t.Fatal(err)
	}
	ev := problems.NewPool(rastrigin, 1)
	for _, restarts := range []es.Restart{es.RestartIPOP, es.RestartBIPOP} {
		t.Run(string(restarts), func(t *testing.T) {
			cfg := restartConfig(restarts, 12000)
			var ends []int // the generations that ended a run
			e := newEngine(t, cfg)
			want := record(t, e, ev, es.RunOptions{OnGeneration: func(s es.Stats) error {
				if n, _ := e.Restarts(); n > len(ends) {
					ends = append(ends, s.Gen)
				}
				return nil
			}})
			if len(ends) < 2 {
				t.Fatalf("%d restarts: nothing to resume across", len(ends))
			}
			for _, k := range []int{ends[0], ends[1] + 3} {
				path := filepath.Join(t.TempDir(), "run.ckpt")
				short := cfg
				short.Stop = es.Stop{Generations: k}
				first := record(t, newEngine(t, short), ev, es.RunOptions{Checkpoint: path})
				resumed, err := es.LoadCheckpoint(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := resumed.SetStop(cfg.Stop); err != nil {
					t.Fatal(err)
				}
				second := record(t, resumed, ev, es.RunOptions{})
				requireSame(t, want, trajectory{stats: append(first.stats, second.stats...), parents: second.parents, best: second.best, reason: second.reason})
			}
		})
	}
}

// Stopping at generation k and resuming from the checkpoint continues the
// very same run, for every strategy.
func TestCheckpointResumeIsIdentical(t *testing.T) {
	const k, total = 7, 40
	for _, c := range resumeConfigs(total) {
		t.Run(c.name, func(t *testing.T) {
			want := record(t, newEngine(t, c.cfg), sphere, es.RunOptions{})

			dir := t.TempDir()
			path := filepath.Join(dir, "run.ckpt")
			short := c.cfg
			short.Stop.Generations = k
			first := record(t, newEngine(t, short), sphere, es.RunOptions{Checkpoint: path})
			if first.reason != es.StopGenerations {
				t.Fatalf("first part stopped by %s", first.reason)
			}
			e, err := es.LoadCheckpoint(path)
			if err != nil {
				t.Fatal(err)
			}
			if e.Gen() != k+1 || !sameStats(e.Last(), first.stats[k]) {
				t.Fatalf("resumed at generation %d with %+v, want %d with %+v", e.Gen(), e.Last(), k+1, first.stats[k])
			}
			if e.Config().Strategy != newEngine(t, c.cfg).Config().Strategy {
				t.Fatalf("resumed as %q", e.Config().Strategy)
			}
			if err := e.SetStop(es.Stop{Generations: total}); err != nil {
				t.Fatal(err)
			}
			second := record(t, e, sphere, es.RunOptions{Checkpoint: path})
			got := trajectory{stats: append(first.stats, second.stats...), parents: second.parents, best: second.best, reason: second.reason}
			requireSame(t, want, got)

			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Fatalf("checkpoint directory holds %d entries (%v), want the checkpoint alone", len(entries), err)
			}
			final, err := es.LoadCheckpoint(path)
			if err != nil || final.Gen() != total+1 {
				t.Fatalf("last checkpoint: %v, generation %d", err, final.Gen())
			}
		})
	}
}

// A checkpoint carries a checksum over its header and body (the Config
// included): flipping any single byte, truncating or extending it is an
// error, never a silently different engine.
func TestCheckpointRejectsDamage(t *testing.T) {
	small := func(c es.Config) es.Config {
		c.Mu, c.Lambda, c.Dim, c.Stop = 2, 3, 2, es.Stop{Generations: 2}
		if c.Strategy == es.StrategyCMA {
			c.Mu = 0
		}
		return c
	}
	for _, c := range resumeConfigs(2) {
		t.Run(c.name, func(t *testing.T) {
			cfg := small(c.cfg)
			e := newEngine(t, cfg)
			record(t, e, sphere, es.RunOptions{})
			good, err := e.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var fresh es.Engine
			if err := fresh.UnmarshalBinary(good); err != nil {
				t.Fatalf("round trip: %v", err)
			}
			if again, _ := fresh.MarshalBinary(); !slices.Equal(again, good) {
				t.Fatal("a restored engine encodes differently")
			}
			for cut := range len(good) {
				var d es.Engine
				if err := d.UnmarshalBinary(good[:cut]); err == nil {
					t.Fatalf("a checkpoint cut to %d of %d bytes was accepted", cut, len(good))
				}
			}
			var d es.Engine
			if err := d.UnmarshalBinary(append(slices.Clone(good), 0)); err == nil {
				t.Fatal("a checkpoint with a byte appended was accepted")
			}
			// Flip every bit pattern of every byte's low and high bits.
			for i := range good {
				for _, mask := range []byte{0x01, 0x80, 0xff} {
					bad := slices.Clone(good)
					bad[i] ^= mask
					var d es.Engine
					err := d.UnmarshalBinary(bad)
					var ce *es.CheckpointError
					if !errors.As(err, &ce) {
						t.Fatalf("flipping byte %d of %d with %#x: %v, want a *CheckpointError", i, len(good), mask, err)
					}
				}
			}
		})
	}
	if _, err := newEngine(t, sphereConfig(2)).MarshalBinary(); err == nil {
		t.Error("MarshalBinary before generation 0 succeeded")
	}
	if _, err := es.LoadCheckpoint(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("LoadCheckpoint of a missing file succeeded")
	}
}

// Files that are not checkpoints of this format fail at the header, with a
// clear message, before the rest of the file is read.
func TestLoadCheckpointRefusesOtherFiles(t *testing.T) {
	e := newEngine(t, sphereConfig(2))
	record(t, e, sphere, es.RunOptions{})
	good, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bigHeader := slices.Clone(good[:52])
	bigHeader[12] = 0x7f // a body of ~9·10¹⁸ bytes
	longer := slices.Clone(good[:52])
	longer[16] = 0x3f // a body of almost 1 GiB, far more than the file holds
	longer[12], longer[13], longer[14], longer[15] = 0, 0, 0, 0
	tests := []struct {
		name string
		path string
		want string
	}{
		{"empty", write("empty", nil), "shorter than the 52-byte header"},
		{"text", write("text", []byte("hello, world\n")), "shorter than the 52-byte header"},
		{"zeros", write("zeros", make([]byte, 4096)), "not an esgrid checkpoint"},
		// Version 1 was bare msgpack, a map header first.
		{"format 1", write("v1", append([]byte{0x87, 0xa7}, make([]byte, 100)...)), "not an esgrid checkpoint"},
		{"huge body announced", write("huge", bigHeader), "more than the limit"},
		{"truncated", write("truncated", good[:len(good)-1]), "damaged or truncated"},
		{"header only", write("header", longer), "damaged or truncated"},
		{"a directory", dir, "es: resume"},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		tests = append(tests, struct {
			name string
			path string
			want string
		}{"/dev/zero", "/dev/zero", "not an esgrid checkpoint"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := es.LoadCheckpoint(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadCheckpoint(%s) = %v, want an error containing %q", tt.name, err, tt.want)
			}
		})
	}
	if _, err := es.LoadCheckpoint(write("good", good)); err != nil {
		t.Fatalf("the good checkpoint: %v", err)
	}
}

// The engine's own cost per generation: Ask (mutation) and Tell
// (selection) for the paper's (30+70)-ES in 30 dimensions, with no
// fitness computed.
func BenchmarkAskTell30Plus70Dim30(b *testing.B) {
	cfg := es.Config{Mu: 30, Lambda: 70, Dim: 30, Lower: -100, Upper: 100, Seed: 1, Stop: es.Stop{Generations: 1}}
	e, err := es.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	e.Ask()
	if err := e.Tell(make([]float64, cfg.Mu)); err != nil {
		b.Fatal(err)
	}
	// Precomputed, distinct fitness values so selection has real work.
	fitness := make([]float64, cfg.Lambda)
	for b.Loop() {
		gen, _ := e.Ask()
		for i := range fitness {
			fitness[i] = float64((gen*7919 + i*104729) % 1000)
		}
		if err := e.Tell(fitness); err != nil {
			b.Fatal(err)
		}
	}
}

// The same for CMA-ES with its default population in 30 dimensions,
// (7/7_W,14): sampling, ranking, the updates of the mean, the paths and
// C, and the eigendecomposition it needs every generation at this size.
func BenchmarkAskTellCMA30(b *testing.B) {
	cfg := es.Config{Strategy: es.StrategyCMA, Dim: 30, Lower: -100, Upper: 100, Seed: 1, Stop: es.Stop{Generations: 1}}
	e, err := es.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	fitness := make([]float64, e.Config().Lambda)
	for b.Loop() {
		gen, _ := e.Ask()
		for i := range fitness {
			fitness[i] = float64((gen*7919 + i*104729) % 1000)
		}
		if err := e.Tell(fitness); err != nil {
			b.Fatal(err)
		}
	}
}
