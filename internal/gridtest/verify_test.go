package gridtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
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
// verify of the results on a second host, and waiting wait for a third
// host to break a tie (0: the default).
func newVerifyCluster(t *testing.T, policy string, verify float64, wait time.Duration) *cluster {
	t.Helper()
	key, err := grid.NewKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy, Problem: spec, Logger: quiet, Verify: verify, VerifyWait: wait,
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

// addDirect starts an agent that connects to the master's data address
// from host (a loopback address 127.0.0.x: hosts vote, not workers),
// lying or not.
func (c *cluster) addDirect(t *testing.T, name, host string, slots int, lie bool) {
	t.Helper()
	cfg := worker.Config{
		Master: c.master.Addr(), Key: c.key, Name: name, Slots: slots, Logger: quiet,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Network: grid.TCPFrom(host),
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
			c := newVerifyCluster(t, policy, 1, 0)
			c.addDirect(t, "liar", "127.0.0.2", 2, true)
			for i := range 3 {
				c.addDirect(t, fmt.Sprintf("honest%d", i), fmt.Sprintf("127.0.0.%d", 3+i), 1, false)
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
			t.Logf("%s: %d results verified, %d mismatches, %d re-evaluated, %d hosts excluded, %d tasks sent",
				policy, st.Verified, st.Mismatches, st.Reevaluated, st.Excluded, st.TasksSent)
		})
	}
	t.Run("without verify", func(t *testing.T) {
		c := newVerifyCluster(t, "wq", 0, 0)
		c.addDirect(t, "liar", "127.0.0.2", 2, true)
		c.addDirect(t, "honest", "127.0.0.3", 1, false)
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

// Issue 26, over real connections: one honest worker beside a key holder
// connected twice, or once. Hosts vote, so the key holder's connections
// are one vote against one: the tie cannot be broken, and the run fails
// with ErrUndecided once no third host has come for VerifyWait. It never
// takes the lie, never excludes the honest worker, and never waits for
// ever. With a second honest host the same liar is outvoted and excluded,
// both of its connections, and the trajectory is the in-process one.
func TestVerifyLiarOnOneHost(t *testing.T) {
	want := inProcess(t)
	for _, tc := range []struct {
		name    string
		liars   int // the liar's connections, all from one host
		honest  int // honest workers, each on a host of its own
		decided bool
	}{
		{"one honest, a liar connected twice", 2, 1, false},
		{"one honest, one liar", 1, 1, false},
		{"two honest, a liar connected twice", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newVerifyCluster(t, "wq", 1, 500*time.Millisecond)
			for i := range tc.liars {
				c.addDirect(t, fmt.Sprintf("liar%d", i), "127.0.0.2", 1, true)
			}
			for i := range tc.honest {
				c.addDirect(t, fmt.Sprintf("honest%d", i), fmt.Sprintf("127.0.0.%d", 3+i), 1, false)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if err := c.master.WaitWorkers(ctx, tc.liars+tc.honest); err != nil {
				t.Fatal(err)
			}
			e, err := es.New(esConfig)
			if err != nil {
				t.Fatal(err)
			}
			var got []es.Stats
			_, err = e.Run(ctx, c.master, es.RunOptions{OnGeneration: func(s es.Stats) error {
				got = append(got, s)
				return nil
			}})
			st := c.master.Stats()
			if !tc.decided {
				if !errors.Is(err, grid.ErrUndecided) {
					t.Fatalf("the run ended with %v, want ErrUndecided", err)
				}
				if st.Excluded != 0 {
					t.Errorf("%d hosts excluded: one host against another decides nothing", st.Excluded)
				}
				// What it completed before is honest.
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("generation %d: %+v, in process %+v", i, got[i], want[i])
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			compare(t, got, want)
			if st.Excluded != 1 {
				t.Errorf("%d hosts excluded, want the liar's", st.Excluded)
			}
		})
	}
}
