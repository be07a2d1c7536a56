package grid

import (
	"testing"
	"time"
)

// gone is gossip's event that the member named name failed (or left).
func gone(name string, left bool) MemberEvent {
	kind := MemberFailed
	if left {
		kind = MemberLeft
	}
	return MemberEvent{Kind: kind, Member: Member{Name: name, Meta: NodeMeta{Role: RoleWorker}}}
}

// muteLink joins m under name (a worker, or a relay if relay) and never
// reads: it answers nothing, as a frozen or cut-off machine, and sends
// nothing of its own (its heartbeats are an hour apart).
func muteLink(t *testing.T, m *Master, name string, relay bool) {
	t.Helper()
	cfg := DialConfig{Key: m.cfg.Key, Name: name, Slots: 1, Conn: ConnConfig{Logger: testLogger(t), Heartbeat: time.Hour}}
	if relay {
		cfg.Problems = []string{helloRelay}
	}
	c, _, err := Dial(t.Context(), m.Addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-c.Done() })
}

// TestMasterKeepsWorkerWhoseLinkAnswersGossip: gossip's "dead" (which any
// key holder can forge, and a saturated machine can earn) does not drop a
// worker whose data link answers the master's probe; its only frame
// since is the echo (its own heartbeats are an hour apart). It works on.
func TestMasterKeepsWorkerWhoseLinkAnswersGossip(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "dead", true: "left"}[left], func(t *testing.T) {
			setGossipProbeWait(t, time.Hour) // an answer is taken at once; none is waited for an hour
			m := startMaster(t, "wq")
			w := newTestWorker("lab-1", 2, 0)
			w.heartbeat = time.Hour
			startWorkers(t, m, w)
			m.HandleMemberEvent(gone("lab-1", left))
			eventually(t, "the master to judge the probe", func() bool {
				st := m.Stats()
				return st.GossipKept+st.Lost.Dead+st.Lost.Left > 0
			})
			if st := m.Stats(); st.GossipKept != 1 || st.Lost.Dead != 0 || st.Lost.Left != 0 || st.Workers != 1 {
				t.Fatalf("kept %d, lost dead %d, left %d, workers %d; want the answering worker kept",
					st.GossipKept, st.Lost.Dead, st.Lost.Left, st.Workers)
			}
			if err := w.conn.Err(); err != nil {
				t.Fatalf("the kept worker's connection closed: %v", err)
			}
			evalAndCheck(t, m, 1, 10)
		})
	}
}

// TestMasterDropsWorkerWhoseLinkIsMute: a worker that gossip says is
// gone and whose link does not answer the probe is dropped, counted as
// gossip said (gossip_dead, or left_cluster).
func TestMasterDropsWorkerWhoseLinkIsMute(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "dead", true: "left"}[left], func(t *testing.T) {
			m := startMaster(t, "wq")
			muteLink(t, m, "mute", false)
			eventually(t, "the worker to join", func() bool { return m.Workers() == 1 })
			m.HandleMemberEvent(gone("mute", left))
			eventually(t, "the mute worker to be dropped", func() bool { return m.Workers() == 0 })
			st := m.Stats()
			lost, other := st.Lost.Dead, st.Lost.Left
			if left {
				lost, other = other, lost
			}
			if lost != 1 || other != 0 || st.GossipKept != 0 || st.Lost.Closed != 0 {
				t.Errorf("lost as gossip said %d, otherwise %d, closed %d, kept %d; want it lost once, as gossip said",
					lost, other, st.Lost.Closed, st.GossipKept)
			}
		})
	}
}

// TestMasterProbesRelayGossipSaysGone: a relay speaks for its workers in
// gossip; one whose link answers is kept, one whose link is mute is
// dropped.
func TestMasterProbesRelayGossipSaysGone(t *testing.T) {
	t.Run("answering", func(t *testing.T) {
		setGossipProbeWait(t, time.Hour)
		m := startMaster(t, "wq")
		r := runRelay(t, m, ConnConfig{Heartbeat: time.Hour})
		eventually(t, "the relay to connect", func() bool { return m.Relays() == 1 })
		m.HandleMemberEvent(gone("relay", false))
		eventually(t, "the master to judge the probe", func() bool { return m.Stats().GossipKept > 0 || m.Relays() == 0 })
		if m.Relays() != 1 || r.Stats().Upstreams != 1 {
			t.Errorf("%d relays, %d upstream connections; want the answering relay kept", m.Relays(), r.Stats().Upstreams)
		}
	})
	t.Run("mute", func(t *testing.T) {
		m := startMaster(t, "wq")
		muteLink(t, m, "relay", true)
		eventually(t, "the relay to connect", func() bool { return m.Relays() == 1 })
		m.HandleMemberEvent(gone("relay", false))
		eventually(t, "the mute relay to be dropped", func() bool { return m.Relays() == 0 })
		if n := m.Stats().GossipKept; n != 0 {
			t.Errorf("kept %d", n)
		}
	})
}

// setGossipProbeWait sets gossipProbeWait for the test, restored as it
// ends: call it before the master starts, so that the master has closed
// by then.
func setGossipProbeWait(t *testing.T, d time.Duration) {
	old := gossipProbeWait
	gossipProbeWait = d
	t.Cleanup(func() { gossipProbeWait = old })
}

// A worker on its way back to a master (not connected, so there is no
// link to ask) that gossip says is gone is still waited for, within the
// wait's own bound: any key holder may forge the verdict, and a frozen
// machine's refutation may come only at memberlist's next push-pull, up
// to half a minute after it thaws, too late for a master that had given
// it up (seed 2619367 of the simulation). Only its grace ends the wait.
func TestMasterAwaitedWorkerOutlivesGossip(t *testing.T) {
	setGossipProbeWait(t, 0) // whatever gossip's verdict would wait for has passed
	m := startMaster(t, "wq")
	awaiting := func() (n int) {
		m.ask(func() { n = m.awaiting() })
		return n
	}
	m.ask(func() { m.expect("w9", expected{by: m.now() + time.Hour}) })
	m.HandleMemberEvent(gone("w9", false))
	m.HandleMemberEvent(gone("w9", true))
	if n := awaiting(); n != 1 {
		t.Fatalf("once gossip says it is dead, then that it left: %d workers awaited, want 1", n)
	}
	m.ask(func() { m.expect("w9", expected{by: m.now() - time.Second}) }) // its grace is over
	if n := awaiting(); n != 0 {
		t.Fatalf("past its grace: %d workers awaited, want 0", n)
	}
}
