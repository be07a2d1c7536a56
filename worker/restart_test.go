package worker

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/grid"
)

// sphereSpec is a registered problem, built by the default Config.Build.
var sphereSpec = grid.ProblemSpec{Name: "sphere", Dim: 3}

// startRealMaster runs a grid.Master on addr ("127.0.0.1:0" for any port).
func startRealMaster(t *testing.T, ctx context.Context, key *grid.Key, addr string) *grid.Master {
	t.Helper()
	m, err := grid.NewMaster(ctx, grid.MasterConfig{
		Listen: addr, Key: key, Policy: "r3q", Problem: sphereSpec, Logger: logger(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// evaluateSphere evaluates a small batch on m and checks every value.
func evaluateSphere(t *testing.T, m *grid.Master, gen int) {
	t.Helper()
	xs := [][]float64{{1, 2, 3}, {0, 0, 1}, {-1, 4, 2}, {3, 3, 3}, {0.5, 0, 0}}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	f, err := m.Evaluate(ctx, gen, xs)
	if err != nil {
		t.Fatalf("generation %d: %v", gen, err)
	}
	for i, x := range xs {
		want := x[0]*x[0] + x[1]*x[1] + x[2]*x[2]
		if f[i] != want {
			t.Errorf("generation %d task %d: %v, want %v", gen, i, f[i], want)
		}
	}
}

// waitWorker waits, a bounded time, for one worker to join m.
func waitWorker(t *testing.T, m *grid.Master) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// joinGossipAs starts a gossip member on 127.0.0.1 that advertises meta.
func joinGossipAs(t *testing.T, ctx context.Context, name string, key *grid.Key, meta grid.NodeMeta, seeds ...string) *grid.Membership {
	t.Helper()
	ms, err := grid.JoinMembership(ctx, grid.MembershipConfig{
		Name: name, BindAddr: "127.0.0.1", SecretKey: key.GossipKey(), Meta: meta,
		Logger: logger(io.Discard), LeaveTimeout: 200 * time.Millisecond,
	}, seeds...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

// TestAgentServesMasterRestartedAtSameAddress: the master crashes (its
// connection drops without a Shutdown) and a new one comes up at the same
// address; the agent reconnects and serves it.
func TestAgentServesMasterRestartedAtSameAddress(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fm := startFakeMaster(t, key, sphereSpec)
	addr := fm.addr()
	_, wait := startAgent(t, ctx, Config{
		Master: addr, Key: key, Name: "w1", Slots: 2,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	mc := fm.next()
	mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{1, 1, 1}}}})
	if rs := receive[*grid.Results](t, mc); rs.Items[0].F != 3 {
		t.Fatalf("first master got %+v", rs)
	}
	// The crash: listener and connection gone, no Shutdown.
	fm.ln.Close()
	mc.c.Close()

	m := startRealMaster(t, ctx, key, addr)
	waitWorker(t, m)
	evaluateSphere(t, m, 0)
	evaluateSphere(t, m, 1)
	m.Close()
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v, want ErrShutdown once the new master ends the run", err)
	}
}

// TestAgentServesMasterRestartedElsewhere: the master crashes and a new one
// on another port appears in gossip while the dead one is still listed
// there (failure detection has not caught it yet); the agent moves on to
// the new master.
func TestAgentServesMasterRestartedElsewhere(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fm := startFakeMaster(t, key, sphereSpec)
	// The old master's gossip member stays alive and keeps naming its dead
	// data port; its name sorts before the new master's.
	old := joinGossipAs(t, ctx, "a-old-master", key, grid.NodeMeta{Role: grid.RoleMaster, DataAddr: fm.addr()})
	_, wait := startAgent(t, ctx, Config{
		Join: []string{old.Addr()}, GossipBind: "127.0.0.1:0", Key: key, Name: "w1", Slots: 2,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: logger(io.Discard),
	})
	mc := fm.next()
	mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{1, 1, 1}}}})
	if rs := receive[*grid.Results](t, mc); rs.Items[0].F != 3 {
		t.Fatalf("first master got %+v", rs)
	}
	fm.ln.Close()
	mc.c.Close()

	m := startRealMaster(t, ctx, key, "127.0.0.1:0")
	joinGossipAs(t, ctx, "b-new-master", key, grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()}, old.Addr())
	waitWorker(t, m)
	evaluateSphere(t, m, 0)
	m.Close()
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v, want ErrShutdown", err)
	}
}

// TestAgentShutdownThroughDelay: with an emulated link delay, the master's
// Shutdown may still be in the delay line when the master hangs up behind
// it; the agent must still take it as the end of the run, not reconnect.
func TestAgentShutdownThroughDelay(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, sphereSpec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, wait := startAgent(t, ctx, Config{
		Master: fm.addr(), Key: key, Name: "w1", Slots: 1, Delay: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	mc := fm.next()
	mc.c.SendAndClose(&grid.Shutdown{Reason: "over"})
	<-mc.c.Done()
	stop := time.AfterFunc(5*time.Second, cancel) // a reconnecting agent never returns by itself
	defer stop.Stop()
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v, want ErrShutdown", err)
	}
}
