package gridtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/worker"
)

// poison is the one x that fails, on every worker and at every try (a
// plugin with a bug on that input): the first x a worker evaluates
// while it serves a child master, so that the task is one a child was
// lent.
type poison struct {
	mu sync.Mutex
	x  []float64
	at string // the worker that chose it
}

// fails says whether x is the poisoned point, choosing it if none is
// yet and the worker named serves a child master.
func (p *poison) fails(x []float64, worker string, atChild bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.x == nil && atChild {
		p.x, p.at = slices.Clone(x), worker
	}
	return p.x != nil && slices.Equal(p.x, x)
}

// poisoned is a problem whose evaluation of the poisoned x fails.
type poisoned struct {
	problems.Problem
	p       *poison
	name    string
	atChild func() bool
}

func (q poisoned) Eval(ctx context.Context, x []float64) (float64, error) {
	if q.p.fails(x, q.name, q.atChild()) {
		return 0, errors.New("poisoned x")
	}
	return q.Problem.Eval(ctx, x)
}

// sessionWatch is a slog handler that notes whether its agent's session
// is with a master other than the root (a child master).
type sessionWatch struct {
	root    string
	atChild *bool
	mu      *sync.Mutex
}

func (h sessionWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h sessionWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "connected to the master" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			h.mu.Lock()
			*h.atChild = a.Value.String() != h.root
			h.mu.Unlock()
		}
		return true
	})
	return nil
}
func (h sessionWatch) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h sessionWatch) WithGroup(string) slog.Handler      { return h }

// TestSplitChildTaskFailureEndsTheRun: a task lent to a child master
// that fails on every worker fails the run with the root's -max-retries,
// naming the task and the failures at the child, and no child is cut off
// on the way. Before, the child allowed 3 retries whatever the root's,
// its failed batch reached no one, and it sat on the task until the root
// cut it off as stalled and ran the task again from no failure.
func TestSplitChildTaskFailureEndsTheRun(t *testing.T) {
	leaktest.Check(t)
	key, err := grid.NewKey("split-test-key-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "rwq", Problem: splitSpec, Logger: quiet, MaxRetries: 1,
		Split: grid.SplitConfig{Rule: grid.SplitPaper, MessageCost: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := new(poison)
	var agents []*agentRun
	for i := range 8 {
		name := fmt.Sprintf("w%d", i)
		var mu sync.Mutex
		atChild := new(bool)
		a, err := worker.New(worker.Config{
			Master: m.Addr(), Key: key, Name: name, Slots: 1, Slowdown: 200,
			Logger:     slog.New(sessionWatch{root: m.Addr(), atChild: atChild, mu: &mu}),
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Build: func(s grid.ProblemSpec) (problems.Problem, error) {
				b, err := worker.BuildProblem(s)
				return poisoned{Problem: b, p: p, name: name, atChild: func() bool { mu.Lock(); defer mu.Unlock(); return *atChild }}, err
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &agentRun{name: name, stop: cancel, done: make(chan struct{})}
		go func() { r.err = a.Run(ctx); close(r.done) }()
		agents = append(agents, r)
	}
	defer func() {
		m.Close()
		for _, a := range agents {
			a.stop()
			<-a.done
		}
	}()
	// Bounds a hang only.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, 8); err != nil {
		t.Fatal(err)
	}
	e, err := es.New(splitES)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(ctx, m, es.RunOptions{})
	st := m.Stats()
	p.mu.Lock()
	at := p.at
	p.mu.Unlock()
	if at == "" {
		t.Skipf("no worker evaluated a task under a child master (%d splits); the run ended with %v", st.Splits, err)
	}
	var rx *grid.RetriesExhaustedError
	if !errors.As(err, &rx) || rx.MaxRetries != 1 || len(rx.Failures) != 2 {
		t.Fatalf("the run ended with %v; want a task failed 2 times (max retries 1)", err)
	}
	for _, f := range rx.Failures {
		if f.Err != "poisoned x" {
			t.Errorf("failure %+v", f)
		}
	}
	if rx.Failures[0].Worker != at {
		t.Errorf("the first failure is %s's, want %s's, under the child: %v", rx.Failures[0].Worker, at, err)
	}
	if st.ChildrenLost != 0 {
		t.Errorf("%d child masters cut off or lost, want none: the failure at the child ends the run", st.ChildrenLost)
	}
	t.Logf("poisoned at %s under a child; the run failed with %v", at, err)
}
