package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
)

// deafProblem's first evaluation hangs, deaf to its cancel, until release
// closes; every later one returns 10 x[0] at once.
type deafProblem struct {
	first   chan struct{} // closed once the first evaluation has started
	release chan struct{}
	calls   chan struct{} // capacity 1: taken by the first call
}

func newDeafProblem() *deafProblem {
	p := &deafProblem{first: make(chan struct{}), release: make(chan struct{}), calls: make(chan struct{}, 1)}
	p.calls <- struct{}{}
	return p
}

func (p *deafProblem) Name() string                   { return "deaf" }
func (p *deafProblem) Bounds() (lower, upper float64) { return 0, 100 }
func (p *deafProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	select {
	case <-p.calls:
		close(p.first)
		<-p.release // deaf to ctx on purpose
		return -1, nil
	default:
		return 10 * x[0], nil
	}
}

// Issue 25: a master with no other worker open sends an overdue task
// again to the worker whose instance it cancelled. The agent takes it as
// a fresh instance: the cancelled one, deaf to its cancel, is abandoned
// at once (acknowledged as stopped), not after AbandonGrace, and the new
// one runs on the slot it held; its result is the only one.
func TestAgentTaskSentAgainReplacesItsCancelledInstance(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "deaf", Dim: 1})
	p := newDeafProblem()
	var once sync.Once
	release := func() { once.Do(func() { close(p.release) }) }
	t.Cleanup(release) // registered after leaktest's check: it runs first
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{
		Master: fm.addr(), Key: key, Name: "w1", Slots: 1, Problems: []string{"deaf"},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		AbandonGrace: time.Hour, // only the task sent again may free the slot
		Build:        func(grid.ProblemSpec) (problems.Problem, error) { return p, nil },
	}
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()

	mc.c.Send(tasks(1, 3))
	select {
	case <-p.first:
	case <-time.After(time.Minute):
		t.Fatal("the task never started")
	}
	mc.c.Send(&grid.Cancel{Gen: 1, IDs: []int32{3}})
	mc.c.Send(tasks(1, 3))
	var stopped, result bool
	for !stopped || !result {
		rs := receive[*grid.Results](t, mc)
		for _, r := range rs.Items {
			switch {
			case r.ID == 3 && r.Cancelled && r.Ack == grid.AckStopped && !stopped && !result:
				stopped = true
			case r.ID == 3 && !r.Cancelled && r.Err == "" && r.F == 30 && stopped && !result:
				result = true
			default:
				t.Fatalf("unexpected result %+v (stopped %v, result %v)", r, stopped, result)
			}
		}
	}
	release() // the abandoned evaluation returns; its value is dropped
	mc.c.Send(&grid.Shutdown{Reason: "done"})
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v, want ErrShutdown", err)
	}
	for {
		select {
		case m := <-mc.msgs:
			if rs, ok := m.(*grid.Results); ok && len(rs.Items) > 0 {
				t.Errorf("results after the new instance's: %+v", rs.Items)
			}
		default:
			return
		}
	}
}
