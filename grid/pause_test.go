package grid

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestMastersOwnPauseBlamesNoWorker: a master that does not run for
// longer than the task timeout (its process stopped, its machine
// suspended or starved) blames no worker for that time: the instance a
// worker ran when the master stopped is not past the timeout when the
// loop's clock ticks again, nor overdue, and its value, come meanwhile,
// is taken. Before, the first tick after the pause dropped every worker
// with an instance out, each as "a task ran past the task timeout", and
// counted a failure against the task: under -max-retries 0 one pause
// failed the run (esrun SIGSTOPped 10 s under -task-timeout 3s: "task 7
// failed 1 times (max retries 0): w1: ran past the task timeout of 3s",
// of tasks of 50 ms). Time the master runs still counts: the instance
// is overdue at its deadline after the pause.
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

func TestMastersOwnPauseBlamesNoWorker(t *testing.T) {
	m := policyBooks(t, "wq")
	m.checkEvery = 250 * time.Millisecond
	m.liveCh = make(chan struct{}) // a drop wakes WaitWorkers' waiters
	w := joinBooks(m, 1, "w", "10.0.0.1", 1)
	w.conn = discardConn(t)
	m.nLive++
	m.measured(w, time.Second)
	reply := make(chan evalReply, 1)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: reply})
	m.flush()
	if len(w.out) != 1 || w.out[0].started < 0 {
		t.Fatalf("setup: %d instances out on w; want its one task running", len(w.out))
	}
	m.tick()
	// The master stops for 11 minutes, past the 10-minute task timeout.
	m.start = m.start.Add(-11 * time.Minute)
	m.tick()
	if w.left || m.counts.Overdue != 0 || len(m.cur.failures[0]) != 0 {
		t.Fatalf("after the master's own pause of 11m0s: worker dropped %v, %d overdue, failures %v; want none", w.left, m.counts.Overdue, m.cur.failures[0])
	}
	// Its time runs again: a second a tick, the instance is overdue at
	// its deadline (4 s), not sooner.
	deadline := m.deadline(w)
	var ran time.Duration
	for ran = 0; m.counts.Overdue == 0 && ran < time.Minute; ran += time.Second {
		m.start = m.start.Add(-time.Second)
		w.lastHeard = m.now()
		m.tick()
	}
	if w.left || m.counts.Overdue != 1 || ran < deadline || ran > deadline+2*time.Second {
		t.Fatalf("after the pause, ticks a second apart: overdue %d after %v (dropped %v); want once, at its deadline %v", m.counts.Overdue, ran, w.left, deadline)
	}
}
