package grid

import (
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// startingRun drives the master's loop functions, no network and no
// clock (the master's is moved on a second at a time), over one batch of
// one task on a lone one-slot worker that builds the run's problem after
// its join (a plugin's start), under a task timeout of 4 s and 2 retries.
// The worker says it starts, within bound (0: it says nothing of the
// kind, as a worker that predates Heartbeat.Starting), serves start after
// its join (< 0: never), and then answers a task took after it began
// running it (< 0: never, a hang; a cancel it answers at once). A worker
// dropped connects again under its name and starts again. It returns the
// batch's reply, whether it came within a day of virtual time, the
// workers dropped, and when the first was.
func startingRun(t *testing.T, policy string, bound, start, took time.Duration) (r evalReply, ended bool, drops int, firstDrop time.Duration) {
	t.Helper()
	m := policyBooks(t, policy)
	m.cfg.TaskTimeout, m.cfg.MaxRetries = 4*time.Second, 2
	m.cfg.IdleTimeout = 30 * time.Second
	m.liveCh = make(chan struct{}) // a drop wakes WaitWorkers' waiters
	var ids sched.WorkerID
	var joinedAt, heardAt time.Duration
	join := func() *mworker {
		ids++
		w := &mworker{id: ids, name: "w", host: "10.0.0.1", slots: 1, lastHeard: m.now()}
		w.conn = discardConn(t)
		m.byID[w.id], m.order, m.byName[w.name] = w, append(m.order, w), w
		m.nLive++
		m.step(sched.Event{Kind: sched.WorkerJoined, Worker: w.id, Slots: w.slots, Starting: true}, 0)
		if bound > 0 {
			m.handle(loopMsg{kind: msgFrame, w: w, msg: &Heartbeat{Starting: int64(bound)}})
		}
		joinedAt, heardAt = m.now(), -1
		return w
	}
	w := join()
	reply := make(chan evalReply, 1)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: reply})
	m.flush()
	gen := m.cur.id
	for elapsed := time.Duration(0); elapsed < 24*time.Hour; elapsed += time.Second {
		m.start = m.start.Add(-time.Second) // a second passes
		now := m.now()
		if heardAt < 0 && start >= 0 && now-joinedAt >= start {
			heardAt = now
			m.handle(loopMsg{kind: msgFrame, w: w, msg: &Results{}}) // it serves
		}
		if heardAt >= 0 {
			w.lastHeard = now // its slots report every few seconds
			// It runs an instance from when it got it or served,
			// whichever came later.
			if len(w.out) > 0 && took >= 0 && now-max(w.out[0].at, heardAt) >= took {
				m.handle(loopMsg{kind: msgFrame, w: w, msg: &Results{Items: []Result{{Gen: gen, ID: 0, F: 0.25, Exec: int64(took), Token: w.tokens[0]}}}})
			}
		}
		overdue := m.counts.Overdue
		m.checkDeadlines()
		switch {
		case w.left:
			if drops++; drops == 1 {
				firstDrop = now - joinedAt
			}
			m.handle(loopMsg{kind: msgClosed, w: w})
			w = join()
		case m.counts.Overdue > overdue:
			// Cut short (and sent again): the worker stops it at once.
			m.handle(loopMsg{kind: msgFrame, w: w, msg: &Results{Items: []Result{{Gen: gen, ID: 0, Cancelled: true, Ack: AckStopped, Token: w.tokens[0]}}}})
		}
		m.flush()
		select {
		case r := <-reply:
			return r, true, drops, firstDrop
		default:
		}
	}
	return evalReply{}, false, drops, firstDrop
}

// A worker whose problem takes three task timeouts to start (a plugin
// that says hello late), and says so, evaluates the tasks sent to it
// meanwhile: their clocks start once it serves. They ran from their send,
// and the run failed with no faulty evaluation ("task 0 failed 3 times
// (max retries 2): … ran past the task timeout of 4s", esrun -local and
// esworker alike, with a plugin 5 s to start). A worker that says nothing
// of its start is timed from the send as before.
func TestTaskTimeoutWaitsForTheStart(t *testing.T) {
	for _, policy := range sched.Names {
		r, ended, drops, _ := startingRun(t, policy, time.Minute, 12*time.Second, time.Second)
		if !ended || r.err != nil || len(r.f) != 1 || r.f[0] != 0.25 || drops != 0 {
			t.Errorf("%s: a start of 12 s under a timeout of 4 s: ended %v, %v, %v, %d workers dropped; want the value, none dropped", policy, ended, r.f, r.err, drops)
		}
		r, ended, drops, _ = startingRun(t, policy, 0, 12*time.Second, time.Second)
		var re *RetriesExhaustedError
		if !ended || !errors.As(r.err, &re) || !strings.Contains(re.Error(), "ran past the task timeout of 4s") || drops != 3 {
			t.Errorf("%s: a start of 12 s not announced: ended %v, %v, %d drops; want the task timed from its send, failed 3 times", policy, ended, r.err, drops)
		}
	}
}

// A run still ends when a worker that said it starts never serves (its
// plugin's start hangs): it is dropped once the bound it gave has passed,
// and each drop counts as a failure of its task, towards MaxRetries. Nor
// does one that serves and then hangs in its first evaluation hold the
// run: its task is timed from when it served.
func TestStartThatNeverEndsFails(t *testing.T) {
	for _, policy := range sched.Names {
		r, ended, drops, first := startingRun(t, policy, time.Minute, -1, time.Second)
		var re *RetriesExhaustedError
		if !ended || !errors.As(r.err, &re) || len(re.Failures) != 3 || !strings.Contains(re.Failures[0].Err, "its worker's problem did not start within 1m0s") || drops != 3 || first <= time.Minute || first > time.Minute+time.Second {
			t.Errorf("%s: a start that never ends: ended %v, %v, %d drops, the first %v after its join; want the task failed 3 times, each a minute after the join", policy, ended, r.err, drops, first)
		}
		r, ended, drops, first = startingRun(t, policy, time.Minute, 12*time.Second, -1)
		if !ended || !errors.As(r.err, &re) || !strings.Contains(re.Error(), "ran past the task timeout of 4s") || drops != 3 || first <= 12*time.Second+4*time.Second {
			t.Errorf("%s: a start of 12 s, then a hang: ended %v, %v, %d drops, the first %v after its join; want the task failed 3 times, timed from its start", policy, ended, r.err, drops, first)
		}
	}
}

// A worker's start is bounded by MaxStartBound whatever it claims, and
// counts from its first word: saying it again does not push it back. Its
// word that it starts is no word that it can evaluate: a refusal of the
// problem (its plugin did not start) stays on record (refusals.go).
func TestStartBound(t *testing.T) {
	m := policyBooks(t, "wq")
	w := joinBooks(m, 1, "w", "10.0.0.1", 1)
	w.heard = false
	m.refused("w", "worker: cannot build problem p (dim 2): no hello within 30s")
	before := m.now()
	m.handle(loopMsg{kind: msgFrame, w: w, msg: &Heartbeat{Starting: int64(24 * time.Hour)}})
	if from := w.startBy - MaxStartBound; w.startFor != MaxStartBound || from < before || from > m.now() {
		t.Errorf("a start of a day claimed: bound %v, by %v; want MaxStartBound from now", w.startFor, w.startBy)
	}
	if m.unable.byName["w"] == nil {
		t.Error("its word that it starts dropped its refusal")
	}
	by := w.startBy
	m.start = m.start.Add(-time.Minute)
	m.handle(loopMsg{kind: msgFrame, w: w, msg: &Heartbeat{Starting: int64(time.Hour)}})
	if w.startBy != by {
		t.Errorf("said again a minute later, its start ends by %v; want %v, as first said", w.startBy, by)
	}
}

// A Conn hands its handler a worker's word that it starts
// (Heartbeat.Starting), and absorbs every other heartbeat, as before.
func TestConnHandsOnTheWordThatAWorkerStarts(t *testing.T) {
	leaktest.Check(t)
	a, b := net.Pipe()
	ca, cb := NewConn(t.Context(), a, quietConfig()), NewConn(t.Context(), b, quietConfig())
	defer func() {
		ca.Close()
		cb.Close()
		<-ca.Done()
		<-cb.Done()
	}()
	got := make(chan Message, 8)
	cb.Start(func(m Message) { got <- m })
	for _, m := range []Message{&Heartbeat{}, &Heartbeat{Starting: -1}, &Heartbeat{Starting: 5e9}, &Heartbeat{Echo: true}, &Results{}} {
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if m := <-got; !reflect.DeepEqual(m, &Heartbeat{Starting: 5e9}) {
		t.Errorf("first message handed on: %T %+v; want the word that it starts", m, m)
	}
	if m, ok := (<-got).(*Results); !ok {
		t.Errorf("second message handed on: %T %+v; want the results, the other heartbeats (a negative Starting too) absorbed", m, m)
	}
}
