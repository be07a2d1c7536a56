package gridtest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/worker"
)

// relayRun is a relay running in this process.
type relayRun struct {
	relay *grid.Relay
	stop  context.CancelFunc
	done  chan struct{}
}

func startRelay(t *testing.T, name string, key *grid.Key, upstream string) *relayRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := grid.NewRelay(grid.RelayConfig{
		Listener: ln, Key: key, Name: name, Logger: quiet,
		Upstream:   func(context.Context, int) (string, error) { return upstream, nil },
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rr := &relayRun{relay: r, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(rr.done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-rr.done
	})
	return rr
}

// waitUpstream waits until every relay has its upstream connection.
func waitUpstream(t *testing.T, rs ...*relayRun) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range rs {
		for r.relay.Stats().Upstreams == 0 {
			if time.Now().After(deadline) {
				t.Fatal("a relay did not connect upstream")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func startAgent(t *testing.T, name string, key *grid.Key, master string) *agentRun {
	t.Helper()
	a, err := worker.New(worker.Config{
		Master: master, Key: key, Name: name, Slots: 1, Slowdown: 5, Logger: quiet,
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
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// TestRelaysTrajectoryEqualsInProcess: a master, a relay R1 with two
// workers behind it, and a relay R2 chained behind R1 with two more (the
// paper's R1 in front of W1–W3, as a tree). The master's policy sees the
// four end workers; a worker behind R1 is killed mid-run; then R1
// itself, taking R2 with it: their workers' tasks go back to the queue
// and they reconnect by the other path they were given (straight to the
// master). The trajectory is the in-process one.
func TestRelaysTrajectoryEqualsInProcess(t *testing.T) {
	leaktest.Check(t)
	want := inProcess(t)
	key, err := grid.NewKey("relay test cluster key 0123456789")
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "r3q", Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	r1 := startRelay(t, "r1", key, m.Addr())
	r2 := startRelay(t, "r2", key, r1.relay.Addr())
	waitUpstream(t, r1, r2)
	var behindR1 []*agentRun
	for i := range 2 {
		behindR1 = append(behindR1, startAgent(t, fmt.Sprintf("r1w%d", i), key, r1.relay.Addr()+","+m.Addr()))
	}
	for i := range 2 {
		startAgent(t, fmt.Sprintf("r2w%d", i), key, r2.relay.Addr()+","+m.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if n := m.Relays(); n != 2 {
		t.Errorf("%d relays connected, want 2 (r1, and r2 through it)", n)
	}
	got := trajectory(t, m, func(s es.Stats) {
		switch s.Gen {
		case 1:
			behindR1[0].stop() // a worker behind a relay dies
		case 3:
			r1.stop() // the relay dies, and the chain behind it
		}
	})
	compare(t, got, want)
	// The three workers left reconnect by the other path they were
	// given, straight to the master.
	if err := m.WaitWorkers(ctx, 3); err != nil {
		t.Errorf("after the relay died: %v", err)
	}
	st := m.Stats()
	t.Logf("joined %d, workers now %d, relays now %d; r1 carried %d streams, r2 %d", st.Joined, st.Workers, m.Relays(),
		r1.relay.Stats().Streams, r2.relay.Stats().Streams)
	if r1.relay.Stats().Streams < 3 || r2.relay.Stats().Streams < 2 {
		t.Errorf("the relays carried %d and %d streams", r1.relay.Stats().Streams, r2.relay.Stats().Streams)
	}
	// R3Q's replicas and their cancels went through the relays as to any
	// worker (the end workers are the policy's workers).
	c := m.Report().Counts
	t.Logf("replicas %d; cancels: %d held, %d running, %d late", c.Replicas, c.CancelsHeld, c.CancelsRunning, c.CancelsLate)
	if c.Replicas == 0 || c.CancelsHeld+c.CancelsRunning+c.CancelsLate == 0 {
		t.Errorf("no replica or cancel: %+v", c)
	}
	m.Close()
}

// TestRelayDeclaredDeadButAnsweringKeepsItsWorkers: the relay speaks for
// its workers in gossip; no worker behind a relay is ever a gossip member
// that peers could declare dead on their own. When gossip declares the
// relay dead (here, the event as the membership delivers it, as a key
// holder could forge it) while its link answers the master's probe, the
// relay is kept, and every worker behind it: none joins again. (A relay
// whose link does not answer is dropped with its workers: grid's
// TestMasterProbesRelayGossipSaysGone.)
func TestRelayDeclaredDeadButAnsweringKeepsItsWorkers(t *testing.T) {
	leaktest.Check(t)
	key, err := grid.NewKey("relay test cluster key 0123456789")
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "r3q", Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r1 := startRelay(t, "r1", key, m.Addr())
	waitUpstream(t, r1)
	for i := range 2 {
		startAgent(t, fmt.Sprintf("w%d", i), key, r1.relay.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := m.WaitWorkers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	m.HandleMemberEvent(grid.MemberEvent{Kind: grid.MemberFailed, Member: grid.Member{Name: "r1", Meta: grid.NodeMeta{Role: grid.RoleWorker}}})
	for m.Stats().GossipKept == 0 && m.Relays() == 1 {
		select {
		case <-ctx.Done():
			t.Fatal("the master never judged its probe of the relay")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if st := m.Stats(); st.GossipKept != 1 || st.Joined != 2 || m.Relays() != 1 || r1.relay.Stats().Upstreams != 1 {
		t.Errorf("after gossip declared the answering relay dead: kept %d, %d joins, %d relays, %d upstream connections; want it and its workers kept",
			st.GossipKept, st.Joined, m.Relays(), r1.relay.Stats().Upstreams)
	}
	compare(t, trajectory(t, m, nil), inProcess(t)) // its workers work on, as ever
}
