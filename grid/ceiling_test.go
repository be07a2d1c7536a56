package grid

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// ceilingRun drives the master's loop functions, no network (a worker's
// frames go into a pipe that discards them) and no clock (the master's
// is moved on a second at a time), over one batch of one task on a lone
// one-slot worker measured at 1 s, under the usual deadlines and a
// 10-minute task timeout. A task instance that has run took answers
// with the value (took < 0: never, a hang); each instance cut short as
// overdue is stopped at once, as the agent answers a cancel (a hang deaf
// to it: once abandoned), and a worker dropped for the task timeout
// connects again under its name. It returns the batch's reply, and how
// often the task was cut short and timed out, once the batch is
// answered or after a day of virtual time.
func ceilingRun(t *testing.T, policy string, took time.Duration) (r evalReply, ended bool, cuts, timeouts int, elapsed time.Duration) {
	t.Helper()
	return ceilingRunTimeout(t, policy, took, 0)
}

// ceilingRunTimeout is ceilingRun under the task timeout given (0: the
// 10 minutes).
func ceilingRunTimeout(t *testing.T, policy string, took, timeout time.Duration) (r evalReply, ended bool, cuts, timeouts int, elapsed time.Duration) {
	t.Helper()
	m := policyBooks(t, policy)
	if timeout > 0 {
		m.cfg.TaskTimeout = timeout
	}
	m.liveCh = make(chan struct{}) // a drop wakes WaitWorkers' waiters
	var ids sched.WorkerID
	join := func() *mworker {
		ids++
		w := joinBooks(m, ids, "w", "10.0.0.1", 1)
		m.nLive++
		w.conn = discardConn(t)
		return w
	}
	w := join()
	m.measured(w, time.Second)
	reply := make(chan evalReply, 1)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: reply})
	m.flush()
	gen := m.cur.id
	for ; elapsed < 24*time.Hour; elapsed += time.Second {
		m.start = m.start.Add(-time.Second) // a second passes
		w.lastHeard = m.now()               // its slots report every few seconds
		started := time.Duration(-1)        // of the instance running
		if len(w.out) > 0 {
			started = w.out[0].started
		}
		if run := m.now() - started; started >= 0 && took >= 0 && run >= took {
			m.results(w, &Results{Items: []Result{{Gen: gen, ID: 0, F: 0.25, Exec: int64(run), Token: w.tokens[0]}}})
		}
		overdue := m.counts.Overdue
		m.checkDeadlines()
		switch {
		case w.left:
			// Dropped at the task timeout: its connection closes, and
			// its agent connects again.
			timeouts++
			m.handle(loopMsg{kind: msgClosed, w: w})
			w = join()
		case m.counts.Overdue > overdue:
			// Cut short (and sent again): the agent stops it, or,
			// deaf to its cancel, abandons it, and says so.
			cuts++
			run := m.now() - started
			m.results(w, &Results{Items: []Result{{Gen: gen, ID: 0, Cancelled: true, Ack: AckStopped, Exec: int64(run), Token: w.tokens[0]}}})
		}
		m.flush()
		select {
		case r := <-reply:
			return r, true, cuts, timeouts, elapsed
		default:
		}
	}
	return evalReply{}, false, cuts, timeouts, elapsed
}

// TestLongTaskEnds: a task of 7 minutes, within the task timeout of 10,
// on a worker whose deadline is 4 s, ends with its value under every
// policy. Its deadline doubled at each overrun up to half the timeout,
// where it was cut short and sent again for ever. So does one of 75
// minutes under a timeout of 3 hours (its ceiling 90 minutes): its
// deadline doubles at most ten times, to 68 min 16 s, below the
// ceiling, and it was cut there for ever, never marked as cut at the
// ceiling (nor did one that always hangs ever reach the timeout).
func TestLongTaskEnds(t *testing.T) {
	for _, c := range []struct{ took, timeout time.Duration }{{7 * time.Minute, 0}, {75 * time.Minute, 3 * time.Hour}} {
		for _, policy := range sched.Names {
			r, ended, cuts, timeouts, elapsed := ceilingRunTimeout(t, policy, c.took, c.timeout)
			switch {
			case !ended:
				t.Errorf("%s: a task of %v still open after a day, cut short %d times, %d task timeouts", policy, c.took, cuts, timeouts)
			case r.err != nil || len(r.f) != 1 || r.f[0] != 0.25:
				t.Errorf("%s: %v, %v after %d cuts and %d timeouts; want its value", policy, r.f, r.err, cuts, timeouts)
			default:
				t.Logf("%s: a task of %v ended after %d cuts, %v of virtual time", policy, c.took, cuts, elapsed)
			}
		}
	}
}

// TestHangingTaskFails: a task that hangs on every try fails its batch
// once it has run past the task timeout MaxRetries+1 times, under every
// policy, with an error that names the timeout. It was cut short at half
// the timeout and sent again for ever, never reaching the timeout.
func TestHangingTaskFails(t *testing.T) {
	for _, policy := range sched.Names {
		r, ended, cuts, timeouts, elapsed := ceilingRun(t, policy, -1)
		if !ended {
			t.Errorf("%s: a task that always hangs still open after a day, cut short %d times, %d task timeouts", policy, cuts, timeouts)
			continue
		}
		var re *RetriesExhaustedError
		if !errors.As(r.err, &re) || len(re.Failures) != 4 || re.Task != 0 {
			t.Errorf("%s: %v after %d cuts and %d timeouts; want task 0 to fail 4 times (max retries 3)", policy, r.err, cuts, timeouts)
			continue
		}
		const timeout = 10 * time.Minute // policyBooks'
		want := fmt.Sprintf("ran past the task timeout of %v", timeout)
		for _, f := range re.Failures {
			if f.Err != want {
				t.Errorf("%s: failure %q, want %q", policy, f.Err, want)
			}
		}
		if timeouts != 4 || !strings.Contains(r.err.Error(), want) {
			t.Errorf("%s: %d task timeouts, error %q; want 4, naming the timeout", policy, timeouts, r.err)
		}
		// The doublings below the ceiling (under 1.5 × the timeout in
		// all), then MaxRetries+1 timeouts; a second a step.
		if bound := 3*timeout/2 + 4*timeout + time.Duration(cuts+timeouts)*time.Second; elapsed > bound {
			t.Errorf("%s: failed after %v of virtual time, over %v", policy, elapsed, bound)
		}
		t.Logf("%s: failed after %d cuts and %d timeouts, %v of virtual time: %v", policy, cuts, timeouts, elapsed, r.err)
	}
}

// TestCeilingIsTheTasks: a task cut short at the deadlines' ceiling on one
// worker (here at its own deadline of 6 minutes, past the ceiling of 5)
// runs without a deadline on the next, however short that one's own
// deadline: only the task timeout ends it. The rule was recomputed from
// the task's overruns and the next worker's deadline, 4 s, doubled once
// below the ceiling: the task, which may hang everywhere, was cut at 8 s,
// and on until its doublings there reached the ceiling again.
func TestCeilingIsTheTasks(t *testing.T) {
	m := policyBooks(t, "wq")
	slow := joinBooks(m, 1, "slow", "10.0.0.1", 1)
	fast := joinBooks(m, 2, "fast", "10.0.0.2", 1)
	m.measured(slow, 90*time.Second)
	m.measured(fast, time.Second)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: make(chan evalReply, 1)})
	if len(slow.out) != 1 || len(fast.out) != 0 {
		t.Fatalf("setup: task 0 on slow %d times, on fast %d; want on slow", len(slow.out), len(fast.out))
	}
	step := func(d time.Duration) {
		m.start = m.start.Add(-d)
		slow.lastHeard, fast.lastHeard = m.now(), m.now()
		m.checkDeadlines()
	}
	step(m.deadline(slow) + time.Second)
	if m.counts.Overdue != 1 || len(fast.out) != 1 {
		t.Fatalf("setup: %d overdue, task 0 on fast %d times; want it cut on slow and sent to fast", m.counts.Overdue, len(fast.out))
	}
	for run := time.Duration(0); run < 9*time.Minute; run += time.Second {
		step(time.Second)
		if m.counts.Overdue != 1 {
			t.Fatalf("task 0, cut short at the ceiling on slow, cut short again on fast after %v (fast's deadline %v)", run+time.Second, m.deadline(fast))
		}
	}
}
