package grid

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Issue 25: a lone worker that lost the tasks of a frame (as an agent
// took a task sent again for its cancelled instance, still running) costs
// a deadline, not the run. The rule "a late worker gets nothing new until
// it answers" stalled it: nothing was left for it to answer. Now the
// overdue instances are cancelled and, no other worker being open, sent
// to it again at once.
func TestMasterLoneWorkerLostTasksSentAgain(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, func(c *MasterConfig) {
				c.DeadlineFloor, c.FirstDeadline = 50*time.Millisecond, 50*time.Millisecond
				c.TaskTimeout = -1 // only the deadlines may end the loss
			})
			w := newTestWorker("lossy", 2, 0)
			var lost atomic.Bool
			w.onTasks = func(*testWorker, net.Conn) bool { return lost.CompareAndSwap(false, true) }
			startWorkers(t, m, w)
			evalAndCheck(t, m, 3, 10)
			if st := m.Stats(); st.Overdue == 0 || st.Dropped != 0 {
				t.Errorf("%d overdue, %d dropped; want some and none", st.Overdue, st.Dropped)
			}
		})
	}
}

// A late worker (found overdue, silent since) is judged by its plain
// deadline: its overrun does not make the other instances it holds wait
// DeadlineFactor times longer, as the overrun of a worker that then
// answers does (sched.Overran). It may be silent, and a silent worker
// costs one deadline: seed 235220 of the simulation had a silent worker
// hold three tasks of a batch sent at moments apart, cut at 30 s, then
// 2 min, then 5 min, while a free worker waited.
func TestMasterLateWorkerDeadlineNotGrown(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) {
		c.DeadlineFloor, c.FirstDeadline = 100*time.Millisecond, 100*time.Millisecond
	})
	silent := newTestWorker("silent", 1, 0)
	silent.freeze = true
	startWorkers(t, m, silent, newTestWorker("alive", 1, time.Millisecond))
	evalAndCheck(t, m, 1, 4)
	eventually(t, "the silent worker to be late", func() bool {
		return slices.ContainsFunc(m.WorkerStats(), func(s WorkerStat) bool { return s.Name == "silent" && s.Late })
	})
	var got, plain, grown time.Duration
	m.ask(func() {
		w, d := m.byName["silent"], m.cfg.deadlines()
		got = m.deadline(w)
		plain = d.Of(w.exec, m.exec, w.rtt)
		grown = d.OfWorker(w.exec, m.exec, w.rtt, w.overran)
	})
	if grown <= plain {
		t.Fatalf("setup: its overrun would not grow its deadline (%v, plain %v)", grown, plain)
	}
	if got != plain {
		t.Errorf("the late worker's deadline is %v, want its plain deadline %v (not %v, grown by its overrun)", got, plain, grown)
	}
}
