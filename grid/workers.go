package grid

import (
	"net"
	"sync"

	"github.com/esgrid/esgrid/sched"
)

// WorkerInfo says who a worker is: the name it gave in its Hello and the
// host its data connection came from.
type WorkerInfo struct {
	Name string
	Host string
}

// keepDeparted is how many workers that have gone a master still
// remembers by name: a run's usual workers, while a master that sees
// workers come and go for weeks keeps a bounded book.
const keepDeparted = 512

// workerBook remembers the workers that joined — the connected ones and
// the last keepDeparted that left — so that a run's report can name the
// workers its ledger counts by id. The handshake adds a worker, the loop
// says when its connection is gone.
type workerBook struct {
	mu       sync.Mutex
	byID     map[sched.WorkerID]WorkerInfo
	departed []sched.WorkerID // oldest first
}

func (b *workerBook) add(id sched.WorkerID, name string, addr net.Addr) {
	host := ""
	if addr != nil {
		host = addr.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID == nil {
		b.byID = make(map[sched.WorkerID]WorkerInfo)
	}
	b.byID[id] = WorkerInfo{Name: name, Host: host}
}

// left records that worker id's connection is gone; the oldest departed
// workers beyond keepDeparted are forgotten.
func (b *workerBook) left(id sched.WorkerID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.byID[id]; !ok {
		return
	}
	b.departed = append(b.departed, id)
	if len(b.departed) > keepDeparted {
		delete(b.byID, b.departed[0])
		// Move down rather than reslice, so that the array does not
		// creep along and reallocate for ever.
		b.departed = b.departed[:copy(b.departed, b.departed[1:])]
	}
}

// WorkerInfo returns the name and host of the worker the master numbered
// id: a connected worker, or one of the last keepDeparted that left;
// false for an id it never gave or has forgotten. It may be called at
// any time, also after Close.
func (m *Master) WorkerInfo(id sched.WorkerID) (WorkerInfo, bool) {
	m.workers.mu.Lock()
	defer m.workers.mu.Unlock()
	wi, ok := m.workers.byID[id]
	return wi, ok
}
