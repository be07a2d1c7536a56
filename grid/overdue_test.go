package grid

import (
	"net"
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
