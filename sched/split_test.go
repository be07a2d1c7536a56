package sched

import (
	"fmt"
	"strings"
	"testing"
)

func added(ids ...TaskID) Event { return Event{Kind: TasksAdded, IDs: ids} }
func taken(n int) Event         { return Event{Kind: TasksTaken, N: n} }

// fmtSplit is fmtActions with Taken as k<t>.
func fmtSplit(acts []Action) string {
	var b []string
	for _, a := range acts {
		if a.Kind == Taken {
			b = append(b, fmt.Sprintf("k%d", a.Task))
			continue
		}
		if s := fmtActions([]Action{a}); s != "" {
			b = append(b, s)
		}
	}
	return strings.Join(b, " ")
}

// TestSplitSeam hand-traces tasks taken from and added to a running
// batch, the events a master that splits feeds its policy.
func TestSplitSeam(t *testing.T) {
	tests := []struct {
		name, policy string
		steps        []scriptStep
		done         bool
	}{
		{
			// "gives p half of its remaining tasks": the tail of Q goes,
			// what the master would send next stays, and the master is
			// done when what it kept is done.
			// Reference: docs/papers.md §2, Split.
			name: "a split takes the tail of Q; the master is done with what it kept", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(6), "s0w1 s1w2"},
				{taken(2), "k5 k4"},
				{res(1, 0), "a0w1 s2w1"},
				{res(2, 1), "a1w2 s3w2"},
				{res(1, 2), "a2w1"},
				{res(2, 3), "a3w2"},
			},
			done: true,
		},
		{
			// A child that dies or returns unfinished gives its tasks back:
			// they go to the back of Q and out as originals.
			// Reference: docs/papers.md §2, Return.
			name: "tasks given back join the tail of Q", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(6), "s0w1 s1w2"},
				{taken(3), "k5 k4 k3"},
				{res(1, 0), "a0w1 s2w1"},
				{added(4, 3), ""},
				{res(2, 1), "a1w2 s4w2"},
				{res(1, 2), "a2w1 s3w1"},
				{res(2, 4), "a4w2"},
			},
			done: false, // t3 runs on w1; t5 is still away
		},
		{
			// "start master": the child runs the same algorithm over the
			// tasks and workers it was handed; its tasks keep the parent's
			// numbers.
			// Reference: docs/papers.md §2, Split and Worker algorithm.
			name: "a sub-master starts empty and runs its share", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(0), ""},
				{added(7, 3, 9), "s7w1 s3w2 s9w1"},
				{res(1, 7), "a7w1"},
				{res(2, 3), "a3w2"},
				{res(1, 9), "a9w1"},
			},
			done: true,
		},
		{
			// "sends some of its queue (task assignment)" to a master that
			// asked: a task with a live instance stays. t0 runs on w1 and
			// its replica on w2; w1 overran t3 and w2 the replica, so both
			// are late and t0 is back in Q, live on w1, waiting for the
			// busy w3.
			// Reference: docs/papers.md §2, Task requests.
			name: "a task with a live instance is never taken", policy: "rr",
			steps: []scriptStep{
				{join(1, 2), ""}, {join(2, 1), ""}, {join(3, 1), ""},
				{batch(4), "s0w1 s1w2 s2w3 s3w1"},
				{res(2, 1), "a1w2 r0w2"},
				{overdue(1, 3), "c3w1r"},
				{overdue(2, 0), "c0w2r"},
				{taken(5), "k3"},
				{res(3, 2), "a2w3 r0w3"},
				{res(1, 0), "a0w1 c0w3r"},
			},
			done: true,
		},
		{
			// A task taken away is decided by the master it went to: a late
			// result for it here is no Accept.
			// Reference: docs/papers.md §2, Task requests.
			name: "a result for a task taken away is not accepted", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1"},
				{leave(1), ""},
				{taken(2), "k1 k0"},
				{res(1, 0), ""},
			},
			done: true,
		},
		{
			// Tasks added while r3q replicates go out as originals before
			// any further replica: R is taken afresh when Q empties again.
			// Reference: docs/papers.md §1, R3Q; §2, Task requests.
			name: "a grant during replication", policy: "r3q",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(6), "s0w1 s1w2 s2w1 s3w2"},
				{taken(1), "k5"},
				{res(1, 0), "a0w1 s4w1"},
				{res(2, 1), "a1w2 r4w2"},
				{added(5), ""},
				{res(1, 2), "a2w1 s5w1"},
				{res(2, 3), "a3w2 r5w2"}, // R afresh, newest first
			},
			done: false,
		},
		{
			name: "an id past the batch grows it; ids in the batch are ignored", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1"},
				{added(5, 0, 1, -1, MaxTaskID+1), ""},
				{res(1, 0), "a0w1 s1w1"},
				{res(1, 1), "a1w1 s5w1"},
				{res(1, 5), "a5w1"},
			},
			done: true,
		},
		{
			name: "a master whose every task was taken is done", policy: "rwq",
			steps: []scriptStep{
				{batch(3), ""},
				{taken(10), "k2 k1 k0"},
				{join(1, 2), ""},
			},
			done: true,
		},
		{
			name: "cyclic deals a grant at once", policy: "cyclic",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(0), ""},
				{added(4, 5, 6), "s4w1 s5w2 s6w1"},
				{taken(3), ""},
			},
			done: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.policy, Config{})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				if got := fmtSplit(p.Step(st.ev, nil)); got != st.want {
					t.Fatalf("step %d (%+v): got %q, want %q", i, st.ev, got, st.want)
				}
			}
			if p.Done() != tc.done {
				t.Errorf("Done() = %v, want %v", p.Done(), tc.done)
			}
		})
	}
}

// TestSplitWholeBatchUnchanged checks that a batch taken whole and given
// back whole runs as the batch would have: same sends, same order.
func TestSplitWholeBatchUnchanged(t *testing.T) {
	for _, name := range []string{"wq", "rr", "rwq", "r3q"} {
		t.Run(name, func(t *testing.T) {
			run := func(split bool) string {
				p, _ := New(name, Config{})
				var log []string
				var out []Action // sends not yet answered, in send order
				step := func(ev Event) {
					acts := p.Step(ev, nil)
					log = append(log, fmtSplit(acts))
					for _, a := range acts {
						if a.Kind == Send {
							out = append(out, a)
						}
					}
				}
				if split {
					p.Step(batch(8), nil)
					p.Step(taken(8), nil)
					step(added(0, 1, 2, 3, 4, 5, 6, 7))
				} else {
					step(batch(8))
				}
				step(join(1, 1))
				step(join(2, 2))
				for len(out) > 0 && !p.Done() {
					a := out[0]
					out = out[1:]
					step(res(a.Worker, a.Task))
				}
				return strings.Join(log, "|")
			}
			a, b := run(false), run(true)
			if a != b {
				t.Errorf("whole batch:\n%s\ntaken and given back:\n%s", a, b)
			}
			t.Log(a)
		})
	}
}

// TestOverload checks docs/papers.md §2's test: "right after M finishes
// assigning one task, count the messages already waiting for M. M is
// overloaded when that count, averaged over the last n assignments, is
// ≥ 1."
// Reference: docs/papers.md §2, Overload test.
func TestOverload(t *testing.T) {
	var o Overload
	o.Note(5, 3) // no window yet: nothing counted
	if o.Overloaded() || o.Assignments != 0 {
		t.Fatalf("without a window: overloaded %v, %d assignments", o.Overloaded(), o.Assignments)
	}
	o.SetWindow(4)
	for _, w := range []int{0, 2, 1} {
		o.Note(1, w)
	}
	if o.Overloaded() {
		t.Errorf("overloaded after 3 of n=4 assignments")
	}
	o.Note(1, 1) // 0 2 1 1: mean 1
	if !o.Overloaded() || o.Mean() != 1 {
		t.Errorf("0,2,1,1: overloaded %v, mean %v; want true, 1", o.Overloaded(), o.Mean())
	}
	o.Note(1, 0) // 2 1 1 0: mean 1
	o.Note(1, 0) // 1 1 0 0: mean 0.5
	if o.Overloaded() || o.Mean() != 0.5 {
		t.Errorf("1,1,0,0: overloaded %v, mean %v; want false, 0.5", o.Overloaded(), o.Mean())
	}
	o.Note(3, 2) // a frame of 3 tasks, 2 waiting after each: 0 2 2 2
	if !o.Overloaded() || o.Mean() != 1.5 {
		t.Errorf("0,2,2,2: overloaded %v, mean %v", o.Overloaded(), o.Mean())
	}
	o.SetWindow(2) // the last two: 2 2
	if o.Mean() != 2 {
		t.Errorf("n=2: mean %v, want 2", o.Mean())
	}
	o.SetWindow(100) // grows, keeps what was noted
	if o.Overloaded() || o.Mean() != float64(0+2+1+1+0+0+2+2+2)/9 {
		t.Errorf("n=100 after 9: overloaded %v, mean %v", o.Overloaded(), o.Mean())
	}
	o.Reset()
	if o.Overloaded() || o.Mean() != 0 || o.Assignments != 9 {
		t.Errorf("after Reset: overloaded %v, mean %v, %d assignments", o.Overloaded(), o.Mean(), o.Assignments)
	}
}

// TestSplitWorthIt: docs/papers.md §2's caveat, "a split takes a worker away
// from computing (the paper lost 18 % at P = 6)".
func TestSplitWorthIt(t *testing.T) {
	base := SplitEstimate{MasterRate: 1000, Exec: 0.009, RTT: 0.0001, Queued: 1000, Margin: 0.1}
	for _, tc := range []struct {
		name             string
		kept, given, out int
		want             bool
	}{
		{"P=6: workers, not the master, limit", 2, 2, 1, false},
		{"P=12: just at the master's rate", 5, 5, 1, false},
		{"P=18: the master limits; halves can do more", 8, 8, 1, true},
	} {
		e := base
		e.Kept, e.Given, e.Lost = tc.kept, tc.given, tc.out
		if got := SplitWorthIt(e); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	e := base
	e.Kept, e.Given, e.Lost = 8, 8, 1
	e.Queued = 5 // too few tasks left to pay for the move
	if SplitWorthIt(e) {
		t.Errorf("a split for 5 tasks")
	}
	e.Queued = 1000
	e.RTT, e.Waiting, e.Service = 0.05, 50, 0.001 // the round trip is the master's queue
	if !SplitWorthIt(e) {
		t.Errorf("the inbox wait was taken for the network's")
	}
	if SplitWorthIt(SplitEstimate{}) {
		t.Errorf("nothing measured: split")
	}
}

// TestDefaultOverloadWindow: the paper's 2 × processors, capped, so that
// a master of thousands of workers decides within a few hundred
// assignments.
func TestDefaultOverloadWindow(t *testing.T) {
	for _, c := range []struct{ procs, want int }{
		{0, 2}, {1, 2}, {9, 18}, {19, 38}, {256, 512}, {257, MaxDefaultOverloadWindow}, {4097, MaxDefaultOverloadWindow},
	} {
		if got := DefaultOverloadWindow(c.procs); got != c.want {
			t.Errorf("DefaultOverloadWindow(%d) = %d, want %d", c.procs, got, c.want)
		}
	}
}
