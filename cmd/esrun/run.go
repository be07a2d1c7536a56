package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/livepage"
	"github.com/esgrid/esgrid/localgrid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/report"
)

// run is esrun without the process: it returns the exit status, 0 on
// success, 1 when the run fails, 2 for a bad command line.
//
// Stdout carries the run's output: its header, a progress line per
// generation, the schedule and the result. Stderr carries the log. With
// -log-json every line on stderr is a JSON object, the per-generation
// line included (the Info record "generation", instead of the line on
// stdout); only a command line refused before it is read whole stays one
// plain line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The grid logs from its own goroutines while esrun writes its lines:
	// one writer at a time, whatever stdout and stderr are.
	stdout, stderr = &logx.SyncWriter{W: stdout}, &logx.SyncWriter{W: stderr}
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	con := logx.Console{W: stderr, Log: newLogger(false, false, stderr)}
	if o != nil {
		con = logx.Console{W: stderr, Log: newLogger(o.logJSON, o.verbose, stderr), JSON: o.logJSON}
		for _, n := range o.deprecated {
			con.Say(slog.LevelWarn, "esrun: "+n, "deprecated flag", "notice", n)
		}
	}
	switch {
	case errors.Is(err, flagx.ErrVersion):
		fmt.Fprintln(stdout, flagx.Version("esrun"))
		return flagx.ExitOK
	case err == nil && o.genkey != "":
		err = genkey(o.genkey, stdout)
	case err == nil:
		err = execute(ctx, o, stdout, con)
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		con.Say(slog.LevelError, fmt.Sprintf("esrun: %v (see esrun -h)", err), "bad command line (see esrun -h)", "err", err)
		return flagx.ExitUsage
	default:
		con.Say(slog.LevelError, fmt.Sprintf("esrun: %v", err), "the run failed", "err", err)
		return flagx.ExitFailure
	}
}

// execute sets the run up from o, runs it and reports.
func execute(ctx context.Context, o *options, stdout io.Writer, con logx.Console) (err error) {
	if err := checkOutputFiles(o); err != nil {
		return err
	}
	if o.resume == "" {
		// Before anything is allocated: the problem itself may hold a
		// vector of -dim numbers.
		if err := checkMemory(footprint(o, o.mu, o.lambda, o.dim, o.lu, false)); err != nil {
			return err
		}
		if err := checkFrame(o, o.dim); err != nil {
			return err
		}
	}
	eng, prob, err := setup(o)
	if err != nil {
		return err
	}
	defer closeProblem(prob) // a plugin's processes (plugins.go)
	loadN, err := loadSize(o)
	if err != nil {
		return err
	}
	cfg := eng.Config()
	// With restarts λ grows: the largest batch the run can reach decides.
	if err := checkMemory(footprint(o, cfg.Mu, cfg.MaxLambda(), cfg.Dim, loadN, cfg.Strategy == es.StrategyCMA)); err != nil {
		return err
	}
	if err := checkFrame(o, cfg.Dim); err != nil {
		return err
	}
	var (
		ev    es.Evaluator
		slots int
		g     *localGrid
		mon   *livepage.Monitor // -metrics (metrics.go)
	)
	nonFinite := o.nonfinite || plugin.DeclaresNonFinite(prob)
	if o.inprocess {
		p := problems.WithLoad(prob, loadN)
		if !nonFinite {
			p = finiteOnly{p}
		}
		// The grid's -task-timeout and -max-retries bound an evaluation
		// here too: a plugin that never answers is killed, and its
		// evaluation tried again, rather than hang the run.
		pool := problems.NewPool(p, o.slots).Limit(o.taskTimeout, o.maxRetries, con.Log)
		ev, slots = pool, pool.Slots()
	} else {
		mon = newMonitor(o, cfg.Problem)
		spec := grid.ProblemSpec{Name: cfg.Problem, Dim: cfg.Dim, LoadN: loadN, NonFinite: nonFinite}
		if g, err = openGrid(o, spec, con, mon); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, g.close(false)) }()
		defer closeMonitor(mon, o.metricsLinger, con)
		ev, slots = g.master, o.local*o.localSlots()
	}

	rec := newRecorder(eng, o, loadN, slots)
	if g != nil {
		rec.Record().Config.Grid.Listen, rec.Record().Config.Grid.Gossip = g.master.Addr(), g.gossip.Addr()
	}
	if !o.quiet {
		fmt.Fprintln(stdout, rec.Header())
		if o.logJSON {
			rec.Log = con.Log
		} else {
			rec.Out = stdout
		}
	}
	var runErr error
	if g != nil {
		runErr = g.waitWorkers(ctx, o.wantWorkers(), o.remoteExpected(), con)
		rec.Restart()
	}
	reason := es.StopReason("")
	if runErr == nil {
		ro := es.RunOptions{Checkpoint: o.checkpoint, OnGeneration: func(s es.Stats) error {
			err := rec.Generation(s)
			mon.Progress(s, rec.Estimate())
			return err
		}}
		if g != nil {
			// The hosts excluded so far go into every checkpoint
			// (excluded.go); in process the resumed run's stay as they are.
			ro.Notes = func() []es.Note { return notesOf(g.master.Excluded()) }
		}
		reason, runErr = eng.Run(ctx, ev, ro)
		runErr = tooManyExcluded(runErr) // excluded.go
	}
	rep := rec.Finish(eng, reason, runErr)
	if g != nil {
		// Closed now, so that the ledger has seen the end of the run and
		// every worker is told the run is over before the report is made.
		// A run that did not finish tells the workers the master will be
		// back, so that -resume finds them.
		if cerr := g.close(runErr == nil); cerr != nil && runErr == nil {
			runErr = cerr
		}
		rep.Schedule = g.Schedule(rep.Config.StartGen, o.split.rule)
	}
	if runErr != nil {
		// The report of a run that did not end goes beside -report FILE,
		// which keeps whatever it held; the hints name only files that
		// are there.
		var hints []string
		if ckpt := resumableCheckpoint(o, len(rep.Generations) > 0); ckpt != "" && !errors.Is(runErr, es.ErrCheckpointReplaced) {
			hints = append(hints, "continue with -resume "+ckpt)
		}
		if o.report != "" {
			hints = append(hints, report.WritePartial(o.report, rep))
		}
		if len(hints) > 0 {
			return fmt.Errorf("%w (%s)", runErr, strings.Join(hints, "; "))
		}
		return runErr
	}
	if o.report != "" {
		if err := report.Write(o.report, rep); err != nil {
			return err
		}
	}
	if !o.quiet && rep.Schedule != nil {
		fmt.Fprint(stdout, rep.Schedule.Summary())
	}
	fmt.Fprintln(stdout, rep.Summary())
	return nil
}

// newRecorder follows eng's run, evaluated as o says, with loadN and
// slots as measured.
func newRecorder(eng *es.Engine, o *options, loadN, slots int) *report.Recorder {
	c := report.RecordConfig{LoadN: loadN, LoadMS: o.loadMS, Slots: slots, Evaluator: "inprocess", ResumedFrom: o.resume}
	if !o.inprocess {
		c.Evaluator = "grid"
		c.Grid = &report.GridConfig{
			Sched: o.sched, Adaptive: o.adaptive, Local: o.local, LocalSlots: o.localSlots(), MinWorkers: o.wantWorkers(),
			Listen: o.listen, Gossip: o.gossip,
		}
	}
	return report.NewRecorder(eng, c)
}

// genkey writes a fresh cluster key to path (esrun -genkey).
func genkey(path string, stdout io.Writer) error {
	if err := grid.WriteKeyFile(path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "esrun: wrote a new cluster key to %s (readable by you only); copy it to every machine of the grid and give it with -key-file %s\n", path, path)
	return nil
}

// openGrid starts the run's grid and tells the user where it listens, and
// how remote workers join when they can.
func openGrid(o *options, spec grid.ProblemSpec, con logx.Console, mon *livepage.Monitor) (*localGrid, error) {
	k, err := loadClusterKey(o)
	if err != nil {
		return nil, err
	}
	g, err := startGrid(o, spec, k.key, con.Log, mon.OnGeneration(), mon.OnInstance())
	if err != nil {
		return nil, err
	}
	if err := startMonitor(mon, o, g, spec.Name, con); err != nil {
		g.close(false)
		return nil, err
	}
	remote := o.remoteExpected() || !isLoopback(o.gossip)
	if remote && k.secret != "" {
		if g.keyFile, err = localgrid.SaveRunKey(k.secret); err != nil {
			g.close(false)
			return nil, err
		}
		k.workerArg = "-key-file " + g.keyFile
	}
	g.hint = g.joinCommand(k) + pluginHint(o, spec.Name)
	con.Say(slog.LevelInfo, fmt.Sprintf("esrun: listening data=%s gossip=%s", g.master.Addr(), g.gossip.Addr()),
		"listening", "addr", g.master.Addr(), "gossip", g.gossip.Addr())
	if g.keyFile != "" {
		const why = "no cluster key given (-key, -key-file or " + grid.KeyEnv + "); made one for this run"
		con.Say(slog.LevelInfo, fmt.Sprintf("esrun: %s in %s (readable by you only; removed when the run ends): copy it to the workers' machines", why, g.keyFile),
			why+": copy it to the workers' machines", "key_file", g.keyFile)
	}
	if remote && !o.remoteExpected() {
		// Not waited for, but welcome: say how to join.
		con.Say(slog.LevelInfo, "esrun: remote workers can join with: "+g.hint, "remote workers can join", "command", g.hint)
	}
	return g, nil
}

// newLogger is the run's logger on stderr: text, or JSON with -log-json
// (internal/logx); at the default level one line per worker joining or
// leaving, per refused connection (rate-limited) and per warning, none
// per task; with -v the debug detail too.
func newLogger(json, verbose bool, stderr io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return logx.New(stderr, json, level)
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
	p, err := openProblem(o) // plugins.go: a built-in, else a -plugin (which may set o.dim)
	if err != nil {
		return nil, nil, err
	}
	lo, hi := p.Bounds()
	var restarts es.Restart
	if o.strategy == string(es.StrategyCMA) {
		restarts = es.Restart(o.restarts)
	}
	cfg := es.Config{
		Problem: o.problem, Mu: o.mu, Lambda: o.lambda, Dim: o.dim,
		Lower: lo, Upper: hi, Seed: o.seed, Comma: o.comma, InitSigma: o.sigma,
		Strategy: es.Strategy(o.strategy), Recombination: es.Recombination(o.recombine),
		SigmaRecombination: es.Recombination(o.sigmaRecom), Rho: o.rho, Restarts: restarts,
		Stop: stopCriteria(o, freshStop(o)),
	}
	eng, err := es.New(cfg)
	if err != nil {
		closeProblem(p)
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
	p, err := newProblem(o, cfg.Problem, cfg.Dim) // plugins.go
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", o.resume, err)
	}
	if lo, hi := p.Bounds(); lo != cfg.Lower || hi != cfg.Upper {
		closeProblem(p)
		return nil, nil, fmt.Errorf("checkpoint %s: bounds [%v, %v] but %s now has [%v, %v]", o.resume, cfg.Lower, cfg.Upper, cfg.Problem, lo, hi)
	}
	if err := eng.SetStop(stopCriteria(o, cfg.Stop)); err != nil {
		closeProblem(p)
		return nil, nil, flagError(err)
	}
	if o.excluded, err = exclusionsOf(eng.Notes()); err != nil { // excluded.go
		closeProblem(p)
		return nil, nil, fmt.Errorf("checkpoint %s: %w", o.resume, err)
	}
	return eng, p, nil
}

// freshStop is the stopping criteria of a new run before the flags are
// applied: 100 generations, or with -target or -strategy cma and no -gens
// none but the default budget (es.DefaultBudget).
func freshStop(o *options) es.Stop {
	if o.set["gens"] || !o.set["target"] && o.strategy != string(es.StrategyCMA) {
		return es.Stop{Generations: o.gens}
	}
	return es.Stop{MaxEvals: es.DefaultBudget(o.dim, o.mu, o.lambda)}
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
	"Strategy": "-strategy", "Comma": "-comma", "Recombination": "-recombine",
	"SigmaRecombination": "-sigma-recombine", "Rho": "-rho", "Restarts": "-restarts",
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
