package grid

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
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

// Failing workers (MasterConfig.MaxFailures). A worker whose every
// answer is an error (a NaN from a broken build, a plugin that crashes)
// would otherwise take a task, fail it, and take the next, for ever:
// each task costs a retry, and the log a line.

// failing counts one failed evaluation of w (a task's or a check's), and
// sets w aside once MaxFailures failed in a row, if another worker can
// take its tasks; if none but workers set aside can, they are given
// tasks again in its place (each may fail only at times); with none at
// all it stays: a problem that fails everywhere is MaxRetries' to report.
func (m *Master) failing(w *mworker, why string) {
	w.fails++
	if w.aside || w.left || m.cfg.MaxFailures <= 0 || w.fails < m.cfg.MaxFailures {
		return
	}
	now := m.now()
	other := slices.ContainsFunc(m.order, func(o *mworker) bool { return o != w && m.present(o, now) })
	aside := slices.ContainsFunc(m.order, func(o *mworker) bool { return o.aside && !o.left && !o.closed })
	if !other && !aside {
		return
	}
	w.aside = true
	m.counts.SetAside++
	m.log.Warn(fmt.Sprintf("worker set aside: its last %d evaluations failed; it gets no more tasks while this connection lasts, and its tasks go to other workers", w.fails),
		"worker", w.name, "worker_id", w.id, "host", w.host, "last_error", logx.Cut(why, logx.MaxErrText))
	m.setSlots(w, 0)
	if !other {
		m.giveBack(w, "the only other worker open to tasks was set aside for failing")
	}
}

// usable reports whether w may be given tasks, lateness aside.
func (m *Master) usable(w *mworker) bool {
	if w.left || w.closed || w.draining || w.aside || m.v.exIDs[w.id] {
		return false
	}
	slots, ok := m.cfg.Plan.SlotsFor(w.name)
	return !ok || slots > 0
}

// open reports whether w may be given tasks now.
func (m *Master) open(w *mworker) bool { return m.usable(w) && !w.late }

// present reports whether w may be given tasks now or soon: open, or
// late for less than FirstDeadline (one late for longer may be silent).
func (m *Master) present(w *mworker, now time.Duration) bool {
	return m.usable(w) && (!w.late || now-w.lateSince < m.cfg.FirstDeadline)
}

// takeBack gives tasks again to the workers set aside once no other
// worker has been open to tasks for FirstDeadline while a batch waits:
// those left may all be silent, or gone; a worker that fails only at
// times then computes again, and one that fails everything ends the
// batch by MaxRetries rather than leave it waiting.
func (m *Master) takeBack(now time.Duration) {
	b := m.cur
	if b == nil || b.replied || m.counts.SetAside == m.counts.TakenBack || slices.ContainsFunc(m.order, m.open) {
		m.noneOpen = -1
		return
	}
	if m.noneOpen < 0 {
		m.noneOpen = now
	}
	if now-m.noneOpen >= m.cfg.FirstDeadline {
		m.noneOpen = -1
		m.giveBack(nil, "no other worker has been open to tasks for the first deadline")
	}
}

// giveBack gives tasks again to every worker set aside but except.
func (m *Master) giveBack(except *mworker, why string) {
	for _, w := range m.order {
		if !w.aside || w == except || w.left || w.closed {
			continue
		}
		w.aside, w.fails = false, 0
		m.counts.TakenBack++
		slots := w.slots
		if s, ok := m.cfg.Plan.SlotsFor(w.name); ok {
			slots = s
		}
		m.log.Warn("worker set aside for failing is given tasks again: "+why, "worker", w.name, "worker_id", w.id)
		m.setSlots(w, slots)
	}
}
