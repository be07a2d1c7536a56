package gridtest

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/worker"
)

// lyingProblem is a problem whose values are off by one ulp on every
// evaluation: a key holder's worker that returns plausible lies.
type lyingProblem struct{ problems.Problem }

func (p lyingProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	f, err := p.Problem.Eval(ctx, x)
	return math.Nextafter(f, math.Inf(-1)), err
}

// newVerifyCluster is newCluster with the master checking a fraction
// verify of the results on a second worker.
func newVerifyCluster(t *testing.T, policy string, verify float64) *cluster {
	t.Helper()
	key, err := grid.NewKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy, Problem: spec, Logger: quiet, Verify: verify,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{master: m, key: key}
	t.Cleanup(func() {
		m.Close()
		for _, a := range c.agents {
			a.stop()
			<-a.done
		}
	})
	return c
}

// addDirect starts an agent that connects to the master's data address,
// lying or not.
func (c *cluster) addDirect(t *testing.T, name string, slots int, lie bool) {
	t.Helper()
	cfg := worker.Config{
		Master: c.master.Addr(), Key: c.key, Name: name, Slots: slots, Logger: quiet,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}
	if lie {
		cfg.Build = func(s grid.ProblemSpec) (problems.Problem, error) {
			p, err := worker.BuildProblem(s)
			return lyingProblem{p}, err
		}
	}
	a, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // stopped by the cluster's cleanup
	r := &agentRun{name: name, stop: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	c.agents = append(c.agents, r)
}

// The invariant, with a liar among the workers: under -verify 1 the
// trajectory is the in-process one, bit for bit, and the liar is
// excluded; without -verify the liar's values change the run.
func TestVerifyTrajectoryEqualsInProcessDespiteLiar(t *testing.T) {
	want := inProcess(t)
	for _, policy := range []string{"wq", "r3q"} {
		t.Run(policy, func(t *testing.T) {
			c := newVerifyCluster(t, policy, 1)
			c.addDirect(t, "liar", 2, true)
			for i := range 3 {
				c.addDirect(t, fmt.Sprintf("honest%d", i), 1, false)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if err := c.master.WaitWorkers(ctx, 4); err != nil {
				t.Fatal(err)
			}
			got := trajectory(t, c.master, nil)
			compare(t, got, want)
			st := c.master.Stats()
			if st.Excluded != 1 || st.Verified == 0 {
				t.Errorf("excluded %d, verified %d, mismatches %d: want the liar caught", st.Excluded, st.Verified, st.Mismatches)
			}
			t.Logf("%s: %d results verified, %d mismatches, %d re-evaluated, %d workers excluded, %d tasks sent",
				policy, st.Verified, st.Mismatches, st.Reevaluated, st.Excluded, st.TasksSent)
		})
	}
	t.Run("without verify", func(t *testing.T) {
		c := newVerifyCluster(t, "wq", 0)
		c.addDirect(t, "liar", 2, true)
		c.addDirect(t, "honest", 1, false)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		if err := c.master.WaitWorkers(ctx, 2); err != nil {
			t.Fatal(err)
		}
		got := trajectory(t, c.master, nil)
		same := len(got) == len(want)
		for i := range got {
			same = same && got[i] == want[i]
		}
		if same {
			t.Error("the liar changed nothing: the test above tests nothing")
		}
	})
}
