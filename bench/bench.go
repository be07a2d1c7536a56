// Package bench measures how well the engine's strategies optimise: the
// paper's (30+70)-ES, the recommended ES with recombination, CMA-ES or any
// spec, on the built-in test functions over several seeds (Table), and
// the step-size trajectory that shows why the paper's ES stalls on the
// sphere (Collapse). Fitness is computed in-process, serially per run.
package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// Config is a table: every strategy on every problem and dimension, with
// the seeds FirstSeed, FirstSeed+1, … (Seeds of them).
type Config struct {
	Problems   []string
	Dims       []int
	Seeds      int     // runs per cell
	FirstSeed  uint64  // the first seed of each cell; 0 means 1
	Target     float64 // a run succeeds once its best fitness is at most this
	Budget     int     // evaluations of a run, per dimension
	Strategies []Strategy
	Jobs       int  // runs at once
	Worst      bool // a column per strategy: the most evaluations a run that reached the target needed
}

// Strategy is a named configuration; Dim, box, seed and stop are filled
// in per run.
type Strategy struct {
	Name   string
	Config es.Config
}

// Paper is the paper's ES: esrun's defaults.
var Paper = es.Config{Mu: 30, Lambda: 70}

// Recommended is the recommended ES with recombination; docs/optimising.md
// explains the choice: the paper's λ = 70 and
// plus-selection, μ = 10, and global intermediate recombination of x and σ
// (ρ = μ).
var Recommended = es.Config{
	Mu: 10, Lambda: 70,
	Recombination: es.RecombineIntermediate, SigmaRecombination: es.RecombineIntermediate,
}

// Builtin are the strategies known by name: paper, recommended, cma, and
// CMA-ES with IPOP or BIPOP restarts.
var Builtin = map[string]es.Config{
	"paper":       Paper,
	"recommended": Recommended,
	"cma":         {Strategy: es.StrategyCMA},
	"ipop":        {Strategy: es.StrategyCMA, Restarts: es.RestartIPOP},
	"bipop":       {Strategy: es.StrategyCMA, Restarts: es.RestartBIPOP},
}

// ParseStrategy reads a built-in name or a spec such as
// "es,mu=15,lambda=100,comma,x=intermediate,s=intermediate,rho=15".
func ParseStrategy(spec string) (Strategy, error) {
	spec = strings.TrimSpace(spec)
	if cfg, ok := Builtin[spec]; ok {
		return Strategy{Name: spec, Config: cfg}, nil
	}
	parts := strings.Split(spec, ",")
	var cfg es.Config
	switch parts[0] {
	case "es":
	case "cma":
		cfg.Strategy = es.StrategyCMA
	default:
		return Strategy{}, fmt.Errorf("%q is not paper, recommended, cma, ipop, bipop or a spec starting with es or cma", spec)
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
			return Strategy{}, fmt.Errorf("%q: unknown setting %q", spec, kv)
		}
		if err != nil {
			return Strategy{}, fmt.Errorf("%q: %s: %v", spec, kv, err)
		}
	}
	if cfg.Strategy != es.StrategyCMA && (cfg.Mu == 0 || cfg.Lambda == 0) {
		if cfg.Mu == 0 {
			cfg.Mu = Paper.Mu
		}
		if cfg.Lambda == 0 {
			cfg.Lambda = Paper.Lambda
		}
	}
	return Strategy{Name: spec, Config: cfg}, nil
}

// ParseStrategies reads a list of strategies: built-in names separated by
// commas or semicolons, and specs (ParseStrategy, whose settings are
// separated by commas) separated by semicolons.
func ParseStrategies(list string) ([]Strategy, error) {
	var out []Strategy
	for _, piece := range strings.Split(list, ";") {
		piece = strings.TrimSpace(piece)
		names := strings.Split(piece, ",")
		if piece == "es" || strings.HasPrefix(piece, "es,") || strings.HasPrefix(piece, "cma,") {
			names = []string{piece}
		}
		for _, s := range names {
			st, err := ParseStrategy(s)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// ParseProblems reads a comma-separated list of test functions: the
// built-in problems but mandelbrot (which has no optimum to reach).
func ParseProblems(list string) ([]string, error) {
	known := slices.DeleteFunc(problems.Names(), func(s string) bool { return s == "mandelbrot" })
	var out []string
	for _, p := range strings.Split(list, ",") {
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("%q is not a test function (known: %s)", p, strings.Join(known, ", "))
		}
		out = append(out, p)
	}
	return out, nil
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

// seedOf is job j's seed: FirstSeed for the first of a cell's runs.
func (o Config) seedOf(j job) uint64 { return max(o.FirstSeed, 1) + uint64(j.seed-1) }

// Check reports whether the engine accepts s on problem in dim
// dimensions with the given seed and stop, before any run starts.
func (s Strategy) Check(problem string, dim int, seed uint64, stop es.Stop) error {
	cfg, _, err := configure(s.Config, problem, dim, seed, stop)
	if err != nil {
		return err
	}
	return cfg.Validate()
}

// Table runs every strategy on every problem and dimension over the
// seeds, c.Jobs runs at once, and prints the table on stdout: per
// problem and dimension, the median evaluations to reach the target, the
// successes and the median best fitness. The runs are pure functions of
// their seeds: the table is the same whatever c.Jobs.
func Table(ctx context.Context, o Config, stdout io.Writer) error {
	var jobs []job
	for pi := range o.Problems {
		for di := range o.Dims {
			for si := range o.Strategies {
				for seed := range o.Seeds {
					jobs = append(jobs, job{strategy: si, problem: pi, dim: di, seed: seed + 1})
				}
			}
		}
	}
	results := make([]outcome, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.Jobs, len(jobs)) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				dim := o.Dims[j.dim]
				results[i], errs[i] = runOne(ctx, o.Strategies[j.strategy].Config, o.Problems[j.problem], dim, o.seedOf(j), o.Target, o.Budget*dim)
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
			return fmt.Errorf("%s on %s %d-D seed %d: %w", o.Strategies[j.strategy].Name, o.Problems[j.problem], o.Dims[j.dim], o.seedOf(j), err)
		}
	}

	fmt.Fprintf(stdout, "Median evaluations to reach f ≤ %g over seeds %d..%d (succeeded/runs), and median best f at the end; budget %d·n evaluations per run.\n", o.Target, o.seedOf(job{seed: 1}), o.seedOf(job{seed: o.Seeds}), o.Budget)
	for i, s := range o.Strategies {
		cfg := s.Config
		cfg.Dim = 30
		fmt.Fprintf(stdout, "  %-12s %s\n", s.Name, describe(cfg))
		_ = i
	}
	fmt.Fprintln(stdout)
	header := []string{"problem", "n"}
	for _, s := range o.Strategies {
		header = append(header, s.Name+" evals", "ok", "best")
		if o.Worst {
			header = append(header, "worst")
		}
	}
	rows := [][]string{header}
	for pi, prob := range o.Problems {
		for di, dim := range o.Dims {
			row := []string{prob, strconv.Itoa(dim)}
			for si := range o.Strategies {
				var cell []outcome
				for i, j := range jobs {
					if j.problem == pi && j.dim == di && j.strategy == si {
						cell = append(cell, results[i])
					}
				}
				med, ok, best := summarise(cell)
				row = append(row, med, ok, best)
				if o.Worst {
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
