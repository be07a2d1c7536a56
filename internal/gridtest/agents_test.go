package gridtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var esConfig = es.Config{
	Problem: "rastrigin", Mu: 5, Lambda: 20, Dim: 8, Lower: -5.12, Upper: 5.12, Seed: 7,
	Stop: es.Stop{Generations: 6},
}

// spec is the problem the workers are told to build: with a small LU load
// so that tasks take long enough for the schedule to matter.
var spec = grid.ProblemSpec{Name: "rastrigin", Dim: 8, LoadN: 60}

// trajectory runs the ES with ev; onGen, if set, sees each generation.
func trajectory(t *testing.T, ev es.Evaluator, onGen func(es.Stats)) []es.Stats {
	t.Helper()
	e, err := es.New(esConfig)
	if err != nil {
		t.Fatal(err)
	}
	var out []es.Stats
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
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

func inProcess(t *testing.T) []es.Stats {
	p, err := worker.BuildProblem(spec)
	if err != nil {
		t.Fatal(err)
	}
	return trajectory(t, problems.NewPool(p, 2), nil)
}

// cluster is a master with gossip and worker agents, all in this process.
type cluster struct {
	master *grid.Master
	gossip *grid.Membership
	key    *grid.Key
	agents []*agentRun
}

// agentRun is one agent's Run in progress.
type agentRun struct {
	name string
	stop context.CancelFunc
	done chan struct{} // closed when Run has returned
	err  error         // Run's result, once done
}

func newCluster(t *testing.T, policy string) *cluster {
	t.Helper()
	key, err := grid.NewKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.Context(): it is cancelled before the cleanup below, which
	// checks that the master's Close, not a cancelled context, ends the
	// workers.
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy, Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()},
		OnEvent: m.HandleMemberEvent, Logger: quiet, LeaveTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{master: m, gossip: ms, key: key}
	t.Cleanup(func() {
		m.Close()
		for _, a := range c.agents {
			if a.name != "intruder" {
				select {
				case <-a.done:
				case <-time.After(time.Minute):
					t.Errorf("worker %s did not stop after the master's shutdown", a.name)
				}
			}
			a.stop()
			<-a.done
		}
		ms.Close()
	})
	return c
}

// addWorker starts an agent that finds the master through gossip.
func (c *cluster) addWorker(t *testing.T, name string, slots int, slowdown float64, key *grid.Key) *agentRun {
	t.Helper()
	return c.addAgent(t, worker.Config{Key: key, Name: name, Slots: slots, Slowdown: slowdown})
}

// addAgent starts an agent of cfg that finds the master through gossip.
func (c *cluster) addAgent(t *testing.T, cfg worker.Config) *agentRun {
	t.Helper()
	cfg.Join, cfg.GossipBind, cfg.Logger = []string{c.gossip.Addr()}, "127.0.0.1:0", quiet
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	a, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // stopped by the cluster's cleanup
	r := &agentRun{name: cfg.Name, stop: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	c.agents = append(c.agents, r)
	return r
}

func TestAgentsTrajectoryEqualsInProcess(t *testing.T) {
	want := inProcess(t)
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			c := newCluster(t, policy)
			for i, slow := range []float64{1, 1, 2, 4} {
				c.addWorker(t, fmt.Sprintf("w%d", i), 1+i%2, slow, c.key)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if err := c.master.WaitWorkers(ctx, 4); err != nil {
				t.Fatal(err)
			}
			got := trajectory(t, c.master, nil)
			compare(t, got, want)
			rep := c.master.Report()
			if len(rep.Generations) != len(want) || rep.Total <= 0 {
				t.Errorf("ledger: %d generations, total %v", len(rep.Generations), rep.Total)
			}
		})
	}
}

func TestAgentsWorkerKilledMidRun(t *testing.T) {
	want := inProcess(t)
	c := newCluster(t, "r3q")
	for i := range 3 {
		c.addWorker(t, fmt.Sprintf("w%d", i), 2, 1, c.key)
	}
	victim := c.addWorker(t, "victim", 2, 3, c.key)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.master.WaitWorkers(ctx, 4); err != nil {
		t.Fatal(err)
	}
	got := trajectory(t, c.master, func(s es.Stats) {
		if s.Gen == 2 {
			victim.stop() // the agent stops at once, dropping what it runs and holds
		}
	})
	compare(t, got, want)
	<-victim.done
	if !errors.Is(victim.err, context.Canceled) {
		t.Errorf("killed agent returned %v", victim.err)
	}
	// The run may end before the master has read the end of the victim's
	// connection, on a loaded machine: it drops the victim all the same.
	eventuallyT(t, "the master to drop the killed worker (3 workers left)", func() bool { return c.master.Workers() == 3 })
}

func TestAgentsWrongKeyNeverGetsATask(t *testing.T) {
	c := newCluster(t, "wq")
	other, err := grid.NewKey(testSecret + " of another cluster")
	if err != nil {
		t.Fatal(err)
	}
	// With another key the agent can neither join the gossip nor pass the
	// handshake; it keeps trying, in vain, for the whole run.
	intruder := c.addWorker(t, "intruder", 2, 1, other)
	c.addWorker(t, "member", 2, 1, c.key)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.master.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	trajectory(t, c.master, nil)
	if st := c.master.Stats(); st.Joined != 1 {
		t.Errorf("%d workers joined, want only the one with the key", st.Joined)
	}
	select {
	case <-intruder.done:
		t.Errorf("wrong-key agent gave up: %v", intruder.err)
	default:
	}
}

func compare(t *testing.T, got, want []es.Stats) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d generations over the grid, %d in process", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("generation %d: grid %+v, in process %+v", i, got[i], want[i])
		}
	}
}
