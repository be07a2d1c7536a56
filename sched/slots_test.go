package sched

import (
	"testing"
)

func slotsTo(w WorkerID, slots int) Event { return Event{Kind: SlotsChanged, Worker: w, Slots: slots} }

// SlotsChanged, traced by hand. docs/papers.md §4 chooses which machines to use
// and how many processes each runs; a plan carries that choice to the
// policy as one event per worker, and so does a calibration that varies a
// worker's concurrency between batches.
func TestSlotsChangedHand(t *testing.T) {
	tests := []struct {
		name, policy string
		steps        []scriptStep
		done         bool
	}{
		{
			// More slots: the worker has room at once and takes the head
			// of Q. Reference: docs/papers.md §4, "how many processes on the
			// fast ones".
			name: "wq: more slots take work at once", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(4), "s0w1"},
				{slotsTo(1, 3), "s1w1 s2w1"},
				{res(1, 0), "a0w1 s3w1"},
				{res(1, 1), "a1w1"},
				{res(1, 2), "a2w1"},
				{res(1, 3), "a3w1"},
			},
			done: true,
		},
		{
			// Fewer slots: nothing running is cancelled; the worker gets
			// nothing new until it runs fewer than its new slots.
			name: "wq: fewer slots keep what runs", policy: "wq",
			steps: []scriptStep{
				{join(1, 3), ""},
				{batch(5), "s0w1 s1w1 s2w1"},
				{slotsTo(1, 1), ""},
				{res(1, 0), "a0w1"}, // two left on it, room for one
				{res(1, 1), "a1w1"},
				{res(1, 2), "a2w1 s3w1"},
				{res(1, 3), "a3w1 s4w1"},
				{res(1, 4), "a4w1"},
			},
			done: true,
		},
		{
			// Set aside under rwq: w1 runs t0 and holds t2. The held t2 is
			// withdrawn and goes to the head of Q; t0 runs on and its
			// result counts; w1 gets nothing more. Reference: docs/papers.md
			// §4, "which machines to use at all".
			name: "rwq: a worker set aside gives back what it holds", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(6), "s0w1 s1w2 s2w1 s3w2"},
				{slotsTo(1, 0), "c2w1h"},
				{res(1, 0), "a0w1"},      // accepted; w1 takes nothing
				{res(2, 1), "a1w2 s2w2"}, // t2 first: back at the head of Q
				{res(2, 3), "a3w2 s4w2"},
				{res(2, 2), "a2w2 s5w2"},
				{res(2, 4), "a4w2"},
				{res(2, 5), "a5w2"},
			},
			done: true,
		},
		{
			// Set aside and taken back: slots ≥ 1 make it open again.
			name: "wq: set aside, then given slots again", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{slotsTo(2, 0), ""},
				{batch(4), "s0w1"}, // w2 is aside from the start
				{res(1, 0), "a0w1 s1w1"},
				{slotsTo(2, 2), "s2w2 s3w2"},
				{res(2, 2), "a2w2"},
				{res(1, 1), "a1w1"},
				{res(2, 3), "a3w2"},
			},
			done: true,
		},
		{
			// Set aside under cyclic: the withdrawn static share is dealt
			// again over the workers still in use.
			name: "cyclic: a worker set aside has its share dealt again", policy: "cyclic",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(4), "s0w1 s1w2 s2w1 s3w2"},
				{slotsTo(1, 0), "c2w1h s2w2"},
				{res(2, 1), "a1w2"},
				{res(1, 0), "a0w1"},
				{res(2, 3), "a3w2"},
				{res(2, 2), "a2w2"},
			},
			done: true,
		},
		{
			// rr: what an aside worker still runs is live, so once Q is
			// empty it is in R and replicated like any other task.
			name: "rr: an aside worker's running task is replicated", policy: "rr",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{slotsTo(1, 0), ""},      // nothing held: nothing withdrawn
				{res(2, 1), "a1w2 s2w2"}, // Q empty: R = {t0, t2}
				{res(2, 2), "a2w2 r0w2"}, // t0, running on the aside w1
				{res(2, 0), "a0w2 c0w1r"},
			},
			done: true,
		},
		{
			name: "unknown, departed and unchanged are ignored", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{slotsTo(9, 4), ""},
				{slotsTo(1, 1), ""},
				{leave(2), ""},
				{slotsTo(2, 4), ""},
				{slotsTo(1, 0), ""},
				{slotsTo(1, 0), ""},
				{res(1, 0), "a0w1"},
				{slotsTo(1, 1), "s1w1"},
				{res(1, 1), "a1w1 s2w1"},
				{res(1, 2), "a2w1"},
			},
			done: true,
		},
		{
			// A late worker stays late: new slots do not make it answer.
			name: "wq: a late worker given slots stays late", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{overdue(1, 0), "c0w1r"},
				{slotsTo(1, 3), ""},
				{res(2, 1), "a1w2 s0w2"},
				{res(1, 0), "a0w1 c0w2r s2w1"}, // answered: open, with its 3 slots
				{res(1, 2), "a2w1"},
			},
			done: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc.policy, Config{}, tc.steps, tc.done) })
	}
}

// Under every policy a worker set aside is sent nothing from the step that
// sets it aside until it is given slots again, the batch still ends, and
// every worker's instances stay within its capacity afterwards.
func TestSlotsChangedEveryPolicy(t *testing.T) {
	for _, name := range Names {
		for _, adaptive := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				p, err := New(name, Config{Adaptive: adaptive})
				if err != nil {
					t.Fatal(err)
				}
				live := map[WorkerID]map[TaskID]bool{1: {}, 2: {}, 3: {}}
				apply := func(ev Event) []Action {
					acts := p.Step(ev, nil)
					for _, a := range acts {
						switch a.Kind {
						case Send:
							live[a.Worker][a.Task] = true
						case Cancel:
							delete(live[a.Worker], a.Task)
						}
					}
					return acts
				}
				apply(join(1, 2))
				apply(join(2, 1))
				apply(join(3, 1))
				apply(batch(40))
				aside := true
				for _, a := range apply(slotsTo(3, 0)) {
					if a.Kind == Send && a.Worker == 3 {
						t.Fatalf("sent to the worker being set aside: %+v", a)
					}
				}
				for step := 0; !p.Done() && step < 1000; step++ {
					// Results in a fixed rotation over the workers, the
					// oldest instance of each first; worker 3 gets slots
					// back after 10 steps.
					if step == 10 {
						apply(slotsTo(3, 2))
						aside = false
					}
					w := WorkerID(1 + step%3)
					var oldest TaskID = -1
					for t := range live[w] {
						if oldest < 0 || t < oldest {
							oldest = t
						}
					}
					if oldest < 0 {
						continue
					}
					delete(live[w], oldest)
					for _, a := range apply(Event{Kind: ResultArrived, Worker: w, Task: oldest, Exec: 1000, RTT: 100}) {
						if a.Kind == Send && a.Worker == 3 && aside {
							t.Fatalf("step %d: sent to a worker set aside: %+v", step, a)
						}
					}
				}
				if !p.Done() {
					t.Fatal("the batch never ended")
				}
			})
		}
	}
}
