package gridtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/worker"
)

// splitES has enough tasks per generation for a master to split in it.
var splitES = es.Config{
	Problem: "rastrigin", Mu: 10, Lambda: 240, Dim: 8, Lower: -5.12, Upper: 5.12, Seed: 11,
	Stop: es.Stop{Generations: 4},
}

var splitSpec = grid.ProblemSpec{Name: "rastrigin", Dim: 8}

func splitTrajectory(t *testing.T, ev es.Evaluator, onGen func(es.Stats)) []es.Stats {
	t.Helper()
	e, err := es.New(splitES)
	if err != nil {
		t.Fatal(err)
	}
	var out []es.Stats
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := e.Run(ctx, ev, es.RunOptions{OnGeneration: func(s es.Stats) error {
		out = append(out, s)
		if onGen != nil {
			onGen(s)
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	return out
}

// splitCluster is a slow master (an emulated cost per message) with
// one-slot agents that dial it directly.
type splitCluster struct {
	master *grid.Master
	key    *grid.Key
	agents []*agentRun
}

func newSplitCluster(t *testing.T, rule grid.SplitRule, workers int, cost time.Duration) *splitCluster {
	t.Helper()
	key, err := grid.NewKey("split-test-key-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "rwq", Problem: splitSpec, Logger: quiet,
		Split: grid.SplitConfig{Rule: rule, MessageCost: cost},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &splitCluster{master: m, key: key}
	for i := range workers {
		c.add(t, fmt.Sprintf("w%d", i))
	}
	t.Cleanup(func() {
		m.Close()
		for _, a := range c.agents {
			select {
			case <-a.done:
			case <-time.After(time.Minute):
				t.Errorf("worker %s did not stop after the master's shutdown", a.name)
			}
			a.stop()
			<-a.done
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, workers); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *splitCluster) add(t *testing.T, name string) *agentRun {
	a, err := worker.New(worker.Config{
		Master: c.master.Addr(), Key: c.key, Name: name, Slots: 1, Slowdown: 200, Logger: quiet,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &agentRun{name: name, stop: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	c.agents = append(c.agents, r)
	return r
}

func splitInProcess(t *testing.T) []es.Stats {
	p, err := worker.BuildProblem(splitSpec)
	if err != nil {
		t.Fatal(err)
	}
	return splitTrajectory(t, problems.NewPool(p, 2), nil)
}

// TestSplitTrajectoryEqualsInProcess: an overloaded master splits, its
// children compute shares of each generation and return, and the ES
// trajectory is the in-process one, bit for bit.
func TestSplitTrajectoryEqualsInProcess(t *testing.T) {
	leaktest.Check(t)
	want := splitInProcess(t)
	c := newSplitCluster(t, grid.SplitPaper, 8, time.Millisecond)
	got := splitTrajectory(t, c.master, nil)
	compare(t, got, want)
	st := c.master.Stats()
	t.Logf("splits %d, masters max %d, lent %d, from children %d, requests %d grants %d refusals %d, overload mean %.2f (n=%d)",
		st.Splits, st.MastersMax, st.Lent, st.FromChildren, st.Requests, st.Grants, st.Refusals, st.OverloadMean, st.OverloadWindow)
	if st.Splits == 0 || st.MastersMax < 2 || st.FromChildren == 0 {
		t.Errorf("the master never split: %+v", st.SplitStats)
	}
	checkRunCounts(t, c.master, got)
	// As esrun does after the run (before the test's context ends and
	// takes the agents with it).
	c.master.Close()
}

// childReady is a slog handler that calls stop, once, with the name of
// the first child master its master hears is ready. It runs on the
// master's loop, as the master takes the child's hello.
type childReady struct {
	once *sync.Once
	stop func(child string)
}

func (h childReady) Enabled(context.Context, slog.Level) bool { return true }
func (h childReady) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "child master ready") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "child" {
				h.once.Do(func() { h.stop(a.Value.String()) })
			}
			return true
		})
	}
	return nil
}
func (h childReady) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h childReady) WithGroup(string) slog.Handler      { return h }

// TestSplitChildKilledMidGeneration: the agent running a child master is
// stopped at once while the child has tasks; the parent takes them back,
// the child's workers find the parent again, and the trajectory is the
// in-process one.
func TestSplitChildKilledMidGeneration(t *testing.T) {
	leaktest.Check(t)
	want := splitInProcess(t)
	key, err := grid.NewKey("split-test-key-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	// The child's agent is stopped as the master takes its hello (on the
	// master's loop): the child holds every task lent to it, and its
	// workers, only now told to move to it, have run none, however late a
	// loaded machine runs the test. Stopped by a goroutine 20 ms after the
	// promotion, as before, a child had returned its share when that
	// goroutine ran 300 ms late, and none was lost.
	var c *splitCluster
	killed := make(chan string, 1)
	ready := childReady{once: new(sync.Once), stop: func(child string) {
		for _, a := range c.agents {
			if a.name == child {
				a.stop()
			}
		}
		killed <- child
	}}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "rwq", Problem: splitSpec, Logger: slog.New(ready),
		Split: grid.SplitConfig{Rule: grid.SplitPaper, MessageCost: time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	c = &splitCluster{master: m, key: key}
	for i := range 8 {
		c.add(t, fmt.Sprintf("w%d", i))
	}
	t.Cleanup(func() {
		m.Close()
		for _, a := range c.agents {
			a.stop()
			<-a.done
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, 8); err != nil {
		t.Fatal(err)
	}
	got := splitTrajectory(t, m, nil)
	compare(t, got, want)
	defer m.Close()
	select {
	case name := <-killed:
		checkRunCounts(t, m, got)
		st := m.Stats()
		t.Logf("killed the child master on %s; children lost %d, given back %d, splits %d", name, st.ChildrenLost, st.GivenBack, st.Splits)
		if st.ChildrenLost == 0 {
			t.Errorf("no child was lost: %+v", st.SplitStats)
		}
	default:
		t.Fatal("no child master was ready")
	}
}

// checkRunCounts: a run whose masters split counts as one that did not
// (the children's counts reach the root): each task of each generation
// one original, every instance sent one original, resend or replica.
func checkRunCounts(t *testing.T, m *grid.Master, traj []es.Stats) {
	t.Helper()
	rep, st := m.Report(), m.Stats()
	evals := traj[len(traj)-1].Evals
	c := rep.Counts
	t.Logf("%d evaluations: %d originals, %d resends, %d replicas; %d sent, %d from children", evals, c.Originals, c.Resends, c.Replicas, st.TasksSent, st.FromChildren)
	if c.Originals != evals {
		t.Errorf("%d originals for %d evaluations", c.Originals, evals)
	}
	if st.TasksSent != int64(c.Originals+c.Resends+c.Replicas) {
		t.Errorf("%d instances sent, counted %d originals + %d resends + %d replicas", st.TasksSent, c.Originals, c.Resends, c.Replicas)
	}
	sum := 0
	for _, g := range rep.Generations {
		sum += g.Originals
		if g.Originals != g.Tasks {
			t.Errorf("generation %d: %d originals for %d tasks", g.Index, g.Originals, g.Tasks)
		}
	}
	if sum != c.Originals {
		t.Errorf("the generations count %d originals, the run %d", sum, c.Originals)
	}
}
