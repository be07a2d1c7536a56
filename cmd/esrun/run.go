package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
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
		err = execute(ctx, o, stdout, stderr)
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
func execute(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	eng, prob, err := setup(o)
	if err != nil {
		return err
	}
	loadN, err := loadSize(o)
	if err != nil {
		return err
	}
	var (
		ev    es.Evaluator
		slots int
		g     *localGrid
	)
	if o.inprocess {
		pool := problems.NewPool(problems.WithLoad(prob, loadN), o.slots)
		ev, slots = pool, pool.Slots()
	} else {
		cfg := eng.Config()
		if g, err = openGrid(o, grid.ProblemSpec{Name: cfg.Problem, Dim: cfg.Dim, LoadN: loadN}, stderr); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, g.close()) }()
		ev, slots = g.master, o.local*o.localSlots()
	}

	rec := newRecorder(eng, o, loadN, slots)
	if g != nil {
		rec.rep.Config.Grid.Listen, rec.rep.Config.Grid.Gossip = g.master.Addr(), g.gossip.Addr()
	}
	if !o.quiet {
		rec.progress = stdout
		fmt.Fprintln(stdout, rec.header())
	}
	var runErr error
	if g != nil {
		runErr = g.waitWorkers(ctx, o.wantWorkers(), o.remoteExpected(), stderr)
		rec.restart()
	}
	reason := es.StopReason("")
	if runErr == nil {
		reason, runErr = eng.Run(ctx, ev, es.RunOptions{Checkpoint: o.checkpoint, OnGeneration: rec.generation})
	}
	rep := rec.finish(eng, reason, runErr)
	if g != nil {
		// Closed now, so that the ledger has seen the end of the run and
		// every worker is told the run is over before the report is made.
		if cerr := g.close(); cerr != nil && runErr == nil {
			runErr = cerr
		}
		rep.Schedule = newScheduleRecord(g.master.Policy(), g.master.Report(), g.master.Stats(), rep.Config.StartGen)
	}
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
	if !o.quiet && rep.Schedule != nil {
		fmt.Fprint(stdout, rep.Schedule.summary())
	}
	fmt.Fprintln(stdout, summary(rep))
	return nil
}

// openGrid starts the run's grid and tells the user where it listens, and
// how remote workers join when they can.
func openGrid(o *options, spec grid.ProblemSpec, stderr io.Writer) (*localGrid, error) {
	k, err := loadClusterKey(o)
	if err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	g, err := startGrid(o, spec, k.key, log)
	if err != nil {
		return nil, err
	}
	g.hint = g.joinCommand(k)
	fmt.Fprintf(stderr, "esrun: listening data=%s gossip=%s\n", g.master.Addr(), g.gossip.Addr())
	remote := o.remoteExpected() || !isLoopback(o.gossip)
	if remote && k.secret != "" {
		fmt.Fprintf(stderr, "esrun: no cluster key given (-key, -key-file or %s); made one for this run: %s\n", grid.KeyEnv, k.secret)
	}
	if remote && !o.remoteExpected() {
		// Not waited for, but welcome: say how to join.
		fmt.Fprintf(stderr, "esrun: remote workers can join with: %s\n", g.hint)
	}
	return g, nil
}

// isLoopback says the host of addr is a loopback address, so that no
// other machine can reach it.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
