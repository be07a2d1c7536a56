package worker

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
)

// depthProblem takes d per evaluation and records the most tasks its
// agent ever had at once, running and held (the remote queue's depth as
// the worker sees it).
type depthProblem struct {
	d     time.Duration
	agent atomic.Pointer[Agent]
	most  atomic.Int64
}

func (*depthProblem) Name() string                   { return "depth" }
func (*depthProblem) Bounds() (lower, upper float64) { return 0, 1 }
func (p *depthProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	if a := p.agent.Load(); a != nil {
		q, r := a.Status()
		for n := int64(q + r); ; {
			m := p.most.Load()
			if n <= m || p.most.CompareAndSwap(m, n) {
				break
			}
		}
	}
	time.Sleep(p.d)
	return x[0], nil
}

// Behind a slow link, fast tasks drain the paper's fixed remote queue (2
// tasks per slot) long before its refill arrives. With the adaptive depth
// the real master measures the worker's round trip and task time from its
// results and keeps more tasks on it; without, the worker never holds more
// than 2 per slot. One worker, so no policy has replicas to cancel and the
// bound is exact.
func TestMasterAdaptiveDepthFromRealResults(t *testing.T) {
	const (
		slots = 1
		delay = 20 * time.Millisecond // each way: a round trip of 40 ms or more
		task  = time.Millisecond
		gens  = 2
		n     = 16 // tasks per generation
	)
	leaktest.Check(t)
	for _, policy := range []string{"rwq", "r3q"} {
		for _, adaptive := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/adaptive=%v", policy, adaptive), func(t *testing.T) {
				t.Parallel()
				key, _ := grid.NewKey(testSecret)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				m, err := grid.NewMaster(ctx, grid.MasterConfig{
					Listen: "127.0.0.1:0", Key: key, Policy: policy, Problem: grid.ProblemSpec{Name: "depth", Dim: 1},
					Sched:  sched.Config{Adaptive: adaptive},
					Logger: logger(io.Discard),
				})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				p := &depthProblem{d: task}
				a, wait := startAgent(t, ctx, Config{
					Master: m.Addr(), Key: key, Name: "far", Slots: slots, Delay: delay, Problems: []string{"depth"},
					Build: func(grid.ProblemSpec) (problems.Problem, error) { return p, nil },
				})
				p.agent.Store(a)
				waitWorker(t, m)
				for g := range gens {
					xs := make([][]float64, n)
					for i := range xs {
						xs[i] = []float64{float64(i)}
					}
					ectx, ecancel := context.WithTimeout(ctx, 2*time.Minute)
					f, err := m.Evaluate(ectx, g, xs)
					ecancel()
					if err != nil {
						t.Fatalf("generation %d: %v", g, err)
					}
					for i := range f {
						if f[i] != float64(i) {
							t.Fatalf("generation %d task %d: %v", g, i, f[i])
						}
					}
				}
				most := p.most.Load()
				if adaptive && most <= 2*slots {
					t.Errorf("adaptive: at most %d tasks on the worker at once, want more than %d", most, 2*slots)
				}
				if !adaptive && most > 2*slots {
					t.Errorf("fixed depth: %d tasks on the worker at once, want at most %d", most, 2*slots)
				}
				t.Logf("most tasks on the worker at once: %d", most)
				m.Close()
				if err := wait(); err != ErrShutdown {
					t.Errorf("Run = %v, want ErrShutdown", err)
				}
			})
		}
	}
}
