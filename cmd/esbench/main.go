// Command esbench measures how well the engine's strategies optimise: the
// paper's (30+70)-ES, the recommended ES with recombination, and CMA-ES, on
// the built-in test functions, over several seeds, and prints a table of
// the median evaluations to reach a target (and the median best fitness
// after the budget). With -collapse it prints instead the step-size
// trajectory that shows why the paper's ES stalls on the sphere.
//
// Fitness is computed in-process, one run per goroutine (-parallel); the runs are
// pure functions of their seeds, so the table is the same on any machine
// with the same floating-point arithmetic, whatever -parallel.
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

	"github.com/esgrid/esgrid/bench"
	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/internal/flagx"
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

By default: sphere, ellipsoid, rosenbrock, rastrigin, ridge, ackley and
griewank in 10 and 30 dimensions, seeds 1..10, target 1e-8, a budget of
10,000·n evaluations per run, for the strategies
  paper        the paper's (30+70)-ES: no recombination, plus-selection
  recommended  the recommended ES: ` + recommendedText + `
  cma          CMA-ES with its default population (λ = 4 + ⌊3 ln n⌋, μ = ⌊λ/2⌋)
  ipop         CMA-ES restarted with λ doubled each time (esrun -restarts ipop)
  bipop        CMA-ES restarted with large and small populations in turn
               (esrun -restarts bipop)
A strategy can also be given as a spec: es or cma followed by settings,
e.g. "es,mu=15,lambda=100,comma,x=intermediate,s=intermediate,rho=15"
or "cma,lambda=50,restarts=ipop" (keys: mu, lambda, rho, x, s, sigma,
comma, restarts).

With -collapse it prints the step-size trajectory of one run instead: the
best fitness and the parents' step sizes every few generations, for the
paper's ES and the recommended one (by default on the 30-D sphere, seed 1,
3,000 generations).

Examples:
  esbench                                   the whole table (a few minutes on 2 cores)
  esbench -problem sphere,ellipsoid -dim 30
  esbench -strategies paper,cma -trials 3
  esbench -problem rastrigin,griewank -strategies ipop,bipop -budget 100000 -worst
                                            the restarts with ten times the budget (long)
  esbench -problem sphere -dim 30 -strategies "cma,lambda=70" -worst
                                            the tail of evaluations over the seeds
  esbench -collapse                         why the paper's ES stalls

Exit status: 0 done, 1 a run failed, 2 a bad command line.
`

// options are the parsed flags.
type options struct {
	problems   []string // -problem
	dims       []int    // -dim
	seeds      int      // -trials: seeds -seed, -seed+1, …
	target     float64
	budget     int // per dimension
	strategies []strategy
	jobs       int
	worst      bool // -worst: a column of the most evaluations a successful run needed
	collapse   bool
	gens       int
	every      int
	problem    string
	dim        int
	seed       uint64
	deprecated []string // notices for the deprecated names given
}

// strategy is a named configuration (bench.Strategy).
type strategy = bench.Strategy

// maxDim bounds -dim and -dims.
const maxDim = 1000

const recommendedText = "(10/10+70)-ES, intermediate recombination\n               of x and σ over all μ parents (esrun -mu 10 -recombine\n               intermediate -sigma-recombine intermediate)"

func newFlagSet(o *options, probs, strategies *string) *flag.FlagSet {
	fs := flag.NewFlagSet("esbench", flag.ContinueOnError)
	fs.StringVar(probs, "problem", "", "the test functions, comma-separated `NAMES` (default "+defaultProblems+"; with -collapse one, default sphere)")
	flagx.IntListVar(fs, &o.dims, "dim", nil, 2, maxDim, "the dimensions, comma-separated `N,...` (default 10,30; with -collapse one, default 30)")
	flagx.IntVar(fs, &o.seeds, "trials", 10, 1, 1000, "runs per cell, with seeds -seed, -seed+1, …: `N` seeds")
	flagx.FloatVar(fs, &o.target, "target", 1e-8, -math.MaxFloat64, math.MaxFloat64, "a run succeeds once its best fitness is ≤ `F`")
	flagx.IntVar(fs, &o.budget, "budget", 10000, 1, 10_000_000, "evaluation budget of a run, `N` times the dimension")
	fs.StringVar(strategies, "strategies", "paper,recommended,cma,ipop,bipop", "comma-separated strategies: paper, recommended, cma, ipop, bipop, or `SPECS` (see above; separate specs with ';')")
	flagx.IntVar(fs, &o.jobs, "parallel", runtime.NumCPU(), 1, 1024, "`N` runs at once (as essim -parallel)")
	fs.BoolVar(&o.worst, "worst", false, "add a column per strategy: the most evaluations a run that reached the target needed (the tail the median hides)")
	fs.BoolVar(&o.collapse, "collapse", false, "print the step-size trajectory of the paper's ES and the recommended one instead")
	flagx.IntVar(fs, &o.gens, "gens", 3000, 1, 1_000_000, "with -collapse: `G` generations to run")
	flagx.IntVar(fs, &o.every, "every", 100, 1, 1_000_000, "with -collapse: print every `G` generations")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "the first `seed` of each cell; with -collapse, the seed")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "problems", "problem")
	flagx.Alias(fs, "dims", "dim")
	flagx.Alias(fs, "seeds", "trials")
	flagx.Alias(fs, "j", "parallel")
	return fs
}

// defaultProblems are the table's test functions.
const defaultProblems = "sphere,ellipsoid,rosenbrock,rastrigin,ridge,ackley,griewank"

func parseOptions(args []string) (*options, error) {
	o := &options{}
	var probs, strategies string
	fs := newFlagSet(o, &probs, &strategies)
	fs.SetOutput(io.Discard)
	err := flagx.Parse(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		if errors.Is(err, flagx.ErrVersion) {
			return &options{deprecated: flagx.Deprecated(fs)}, err
		}
		return nil, usagef("%v", err)
	}
	o.deprecated = flagx.Deprecated(fs)
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case probs == "" && o.collapse:
		probs = "sphere"
	case probs == "":
		probs = defaultProblems
	}
	if o.problems, err = bench.ParseProblems(probs); err != nil {
		return nil, usagef("-problem: %v", err)
	}
	switch {
	case len(o.dims) == 0 && o.collapse:
		o.dims = []int{30}
	case len(o.dims) == 0:
		o.dims = []int{10, 30}
	}
	if o.collapse {
		if len(o.problems) > 1 || len(o.dims) > 1 {
			return nil, usagef("-collapse follows one run: give one -problem and one -dim")
		}
		o.problem, o.dim = o.problems[0], o.dims[0]
	}
	if o.collapse && !set["strategies"] {
		strategies = "paper,recommended"
	}
	if o.strategies, err = bench.ParseStrategies(strategies); err != nil {
		return nil, usagef("-strategies: %v", err)
	}
	// A strategy the engine refuses is a bad command line, not a failed
	// run: say so before any run starts.
	for _, st := range o.strategies {
		for _, dim := range o.dims {
			t := o.target
			stop := es.Stop{Target: &t, MaxEvals: o.budget * dim}
			if o.collapse {
				stop = es.Stop{Generations: o.gens}
			}
			if err := st.Check(o.problems[0], dim, o.seed, stop); err != nil {
				return nil, usagef("-strategies %s: %v", st.Name, err)
			}
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if o != nil {
		for _, n := range o.deprecated {
			fmt.Fprintf(stderr, "esbench: %s\n", n)
		}
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("esbench"))
		return flagx.ExitOK
	}
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
			err = bench.Table(ctx, bench.Config{Problems: o.problems, Dims: o.dims, Seeds: o.seeds, FirstSeed: o.seed, Target: o.target, Budget: o.budget, Strategies: o.strategies, Jobs: o.jobs, Worst: o.worst}, stdout)
		}
	}
	var ue *usageError
	switch {
	case err == nil:
		return flagx.ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esbench: %v (see esbench -h)\n", err)
		return flagx.ExitUsage
	default:
		fmt.Fprintf(stderr, "esbench: %v\n", err)
		return flagx.ExitFailure
	}
}
