package grid

import (
	"time"

	"github.com/esgrid/esgrid/sched"
)

// OutInstance is one instance the master's books have outstanding on a
// connected worker: sent, not yet answered or cancelled.
type OutInstance struct {
	Worker sched.WorkerID
	Task   int
	// Sent is when the master sent it and Started when it began running
	// in the books (-1 while held in the worker's queue), on the master's
	// clock (Now), as the ledger's instances.
	Sent, Started time.Duration
	Overdue       bool
}

// Outstanding returns now on the master's clock and at most limit of
// the instances outstanding on its workers (a status page's running
// bars), with how many more there are. It is taken on the master's
// loop; once the loop has exited there are none.
func (m *Master) Outstanding(limit int) (now time.Duration, out []OutInstance, more int) {
	m.ask(func() {
		for _, w := range m.order {
			if w.left {
				continue
			}
			for _, o := range w.out {
				if len(out) >= limit {
					more++
					continue
				}
				out = append(out, OutInstance{Worker: w.id, Task: int(o.task), Sent: o.at, Started: o.started, Overdue: o.overdue})
			}
		}
	})
	return m.now(), out, more
}
