package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/problems"
)

// Number is a float64 that JSON writes as null when it is NaN or infinite,
// which encoding/json cannot represent.
type Number float64

// MarshalJSON writes n, or null.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// Record is the -report file, as a run writes it (Report is what Read
// reads of it).
type Record struct {
	Config      RecordConfig `json:"config"`
	Generations []GenRecord  `json:"generations"`
	// Stop is why the run ended; empty when it failed or was interrupted,
	// and Error says why.
	Stop  string `json:"stop"`
	Error string `json:"error,omitempty"`
	// FailedTask, when the run failed because a task failed more often
	// than -max-retries allows (or, in process, failed other than by a
	// timeout), says which and how, for a program to read (Error says it
	// to a person).
	FailedTask *FailedTask `json:"failed_task,omitempty"`
	Best       BestRecord  `json:"best"`
	Evals      int         `json:"evals"`
	NaNs       int         `json:"nans"`
	// Restarts counts CMA-ES's restarts (with -restarts).
	Restarts    int     `json:"restarts,omitempty"`
	WallSeconds float64 `json:"wall_seconds"`
	// Schedule is the grid's time accounting; absent with -inprocess.
	Schedule *Schedule `json:"schedule,omitempty"`
}

// FailedTask is the task whose failures exhausted its retries
// (grid.RetriesExhaustedError, or an in-process run's
// problems.RetriesExhaustedError), or whose in-process evaluation failed
// other than by a timeout, which is not retried
// (problems.TaskFailedError): its generation, its index there, the
// retries allowed, and each failure in the order they came.
type FailedTask struct {
	Gen        int           `json:"gen"`
	Task       int           `json:"task"`
	MaxRetries int           `json:"max_retries"`
	Failures   []TaskFailure `json:"failures"`
}

// TaskFailure is one failed evaluation: the worker's name and its error.
type TaskFailure struct {
	Worker string `json:"worker"`
	Error  string `json:"error"`
}

// InProcessWorker is the worker a failure of an in-process run's
// evaluation is put down to: there is none, and the pool is the
// evaluator the report's config calls so.
const InProcessWorker = "inprocess"

// failedTask is err's FailedTask, nil unless err is, or wraps, a
// *grid.RetriesExhaustedError, a *problems.RetriesExhaustedError or a
// *problems.TaskFailedError.
func failedTask(err error) *FailedTask {
	var px *problems.RetriesExhaustedError
	if errors.As(err, &px) {
		// An in-process run's (-inprocess): its every failure a timeout.
		ft := &FailedTask{Gen: px.Gen, Task: px.Task, MaxRetries: px.MaxRetries, Failures: make([]TaskFailure, len(px.Failures))}
		for i, f := range px.Failures {
			ft.Failures[i] = TaskFailure{Worker: InProcessWorker, Error: f}
		}
		return ft
	}
	var tf *problems.TaskFailedError
	if errors.As(err, &tf) {
		// An in-process run's evaluation error, not retried: its one
		// failure, cut as a grid cuts a worker's error.
		return &FailedTask{Gen: tf.Gen, Task: tf.Task, MaxRetries: tf.MaxRetries,
			Failures: []TaskFailure{{Worker: InProcessWorker, Error: logx.Cut(tf.Err.Error(), logx.MaxErrText)}}}
	}
	var rx *grid.RetriesExhaustedError
	if !errors.As(err, &rx) {
		return nil
	}
	ft := &FailedTask{Gen: rx.Gen, Task: rx.Task, MaxRetries: rx.MaxRetries, Failures: make([]TaskFailure, len(rx.Failures))}
	for i, f := range rx.Failures {
		ft.Failures[i] = TaskFailure{Worker: f.Worker, Error: f.Err}
	}
	return ft
}

// RecordConfig is the ES configuration plus how the run was evaluated.
type RecordConfig struct {
	es.Config
	LoadN  int     `json:"load_n"`            // LU size added per evaluation, 0 = none
	LoadMS float64 `json:"load_ms,omitempty"` // the -load-ms the size was calibrated for
	// Slots is the evaluations this process runs at once: the pool's
	// size, or the local workers' slots together.
	Slots int `json:"slots"`
	// Evaluator is "grid" or "inprocess"; Grid describes the grid.
	Evaluator string      `json:"evaluator"`
	Grid      *GridConfig `json:"grid,omitempty"`
	// ResumedFrom is the checkpoint the run continued, and StartGen the
	// first generation this process ran.
	ResumedFrom string `json:"resumed_from,omitempty"`
	StartGen    int    `json:"start_gen"`
}

// GridConfig is how a grid run was set up.
type GridConfig struct {
	Sched string `json:"sched"`
	// Adaptive: remote queues sized from measurements (-adaptive).
	Adaptive   bool   `json:"adaptive,omitempty"`
	Local      int    `json:"local"`       // worker agents in this process
	LocalSlots int    `json:"local_slots"` // slots of each
	MinWorkers int    `json:"min_workers"` // workers waited for before generation 0
	Listen     string `json:"listen"`      // the data address, as bound
	Gossip     string `json:"gossip"`      // the gossip address, as advertised
}

// GenRecord is one generation: the parents after selection.
type GenRecord struct {
	Gen         int     `json:"gen"`
	Evals       int     `json:"evals"`
	Best        Number  `json:"best"`
	Mean        Number  `json:"mean"`
	BestEver    Number  `json:"best_ever"`
	NaNs        int     `json:"nans"`
	WallSeconds float64 `json:"wall_seconds"` // ask, evaluate, tell and checkpoint
}

// BestRecord is the best individual of the run.
type BestRecord struct {
	F Number    `json:"f"`
	X []float64 `json:"x"`
}

// Recorder follows a run: it writes one line per generation and collects
// the report. The line is the terminal's progress line on stdout, or with
// -log-json the Info record "generation" of the log on stderr.
type Recorder struct {
	// Out receives the text progress lines; nil: none.
	Out io.Writer
	// Log receives the JSON generation records; nil: none.
	Log   *slog.Logger
	est   *Progress
	evals int // evaluations before this generation
	start time.Time
	last  time.Time
	rep   Record
}

// NewRecorder follows eng's run from its current generation; c says how
// it is evaluated (its es.Config and StartGen are taken from eng).
func NewRecorder(eng *es.Engine, c RecordConfig) *Recorder {
	now := time.Now()
	c.Config, c.StartGen = eng.Config(), eng.Gen()
	return &Recorder{est: NewProgress(c.Config), evals: eng.Evals(), start: now, last: now, rep: Record{Config: c, Generations: []GenRecord{}}}
}

// Record is the report so far: complete once Finish has returned it.
func (r *Recorder) Record() *Record { return &r.rep }

// Estimate is the run's rate and time left, as the progress line gives
// them.
func (r *Recorder) Estimate() *Progress { return r.est }

// Restart sets the clocks to now: the run's time starts once its workers
// have joined.
func (r *Recorder) Restart() {
	r.start = time.Now()
	r.last = r.start
}

// Header describes the run in one line.
func (r *Recorder) Header() string {
	c := r.rep.Config
	var b strings.Builder
	b.WriteString(c.Notation())
	if c.Config.Strategy != es.StrategyCMA && c.Rho > 1 {
		fmt.Fprintf(&b, " (recombination: x %s, σ %s)", c.Recombination, c.SigmaRecombination)
	}
	fmt.Fprintf(&b, " on %s, %d-D in [%g, %g], seed %d", c.Problem, c.Dim, c.Lower, c.Upper, c.Seed)
	if c.Stop.Generations > 0 {
		fmt.Fprintf(&b, ", generations %d..%d", c.StartGen, c.Stop.Generations)
	}
	if c.Stop.Target != nil {
		fmt.Fprintf(&b, ", target %g", *c.Stop.Target)
	}
	if c.Stop.MaxEvals > 0 {
		fmt.Fprintf(&b, ", at most %d evaluations", c.Stop.MaxEvals)
	}
	if !r.est.known {
		b.WriteString(" (no last generation: ETA unknown)")
	}
	if g := c.Grid; g != nil {
		fmt.Fprintf(&b, ", grid %s", g.Sched)
		if g.Adaptive {
			b.WriteString(" with adaptive depth")
		}
		b.WriteString(": ")
		if g.Local > 0 {
			fmt.Fprintf(&b, "%s × %s", plural(g.Local, "local worker"), plural(g.LocalSlots, "slot"))
		} else {
			b.WriteString("remote workers only")
		}
		if g.MinWorkers > g.Local {
			fmt.Fprintf(&b, ", waits for %s", plural(g.MinWorkers, "worker"))
		}
	} else {
		fmt.Fprintf(&b, ", in-process pool of %s", plural(c.Slots, "slot"))
	}
	switch {
	case c.LoadN > 0 && c.LoadMS > 0:
		fmt.Fprintf(&b, ", load LU %d×%d (calibrated for %g ms)", c.LoadN, c.LoadN, c.LoadMS)
	case c.LoadN > 0:
		fmt.Fprintf(&b, ", load LU %d×%d", c.LoadN, c.LoadN)
	default:
		b.WriteString(", no load")
	}
	if c.ResumedFrom != "" {
		fmt.Fprintf(&b, ", resumed from %s", c.ResumedFrom)
	}
	return b.String()
}

// Generation is the engine's per-generation callback.
func (r *Recorder) Generation(s es.Stats) error {
	now, start := time.Now(), r.last
	g := GenRecord{
		Gen: s.Gen, Evals: s.Evals, Best: Number(s.Best), Mean: Number(s.Mean),
		BestEver: Number(s.BestEver), NaNs: s.NaNs, WallSeconds: now.Sub(r.last).Seconds(),
	}
	r.last = now
	r.rep.Generations = append(r.rep.Generations, g)
	wall := now.Sub(start)
	r.est.Add(s.Evals-r.evals, wall)
	r.evals = s.Evals
	if r.Out != nil {
		fmt.Fprintln(r.Out, r.est.Line(s, wall))
	}
	if r.Log != nil {
		r.est.Record(r.Log, s, wall)
	}
	return nil
}

// plural is "1 slot", "2 slots".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Finish completes the report from the engine's final state.
func (r *Recorder) Finish(eng *es.Engine, reason es.StopReason, runErr error) *Record {
	best := eng.Best()
	r.rep.Stop = string(reason)
	if runErr != nil {
		r.rep.Error = runErr.Error()
		r.rep.FailedTask = failedTask(runErr)
	}
	r.rep.Best = BestRecord{F: Number(best.F), X: best.X}
	r.rep.Evals, r.rep.NaNs = eng.Evals(), eng.NaNs()
	r.rep.Restarts, _ = eng.Restarts()
	r.rep.WallSeconds = time.Since(r.start).Seconds()
	return &r.rep
}

// Summary is the final line of a run.
func (rep *Record) Summary() string {
	last := rep.Config.StartGen - 1
	if n := len(rep.Generations); n > 0 {
		last = rep.Generations[n-1].Gen
	}
	stop := rep.Stop
	if t := rep.Config.Stop.Target; t != nil && stop != "" && stop != string(es.StopTarget) {
		// Say it: a run given a target may well end by another criterion.
		stop += fmt.Sprintf(", target %g not reached", *t)
	}
	if rep.Config.Restarts == es.RestartIPOP || rep.Config.Restarts == es.RestartBIPOP {
		stop += fmt.Sprintf(", %d restarts", rep.Restarts)
	}
	return fmt.Sprintf("best %.6e after generation %d (%d evaluations, %d NaN, stop: %s, %v)",
		float64(rep.Best.F), last, rep.Evals, rep.NaNs, stop, logx.Round(time.Duration(rep.WallSeconds*float64(time.Second))))
}

// PartialSuffix names the report of a run that failed or was interrupted:
// it is written beside -report FILE, as FILE.partial, so that FILE, if it
// exists, keeps the report of a run that ended.
const PartialSuffix = ".partial"

// WritePartial writes rep, the report of a run that did not end, beside
// path (path+PartialSuffix), leaving path as it was, and returns what to
// tell the user: where the report is, or why it is not there.
func WritePartial(path string, rep *Record) string {
	partial := path + PartialSuffix
	if err := Write(partial, rep); err != nil {
		return err.Error()
	}
	return "partial report in " + partial
}

// Write writes rep as indented JSON to path, whole or not at all
// (atomicfile.Write): to a temporary file in the same directory, synced,
// then renamed over path, mode 0644; through a symbolic link, and never
// over anything but a regular file.
func Write(path string, rep *Record) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := atomicfile.WriteBytes(path, 0o644, append(data, '\n')); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
}
