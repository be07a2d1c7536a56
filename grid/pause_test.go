package grid

import (
	"context"
	"net"
	"testing"
	"time"
)

// discardConn is a connection over a pipe whose far end reads what it is
// sent and drops it: the link of a worker or child alive, that says
// nothing. Both ends close as the test ends.
func discardConn(t *testing.T) *Conn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	end, far := net.Pipe()
	c, discard := NewConn(ctx, end, quietConfig()), NewConn(ctx, far, quietConfig())
	discard.Start(func(Message) {})
	t.Cleanup(func() {
		c.Close()
		discard.Close()
		<-c.Done()
		<-discard.Done()
		cancel()
	})
	return c
}

// pauseBooks is policyBooks with one worker of a second's tasks running
// the one task of a batch, and the heartbeat's first beat.
func pauseBooks(t *testing.T) (*Master, *mworker) {
	t.Helper()
	m := policyBooks(t, "wq")
	m.checkEvery = 250 * time.Millisecond
	m.liveCh = make(chan struct{}) // a drop wakes WaitWorkers' waiters
	w := joinBooks(m, 1, "w", "10.0.0.1", 1)
	w.conn = discardConn(t)
	m.nLive++
	m.measured(w, time.Second)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: make(chan evalReply, 1)})
	m.flush()
	if len(w.out) != 1 || w.out[0].started < 0 {
		t.Fatalf("setup: %d instances out on w; want its one task running", len(w.out))
	}
	m.beat()
	m.tick()
	return m, w
}

// unblamed fails t if w was blamed for the master's pause: dropped,
// overdue, or its task failed.
func unblamed(t *testing.T, m *Master, w *mworker, when string) {
	t.Helper()
	if w.left || m.counts.Overdue != 0 || len(m.cur.failures[0]) != 0 {
		t.Fatalf("%s: worker dropped %v, %d overdue, failures %v; want none", when, w.left, m.counts.Overdue, m.cur.failures[0])
	}
}

// TestMastersOwnPauseBlamesNoWorker: a master that does not run for
// longer than the task timeout (its process stopped, its machine
// starved) blames no worker for that time: the instance a worker ran
// when the master stopped is not past the timeout when the loop's clock
// ticks again, nor overdue, and its value, come meanwhile, is taken.
// Before, the first tick after the pause dropped every worker with an
// instance out, each as "a task ran past the task timeout", and counted
// a failure against the task: under -max-retries 0 one pause failed the
// run (esrun SIGSTOPped 10 s under -task-timeout 3s: "task 7 failed 1
// times (max retries 0): w1: ran past the task timeout of 3s", of tasks
// of 50 ms). Time the master runs still counts: the instance is overdue
// at its deadline after the pause.
func TestMastersOwnPauseBlamesNoWorker(t *testing.T) {
	m, w := pauseBooks(t)
	// The master stops for 11 minutes, past the 10-minute task timeout;
	// its heartbeat beats as it runs again.
	m.start = m.start.Add(-11 * time.Minute)
	m.beat()
	m.tick()
	unblamed(t, m, w, "after the master's own pause of 11m0s")
	// Its time runs again: a second a tick, the instance is overdue at
	// its deadline (4 s), less the pause's pauseLimit that counts, not
	// sooner.
	deadline := m.deadline(w) - m.pauseLimit()
	var ran time.Duration
	for ran = 0; m.counts.Overdue == 0 && ran < time.Minute; ran += time.Second {
		m.start = m.start.Add(-time.Second)
		m.beat()
		w.lastHeard = m.now()
		m.tick()
	}
	if w.left || m.counts.Overdue != 1 || ran < deadline || ran > deadline+2*time.Second {
		t.Fatalf("after the pause, ticks a second apart: overdue %d after %v (dropped %v); want once, at its deadline less %v, %v", m.counts.Overdue, ran, w.left, m.pauseLimit(), deadline)
	}
}

// TestMastersPauseDuringATurnBlamesNoWorker: the master may stop in a
// turn of its loop as well as between two (a busy master is mostly in
// one), and its loop may run again before its heartbeat does: neither
// blames a worker for the pause, and the clock never goes back. Before,
// only a wait of the loop longer than checkEvery + 2 s counted as a
// pause, from the start of its next turn: a pause in a turn counted in
// full ("after the master's own pause of 11m0s in a turn: worker dropped
// true, 0 overdue, failures [{w ran past the task timeout of 10m0s}]").
func TestMastersPauseDuringATurnBlamesNoWorker(t *testing.T) {
	m, w := pauseBooks(t)
	before := m.now()
	m.start = m.start.Add(-11 * time.Minute) // stopped in a turn
	m.tick()                                 // the loop runs on before the heartbeat
	unblamed(t, m, w, "after the master's own pause of 11m0s in a turn")
	held := m.now()
	if held < before || held > before+m.pauseLimit()+time.Second {
		t.Fatalf("the clock at %v before the pause, %v after it before the heartbeat beat; want held at most %v on", before, held, m.pauseLimit())
	}
	m.beat()
	m.tick()
	unblamed(t, m, w, "after the heartbeat beat")
	if after := m.now(); after < held || after > held+time.Second {
		t.Fatalf("the clock at %v before the heartbeat beat, %v after; want it to run on from there", held, after)
	}
}

// TestMastersBusyTurnCounts: a loop busy in a turn does not stop the
// heartbeat, so its time counts: no input that keeps the master busy
// can hold its clock, and the deadlines it keeps.
func TestMastersBusyTurnCounts(t *testing.T) {
	m, w := pauseBooks(t)
	for range 5 * 60 * 4 { // 5 minutes of beats, a quarter second apart, the loop busy
		m.start = m.start.Add(-m.checkEvery)
		m.beat()
	}
	w.lastHeard = m.now()
	m.tick()
	if m.counts.Overdue != 1 {
		t.Fatalf("a task of a worker of a second's tasks, 5 minutes on while the loop was busy: %d overdue; want it overdue", m.counts.Overdue)
	}
}

// TestPauseAtTheLoopsEndLeftOut: the heartbeat stops with the loop, and a
// pause up to then is left out of the clock that runs on (a report taken
// after Close). Before, the clock let go of its hold at once, and the
// pause counted ("the clock at 1h0m0s before a pause of 3h0m0s ended by
// the loop's end, 4h0m0s after").
func TestPauseAtTheLoopsEndLeftOut(t *testing.T) {
	m := policyBooks(t, "wq")
	m.checkEvery = time.Hour // no beat but the first, and the last
	m.loopCtx, m.stopLoop = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.heartbeat()
	for m.clock.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	before := m.now()
	m.start = m.start.Add(-3 * time.Hour)
	m.stopLoop()
	m.wg.Wait()
	if after := m.now(); after < before || after > before+m.pauseLimit()+time.Minute {
		t.Fatalf("the clock at %v before a pause of 3h0m0s ended by the loop's end, %v after; want at most %v on", before.Round(time.Second), after.Round(time.Second), m.pauseLimit())
	}
}
