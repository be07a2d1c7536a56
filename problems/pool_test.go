package problems_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/problems"
)

// Pool is the in-process es.Evaluator.
var _ es.Evaluator = (*problems.Pool)(nil)

// probe is a Problem that returns x[0] and records how many evaluations
// run at once; it fails on x[0] in fail, panics on x[0] == panicAt, and
// blocks until ctx ends on x[0] == blockAt.
type probe struct {
	running, peak atomic.Int64
	fail          map[float64]bool
	panicAt       float64
	blockAt       float64
}

func (p *probe) Name() string                   { return "probe" }
func (p *probe) Bounds() (lower, upper float64) { return 0, 1000 }
func (p *probe) Eval(ctx context.Context, x []float64) (float64, error) {
	n := p.running.Add(1)
	defer p.running.Add(-1)
	for old := p.peak.Load(); n > old && !p.peak.CompareAndSwap(old, n); old = p.peak.Load() {
	}
	time.Sleep(50 * time.Microsecond) // let other slots overlap
	switch {
	case p.fail[x[0]]:
		return 0, fmt.Errorf("bad %v", x[0])
	case x[0] == p.panicAt:
		panic("kaboom")
	case x[0] == p.blockAt:
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return x[0], nil
}

func batch(n int) [][]float64 {
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	return xs
}

func TestPoolResultsByIndex(t *testing.T) {
	for _, slots := range []int{1, 3, 64} {
		p := &probe{panicAt: -1, blockAt: -1}
		pool := problems.NewPool(p, slots)
		fs, err := pool.Evaluate(context.Background(), 1, batch(40))
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range fs {
			if f != float64(i) {
				t.Fatalf("slots %d: fitness[%d] = %v", slots, i, f)
			}
		}
		if peak := p.peak.Load(); peak > int64(slots) {
			t.Errorf("slots %d: %d evaluations ran at once", slots, peak)
		}
		if p.running.Load() != 0 {
			t.Errorf("slots %d: evaluations still running after Evaluate returned", slots)
		}
	}
	if got := problems.NewPool(&probe{}, 0).Slots(); got != runtime.NumCPU() {
		t.Errorf("default slots = %d, want NumCPU = %d", got, runtime.NumCPU())
	}
	if fs, err := problems.NewPool(&probe{}, 2).Evaluate(context.Background(), 0, nil); err != nil || len(fs) != 0 {
		t.Errorf("empty batch: %v, %v", fs, err)
	}
}

// The error names the lowest failing task, whatever the slots and timing.
func TestPoolErrorNamesTask(t *testing.T) {
	for _, slots := range []int{1, 4, 64} {
		p := &probe{fail: map[float64]bool{5: true, 9: true}, panicAt: -1, blockAt: -1}
		_, err := problems.NewPool(p, slots).Evaluate(context.Background(), 3, batch(20))
		if err == nil || !strings.HasPrefix(err.Error(), "task 5: bad 5") {
			t.Errorf("slots %d: error %v, want task 5's", slots, err)
		}
	}
	p := &probe{panicAt: 7, blockAt: -1}
	_, err := problems.NewPool(p, 2).Evaluate(context.Background(), 0, batch(10))
	if err == nil || !strings.Contains(err.Error(), "task 7") || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panic: error %v, want task 7 panicked", err)
	}
}

func TestPoolCancel(t *testing.T) {
	p := &probe{blockAt: 2, panicAt: -1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := problems.NewPool(p, 2).Evaluate(ctx, 0, batch(50))
		done <- err
	}()
	for p.peak.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Evaluate after cancel = %v", err)
	}
	if p.running.Load() != 0 {
		t.Fatal("evaluations still running after Evaluate returned")
	}
}

// A cancellation that comes after every task has finished loses nothing.
func TestPoolCancelAfterLastTask(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	last := problemFunc(func(x []float64) (float64, error) {
		if n.Add(1) == 8 {
			cancel()
		}
		return x[0], nil
	})
	fs, err := problems.NewPool(last, 1).Evaluate(ctx, 0, batch(8))
	if err != nil || len(fs) != 8 {
		t.Fatalf("Evaluate = %v, %v; want 8 results", fs, err)
	}
}

type problemFunc func(x []float64) (float64, error)

func (f problemFunc) Name() string                                         { return "func" }
func (f problemFunc) Bounds() (lower, upper float64)                       { return 0, 1 }
func (f problemFunc) Eval(_ context.Context, x []float64) (float64, error) { return f(x) }

// hangs is a Problem that returns x[0], except that its first hangs
// evaluations of x[0] == at wait until their context ends.
type hangs struct {
	at     float64
	hangs  int64
	calls  atomic.Int64 // evaluations of at
	onHang func()       // called as an evaluation begins to hang (nil: nothing)
}

func (h *hangs) Name() string                   { return "hangs" }
func (h *hangs) Bounds() (lower, upper float64) { return 0, 1000 }
func (h *hangs) Eval(ctx context.Context, x []float64) (float64, error) {
	if x[0] == h.at && h.calls.Add(1) <= h.hangs {
		if h.onHang != nil {
			h.onHang()
		}
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return x[0], nil
}

// An evaluation past the pool's deadline is cancelled and tried again: a
// retry that answers gives the batch the values it gives without a
// deadline, and an evaluation that times out more than maxRetries times
// fails the batch with an error that names the timeout, not a context's
// (which firstError would put behind the cancellations it causes).
func TestPoolTimeoutRetries(t *testing.T) {
	xs := batch(8)
	h := &hangs{at: 3, hangs: 2}
	got, err := problems.NewPool(h, 2).Limit(time.Millisecond, 2, nil).Evaluate(context.Background(), 0, xs)
	if err != nil || h.calls.Load() != 3 {
		t.Fatalf("two timeouts, two retries allowed: err %v after %d tries of task 3", err, h.calls.Load())
	}
	for i, f := range got {
		if f != float64(i) {
			t.Fatalf("got %v, want the values without a deadline", got)
		}
	}

	h = &hangs{at: 3, hangs: 1 << 40}
	_, err = problems.NewPool(h, 2).Limit(time.Millisecond, 2, nil).Evaluate(context.Background(), 0, xs)
	want := "task 3: failed 3 times (max retries 2): each ran past the task timeout of 1ms; the last: context deadline exceeded"
	if err == nil || err.Error() != want || errors.Is(err, context.DeadlineExceeded) || h.calls.Load() != 3 {
		t.Fatalf("a task that always hangs: err %v after %d tries; want %q", err, h.calls.Load(), want)
	}
	// Its fields say the same to a program (esrun's report).
	var rx *problems.RetriesExhaustedError
	if !errors.As(err, &rx) || rx.Task != 3 || rx.MaxRetries != 2 || rx.Timeout != time.Millisecond ||
		!slices.Equal(rx.Failures, slices.Repeat([]string{"ran past the task timeout of 1ms: context deadline exceeded"}, 3)) {
		t.Fatalf("a task that always hangs: %#v", rx)
	}

	// Without Limit, or with a timeout of 0, no deadline: a cancel from
	// outside ends the hang, once it hangs (not after a time, which a
	// loaded machine may take before it even reaches task 3), and it is
	// not tried again.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h = &hangs{at: 3, hangs: 1, onHang: cancel}
	if _, err = problems.NewPool(h, 2).Limit(0, 2, nil).Evaluate(ctx, 0, xs); !errors.Is(err, context.Canceled) || h.calls.Load() != 1 {
		t.Fatalf("no deadline: err %v after %d tries", err, h.calls.Load())
	}
}

// An evaluation error other than a timeout fails the batch at once, as a
// TaskFailedError that names the generation, the task and the retries,
// for esrun's report; its text is the task's and the error's, as before.
func TestPoolTaskFailedError(t *testing.T) {
	p := &probe{fail: map[float64]bool{5: true}, panicAt: -1, blockAt: -1}
	_, err := problems.NewPool(p, 2).Limit(time.Minute, 2, nil).Evaluate(context.Background(), 3, batch(10))
	var tf *problems.TaskFailedError
	if !errors.As(err, &tf) || tf.Gen != 3 || tf.Task != 5 || tf.MaxRetries != 2 || err.Error() != "task 5: "+tf.Err.Error() {
		t.Fatalf("error %v (%+v), want a TaskFailedError of generation 3, task 5, max retries 2", err, tf)
	}
}
