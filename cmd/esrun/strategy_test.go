package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

func TestStrategyFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-strategy", "de"}, `-strategy "de" is not a strategy (known: es, cma)`},
		{[]string{"-recombine", "uniform"}, `-recombine "uniform" is not a recombination (known: none, discrete, intermediate)`},
		{[]string{"-sigma-recombine", "discrete"}, `-sigma-recombine "discrete" is not a recombination of step sizes`},
		{[]string{"-rho", "-1"}, "-rho -1: must be an integer between 0 and 1000000"},
		{[]string{"-rho", "1e9"}, "-rho 1e9: must be an integer between 0 and 1000000"},
		{[]string{"-rho", "99999999"}, "-rho 99999999: must be an integer between 0 and 1000000"},
		{[]string{"-recombine", "discrete", "-rho", "31"}, "-rho must be in [1, Mu (30)], got 31"},
		{[]string{"-rho", "2"}, "-rho is 2 but neither object variables nor step sizes are recombined"},
		{[]string{"-strategy", "cma", "-comma"}, "-comma does not apply to -strategy cma"},
		{[]string{"-strategy", "cma", "-recombine", "discrete"}, "-recombine does not apply to -strategy cma"},
		{[]string{"-strategy", "cma", "-sigma-recombine", "none"}, "-sigma-recombine does not apply to -strategy cma"},
		{[]string{"-strategy", "cma", "-rho", "3"}, "-rho does not apply to -strategy cma"},
		{[]string{"-strategy", "cma", "-lambda", "1"}, "-lambda must be ≥ 2 for CMA-ES, got 1"},
		{[]string{"-strategy", "cma", "-mu", "20", "-lambda", "10"}, "-mu must be ≤ Lambda (10) for CMA-ES, got 20"},
		{[]string{"-strategy", "cma", "-max-evals", "10"}, "-max-evals must be ≥ Lambda (14) so that generation 0 fits"},
		{[]string{"-resume", "x.ckpt", "-strategy", "cma"}, "-strategy cannot be given with -resume"},
		{[]string{"-resume", "x.ckpt", "-recombine", "discrete"}, "-recombine cannot be given with -resume"},
		{[]string{"-resume", "x.ckpt", "-rho", "2"}, "-rho cannot be given with -resume"},
		{[]string{"-restarts", "ipop"}, "-restarts applies to -strategy cma only"},
		{[]string{"-strategy", "cma", "-restarts", "lr"}, `-restarts "lr" is not a restart strategy (known: none, ipop, bipop)`},
		{[]string{"-resume", "x.ckpt", "-restarts", "bipop"}, "-restarts cannot be given with -resume"},
	}
	for _, tt := range tests {
		code, stdout, stderr := esrun(context.Background(), append(tt.args, "-inprocess")...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// The paper's run is unchanged by the new flags' defaults; the header
// names the strategy in the literature's notation.
func TestStrategyHeaders(t *testing.T) {
	tests := []struct {
		args   []string
		header string
	}{
		{nil, "(30+70)-ES on ridge, 30-D in [-100, 100], seed 1"},
		{[]string{"-mu", "10", "-recombine", "intermediate", "-sigma-recombine", "intermediate"}, "(10/10+70)-ES (recombination: x intermediate, σ intermediate) on ridge"},
		{[]string{"-comma", "-mu", "10", "-recombine", "discrete", "-rho", "2"}, "(10/2,70)-ES (recombination: x discrete, σ none) on ridge"},
		{[]string{"-strategy", "cma"}, "(7/7_W,14)-CMA-ES on ridge, 30-D in [-100, 100], seed 1"},
		{[]string{"-strategy", "cma", "-lambda", "70"}, "(35/35_W,70)-CMA-ES on ridge"},
		{[]string{"-strategy", "cma", "-restarts", "bipop"}, "BIPOP-(7/7_W,14)-CMA-ES on ridge"},
	}
	for _, tt := range tests {
		code, stdout, stderr := esrun(context.Background(), append(tt.args, "-inprocess", "-gens", "1")...)
		if code != 0 || !strings.HasPrefix(stdout, tt.header) {
			t.Errorf("%v: exit %d (%s), header %q, want %q", tt.args, code, stderr, strings.SplitN(stdout, "\n", 2)[0], tt.header)
		}
	}
	code, stdout, _ := esrun(context.Background(), "-inprocess", "-quiet")
	if code != 0 || !strings.HasPrefix(stdout, "best 1.291272e+04 after generation 100 (7030 evaluations") {
		t.Errorf("the default run: exit %d, %q", code, stdout)
	}
}

// CMA-ES on the local grid is its in-process run, bit for bit; a run
// stopped at generation 4 and resumed from its checkpoint ends the same.
func TestCMAOnGridAndResumed(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	args := []string{"-strategy", "cma", "-problem", "rosenbrock", "-dim", "6", "-lambda", "16", "-seed", "4", "-lu", "20", "-quiet"}
	whole, grid, ckpt, resumed := filepath.Join(dir, "whole.json"), filepath.Join(dir, "grid.json"), filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "resumed.json")
	if code, _, stderr := esrun(t.Context(), append(args, "-gens", "12", "-inprocess", "-report", whole)...); code != 0 {
		t.Fatal(stderr)
	}
	want := readReport(t, whole)
	if want.Config.Mu != 8 || want.Config.Lambda != 16 || len(want.Generations) != 13 || want.Evals != 13*16 {
		t.Fatalf("in-process CMA-ES: μ %d, λ %d, %d generations, %d evaluations", want.Config.Mu, want.Config.Lambda, len(want.Generations), want.Evals)
	}
	if code, _, stderr := esrun(t.Context(), append(args, "-gens", "12", "-local", "3", "-slots", "2", "-report", grid)...); code != 0 {
		t.Fatal(stderr)
	}
	sameTrajectory(t, readReport(t, grid), want)

	if code, _, stderr := esrun(t.Context(), append(args, "-gens", "4", "-checkpoint", ckpt, "-policy", "wq", "-local", "2")...); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := esrun(t.Context(), "-resume", ckpt, "-gens", "12", "-report", resumed, "-inprocess")
	if code != 0 {
		t.Fatal(stderr)
	}
	if !strings.HasPrefix(stdout, "(8/8_W,16)-CMA-ES on rosenbrock") {
		t.Errorf("resumed header: %q", strings.SplitN(stdout, "\n", 2)[0])
	}
	r := readReport(t, resumed)
	if r.Config.StartGen != 5 {
		t.Fatalf("resumed at generation %d, want 5", r.Config.StartGen)
	}
	r.Generations = append(want.Generations[:5:5], r.Generations...)
	sameTrajectory(t, r, want)
}

// A file that is not a checkpoint fails at once, with exit status 1 and a
// message that says so: /dev/zero is not read to the end of memory.
func TestResumeRefusesNonCheckpoints(t *testing.T) {
	dir := t.TempDir()
	zeros := filepath.Join(dir, "zeros")
	if err := os.WriteFile(zeros, make([]byte, 1<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{zeros}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths = append(paths, "/dev/zero")
	}
	for _, p := range paths {
		start := time.Now()
		code, _, stderr := esrun(context.Background(), "-resume", p, "-inprocess", "-checkpoint", filepath.Join(dir, "out.ckpt"))
		if code != 1 || !strings.Contains(stderr, "not an esgrid checkpoint") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("-resume %s: exit %d, stderr %q", p, code, stderr)
		}
		t.Logf("-resume %s failed in %v", p, time.Since(start))
	}
}

// A run given -target, or running CMA-ES, without -gens goes on until the
// target or the budget of 10⁴·n evaluations; when the target is not what
// stopped it, the last line says so.
func TestDefaultStops(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-problem", "sphere", "-dim", "2", "-target", "1e-300"}, "(19980 evaluations, 0 NaN, stop: budget, target 1e-300 not reached,"},
		{[]string{"-problem", "sphere", "-dim", "2", "-target", "1e-8", "-gens", "3"}, "after generation 3 (240 evaluations, 0 NaN, stop: generations, target 1e-08 not reached,"},
		{[]string{"-problem", "sphere", "-dim", "2", "-target", "1e-8", "-max-evals", "100"}, "(100 evaluations, 0 NaN, stop: budget, target 1e-08 not reached,"},
		{[]string{"-strategy", "cma", "-problem", "sphere", "-dim", "2"}, "(19998 evaluations, 0 NaN, stop: budget,"},
		{[]string{"-strategy", "cma", "-problem", "sphere", "-dim", "2", "-target", "1e-8"}, "stop: target,"},
		{[]string{"-strategy", "cma", "-restarts", "ipop", "-problem", "rastrigin", "-dim", "2", "-target", "-1"}, "(19860 evaluations, 0 NaN, stop: budget, target -1 not reached, 6 restarts,"},
	}
	for _, tt := range tests {
		code, stdout, stderr := esrun(context.Background(), append(tt.args, "-inprocess", "-quiet")...)
		if code != 0 || !strings.Contains(stdout, tt.want) {
			t.Errorf("%v: exit %d (%s), %q, want %q", tt.args, code, stderr, stdout, tt.want)
		}
	}
}

// CMA-ES with restarts on the local grid is its in-process run, bit for
// bit, across several restarts; stopped within a later run and resumed
// from its checkpoint, it ends the same.
func TestRestartsOnGridAndResumed(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	args := []string{"-strategy", "cma", "-restarts", "bipop", "-problem", "rastrigin", "-dim", "3", "-seed", "2", "-quiet"}
	whole, grid, ckpt, resumed := filepath.Join(dir, "whole.json"), filepath.Join(dir, "grid.json"), filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "resumed.json")
	if code, _, stderr := esrun(t.Context(), append(args, "-max-evals", "4000", "-inprocess", "-report", whole)...); code != 0 {
		t.Fatal(stderr)
	}
	want := readReport(t, whole)
	if want.Restarts < 3 {
		t.Fatalf("%d restarts in %d evaluations: the comparison proves little", want.Restarts, want.Evals)
	}
	if code, _, stderr := esrun(t.Context(), append(args, "-max-evals", "4000", "-local", "3", "-slots", "2", "-report", grid)...); code != 0 {
		t.Fatal(stderr)
	}
	sameTrajectory(t, readReport(t, grid), want)

	if code, _, stderr := esrun(t.Context(), append(args, "-max-evals", "2500", "-checkpoint", ckpt, "-sched", "wq", "-local", "2")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(t.Context(), "-resume", ckpt, "-max-evals", "4000", "-report", resumed, "-inprocess", "-quiet"); code != 0 {
		t.Fatal(stderr)
	}
	r := readReport(t, resumed)
	if r.Restarts != want.Restarts {
		t.Errorf("resumed: %d restarts, want %d", r.Restarts, want.Restarts)
	}
	r.Generations = append(want.Generations[:r.Config.StartGen:r.Config.StartGen], r.Generations...)
	sameTrajectory(t, r, want)
}
