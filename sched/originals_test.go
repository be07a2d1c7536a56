package sched

import (
	"testing"
	"time"
)

// The counters agree with the batch (issue 25): every task sent counts one
// original, however often it is sent again; every further instance counts
// as a resend (sent again from Q) or a replica (sent as one, issue 27), so
// originals + resends + replicas = instances sent. Each case sends
// tasks again by one of the ways a task goes back to Q.
func TestOriginalsAreTasks(t *testing.T) {
	tests := []struct {
		name, policy string
		n            int
		events       []Event
	}{
		{
			// Overdue withdraws w1's held t2; it goes to w2 again.
			name: "held tasks withdrawn from a late worker", policy: "rwq", n: 6,
			events: []Event{overdue(1, 0), res(2, 1), res(2, 3), res(2, 0), res(2, 2), res(2, 4), res(2, 5)},
		},
		{
			// cyclic deals a late worker's share again.
			name: "a late worker's static share dealt again", policy: "cyclic", n: 4,
			events: []Event{overdue(1, 0), res(2, 1), res(2, 3), res(2, 0), res(2, 2)},
		},
		{
			name: "a failed task retried", policy: "wq", n: 3,
			events: []Event{failed(1, 0), res(2, 1), res(2, 0), res(1, 2)},
		},
		{
			name: "a departed worker's tasks", policy: "r3q", n: 5,
			events: []Event{leave(1), res(2, 1), res(2, 3), res(2, 0), res(2, 2), res(2, 4)},
		},
		{
			name: "a draining worker's held task returned", policy: "rwq", n: 4,
			events: []Event{draining(1), returned(1, 2), res(2, 1), res(2, 3), res(1, 0), res(2, 2)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.policy, Config{})
			if err != nil {
				t.Fatal(err)
			}
			l := NewLedger(LedgerConfig{})
			sends, replicas := 0, 0
			var acts []Action
			at := time.Duration(0)
			step := func(ev Event) {
				at += time.Millisecond
				acts = p.Step(ev, acts[:0])
				l.Step(at, ev, acts)
				for _, a := range acts {
					if a.Kind == Send {
						sends++
						if a.Replica {
							replicas++
						}
					}
				}
			}
			step(join(1, 1))
			step(join(2, 1))
			step(batch(tc.n))
			for _, ev := range tc.events {
				step(ev)
			}
			if !p.Done() {
				t.Fatal("the batch did not end")
			}
			c := l.Report().Generations[0].Counts
			// Each case sends a task again from Q: a resend, not a replica.
			if c.Originals != tc.n || c.Replicas != replicas || c.Resends == 0 || c.Originals+c.Resends+c.Replicas != sends {
				t.Errorf("%d originals, %d resends and %d replicas for %d tasks and %d instances sent, %d as replicas",
					c.Originals, c.Resends, c.Replicas, tc.n, sends, replicas)
			}
		})
	}
}

// An original withdrawn before it left (Unsent) while a replica of its
// task did go: the replica is the task's original now, for the worker it
// went to too.
func TestUnsentOriginalLeavesTheReplicaOriginal(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
	l.Step(ms, alive(2), []Action{{Kind: Send, Worker: 2, Task: 0, Replica: true}})
	l.Step(ms, alive(1), []Action{{Kind: Cancel, Worker: 1, Task: 0, Held: true}})
	l.Unsent(1, 0)
	rep := l.Report()
	if c := rep.Counts; c.Originals != 1 || c.Replicas != 0 {
		t.Errorf("run: %d originals, %d replicas; want 1 and 0", c.Originals, c.Replicas)
	}
	for _, w := range rep.Workers {
		want := map[WorkerID]int{1: 0, 2: 1}[w.Worker]
		if w.Originals != want || w.Replicas != 0 {
			t.Errorf("worker %d: %d originals, %d replicas; want %d and 0", w.Worker, w.Originals, w.Replicas, want)
		}
	}
}

// An original withdrawn before it left (Unsent) while a resend of its task
// did go: the resend is the task's original now, and no resend is left.
func TestUnsentOriginalLeavesTheResendOriginal(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
	l.Step(ms, alive(2), []Action{{Kind: Send, Worker: 2, Task: 0}})
	if c := l.Report().Counts; c.Originals != 1 || c.Resends != 1 || c.Replicas != 0 {
		t.Errorf("sent twice: %d originals, %d resends, %d replicas; want 1, 1 and 0", c.Originals, c.Resends, c.Replicas)
	}
	l.Step(ms, alive(1), []Action{{Kind: Cancel, Worker: 1, Task: 0, Held: true}})
	l.Unsent(1, 0)
	if c := l.Report().Counts; c.Originals != 1 || c.Resends != 0 || c.Replicas != 0 {
		t.Errorf("the first withdrawn: %d originals, %d resends, %d replicas; want 1, 0 and 0", c.Originals, c.Resends, c.Replicas)
	}
}

// A late worker's whole static share back in Q, with a task it failed
// among them, is dealt again in one pass over Q: taken entries leave it,
// where each later take scanned them all again (quadratic, minutes of the
// master's loop for λ = 10⁵ under cyclic).
func TestRequeuedShareLeavesQ(t *testing.T) {
	pi, err := New("cyclic", Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := pi.(*policy)
	var acts []Action
	for _, ev := range []Event{join(1, 1), join(2, 1), batch(20000), overdue(1, 0)} {
		acts = p.Step(ev, acts[:0])
	}
	if p.qLive != 0 || p.q.size > 32 {
		t.Errorf("after the late worker's share went to the other: %d tasks in Q, %d entries; want 0 and few", p.qLive, p.q.size)
	}
}

// A worker's share back in Q with a task it failed among them, and the
// other worker gone: every task is dealt to it once, the failed one after
// those it may take, and Q is left with no taken entries.
func TestQDealtOnceAroundAnExcludedTask(t *testing.T) {
	pi, err := New("cyclic", Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := pi.(*policy)
	var acts []Action
	sent := map[TaskID]int{}
	for _, ev := range []Event{join(1, 1), join(2, 1), batch(2000), overdue(1, 0), leave(2), alive(1)} {
		acts = p.Step(ev, acts[:0])
		for _, a := range acts {
			if a.Kind == Send && ev.Kind == Measured {
				sent[a.Task]++
			}
		}
	}
	if len(sent) != 2000 || p.q.size > 32 {
		t.Errorf("%d tasks dealt, Q has %d entries, %d live; want 2000, few", len(sent), p.q.size, p.qLive)
	}
	for ti, n := range sent {
		if n != 1 {
			t.Errorf("task %d dealt %d times", ti, n)
		}
	}
}
