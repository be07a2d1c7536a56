package sched

import (
	"fmt"
	"strings"
	"testing"
)

// A script is a list of events, each with the exact actions it must cause.
type scriptStep struct {
	ev   Event
	want string // actions, space-separated: s<t>w<w> send, r<t>w<w> replica, c<t>w<w>h|r cancel, a<t>w<w> accept
}

func join(w WorkerID, slots int) Event { return Event{Kind: WorkerJoined, Worker: w, Slots: slots} }
func leave(w WorkerID) Event           { return Event{Kind: WorkerLeft, Worker: w} }
func batch(n int) Event                { return Event{Kind: BatchStarted, N: n} }
func res(w WorkerID, t TaskID) Event   { return Event{Kind: ResultArrived, Worker: w, Task: t} }

func fmtActions(acts []Action) string {
	var b []string
	for _, a := range acts {
		switch {
		case a.Kind == Send && a.Replica:
			b = append(b, fmt.Sprintf("r%dw%d", a.Task, a.Worker))
		case a.Kind == Send:
			b = append(b, fmt.Sprintf("s%dw%d", a.Task, a.Worker))
		case a.Kind == Cancel && a.Held:
			b = append(b, fmt.Sprintf("c%dw%dh", a.Task, a.Worker))
		case a.Kind == Cancel:
			b = append(b, fmt.Sprintf("c%dw%dr", a.Task, a.Worker))
		case a.Kind == Accept:
			b = append(b, fmt.Sprintf("a%dw%d", a.Task, a.Worker))
		}
	}
	return strings.Join(b, " ")
}

func TestSemantics(t *testing.T) {
	tests := []struct {
		name, policy string
		steps        []scriptStep
		done         bool
	}{
		{
			name: "a departed worker's task goes back to the head of Q", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{leave(1), ""},           // t0 back to Q, no one free
				{res(2, 1), "a1w2 s0w2"}, // t0 before t2
				{res(2, 0), "a0w2 s2w2"},
				{res(2, 2), "a2w2"},
			},
			done: true,
		},
		{
			name: "a late result from a departed worker is accepted once", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{leave(1), ""},
				{res(1, 0), "a0w1"}, // accepted; t0 leaves Q
				{res(2, 1), "a1w2"}, // nothing left to send
				{res(1, 0), ""},
			},
			done: true,
		},
		{
			name: "a departed worker's result cancels the live copies", policy: "rr",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{res(2, 1), "a1w2 r0w2"}, // Q empty: R = {t0}, w2 idle
				{leave(1), ""},           // t0 still live on w2: not given back
				{res(1, 0), "a0w1 c0w2r"},
			},
			done: true,
		},
		{
			name: "a worker joining mid-batch gets work from Q", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(5), "s0w1 s1w1"},
				{join(2, 1), "s2w2 s3w2"},
				{res(1, 0), "a0w1 s4w1"},
			},
		},
		{
			name: "a worker joining once Q is empty gets a replica (rr)", policy: "rr",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(1), "s0w1"},
				{join(2, 1), "r0w2"},
				{res(2, 0), "a0w2 c0w1r"},
			},
			done: true,
		},
		{
			name: "a batch with no worker starts when one joins", policy: "cyclic",
			steps: []scriptStep{
				{batch(3), ""},
				{join(4, 2), "s0w4 s1w4 s2w4"},
				{join(5, 1), ""}, // static: nothing for a latecomer
				{leave(4), "s0w5 s1w5 s2w5"},
			},
		},
		{
			name: "stale and nonsense results change nothing", policy: "r3q",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1 s1w1"},
				{res(1, 7), ""}, {res(1, -1), ""}, {res(9, 2), ""},
				{Event{Kind: 0}, ""}, {leave(9), ""}, {join(1, 5), ""},
				{res(1, 0), "a0w1"},
				{res(1, 0), ""},
			},
		},
		{
			name: "a new batch cancels what an abandoned one left, held first", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(5), "s0w1 s1w1"},
				{batch(1), "c1w1h c0w1r s0w1"},
				{res(1, 0), "a0w1"},
			},
			done: true,
		},
		{
			name: "r3q cancels a held replica when the original wins", policy: "r3q",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(4), "s0w1 s1w2 s2w1 s3w2"},
				{res(2, 1), "a1w2 r2w2"}, // newest lacking on w2 is t2 (t3 it holds)
				{res(1, 0), "a0w1 r3w1"},
				{res(1, 2), "a2w1 c2w2h"}, // w2's copy of t2 waits behind t3
				{res(2, 3), "a3w2 c3w1r"},
			},
			done: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.policy, Config{})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				if got := fmtActions(p.Step(st.ev, nil)); got != st.want {
					t.Fatalf("step %d %+v: got %q, want %q", i, st.ev, got, st.want)
				}
			}
			if p.Done() != tc.done {
				t.Errorf("Done() = %v, want %v", p.Done(), tc.done)
			}
		})
	}
}
