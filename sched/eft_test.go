package sched

import (
	"testing"
	"time"
)

// Hand-traced schedules of eft (eft.go). Each step's actions are worked out
// from eft's model in the comment above it: a worker with c slots,
// execution time e and round trip r has a further instance back at r + e
// when a slot is idle, else when the slot that frees first frees (its
// running instance's start + e), + e + r/2; a running instance started r/2
// after it was sent to an idle slot, or, held, when the result before it
// left its worker (that result's arrival − r/2). A step's sends of
// originals leave longest chain first (eft_order.go): the chain of a send
// is r + e × the instances its slot runs from it on. Reference: issue 16,
// parts 2 and 3.

const sec = time.Second

func milli(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// means is a Measured event that sets a worker's means.
func means(w WorkerID, exec, rtt time.Duration) Event {
	return Event{Kind: Measured, Worker: w, Exec: exec, RTT: rtt}
}

// batchAt is BatchStarted at a time.
func batchAt(n int, at time.Duration) Event { return Event{Kind: BatchStarted, N: n, At: at} }

// resAt is a result with its arrival time and measurements.
func resAt(w WorkerID, t TaskID, at, exec, rtt time.Duration) Event {
	return Event{Kind: ResultArrived, Worker: w, Task: t, At: at, Exec: exec, RTT: rtt}
}

func withAt(ev Event, at time.Duration) Event { ev.At = at; return ev }

// tickAt is a Tick at a time.
func tickAt(at time.Duration) Event { return Event{Kind: Tick, At: at} }

func runEFT(t *testing.T, cfg Config, steps []scriptStep, done bool) {
	t.Helper()
	runCase(t, "eft", cfg, steps, done)
}

func TestEFTHand(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		steps []scriptStep
		done  bool
	}{
		{
			// "No task is held on a worker that would finish it after a
			// faster worker could." w1: e = 1 s, w2: e = 3.5 s, r = 0.2 s
			// each, one slot each, 4 tasks at 0. w1's places come back at
			// 1.2, 2.2, 3.2, 4.2; w2's at 3.7, 7.2. The four earliest are
			// 1.2 2.2 3.2 3.7: the horizon H is 3.7. w1 takes t0 (1.2) and
			// holds t1 (2.2): a third would start at 2.1, after the refill
			// that w1's first result brings (1.1 + 0.2), so it is not due.
			// w2 takes t2 (3.7 ≤ H); its second place (7.2) is past H: t3
			// stays in Q. At 1.2 w1 is due (its held t1 started at 1.1, so
			// its next place is back at 3.2) and the plan of t3 alone is
			// w1's 3.2 against w2's 7.2: w1 takes it. No replica: the
			// latest instance, w2's t2 at 3.7, is beaten by no one (w1's
			// next place is back at 4.2, then 4.4). The batch ends at 3.7,
			// the optimum (w1 returns 3 tasks by 3.2, w2 one at 3.7).
			name: "the plan: a slow worker gets only what it finishes by the horizon",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, milli(200)), ""}, {means(2, 3500*time.Millisecond, milli(200)), ""},
				{batchAt(4, 0), "s2w2 s0w1 s1w1"},
				{resAt(1, 0, milli(1200), sec, milli(200)), "a0w1 s3w1"},
				{resAt(1, 1, milli(2200), sec, 0), "a1w1"},
				{resAt(1, 3, milli(3200), sec, 0), "a3w1"},
				{resAt(2, 2, milli(3700), 3500*time.Millisecond, milli(200)), "a2w2"},
			},
			done: true,
		},
		{
			// Depth from the model: a worker 2.5 s away (e = 1 s) must hold
			// what its slot runs until a refill sent at its first result
			// arrives: the first instance runs 1.25-2.25, the refill
			// triggered then arrives at 4.75, so instances starting at
			// 2.25, 3.25 and 4.25 are held: 4 in all (1 + ⌈2.5/1⌉, the
			// adaptive depth's rule).
			name: "depth covers the round trip",
			steps: []scriptStep{
				{join(1, 1), ""},
				{means(1, sec, 2500*time.Millisecond), ""},
				{batchAt(10, 0), "s0w1 s1w1 s2w1 s3w1"},
			},
		},
		{
			// Four slots in step (e = 1 s, r = 0.5 s): all four end at
			// 1.25 and the refills their results bring arrive at 1.75, so
			// each slot needs its next task held: 8 (two per slot), not
			// 4 + ⌈4 × 0.5⌉ = 6 as if the slots ended at spread-out times.
			name: "slots in step each hold a task",
			steps: []scriptStep{
				{join(1, 4), ""},
				{means(1, sec, milli(500)), ""},
				{batchAt(20, 0), "s0w1 s1w1 s2w1 s3w1 s4w1 s5w1 s6w1 s7w1"},
			},
		},
		{
			// Depth 2 (Config.Depth, rwq's depth): a worker not measured
			// yet gets two instances per slot, until results say more.
			name: "depth 2: a worker not measured gets two per slot",
			cfg:  Config{Depth: 2},
			steps: []scriptStep{
				{join(1, 2), ""},
				{batchAt(5, 0), "s0w1 s1w1 s2w1 s3w1"},
			},
		},
		{
			// Config.Depth's default, 1: one per slot before
			// measurements, as wq; the rest of Q waits for whichever slot
			// frees first.
			name: "a worker not measured gets one per slot",
			steps: []scriptStep{
				{join(1, 2), ""},
				{batchAt(5, 0), "s0w1 s1w1"},
			},
		},
		{
			// Replication that targets. w1 is 2 s away (r = 2 s), w2 is the
			// master's own host (r = 0); e = 1 s each; two per slot (Depth 2). At 0
			// the plan of 4 is w2 at 1 and 2, w1 at 3 (t2 runs 1-2, back at
			// 3) and w2 at 3: H = 3. w2 runs t0 and holds t1; w1 takes t2;
			// its second place (4) is past H: t3 waits. Then w2 runs fast
			// (0.5 s a task; its e falls to 0.94, 0.88): at 0.5 it takes
			// t3 (back at 2.4, before w1's next place at 3.5). Q is empty:
			// the latest instance is w1's t2, back at 3.0, and w2's next
			// place, at 3.3, cannot beat it. At 1.0 w2's next place is back
			// at 1.0 + 0.88 + 0.88 = 2.77: earlier, so w2 gets a replica of
			// t2, held behind t3. It returns it at 2.0, and w1's copy,
			// running since 1.0, is cancelled: the batch ends at 2.0, not
			// 3.0.
			name: "a replica goes where it is expected to beat its copy",
			cfg:  Config{Depth: 2},
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, 2*sec), ""}, {means(2, sec, 0), ""},
				{batchAt(4, 0), "s2w1 s0w2 s1w2"},
				{resAt(2, 0, milli(500), milli(500), 0), "a0w2 s3w2"},
				{resAt(2, 1, milli(1000), milli(500), 0), "a1w2 r2w2"},
				{resAt(2, 3, milli(1500), milli(500), 0), "a3w2"},
				{resAt(2, 2, milli(2000), milli(500), 0), "a2w2 c2w1r"},
			},
			done: true,
		},
		{
			// Copies bound replicas: with Copies 1 the same run sends no
			// replica, and w1's t2 decides the batch at 3.0.
			name: "copies 1: no replica",
			cfg:  Config{Copies: 1, Depth: 2},
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, 2*sec), ""}, {means(2, sec, 0), ""},
				{batchAt(4, 0), "s2w1 s0w2 s1w2"},
				{resAt(2, 0, milli(500), milli(500), 0), "a0w2 s3w2"},
				{resAt(2, 1, milli(1000), milli(500), 0), "a1w2"},
				{resAt(2, 3, milli(1500), milli(500), 0), "a3w2"},
				{resAt(1, 2, milli(3000), sec, 0), "a2w1"},
			},
			done: true,
		},
		{
			// A replica is not sent where it would not beat its copy: two
			// local workers alike (e = 1 s, r = 0), two tasks. At 1.0 w2
			// is idle (its next place back at 2.0) and w1's t0 is due back
			// now: no replica. Overdue (docs/papers.md leaves deadlines to the
			// driver; New: the instance is cancelled, the task goes back
			// to the head of Q, the worker is late) at 1.5 cancels w1's t0
			// and puts it back in Q, and the plan gives it to w2, whose
			// result at 2.5 wins.
			name: "no replica that cannot win; Overdue replans",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, 0), ""}, {means(2, sec, 0), ""},
				{batchAt(2, 0), "s0w1 s1w2"},
				{resAt(2, 1, sec, sec, 0), "a1w2"},
				{withAt(overdue(1, 0), 1500*time.Millisecond), "c0w1r s0w2"},
				{resAt(2, 0, 2500*time.Millisecond, sec, 0), "a0w2"},
			},
			done: true,
		},
		{
			// WorkerLeft: w1 (running t0, holding t2) leaves at 0.5; t0 and
			// t2 go back to the head of Q in send order and are planned
			// again: w2 (local, e = 1 s, running t1 until 1.0) holds fewer
			// than two, so it takes t0 at once, and t2 when t1 is back.
			name: "a departed worker's tasks are planned again",
			cfg:  Config{Depth: 2},
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, 0), ""}, {means(2, sec, 0), ""},
				{batchAt(3, 0), "s0w1 s1w2 s2w1"},
				{withAt(leave(1), milli(500)), "s0w2"},
				{resAt(2, 1, sec, sec, 0), "a1w2 s2w2"},
				{resAt(2, 0, 2*sec, sec, 0), "a0w2"},
				{resAt(2, 2, 3*sec, sec, 0), "a2w2"},
			},
			done: true,
		},
		{
			// Failed: t0 goes back to Q and not to w1, which failed it,
			// while w2 has not.
			name: "a failed task is retried elsewhere",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{means(1, sec, 0), ""}, {means(2, sec, 0), ""},
				{batchAt(2, 0), "s0w1 s1w2"},
				{withAt(failed(1, 0), milli(500)), ""},
				{resAt(2, 1, sec, sec, 0), "a1w2 s0w2"},
				{resAt(2, 0, 2*sec, sec, 0), "a0w2"},
			},
			done: true,
		},
		{
			// WorkerDraining and Returned: a draining worker gets nothing
			// new; its returned held task is planned again (depth 2, so
			// each worker holds one; not measured, so the plan is even).
			name: "a draining worker's returned task goes elsewhere",
			cfg:  Config{Depth: 2},
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batchAt(4, 0), "s0w1 s1w2 s2w1 s3w2"},
				{withAt(draining(1), milli(1)), ""},
				{withAt(returned(1, 2), milli(1)), ""},
				{resAt(2, 1, milli(2), 0, 0), "a1w2 s2w2"},
				{resAt(1, 0, milli(2), 0, 0), "a0w1"},
				{resAt(2, 3, milli(3), 0, 0), "a3w2"},
				{resAt(2, 2, milli(4), 0, 0), "a2w2"},
			},
			done: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runEFT(t, tc.cfg, tc.steps, tc.done) })
	}
}

// TestEFTLate: an instance later than its worker's model allows, beyond
// the spread of task times, draws a replica as its lateness grows, Ticks
// carrying the clock when no result comes; once it loses, what it ran is a
// censored measurement of its worker. The paper's policies ignore Tick.
func TestEFTLate(t *testing.T) {
	// w1 and w2: one slot each, e = 1 s, r = 0.2 s; every measurement
	// alike, so the spread of task times is 0 and the band is a fifth of
	// e plus r/2: 0.3 s. Batch of 2 at 0: both places are back at 1.2, so
	// each takes one; t1 starts on w2 at 0.1 and is due back at 1.2.
	//  1.2: t0 back; w1 could return a replica by 2.4, t1 is due now: none.
	//  Tick 1.3: t1 is 0.1 late, within the band: expected e/10 on, at
	//   1.4; w1's 2.5 does not beat it.
	//  Tick 2.0: 0.8 late, past the band: expected 0.8 on, at 2.8; w1's
	//   3.2 does not beat it.
	//  Tick 2.5: 1.3 late: expected at 3.8; w1's 3.7 beats it: replica.
	//  3.7: w1 returns t1; w2's copy is stopped after running 3.6 s, more
	//   than its e + r/2 + band (1.4): a censored run, but a lone one
	//   (TestEFTLoneStall), so its e becomes at most twice its mean: 2 s.
	// Batch of 2 at 4.0: w1's places are back at 5.2 and 6.2, w2's first
	// at 6.2 too (4.0 + 0.1 + 2 + 0.1): the horizon is 6.2, and of the
	// places at 6.2 w1's comes first (a tie goes to the worker that joined
	// first): w1 takes t0 and holds t1 (due: two per slot), w2 gets
	// nothing. Without the censored run w2's place at 5.2 would take t1.
	runEFT(t, Config{}, []scriptStep{
		{join(1, 1), ""}, {join(2, 1), ""},
		{means(1, sec, milli(200)), ""}, {means(2, sec, milli(200)), ""},
		{batchAt(2, 0), "s0w1 s1w2"},
		{resAt(1, 0, milli(1200), sec, milli(200)), "a0w1"},
		{tickAt(milli(1300)), ""},
		{tickAt(milli(2000)), ""},
		{tickAt(milli(2500)), "r1w1"},
		{resAt(1, 1, milli(3700), sec, milli(200)), "a1w1 c1w2r"},
		{batchAt(2, milli(4000)), "s0w1 s1w1"},
	}, false)

	for _, name := range []string{"wq", "rr", "rwq", "r3q", "cyclic"} {
		p, err := New(name, Config{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []Event{join(1, 1), join(2, 1), batchAt(3, 0), resAt(1, 0, sec, sec, 0)} {
			p.Step(ev, nil)
		}
		for _, at := range []time.Duration{2 * sec, 100 * sec} {
			if acts := p.Step(tickAt(at), nil); len(acts) > 0 {
				t.Errorf("%s: Tick at %v: %s", name, at, fmtActions(acts))
			}
		}
	}
}

// TestEFTConfig: Copies is checked, and Measures names the policies that
// use measurements.
func TestEFTConfig(t *testing.T) {
	if _, err := New("eft", Config{Copies: -1}); err == nil {
		t.Error("negative copies accepted")
	}
	if _, err := New("eft", Config{Copies: MaxCopies + 1}); err == nil {
		t.Error("too many copies accepted")
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"eft", Config{}, true}, {"r3q", Config{}, false}, {"r3q", Config{Adaptive: true}, true},
		{"rwq", Config{Adaptive: true}, true}, {"wq", Config{Adaptive: true}, false},
	} {
		if got := Measures(c.name, c.cfg); got != c.want {
			t.Errorf("Measures(%sec, %+v) = %v", c.name, c.cfg, got)
		}
	}
}

// The order of a burst moves the model with the sends (eft_order.go). With
// m = 100 ms: w1 (e = 1 s) runs t0 and holds t1, w2 (e = 2.5 s) runs t2;
// sent as s0w1 s1w1 s2w2 (places 0, 1, 2), they leave longest chain first,
// s2w2 s0w1 s1w1. t0 now leaves at place 1 and reaches w1 at 0.1 + 0.1 =
// 0.2 s, which is when its run starts; t2 reaches w2 at 0.1 s; held t1
// arrives at 0.3 s and has no start yet. (Moving the held t1 must not move
// t0's start: both were once noted at 0.3 s.)
func TestEFTOrderMovesTheModel(t *testing.T) {
	pol, err := New("eft", Config{Depth: 2})
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*policy)
	runScript(t, p, []scriptStep{
		{join(1, 1), ""}, {join(2, 1), ""},
		{means(1, sec, milli(200)), ""}, {means(2, 2500*time.Millisecond, milli(200)), ""},
	})
	p.eft.msgCost = float64(100 * time.Millisecond)
	runScript(t, p, []scriptStep{{batchAt(3, 0), "s2w2 s0w1 s1w1"}})
	e := p.eft
	if got := e.ew[p.idx[1]].run; len(got) != 1 || got[0] != milli(200) {
		t.Errorf("w1's running start %v, want [200ms]", got)
	}
	if got := e.ew[p.idx[2]].run; len(got) != 1 || got[0] != milli(100) {
		t.Errorf("w2's running start %v, want [100ms]", got)
	}
	for task, want := range map[TaskID]time.Duration{0: milli(200), 1: milli(300), 2: milli(100)} {
		if e.sent[task].arrive != want {
			t.Errorf("t%d arrives at %v, want %v", task, e.sent[task].arrive, want)
		}
	}
	for task, want := range map[TaskID]int32{0: 1, 1: 2, 2: 0} {
		if e.sent[task].place != want {
			t.Errorf("t%d at place %d, want %d", task, e.sent[task].place, want)
		}
	}
}

// TestEFTLoneStall: one measurement far beyond a worker's mean (a task
// that waited for a plugin's process to start, or hit a stall) counts as
// twice the mean, so that equal workers stay equal; a second in a row is
// a change of pace and replaces the mean. w1 and w2: one slot each, e =
// 1 s, r = 0.2 s.
//   - w2 reports a lone 50 s: its e becomes 1 + (2 − 1)/8 = 1.125 s,
//     within noise of w1's 1 s (the spread of w2's times is now 1/8 s²,
//     a standard error of 0.09 s: withinNoise), so it counts as 1 s. A
//     batch of 2 at 0: each worker's first place is back at 1.2, its
//     second at 2.2: each takes one (equal chains leave in worker order).
//     Counted as it came, the stall would make w2's e 7.125 s and w1
//     would take both.
//   - w2 reports 50 s again: its e is 50 s. The next batch's places: w1's
//     at 1.2 and 2.2 (it is idle again), w2's at 50.2: w1 takes t0 and
//     holds t1.
func TestEFTLoneStall(t *testing.T) {
	runEFT(t, Config{}, []scriptStep{
		{join(1, 1), ""}, {join(2, 1), ""},
		{means(1, sec, milli(200)), ""}, {means(2, sec, milli(200)), ""},
		{means(2, 50*sec, milli(200)), ""},
		{batchAt(2, 0), "s0w1 s1w2"},
		{resAt(1, 0, milli(1200), sec, milli(200)), "a0w1"},
		{resAt(2, 1, milli(1200), 50*sec, milli(200)), "a1w2"},
		{batchAt(2, milli(1400)), "s0w1 s1w1"},
	}, false)
}

// TestEFTStartingNotJudged: a worker that joined Starting (it builds the
// run's problem, a plugin's first process, before it serves) is not
// judged by how long its instances ran until something comes from it:
// they waited for it. w1: one slot, e = 1 s, r = 0.2 s; w2: one slot,
// joined Starting, not measured (the default: w1's figures). As in
// TestEFTLate, the task on w2 (t0) is late, draws a replica at 2.5 that
// w1 returns at 3.7, and w2's copy is stopped after 3.6 s: no censored
// run, since w2 is starting, so its places still count at the default.
// Batch of 3 at 4.0: w1's and w2's first places are back at 5.2, w1's
// second at 6.2: each takes one, and w1 holds the third. Joined without
// Starting, w2 would be bounded at 1.5 × 3.6 s and take nothing.
func TestEFTStartingNotJudged(t *testing.T) {
	for _, starting := range []bool{true, false} {
		want := "s0w1 s1w2 s2w1"
		if !starting {
			want = "s0w1 s1w1"
		}
		runEFT(t, Config{}, []scriptStep{
			{join(1, 1), ""}, {Event{Kind: WorkerJoined, Worker: 2, Slots: 1, Starting: starting}, ""},
			{means(1, sec, milli(200)), ""},
			{batchAt(2, 0), "s0w2 s1w1"},
			{resAt(1, 1, milli(1200), sec, milli(200)), "a1w1"},
			{tickAt(milli(1300)), ""},
			{tickAt(milli(2000)), ""},
			{tickAt(milli(2500)), "r0w1"},
			{resAt(1, 0, milli(3700), sec, milli(200)), "a0w1 c0w2r"},
			{batchAt(3, milli(4000)), want},
		}, false)
	}
}
