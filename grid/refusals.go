package grid

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Workers that cannot evaluate the problem. A worker may connect and then
// refuse the master's problem (a Reject after the Welcome: it does not
// build there, e.g. a plugin that does not start). Such a worker retries,
// and without a record of it the run would wait for ever for one that
// can. (A worker that does not offer the problem is refused in the
// handshake and never joins: the master waits for one that does, as
// for any worker that has not come yet.) The loop keeps each one's latest reason; once no
// connected worker can evaluate, and every worker that tried has been
// refused at least refusalsToFail times, for FirstDeadline (the wait for
// a first answer, 30 s by default), the batch fails with every worker's
// reason, as does a wait for MinWorkers. A worker that sends results
// (status reports included) can evaluate: its record is dropped.

// ErrNoWorkerCan is wrapped by the error of an Evaluate (or of the wait
// for MinWorkers) that failed because every worker that tried refused the
// problem.
var ErrNoWorkerCan = errors.New("no worker can evaluate the problem")

// refusalsToFail is how often each worker must have been refused before
// the run fails: once may be a worker that was starting up.
const refusalsToFail = 2

// maxRefusalsListed bounds the workers the error lists.
const maxRefusalsListed = 16

// unableState is the loop's record of refusals.
type unableState struct {
	byName map[string]*refusal // loop-owned
	since  time.Duration       // since when no connected worker can evaluate; -1: one can
	err    atomic.Pointer[error]
}

// refusal is one worker's latest refusal.
type refusal struct {
	reason string
	count  int
}

// refused records, on the loop, that the worker name was refused for
// reason, and logs the first refusal.
func (m *Master) refused(name, reason string) {
	u := &m.unable
	if u.byName == nil {
		u.byName = make(map[string]*refusal)
		u.since = -1
	}
	r := u.byName[name]
	if r == nil {
		if len(u.byName) >= maxNamesKept {
			return // past the bound, not recorded, nor logged (master_loop.go)
		}
		r = &refusal{}
		u.byName[name] = r
	}
	r.count++
	r.reason = reason
	if r.count == 1 {
		// Once: its reason may change at every attempt (a back-off that
		// counts down); the run's error gives the latest.
		m.log.Warn("worker cannot evaluate the problem; the run fails if no worker can", "worker", name,
			"reason", reason, "within", m.cfg.FirstDeadline)
	}
}

// noteRefusal records a closed worker's refusal of the problem (its
// connection ended with its Reject), and reports whether there was one.
func (m *Master) noteRefusal(w *mworker) bool {
	var rej *RejectError
	if !errors.As(w.conn.Err(), &rej) {
		return false
	}
	m.refused(w.name, rej.Reason)
	return true
}

// canEvaluate drops w's record of refusals: it sent results.
func (m *Master) canEvaluate(w *mworker) {
	if m.unable.byName != nil {
		delete(m.unable.byName, w.name)
	}
}

// checkRefusals runs on the loop's ticks: it fails the batch (and any
// wait for workers) once no worker can evaluate, as the comment at the
// top of this file says.
func (m *Master) checkRefusals() {
	u := &m.unable
	if len(u.byName) == 0 {
		u.since = -1
		u.err.Store(nil)
		return
	}
	now := m.now()
	for name, w := range m.byName {
		if _, refused := u.byName[name]; !refused && !w.left {
			u.since = -1 // one can
			u.err.Store(nil)
			return
		}
	}
	if u.since < 0 {
		u.since = now
	}
	if now-u.since < m.cfg.FirstDeadline {
		return
	}
	for _, r := range u.byName {
		if r.count < refusalsToFail {
			return
		}
	}
	err := m.unableError()
	if u.err.Load() == nil {
		m.log.Error("no worker can evaluate the problem; the run fails", "err", err)
		u.err.Store(&err)
		m.setLive(m.nLive, false) // wakes WaitWorkers
	}
	if b := m.cur; b != nil && !b.replied {
		b.fail(fmt.Errorf("grid: generation %d: %w", b.gen, err))
	}
}

// unableError lists each refusing worker's reason, by name.
func (m *Master) unableError() error {
	names := make([]string, 0, len(m.unable.byName))
	for name := range m.unable.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, name := range names {
		if i == maxRefusalsListed {
			fmt.Fprintf(&b, "; and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", name, m.unable.byName[name].reason)
	}
	return fmt.Errorf("%w %q for %v: %s", ErrNoWorkerCan, m.cfg.Problem.Name, m.cfg.FirstDeadline, b.String())
}

// unableErr is the run's failure for want of a worker that can evaluate,
// if it has failed so (for WaitWorkers).
func (m *Master) unableErr() error {
	if p := m.unable.err.Load(); p != nil {
		return *p
	}
	return nil
}
