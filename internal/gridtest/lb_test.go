package gridtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// paced is a problem whose evaluations take a pace-dependent time on top
// of their own: a lab PC that runs at the pace its owner leaves it.
type paced struct {
	problems.Problem
	pace func() float64 // how many times unit the evaluation waits
	unit time.Duration
}

func (p paced) Eval(ctx context.Context, x []float64) (float64, error) {
	f, err := p.Problem.Eval(ctx, x)
	if err != nil {
		return f, err
	}
	t := time.NewTimer(time.Duration(p.pace() * float64(p.unit)))
	defer t.Stop()
	select {
	case <-t.C:
		return f, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// TestAgentsLBWhenSpeedsVary: a real grid (master and agents over TCP)
// whose workers change speed from one generation to the next, each in its
// own way (faster after a slow start, alternating, slower again), has in
// every generation of its report an LB no larger than the generation's
// total, and an efficiency against LB of at most 100 %. The bound holds by
// construction, so it is asserted exactly, whatever the machine's load.
// A rate taken over the whole run gave the fast generations an LB above
// their total.
func TestAgentsLBWhenSpeedsVary(t *testing.T) {
	want := inProcess(t)
	// paces[i][g] is worker i's pace in generation g (the last one holds
	// on); its slots are 1 + i%2.
	paces := [][]float64{
		{8, 8, 8, 8, 1},
		{6, 1, 6, 1, 6, 1, 6},
		{8, 8, 8, 8, 2},
		{4, 4, 4, 4, 1, 1, 4},
	}
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			c := newCluster(t, policy)
			var gen atomic.Int32 // the generation being evaluated
			for i, ps := range paces {
				pace := func() float64 { return ps[min(int(gen.Load()), len(ps)-1)] }
				c.addAgent(t, worker.Config{
					Key: c.key, Name: fmt.Sprintf("w%d", i), Slots: 1 + i%2,
					Build: func(spec grid.ProblemSpec) (problems.Problem, error) {
						p, err := worker.BuildProblem(spec)
						return paced{Problem: p, pace: pace, unit: 2 * time.Millisecond}, err
					},
				})
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if err := c.master.WaitWorkers(ctx, len(paces)); err != nil {
				t.Fatal(err)
			}
			got := trajectory(t, c.master, func(s es.Stats) { gen.Store(int32(s.Gen + 1)) })
			compare(t, got, want)
			rep := c.master.Report()
			if len(rep.Generations) != len(want) {
				t.Fatalf("%d generations in the report, want %d", len(rep.Generations), len(want))
			}
			for _, g := range rep.Generations {
				if !g.Complete || g.LB <= 0 || g.LB > g.Total {
					t.Errorf("generation %d: complete %v, LB %v, total %v", g.Index, g.Complete, g.LB, g.Total)
				}
			}
			if rep.LB > rep.Total || rep.EfficiencyLB > 1 {
				t.Errorf("LB %v, total %v: efficiency %v", rep.LB, rep.Total, rep.EfficiencyLB)
			}
		})
	}
}
