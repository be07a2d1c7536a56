package problems

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
)

// Pool evaluates a batch of vectors on a Problem with a fixed number of
// goroutines (slots). It is the in-process Evaluator of the ES engine
// (it has es.Evaluator's method) and the reference that grid runs are
// compared against.
type Pool struct {
	p     Problem
	slots int

	// The deadline of one evaluation (Limit); timeout 0: none.
	timeout    time.Duration
	maxRetries int
	log        *slog.Logger
}

// NewPool returns a pool of slots goroutines over p; slots ≤ 0 means
// runtime.NumCPU().
func NewPool(p Problem, slots int) *Pool {
	if slots <= 0 {
		slots = runtime.NumCPU()
	}
	return &Pool{p: p, slots: slots}
}

// Slots returns the number of evaluations the pool runs at once.
func (pl *Pool) Slots() int { return pl.slots }

// Limit gives every evaluation a deadline, as a grid's -task-timeout
// does: an evaluation still running after timeout is cancelled (a
// plugin's process is then killed unless it answers the cancel) and
// counts as failed; it is tried again, up to maxRetries times, and the
// batch fails once it has timed out maxRetries+1 times, naming the
// timeout. An evaluation that ignores the cancel and returns its value
// keeps it: f depends on x alone, so the value is the one a retry would
// give. Only timeouts are retried: any other error fails the batch at
// once, as before. A retry that succeeds gives the value a first try
// would have, so a run's evolution does not depend on its timeouts.
// Each timeout is logged to log (nil: not logged). timeout 0 means no
// deadline. Limit returns pl, and must be called before Evaluate.
func (pl *Pool) Limit(timeout time.Duration, maxRetries int, log *slog.Logger) *Pool {
	pl.timeout, pl.maxRetries, pl.log = max(timeout, 0), max(maxRetries, 0), log
	return pl
}

// Evaluate returns f(xs[i]) for every i. Tasks are handed to the slots in
// index order, but the result does not depend on which slot ran what. The
// first failure cancels the rest; the error returned is the failure of
// the lowest task index ("task 7: ..."), so it does not depend on timing
// either. All goroutines have ended when Evaluate returns.
func (pl *Pool) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	fitness := make([]float64, len(xs))
	errs := make([]error, len(xs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range min(pl.slots, len(xs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(xs) || ctx.Err() != nil {
					return
				}
				if fitness[i], errs[i] = pl.evalLimited(ctx, gen, i, xs[i]); errs[i] != nil {
					cancel()
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		var tf *TaskFailedError
		if errors.As(err, &tf) {
			tf.Gen, tf.MaxRetries = gen, pl.maxRetries
		}
		return nil, err
	}
	if int(done.Load()) < len(xs) {
		// Cancelled from outside before every task was taken.
		return nil, ctx.Err()
	}
	return fitness, nil
}

// errTimedOut is the cause of an evaluation's context at its deadline.
var errTimedOut = errors.New("the evaluation's deadline")

// RetriesExhaustedError is the error of an evaluation that ran past the
// pool's timeout more often than its retries allow (Limit). Its fields
// say so to a program (esrun's report, whose failed_task reads it as it
// reads a grid's), its text to a person; it wraps no context's error.
type RetriesExhaustedError struct {
	Gen, Task  int
	MaxRetries int
	Timeout    time.Duration
	// Failures say how each try ended, in order (MaxRetries+1 of them):
	// "ran past the task timeout of D: " and its error, cut to 300
	// bytes.
	Failures []string
	last     error // the last try's error, whole, for the text
}

// Error says how often the evaluation ran past the timeout, and how the
// last try ended.
func (e *RetriesExhaustedError) Error() string {
	return fmt.Sprintf("failed %d times (max retries %d): each ran past the task timeout of %v; the last: %v", len(e.Failures), e.MaxRetries, e.Timeout, e.last)
}

// TaskFailedError is the error of a batch one of whose evaluations
// failed other than by running past the timeout (Limit): there is no
// other machine to try it on, so the batch fails at once. Its fields say
// so to a program (esrun's report, whose failed_task reads it as it
// reads a RetriesExhaustedError), its text ("task N: " and Err's) to a
// person.
type TaskFailedError struct {
	Gen, Task int
	// MaxRetries is the pool's (Limit): only timeouts use them.
	MaxRetries int
	Err        error
}

// Error names the task and its error.
func (e *TaskFailedError) Error() string { return fmt.Sprintf("task %d: %v", e.Task, e.Err) }

// Unwrap returns the evaluation's error.
func (e *TaskFailedError) Unwrap() error { return e.Err }

// evalLimited runs task i's evaluation within the pool's deadline,
// trying again after each timeout, up to maxRetries times (see Limit).
// Its error never wraps a context's error for a timeout, so that
// firstError reports it before the cancellations it causes.
func (pl *Pool) evalLimited(ctx context.Context, gen, i int, x []float64) (float64, error) {
	if pl.timeout <= 0 {
		return pl.eval(ctx, x)
	}
	var fails []string
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeoutCause(ctx, pl.timeout, errTimedOut)
		f, err := pl.eval(tctx, x)
		timedOut := err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), errTimedOut)
		cancel()
		if !timedOut {
			return f, err
		}
		fails = append(fails, logx.Cut(fmt.Sprintf("ran past the task timeout of %v: %v", pl.timeout, err), logx.MaxErrText))
		if try > pl.maxRetries {
			return 0, &RetriesExhaustedError{Gen: gen, Task: i, MaxRetries: pl.maxRetries, Timeout: pl.timeout, Failures: fails, last: err}
		}
		if pl.log != nil {
			pl.log.Warn("evaluation ran past the task timeout; it is tried again", "gen", gen, "task", i, "timeout", pl.timeout, "failures", try, "max_retries", pl.maxRetries, "err", err)
		}
	}
}

// eval runs one evaluation, turning a panic in the problem into an error
// so that one bad vector does not take the process down.
func (pl *Pool) eval(ctx context.Context, x []float64) (f float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", pl.p.Name(), r)
		}
	}()
	return pl.p.Eval(ctx, x)
}

// firstError returns the lowest-index error that is not a cancellation
// (those are usually caused by another task's failure), else the
// lowest-index error, wrapped with its task index.
func firstError(errs []error) error {
	first := -1
	for i, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			var rx *RetriesExhaustedError
			if errors.As(err, &rx) {
				return fmt.Errorf("task %d: %w", i, err)
			}
			return &TaskFailedError{Task: i, Err: err}
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		return fmt.Errorf("task %d: %w", first, errs[first])
	}
	return nil
}
