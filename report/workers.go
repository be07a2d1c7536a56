package report

import (
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched"
)

// NameWorkers fills in each per-worker entry's name and host, which the
// ledger does not know (it counts workers by the master's id).
func (s *Schedule) NameWorkers(info func(sched.WorkerID) (grid.WorkerInfo, bool)) {
	for i := range s.PerWorker {
		if wi, ok := info(sched.WorkerID(s.PerWorker[i].Worker)); ok {
			s.PerWorker[i].Name, s.PerWorker[i].Host = wi.Name, wi.Host
		}
	}
}
