package sched

import (
	"fmt"
	"strings"
	"testing"
	"time"
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

// runScript steps p through steps, checking the actions of each.
func runScript(t *testing.T, p Policy, steps []scriptStep) {
	t.Helper()
	for i, st := range steps {
		if got := fmtActions(p.Step(st.ev, nil)); got != st.want {
			t.Fatalf("step %d %+v: got %q, want %q", i, st.ev, got, st.want)
		}
	}
}

// runCase runs steps on a fresh policy and checks whether the batch is
// done at the end.
func runCase(t *testing.T, policy string, cfg Config, steps []scriptStep, done bool) {
	t.Helper()
	p, err := New(policy, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, p, steps)
	if p.Done() != done {
		t.Fatalf("Done() = %v, want %v", p.Done(), done)
	}
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
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc.policy, Config{}, tc.steps, tc.done) })
	}
}

// measured is a result carrying measurements, as an adaptive driver steps it.
func measured(w WorkerID, t TaskID, rtt, exec time.Duration) Event {
	return Event{Kind: ResultArrived, Worker: w, Task: t, RTT: rtt, Exec: exec}
}

// Adaptive depth, worked out by hand: depth per slot 1 + ceil(RTT/Exec) of
// the worker's smoothed means (a new value weighs 1/8), within [Depth,
// AdaptiveMax].
func TestAdaptiveDepth(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name, policy string
		cfg          Config
		steps        []scriptStep
	}{
		{
			name: "depth follows the smoothed means, up and down", policy: "rwq", cfg: Config{Adaptive: true},
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(20), "s0w1 s1w1"}, // depth 2 until measured
				// RTT 100, Exec 40: 1 + ceil(2.5) = 4; it holds 1: three more.
				{measured(1, 0, 100*ms, 40*ms), "a0w1 s2w1 s3w1 s4w1"},
				// Exec 400: mean 40 + 360/8 = 85; 1 + ceil(100/85) = 3; it
				// holds 3: nothing, and nothing is cancelled.
				{measured(1, 1, 100*ms, 400*ms), "a1w1"},
				// Mean 85 + 315/8 = 124.375: depth 2; it holds 2.
				{measured(1, 2, 100*ms, 400*ms), "a2w1"},
				// Mean 158.8: depth 2; it holds 1: one more.
				{measured(1, 3, 100*ms, 400*ms), "a3w1 s5w1"},
				// A result without measurements keeps the depth.
				{res(1, 4), "a4w1 s6w1"},
			},
		},
		{
			name: "a measurement alone can free a worker; the cap holds", policy: "r3q", cfg: Config{Adaptive: true, AdaptiveMax: 3},
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 2), ""},
				{batch(20), "s0w1 s1w2 s2w2 s3w1 s4w2 s5w2"},
				// 1 + ceil(1 s / 10 ms) = 101, capped at 3: w2 takes 2 × 1 more.
				{Event{Kind: Measured, Worker: 2, RTT: time.Second, Exec: 10 * ms}, "s6w2 s7w2"},
				// Exec alone, no RTT yet: 1 + 0, at least Depth (2): no change.
				{Event{Kind: Measured, Worker: 1, Exec: 10 * ms}, ""},
				// Of an unknown or departed worker, or nonsense: ignored.
				{Event{Kind: Measured, Worker: 9, RTT: time.Second, Exec: ms}, ""},
				{Event{Kind: Measured, Worker: 1, RTT: -time.Second, Exec: -ms}, ""},
			},
		},
		{
			name: "Depth is the floor", policy: "rwq", cfg: Config{Adaptive: true, Depth: 3},
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(20), "s0w1 s1w1 s2w1"},
				// 1 + ceil(10/100) = 2, below the floor 3: it holds 2, gets 1.
				{measured(1, 0, 10*ms, 100*ms), "a0w1 s3w1"},
			},
		},
		{
			name: "wq does not adapt", policy: "wq", cfg: Config{Adaptive: true},
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(5), "s0w1"},
				{measured(1, 0, time.Second, ms), "a0w1 s1w1"},
				{Event{Kind: Measured, Worker: 1, RTT: time.Second, Exec: ms}, ""},
			},
		},
		{
			name: "without Adaptive measurements are ignored", policy: "r3q", cfg: Config{},
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(5), "s0w1 s1w1"},
				{measured(1, 0, time.Second, ms), "a0w1 s2w1"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.policy, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			runScript(t, p, tc.steps)
		})
	}
	if _, err := New("r3q", Config{Adaptive: true, AdaptiveMax: -1}); err == nil {
		t.Error("negative adaptive max accepted")
	}
	if _, err := New("r3q", Config{Adaptive: true, AdaptiveMax: MaxDepth + 1}); err == nil {
		t.Error("huge adaptive max accepted")
	}
}
