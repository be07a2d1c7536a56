package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// run is esrun without the process: it returns the exit status, 0 on
// success, 1 when the run fails, 2 for a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	if err == nil {
		err = execute(ctx, o, stdout)
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esrun: %v (see esrun -h)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "esrun: %v\n", err)
		return 1
	}
}

// execute sets the run up from o, runs it and reports.
func execute(ctx context.Context, o *options, stdout io.Writer) error {
	eng, prob, err := setup(o)
	if err != nil {
		return err
	}
	loadN, err := loadSize(o)
	if err != nil {
		return err
	}
	prob = problems.WithLoad(prob, loadN)
	ev, slots, closeEv, err := newEvaluator(o, prob)
	if err != nil {
		return err
	}
	defer closeEv()

	rec := newRecorder(eng, o, loadN, slots)
	if !o.quiet {
		rec.progress = stdout
		fmt.Fprintln(stdout, rec.header())
	}
	reason, runErr := eng.Run(ctx, ev, es.RunOptions{Checkpoint: o.checkpoint, OnGeneration: rec.generation})
	rep := rec.finish(eng, reason, runErr)
	if o.report != "" {
		if err := writeReport(o.report, rep); err != nil {
			return errors.Join(runErr, err)
		}
	}
	if runErr != nil {
		if o.checkpoint != "" && eng.Gen() > 0 {
			return fmt.Errorf("%w (continue with -resume %s)", runErr, o.checkpoint)
		}
		return runErr
	}
	fmt.Fprintln(stdout, summary(rep))
	return nil
}

// newEvaluator chooses what evaluates the batches: for now the in-process
// pool. It returns the evaluator, its number of slots and a function that
// releases it.
func newEvaluator(o *options, p problems.Problem) (es.Evaluator, int, func(), error) {
	pool := problems.NewPool(p, o.slots)
	return pool, pool.Slots(), func() {}, nil
}

// setup returns the engine, fresh from the flags or resumed from a
// checkpoint, and the problem it optimises.
func setup(o *options) (*es.Engine, problems.Problem, error) {
	if o.resume != "" {
		return resume(o)
	}
	if !slices.Contains(problems.Names(), o.problem) {
		return nil, nil, usagef("-problem %q is not known (known: %v)", o.problem, problems.Names())
	}
	p, err := problems.New(o.problem, o.dim)
	if err != nil {
		return nil, nil, usagef("-dim %d: %v", o.dim, err)
	}
	lo, hi := p.Bounds()
	cfg := es.Config{
		Problem: o.problem, Mu: o.mu, Lambda: o.lambda, Dim: o.dim,
		Lower: lo, Upper: hi, Seed: o.seed, Comma: o.comma, InitSigma: o.sigma,
		Stop: stopCriteria(o, es.Stop{Generations: o.gens, MaxEvals: o.maxEvals}),
	}
	eng, err := es.New(cfg)
	if err != nil {
		return nil, nil, flagError(err)
	}
	return eng, p, nil
}

// resume restores the engine from o.resume; only the stopping criteria can
// be changed by flags.
func resume(o *options) (*es.Engine, problems.Problem, error) {
	eng, err := es.LoadCheckpoint(o.resume)
	if err != nil {
		return nil, nil, err
	}
	cfg := eng.Config()
	p, err := problems.New(cfg.Problem, cfg.Dim)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", o.resume, err)
	}
	if lo, hi := p.Bounds(); lo != cfg.Lower || hi != cfg.Upper {
		return nil, nil, fmt.Errorf("checkpoint %s: bounds [%v, %v] but %s now has [%v, %v]", o.resume, cfg.Lower, cfg.Upper, cfg.Problem, lo, hi)
	}
	if err := eng.SetStop(stopCriteria(o, cfg.Stop)); err != nil {
		return nil, nil, flagError(err)
	}
	return eng, p, nil
}

// stopCriteria returns base with the stopping flags given on the command
// line applied.
func stopCriteria(o *options, base es.Stop) es.Stop {
	if o.set["gens"] {
		base.Generations = o.gens
	}
	if o.set["max-evals"] {
		base.MaxEvals = o.maxEvals
	}
	if o.set["target"] {
		t := o.target
		base.Target = &t
	}
	return base
}

// flagOfField names the flag behind each es.Config field.
var flagOfField = map[string]string{
	"Mu": "-mu", "Lambda": "-lambda", "Dim": "-dim", "InitSigma": "-sigma",
	"Stop.Generations": "-gens", "Stop.Target": "-target", "Stop.MaxEvals": "-max-evals",
}

// flagError turns an invalid es.Config into a usage error about the flag.
func flagError(err error) error {
	var ce *es.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	if name, ok := flagOfField[ce.Field]; ok {
		return usagef("%s %s", name, ce.Msg)
	}
	return usagef("%v", err)
}

// loadSize returns the LU size of the load: -lu, or calibrated from -load-ms.
func loadSize(o *options) (int, error) {
	if o.loadMS <= 0 {
		return o.lu, nil
	}
	n, err := problems.Calibrate(time.Duration(o.loadMS * float64(time.Millisecond)))
	if err != nil {
		return 0, usagef("-load-ms %v: %v", o.loadMS, err)
	}
	return n, nil
}
