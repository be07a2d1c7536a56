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
	"strconv"
	"strings"
	"sync"

	"github.com/esgrid/esgrid/es"
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
  esbench -problems sphere,ellipsoid -dims 30
  esbench -strategies paper,cma -seeds 3
  esbench -problems rastrigin,griewank -strategies ipop,bipop -budget 100000 -worst
                                            the restarts with ten times the budget (long)
  esbench -problems sphere -dims 30 -strategies "cma,lambda=70" -worst
                                            the tail of evaluations over the seeds
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
	worst      bool // -worst: a column of the most evaluations a successful run needed
	collapse   bool
	gens       int
	every      int
	problem    string
	dim        int
	seed       uint64
}

// strategy is a named configuration; Dim, box, seed and stop are filled
// in per run.
type strategy struct {
	name string
	cfg  es.Config
}

// maxDim bounds -dim and -dims.
const maxDim = 1000

// paper is the paper's ES: esrun's defaults.
var paper = es.Config{Mu: 30, Lambda: 70}

// recommended is the recommended ES with recombination; README's
// "Recombination" section explains the choice: the paper's λ = 70 and
// plus-selection, μ = 10, and global intermediate recombination of x and σ
// (ρ = μ).
var recommended = es.Config{
	Mu: 10, Lambda: 70,
	Recombination: es.RecombineIntermediate, SigmaRecombination: es.RecombineIntermediate,
}

const recommendedText = "(10/10+70)-ES, intermediate recombination\n               of x and σ over all μ parents (esrun -mu 10 -recombine\n               intermediate -sigma-recombine intermediate)"

var builtinStrategies = map[string]es.Config{
	"paper":       paper,
	"recommended": recommended,
	"cma":         {Strategy: es.StrategyCMA},
	"ipop":        {Strategy: es.StrategyCMA, Restarts: es.RestartIPOP},
	"bipop":       {Strategy: es.StrategyCMA, Restarts: es.RestartBIPOP},
}

func newFlagSet(o *options, probs, strategies *string) *flag.FlagSet {
	fs := flag.NewFlagSet("esbench", flag.ContinueOnError)
	fs.StringVar(probs, "problems", "sphere,ellipsoid,rosenbrock,rastrigin,ridge,ackley,griewank", "comma-separated `NAMES` of the test functions")
	flagx.IntListVar(fs, &o.dims, "dims", []int{10, 30}, 2, maxDim, "comma-separated `DIMS`")
	flagx.IntVar(fs, &o.seeds, "seeds", 10, 1, 1000, "runs per cell, with seeds 1..`N`")
	flagx.FloatVar(fs, &o.target, "target", 1e-8, -math.MaxFloat64, math.MaxFloat64, "a run succeeds once its best fitness is ≤ `F`")
	flagx.IntVar(fs, &o.budget, "budget", 10000, 1, 10_000_000, "evaluation budget of a run, `N` times the dimension")
	fs.StringVar(strategies, "strategies", "paper,recommended,cma,ipop,bipop", "comma-separated strategies: paper, recommended, cma, ipop, bipop, or `SPECS` (see above; separate specs with ';')")
	flagx.IntVar(fs, &o.jobs, "j", runtime.NumCPU(), 1, 1024, "`N` runs at once")
	fs.BoolVar(&o.worst, "worst", false, "add a column per strategy: the most evaluations a run that reached the target needed (the tail the median hides)")
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
			st, err := parseStrategy(s)
			if err != nil {
				return nil, usagef("-strategies: %v", err)
			}
			o.strategies = append(o.strategies, st)
		}
	}
	return o, nil
}

// parseStrategy reads a built-in name or a spec such as
// "es,mu=15,lambda=100,comma,x=intermediate,s=intermediate,rho=15".
func parseStrategy(spec string) (strategy, error) {
	spec = strings.TrimSpace(spec)
	if cfg, ok := builtinStrategies[spec]; ok {
		return strategy{name: spec, cfg: cfg}, nil
	}
	parts := strings.Split(spec, ",")
	var cfg es.Config
	switch parts[0] {
	case "es":
	case "cma":
		cfg.Strategy = es.StrategyCMA
	default:
		return strategy{}, fmt.Errorf("%q is not paper, recommended, cma, ipop, bipop or a spec starting with es or cma", spec)
	}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "mu":
			cfg.Mu, err = strconv.Atoi(v)
		case "lambda":
			cfg.Lambda, err = strconv.Atoi(v)
		case "rho":
			cfg.Rho, err = strconv.Atoi(v)
		case "sigma":
			cfg.InitSigma, err = strconv.ParseFloat(v, 64)
		case "x":
			cfg.Recombination = es.Recombination(v)
		case "s":
			cfg.SigmaRecombination = es.Recombination(v)
		case "comma":
			cfg.Comma = true
		case "restarts":
			cfg.Restarts = es.Restart(v)
		default:
			return strategy{}, fmt.Errorf("%q: unknown setting %q", spec, kv)
		}
		if err != nil {
			return strategy{}, fmt.Errorf("%q: %s: %v", spec, kv, err)
		}
	}
	if cfg.Strategy != es.StrategyCMA && (cfg.Mu == 0 || cfg.Lambda == 0) {
		if cfg.Mu == 0 {
			cfg.Mu = paper.Mu
		}
		if cfg.Lambda == 0 {
			cfg.Lambda = paper.Lambda
		}
	}
	return strategy{name: spec, cfg: cfg}, nil
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
			err = collapse(ctx, o, stdout)
		} else {
			err = benchmark(ctx, o, stdout, stderr)
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

// outcome is one run's result.
type outcome struct {
	evals   int     // evaluations spent
	reached bool    // the target was reached
	best    float64 // best fitness found
}

// job is one run of the table.
type job struct {
	strategy, problem, dim, seed int
}

// configure returns the Config of one run.
func configure(base es.Config, problem string, dim int, seed uint64, stop es.Stop) (es.Config, problems.Problem, error) {
	p, err := problems.New(problem, dim)
	if err != nil {
		return es.Config{}, nil, err
	}
	cfg := base
	cfg.Problem, cfg.Dim, cfg.Seed, cfg.Stop = problem, dim, seed, stop
	cfg.Lower, cfg.Upper = p.Bounds()
	return cfg, p, nil
}

// evaluator evaluates a batch serially, in this goroutine.
func evaluator(p problems.Problem) es.Evaluator {
	return es.EvaluatorFunc(func(ctx context.Context, _ int, xs [][]float64) ([]float64, error) {
		fs := make([]float64, len(xs))
		for i, x := range xs {
			f, err := p.Eval(ctx, x)
			if err != nil {
				return nil, fmt.Errorf("task %d: %w", i, err)
			}
			fs[i] = f
		}
		return fs, nil
	})
}

// runOne runs one configuration to the target or the budget.
func runOne(ctx context.Context, base es.Config, problem string, dim int, seed uint64, target float64, budget int) (outcome, error) {
	t := target
	cfg, p, err := configure(base, problem, dim, seed, es.Stop{Target: &t, MaxEvals: budget})
	if err != nil {
		return outcome{}, err
	}
	e, err := es.New(cfg)
	if err != nil {
		return outcome{}, err
	}
	reason, err := e.Run(ctx, evaluator(p), es.RunOptions{})
	if err != nil {
		return outcome{}, err
	}
	return outcome{evals: e.Evals(), reached: reason == es.StopTarget, best: e.Best().F}, nil
}

// benchmark runs the table and prints it.
func benchmark(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	var jobs []job
	for pi := range o.problems {
		for di := range o.dims {
			for si := range o.strategies {
				for seed := range o.seeds {
					jobs = append(jobs, job{strategy: si, problem: pi, dim: di, seed: seed + 1})
				}
			}
		}
	}
	results := make([]outcome, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.jobs, len(jobs)) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				dim := o.dims[j.dim]
				results[i], errs[i] = runOne(ctx, o.strategies[j.strategy].cfg, o.problems[j.problem], dim, uint64(j.seed), o.target, o.budget*dim)
			}
		})
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for i, err := range errs {
		if err != nil {
			j := jobs[i]
			return fmt.Errorf("%s on %s %d-D seed %d: %w", o.strategies[j.strategy].name, o.problems[j.problem], o.dims[j.dim], j.seed, err)
		}
	}

	fmt.Fprintf(stdout, "Median evaluations to reach f ≤ %g over seeds 1..%d (succeeded/runs), and median best f at the end; budget %d·n evaluations per run.\n", o.target, o.seeds, o.budget)
	for i, s := range o.strategies {
		cfg := s.cfg
		cfg.Dim = 30
		fmt.Fprintf(stdout, "  %-12s %s\n", s.name, describe(cfg))
		_ = i
	}
	fmt.Fprintln(stdout)
	header := []string{"problem", "n"}
	for _, s := range o.strategies {
		header = append(header, s.name+" evals", "ok", "best")
		if o.worst {
			header = append(header, "worst")
		}
	}
	rows := [][]string{header}
	for pi, prob := range o.problems {
		for di, dim := range o.dims {
			row := []string{prob, strconv.Itoa(dim)}
			for si := range o.strategies {
				var cell []outcome
				for i, j := range jobs {
					if j.problem == pi && j.dim == di && j.strategy == si {
						cell = append(cell, results[i])
					}
				}
				med, ok, best := summarise(cell)
				row = append(row, med, ok, best)
				if o.worst {
					row = append(row, worst(cell))
				}
			}
			rows = append(rows, row)
		}
	}
	printTable(stdout, rows)
	return nil
}

// describe names a strategy's settings in the literature's notation.
func describe(cfg es.Config) string {
	if cfg.Strategy == es.StrategyCMA {
		d := "CMA-ES, λ = 4 + ⌊3 ln n⌋ and μ = ⌊λ/2⌋ unless set (" + cfg.Notation() + " at n = 30)"
		switch cfg.Restarts {
		case es.RestartIPOP:
			d += ", IPOP restarts: λ doubled at each"
		case es.RestartBIPOP:
			d += ", BIPOP restarts: large and small populations in turn"
		}
		return d
	}
	d := cfg.Notation()
	if cfg.Recombination != "" || cfg.SigmaRecombination != "" {
		x, s := cfg.Recombination, cfg.SigmaRecombination
		if x == "" {
			x = es.RecombineNone
		}
		if s == "" {
			s = es.RecombineNone
		}
		d += fmt.Sprintf(", recombination of x: %s, of σ: %s", x, s)
	}
	return d
}

// summarise gives a cell: the median evaluations to the target (runs that
// missed it count as infinitely many, so the median is "–" unless more than
// half succeeded), the successes, and the median best fitness.
func summarise(runs []outcome) (median, ok, best string) {
	evals := make([]float64, len(runs))
	bests := make([]float64, len(runs))
	n := 0
	for i, r := range runs {
		evals[i] = float64(r.evals)
		if !r.reached {
			evals[i] = inf
		} else {
			n++
		}
		bests[i] = r.best
	}
	median = "–"
	if m := medianOf(evals); m < inf {
		median = strconv.FormatFloat(m, 'f', 0, 64)
	}
	return median, fmt.Sprintf("%d/%d", n, len(runs)), fmt.Sprintf("%.2g", medianOf(bests))
}

// worst is the most evaluations a run that reached the target needed
// ("–" if none did).
func worst(runs []outcome) string {
	most := -1
	for _, r := range runs {
		if r.reached {
			most = max(most, r.evals)
		}
	}
	if most < 0 {
		return "–"
	}
	return strconv.Itoa(most)
}

const inf = 1e308

// medianOf is the median, the mean of the two middle values for an even
// count (∞ if either is).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.SortFunc(s, func(a, b float64) int {
		switch {
		case a < b || a == a && b != b:
			return -1
		case a > b || a != a && b == b:
			return 1
		}
		return 0
	})
	k := len(s)
	if k == 0 {
		return 0
	}
	if k%2 == 1 {
		return s[k/2]
	}
	a, b := s[k/2-1], s[k/2]
	if a >= inf || b >= inf {
		return inf
	}
	return (a + b) / 2
}

// printTable writes rows as a Markdown table, columns padded.
func printTable(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i < 2 {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	sepRow := make([]string, len(rows[0]))
	for i := range sepRow {
		sepRow[i] = strings.Repeat("-", width[i])
		if i >= 2 {
			sepRow[i] = strings.Repeat("-", width[i]-1) + ":"
		}
	}
	line(sepRow)
	for _, r := range rows[1:] {
		line(r)
	}
}
