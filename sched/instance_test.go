package sched

import (
	"slices"
	"testing"
	"time"
)

// OnInstance sees every instance end once, with its kind, whether it was
// a replica and its interval; the workers' reports say when they joined
// and left.
func TestLedgerInstances(t *testing.T) {
	var got []Instance
	l := NewLedger(LedgerConfig{OnInstance: func(in Instance) { got = append(got, in) }})
	s := time.Second
	l.Step(0, Event{Kind: WorkerJoined, Worker: 1, Slots: 1}, nil)
	l.Step(0, Event{Kind: WorkerJoined, Worker: 2, Slots: 2}, nil)
	// Batch 0: t0 to w1, t1 and t2 to w2; t2 fails on w2 and goes to w1,
	// held behind t0; t1 finishes, w2 gets a replica of t0, which wins
	// (t0 on w1 is stopped while running), then one of t2, which wins too
	// (t2 held on w1 is dropped).
	l.Step(0, Event{Kind: BatchStarted, N: 3}, []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}, {Kind: Send, Worker: 2, Task: 2}})
	l.Step(500*time.Millisecond, Event{Kind: Failed, Worker: 2, Task: 2}, []Action{{Kind: Send, Worker: 1, Task: 2}})
	l.Ran(Execution{Worker: 2, Task: 1, Start: 0, End: 2 * s})
	l.Step(2*s, Event{Kind: ResultArrived, Worker: 2, Task: 1}, []Action{{Kind: Accept, Worker: 2, Task: 1}, {Kind: Send, Worker: 2, Task: 0, Replica: true}})
	l.Ran(Execution{Worker: 2, Task: 0, Start: 2 * s, End: 3 * s})
	l.Step(3*s, Event{Kind: ResultArrived, Worker: 2, Task: 0}, []Action{{Kind: Accept, Worker: 2, Task: 0}, {Kind: Cancel, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 2, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: 3 * s, Cancelled: true})
	l.Ran(Execution{Worker: 2, Task: 2, Start: 3 * s, End: 4 * s})
	l.Step(4*s, Event{Kind: ResultArrived, Worker: 2, Task: 2}, []Action{{Kind: Accept, Worker: 2, Task: 2}, {Kind: Cancel, Worker: 1, Task: 2, Held: true}})
	l.Dropped(4100*time.Millisecond, 1, 2)
	l.Dropped(4200*time.Millisecond, 1, 2) // a second answer to one cancel: nothing
	l.Step(5*s, Event{Kind: WorkerLeft, Worker: 2}, nil)
	// Batch 1: an execution of batch 0 reported late is no longer on the
	// books: whether it was a replica is not known.
	l.Step(6*s, Event{Kind: BatchStarted, N: 1}, []Action{{Kind: Send, Worker: 1, Task: 0}})
	l.Ran(Execution{Worker: 1, Task: 5, Start: 5 * s, End: 6500 * time.Millisecond})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 6 * s, End: 7 * s})
	l.Step(7*s, Event{Kind: ResultArrived, Worker: 1, Task: 0}, []Action{{Kind: Accept, Worker: 1, Task: 0}})
	l.Finish(7 * s)

	want := []Instance{
		{Worker: 2, Task: 2, Gen: 0, Known: true, Kind: InstanceFailed, Start: 0, End: 500 * time.Millisecond},
		{Worker: 2, Task: 1, Gen: 0, Known: true, Kind: InstanceFinished, Start: 0, End: 2 * s},
		{Worker: 2, Task: 0, Gen: 0, Replica: true, Known: true, Kind: InstanceFinished, Start: 2 * s, End: 3 * s},
		{Worker: 1, Task: 0, Gen: 0, Known: true, Kind: InstanceCancelledRunning, Start: 0, End: 3 * s},
		{Worker: 2, Task: 2, Gen: 0, Replica: true, Known: true, Kind: InstanceFinished, Start: 3 * s, End: 4 * s},
		{Worker: 1, Task: 2, Gen: 0, Replica: true, Known: true, Kind: InstanceCancelledHeld, Start: 500 * time.Millisecond, End: 4100 * time.Millisecond},
		{Worker: 1, Task: 5, Gen: 0, Kind: InstanceFinished, Start: 5 * s, End: 6500 * time.Millisecond},
		{Worker: 1, Task: 0, Gen: 1, Known: true, Kind: InstanceFinished, Start: 6 * s, End: 7 * s},
	}
	if !slices.Equal(got, want) {
		t.Errorf("instances:\n got %+v\nwant %+v", got, want)
	}
	rep := l.Report()
	var kinds [InstanceFailed + 1]int
	for _, in := range got {
		kinds[in.Kind]++
	}
	if kinds[InstanceCancelledHeld] != rep.CancelsHeld || kinds[InstanceCancelledRunning] != rep.CancelsRunning {
		t.Errorf("instances cancelled held %d, running %d; the counts say %d and %d", kinds[InstanceCancelledHeld], kinds[InstanceCancelledRunning], rep.CancelsHeld, rep.CancelsRunning)
	}
	for _, w := range rep.Workers {
		switch w.Worker {
		case 1:
			if w.Joined != 0 || w.Left != -1 {
				t.Errorf("w1 joined %v, left %v; want 0 and -1 (present)", w.Joined, w.Left)
			}
		case 2:
			if w.Joined != 0 || w.Left != 5*s {
				t.Errorf("w2 joined %v, left %v; want 0 and 5s", w.Joined, w.Left)
			}
		}
	}
}
