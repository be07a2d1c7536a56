package grid

import (
	"testing"
)

// A worker that said it stops (a Drain of its own: esworker told to exit)
// and whose connection closed with nothing out left as it said it would:
// it is not lost. It was counted as lost (esgrid_workers_lost_total
// {cause="closed"}) and logged at Warn, "worker lost", at every esworker
// stopped by SIGTERM. A connection that closes unasked is lost, as before.
func TestDrainedWorkerIsNotLost(t *testing.T) {
	for _, drained := range []bool{true, false} {
		m := policyBooks(t, "wq")
		w := joinBooks(m, 1, "w", "10.0.0.1", 1)
		w.conn = discardConn(t)
		m.nLive++
		m.liveCh = make(chan struct{}) // a leave wakes WaitWorkers' waiters
		if drained {
			m.handle(loopMsg{kind: msgFrame, w: w, msg: &Drain{}})
		}
		m.handle(loopMsg{kind: msgClosed, w: w})
		want := int64(1)
		if drained {
			want = 0
		}
		if got := m.counts.Lost.Closed; got != want || !w.left {
			t.Errorf("drained %v, then the connection closed: %d workers lost (closed), left %v; want %d and left", drained, got, w.left, want)
		}
	}
}
