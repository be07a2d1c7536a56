package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/esgrid/esgrid/problems"
)

// options are esrun's parsed flags.
type options struct {
	problem    string
	dim        int
	mu, lambda int
	gens       int
	seed       uint64
	comma      bool
	sigma      float64
	target     float64
	maxEvals   int
	lu         int
	loadMS     float64
	slots      int
	checkpoint string
	resume     string
	report     string
	quiet      bool

	set map[string]bool // the flags given on the command line
}

// usageError is a bad command line: esrun prints it on one line and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usageText = `Usage: esrun [flags]

esrun runs a (μ+λ) Evolution Strategy on this machine: by default the
paper's experiment shape, a (30+70)-ES on the 30-dimensional Ridge function
for 100 generations, evaluated by one goroutine per CPU. It prints one line
per generation and a summary.

Examples:
  esrun                                  the default run
  esrun -problem rastrigin -dim 10 -gens 300 -seed 7
  esrun -load-ms 100 -gens 20            add an LU load of about 100 ms per evaluation
  esrun -target 1e-8 -problem sphere -dim 10 -gens 1000
  esrun -checkpoint run.ckpt -report run.json
  esrun -resume run.ckpt -gens 200       continue a run, here up to generation 200

Flags:
`

// newFlagSet declares esrun's flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esrun", flag.ContinueOnError)
	fs.StringVar(&o.problem, "problem", "ridge", "fitness function to minimise: "+strings.Join(problems.Names(), ", "))
	fs.IntVar(&o.dim, "dim", 30, "number of dimensions n")
	fs.IntVar(&o.mu, "mu", 30, "μ, the number of parents")
	fs.IntVar(&o.lambda, "lambda", 70, "λ, the number of offspring per generation (the tasks of a generation)")
	fs.IntVar(&o.gens, "gens", 100, "last generation to run (generation 0 evaluates the μ initial parents); 0 = no limit")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; the same seed gives the same run")
	fs.BoolVar(&o.comma, "comma", false, "use (μ,λ) selection instead of (μ+λ)")
	fs.Float64Var(&o.sigma, "sigma", 0, "initial step size; 0 = a tenth of the box width")
	fs.Float64Var(&o.target, "target", 0, "stop once the best fitness is ≤ this value (unset: no target)")
	fs.IntVar(&o.maxEvals, "max-evals", 0, "evaluation budget: do not start a generation that would exceed it; 0 = none")
	fs.IntVar(&o.lu, "lu", 0, "add an `N`×N LU decomposition to every evaluation; 0 = no load")
	fs.Float64Var(&o.loadMS, "load-ms", 0, "add an LU load sized so one evaluation takes about `MS` milliseconds here (calibrated at start)")
	fs.IntVar(&o.slots, "slots", 0, "run `N` evaluations at once; 0 = one per CPU")
	fs.StringVar(&o.checkpoint, "checkpoint", "", "write the state to `FILE` after every generation")
	fs.StringVar(&o.resume, "resume", "", "continue the run saved in checkpoint `FILE` (and keep checkpointing to it unless -checkpoint is given)")
	fs.StringVar(&o.report, "report", "", "write a JSON report to `FILE`: config, per-generation best, mean and wall time, final best")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the final summary")
	return fs
}

// resumeFixed lists the flags that a checkpoint fixes.
var resumeFixed = []string{"problem", "dim", "mu", "lambda", "seed", "comma", "sigma"}

// parseOptions parses args. -h yields flag.ErrHelp; anything else wrong is a
// *usageError.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	switch {
	case o.lu < 0:
		return nil, usagef("-lu must be ≥ 0, got %d", o.lu)
	case o.loadMS < 0 || o.loadMS > 60_000 || o.loadMS != o.loadMS:
		return nil, usagef("-load-ms must be in [0, 60000], got %v", o.loadMS)
	case o.lu > 0 && o.loadMS > 0:
		return nil, usagef("-lu and -load-ms both set the load; give one")
	case o.slots < 0:
		return nil, usagef("-slots must be ≥ 0, got %d", o.slots)
	}
	if o.resume != "" {
		for _, name := range resumeFixed {
			if o.set[name] {
				return nil, usagef("-%s cannot be given with -resume: the checkpoint fixes it", name)
			}
		}
		if o.checkpoint == "" {
			o.checkpoint = o.resume
		}
	}
	return o, nil
}

// printUsage writes the help text with the flag defaults.
func printUsage(w io.Writer) {
	fs := newFlagSet(&options{})
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
}
