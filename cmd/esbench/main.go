// Command esbench measures how well the engine's strategies optimise: the
// paper's (30+70)-ES, the recommended ES with recombination, and CMA-ES, on
// the built-in test functions, over several seeds, and prints a table of
// the median evaluations to reach a target (and the median best fitness
// after the budget). With -collapse it prints instead the step-size
// trajectory that shows why the paper's ES stalls on the sphere.
//
// Fitness is computed in-process, one run per goroutine (-j); the runs are
// pure functions of their seeds, so the table is the same on any machine
// with the same floating-point arithmetic, whatever -j.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"

	"github.com/esgrid/esgrid/bench"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad flag or flag value: one line on stderr, exit 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usageText = `Usage: esbench [flags]

esbench runs the engine's strategies on the built-in test functions and
prints, per function and dimension, the median number of evaluations to
reach the target over the seeds, how many seeds reached it, and the median
best fitness when the run ended (at the target, or after the budget).

By default: sphere, ellipsoid, rosenbrock, rastrigin, ridge and ackley in
10 and 30 dimensions, seeds 1..10, target 1e-8, a budget of 10,000·n
evaluations per run, for the strategies
  paper        the paper's (30+70)-ES: no recombination, plus-selection
  recommended  the recommended ES: ` + recommendedText + `
  cma          CMA-ES with its default population (λ = 4 + ⌊3 ln n⌋, μ = ⌊λ/2⌋)
A strategy can also be given as a spec: es or cma followed by settings,
e.g. "es,mu=15,lambda=100,comma,x=intermediate,s=intermediate,rho=15"
or "cma,lambda=50" (keys: mu, lambda, rho, x, s, sigma, comma).

With -collapse it prints the step-size trajectory of one run instead: the
best fitness and the parents' step sizes every few generations, for the
paper's ES and the recommended one (by default on the 30-D sphere, seed 1,
3,000 generations).

Examples:
  esbench                                   the whole table (a few minutes on 2 cores)
  esbench -problems sphere,ellipsoid -dims 30
  esbench -strategies paper,cma -seeds 3
  esbench -collapse                         why the paper's ES stalls
`

// options are the parsed flags.
type options struct {
	problems   []string
	dims       []int
	seeds      int
	target     float64
	budget     int // per dimension
	strategies []strategy
	jobs       int
	collapse   bool
	gens       int
	every      int
	problem    string
	dim        int
	seed       uint64
}

// strategy is a named configuration (bench.Strategy).
type strategy = bench.Strategy

// maxDim bounds -dim and -dims.
const maxDim = 1000

const recommendedText = "(10/10+70)-ES, intermediate recombination\n               of x and σ over all μ parents (esrun -mu 10 -recombine\n               intermediate -sigma-recombine intermediate)"

func newFlagSet(o *options, probs, strategies *string) *flag.FlagSet {
	fs := flag.NewFlagSet("esbench", flag.ContinueOnError)
	fs.StringVar(probs, "problems", "sphere,ellipsoid,rosenbrock,rastrigin,ridge,ackley", "comma-separated `NAMES` of the test functions")
	flagx.IntListVar(fs, &o.dims, "dims", []int{10, 30}, 2, maxDim, "comma-separated `DIMS`")
	flagx.IntVar(fs, &o.seeds, "seeds", 10, 1, 1000, "runs per cell, with seeds 1..`N`")
	flagx.FloatVar(fs, &o.target, "target", 1e-8, -math.MaxFloat64, math.MaxFloat64, "a run succeeds once its best fitness is ≤ `F`")
	flagx.IntVar(fs, &o.budget, "budget", 10000, 1, 10_000_000, "evaluation budget of a run, `N` times the dimension")
	fs.StringVar(strategies, "strategies", "paper,recommended,cma", "comma-separated strategies: paper, recommended, cma, or `SPECS` (see above; separate specs with ';')")
	flagx.IntVar(fs, &o.jobs, "j", runtime.NumCPU(), 1, 1024, "`N` runs at once")
	fs.BoolVar(&o.collapse, "collapse", false, "print the step-size trajectory of the paper's ES and the recommended one instead")
	flagx.IntVar(fs, &o.gens, "gens", 3000, 1, 1_000_000, "with -collapse: `G` generations to run")
	flagx.IntVar(fs, &o.every, "every", 100, 1, 1_000_000, "with -collapse: print every `G` generations")
	fs.StringVar(&o.problem, "problem", "sphere", "with -collapse: the test function")
	flagx.IntVar(fs, &o.dim, "dim", 30, 2, maxDim, "with -collapse: the dimension `N`")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "with -collapse: the `seed`")
	return fs
}

func parseOptions(args []string) (*options, error) {
	o := &options{}
	var probs, strategies string
	fs := newFlagSet(o, &probs, &strategies)
	fs.SetOutput(io.Discard)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	known := problems.Names()
	for _, p := range strings.Split(probs, ",") {
		if !slices.Contains(known, p) || p == "mandelbrot" {
			return nil, usagef("-problems: %q is not a test function (known: %s)", p, strings.Join(slices.DeleteFunc(known, func(s string) bool { return s == "mandelbrot" }), ", "))
		}
		o.problems = append(o.problems, p)
	}
	switch {
	case !slices.Contains(known, o.problem) || o.problem == "mandelbrot":
		return nil, usagef("-problem: %q is not a test function", o.problem)
	}
	if o.collapse && !set["strategies"] {
		strategies = "paper,recommended"
	}
	for _, piece := range strings.Split(strategies, ";") {
		piece = strings.TrimSpace(piece)
		names := strings.Split(piece, ",")
		if piece == "es" || strings.HasPrefix(piece, "es,") || strings.HasPrefix(piece, "cma,") {
			names = []string{piece}
		}
		for _, s := range names {
			st, err := bench.ParseStrategy(s)
			if err != nil {
				return nil, usagef("-strategies: %v", err)
			}
			o.strategies = append(o.strategies, st)
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		var a, b string
		fmt.Fprint(stdout, usageText+"\nFlags:\n")
		fs := newFlagSet(&options{}, &a, &b)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	}
	if err == nil {
		if o.collapse {
			err = bench.Collapse(ctx, bench.CollapseConfig{Strategies: o.strategies, Problem: o.problem, Dim: o.dim, Seed: o.seed, Gens: o.gens, Every: o.every}, stdout)
		} else {
			err = bench.Table(ctx, bench.Config{Problems: o.problems, Dims: o.dims, Seeds: o.seeds, Target: o.target, Budget: o.budget, Strategies: o.strategies, Jobs: o.jobs}, stdout)
		}
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esbench: %v (see esbench -h)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "esbench: %v\n", err)
		return 1
	}
}
