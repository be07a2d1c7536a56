package gridtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// Overdue instances (issue 25), with the real master and real agents over
// loopback TCP, each agent emulating its fault (worker.Faults). Deadlines
// are short so that instances go overdue within a test's patience, and
// there is no task timeout: only the deadlines can end a hang. Every wait
// is bounded by a context; nothing asserts how long anything took.

// faultGrid is a master and the agents serving it.
type faultGrid struct {
	m     *grid.Master
	key   *grid.Key
	runs  []*agentRun
	build func(grid.ProblemSpec) (problems.Problem, error) // the agents' (default: the spec's)
}

func newFaultGrid(t *testing.T, policy string) *faultGrid {
	t.Helper()
	leaktest.Check(t)
	key, err := grid.NewKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy, Problem: grid.ProblemSpec{Name: "sphere", Dim: 5},
		DeadlineFloor: 50 * time.Millisecond, FirstDeadline: 50 * time.Millisecond,
		TaskTimeout: -1, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &faultGrid{m: m, key: key}
	t.Cleanup(func() {
		m.Close()
		for _, r := range g.runs {
			r.stop()
			<-r.done
		}
	})
	return g
}

// add starts an agent that dials the master, with faults f.
func (g *faultGrid) add(t *testing.T, name string, slots int, f worker.Faults) {
	t.Helper()
	a, err := worker.New(worker.Config{
		Master: g.m.Addr(), Key: g.key, Name: name, Slots: slots, Faults: f, Logger: quiet,
		AbandonGrace: 20 * time.Millisecond, Build: g.build,
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
	g.runs = append(g.runs, r)
}

// evaluate waits for n workers, then evaluates gens batches of tasks
// each, checking every value; a stalled batch fails at the context's
// end.
func (g *faultGrid) evaluate(t *testing.T, n, gens, tasks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := g.m.WaitWorkers(ctx, n); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(25, 1))
	for gen := range gens {
		xs := make([][]float64, tasks)
		for i := range xs {
			xs[i] = []float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
		}
		f, err := g.m.Evaluate(ctx, gen, xs)
		if err != nil {
			t.Fatalf("generation %d (%+v): %v", gen, g.m.Stats(), err)
		}
		for i, x := range xs {
			if want := sphere(x); f[i] != want {
				t.Fatalf("generation %d task %d: %v, want %v", gen, i, f[i], want)
			}
		}
	}
}

// sent is the number of instances the master sent to the worker named
// name, by its ledger.
func (g *faultGrid) sent(t *testing.T, name string) int {
	t.Helper()
	var id sched.WorkerID = -1
	for _, w := range g.m.WorkerStats() {
		if w.Name == name {
			id = w.ID
		}
	}
	for _, w := range g.m.Report().Workers {
		if w.Worker == id {
			return w.Originals + w.Resends + w.Replicas
		}
	}
	t.Fatalf("no worker %s in the ledger", name)
	return 0
}

func sphere(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return s
}

// A silent worker acknowledges the cancels of the tasks it holds; a
// dropped held instance says nothing of its slots, so it stays late and
// costs one deadline in the run, not one in every generation: under wq,
// with one slot, it is sent one task in all. With 64 slots it holds a
// whole batch, which its acknowledgements must not take back from the
// healthy workers.
func TestSilentWorkerAcknowledgingCancels(t *testing.T) {
	for _, policy := range []string{"wq", "rwq", "cyclic"} {
		t.Run(policy+"-1slot", func(t *testing.T) {
			g := newFaultGrid(t, policy)
			g.add(t, "good1", 1, worker.Faults{})
			g.add(t, "good2", 1, worker.Faults{})
			g.add(t, "silent", 1, worker.Faults{Silent: true})
			g.evaluate(t, 3, 6, 6)
			// rwq sends a held task with the running one; cyclic the
			// silent worker's share of the first batch.
			if n, most := g.sent(t, "silent"), map[string]int{"wq": 1, "rwq": 2, "cyclic": 2}[policy]; n < 1 || n > most {
				t.Errorf("the silent worker was sent %d instances over 6 generations, want 1 to %d", n, most)
			}
		})
	}
	for _, policy := range []string{"wq", "rwq"} {
		t.Run(policy+"-64slots", func(t *testing.T) {
			g := newFaultGrid(t, policy)
			g.add(t, "good1", 1, worker.Faults{})
			g.add(t, "good2", 1, worker.Faults{})
			g.add(t, "silent", 64, worker.Faults{Silent: true})
			g.evaluate(t, 3, 2, 30)
		})
	}
}

// A lone worker whose evaluations hang deaf to their cancel: each hang
// costs a deadline (the overdue instance is cancelled and its task sent
// again to the same worker, which abandons the hung evaluation for it),
// never the run, and the worker is never dropped.
func TestLoneWorkerHangingEvaluations(t *testing.T) {
	for _, policy := range sched.Names {
		for _, slots := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s-%dslots", policy, slots), func(t *testing.T) {
				g := newFaultGrid(t, policy)
				g.add(t, "hang", slots, worker.Faults{HangEvery: 5})
				g.evaluate(t, 1, 4, 10)
				if st := g.m.Stats(); st.Overdue == 0 || st.Dropped != 0 {
					t.Errorf("%d overdue, %d dropped; want some and none", st.Overdue, st.Dropped)
				}
			})
		}
	}
}

// longProblem is sphere, but an evaluation whose x[0] is above 0.8 takes
// 300 ms (it stops when cancelled).
type longProblem struct{}

func (longProblem) Name() string                   { return "sphere" }
func (longProblem) Bounds() (lower, upper float64) { return 0, 1 }
func (longProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	if x[0] > 0.8 {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return sphere(x), nil
}

// A task merely longer than the deadline (6 × the 50 ms floor) on a lone
// worker: each overdue instance is cancelled and sent again with its
// deadline doubled, so the task ends rather than being cancelled for
// ever (issue 25's stall had a lone r3q worker late with deadline=1s).
func TestLoneWorkerLongTasksEnd(t *testing.T) {
	for _, policy := range []string{"wq", "r3q"} {
		t.Run(policy, func(t *testing.T) {
			g := newFaultGrid(t, policy)
			g.build = func(grid.ProblemSpec) (problems.Problem, error) { return longProblem{}, nil }
			g.add(t, "w", 2, worker.Faults{})
			g.evaluate(t, 1, 2, 10)
			if st := g.m.Stats(); st.Overdue == 0 || st.Dropped != 0 {
				t.Errorf("%d overdue, %d dropped; want some and none", st.Overdue, st.Dropped)
			}
		})
	}
}
