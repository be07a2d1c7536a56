package sched

import (
	"slices"
	"testing"
	"time"
)

// The defects of issue 15, each pinned by a case worked out by hand.

// Cancel outcomes are what the workers did, not what the master believed:
// a cancel believed held that finds its instance running counts as
// running, one believed running that finds it held counts as held, one
// that finds it finished as late; and a report that answers no cancel
// counts for nothing.
func TestLedgerCancelOutcomesAreFacts(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	s := time.Second
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(3), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}, {Kind: Send, Worker: 1, Task: 2}, {Kind: Send, Worker: 2, Task: 2, Replica: true}})
	l.Ran(Execution{Worker: 2, Task: 1, Start: 0, End: s})
	// The policy believes w1's t2 held and w2's t2... running; the facts
	// are the other way round.
	l.Step(s, res(2, 1), []Action{{Kind: Accept, Worker: 2, Task: 1}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}})
	l.Ran(Execution{Worker: 2, Task: 2, Start: s, End: 2 * s})
	l.Step(2*s, res(2, 2), []Action{{Kind: Accept, Worker: 2, Task: 2}, {Kind: Cancel, Worker: 1, Task: 2, Held: true}})
	// w1 had started t2 at 1 s: the cancel stops it at 2.1 s.
	l.Ran(Execution{Worker: 1, Task: 2, Start: s, End: 2100 * ms, Cancelled: true})
	// Reports that answer no cancel: a drop, a late cancel, a stopped
	// execution, and the same stopped execution again, 300 times.
	for range 300 {
		l.Dropped(2200*ms, 2, 1)
		l.Late(2200*ms, 1, 0)
		l.Ran(Execution{Worker: 1, Task: 2, Start: 0, End: 2200 * ms, Cancelled: true})
		l.Ran(Execution{Worker: 2, Task: 0, Start: 0, End: time.Hour, Cancelled: true})
	}
	l.Finish(3 * s)
	rep := l.Report()
	want := Counts{Originals: 3, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: 1100 * ms}
	if rep.Counts != want {
		t.Errorf("counts %+v, want %+v", rep.Counts, want)
	}
	if g := rep.Generations[0]; g.Counts != want {
		t.Errorf("generation counts %+v, want %+v", g.Counts, want)
	}

	// The other way round: believed running, found held; and one late.
	l = NewLedger(LedgerConfig{})
	l.Step(0, join(1, 1), nil)
	l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 1, Task: 1}})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 1, Task: 1}})
	l.Dropped(s, 1, 1)
	l.Dropped(s, 1, 1) // once per cancel
	l.Finish(2 * s)
	if got := l.Report().Counts; got.CancelsHeld != 1 || got.Dropped != 1 || got.CancelsRunning != 0 || got.Aborted != 0 {
		t.Errorf("believed running, dropped while held: %+v", got)
	}
}

// Counters count only instances the master really sent: a Send that the
// driver withdrew before it went out (Unsent) leaves no trace, and a
// cancel of it awaits no outcome.
func TestLedgerUnsent(t *testing.T) {
	var finals []Generation
	l := NewLedger(LedgerConfig{OnGeneration: func(g Generation) { finals = append(finals, g) }})
	s := time.Second
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}, {Kind: Send, Worker: 2, Task: 0, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0, Held: true}})
	l.Unsent(2, 0) // the replica never left the master
	l.Ran(Execution{Worker: 2, Task: 1, Start: 0, End: 2 * s})
	l.Step(2*s, res(2, 1), []Action{{Kind: Accept, Worker: 2, Task: 1}})
	l.Step(3*s, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
	// Generation 0 is final as soon as the next starts: no cancel of it
	// waits for an answer.
	if len(finals) != 1 {
		t.Fatalf("%d generations final, want 1", len(finals))
	}
	if c := finals[0].Counts; c != (Counts{Originals: 2}) {
		t.Errorf("counts %+v, want 2 originals only", c)
	}
	l.Unsent(1, 0) // the worker left before its task went out
	l.Step(3*s, leave(1), nil)
	if rep := l.Report(); rep.Originals != 2 || rep.Generations[1].Originals != 0 {
		t.Errorf("run originals %d, generation 1 originals %d; want 2 and 0", rep.Originals, rep.Generations[1].Originals)
	}
}

// A stale result (of an earlier batch) is none of the open batch's
// instances, even when that batch sent its worker the same task again:
// it must not end that instance, whose send may still be taken back
// (Unsent), so that originals + resends + replicas stay the instances
// sent (simgrid seed 10984: a master killed just after a batch started).
func TestLedgerStaleRanEndsNoInstance(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	s := time.Second
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Send, Worker: 1, Task: 1, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 1, Start: s, End: 2 * s})
	l.Step(2*s, res(1, 1), []Action{{Kind: Accept, Worker: 1, Task: 1}, {Kind: Cancel, Worker: 2, Task: 1}})
	sent := 3
	// The next batch sends task 1 to worker 2 again, before the result of
	// its earlier instance arrives.
	l.Step(3*s, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}})
	sent += 2
	l.Ran(Execution{Worker: 2, Task: 1, Start: 3*s - s/2, End: 3 * s, Arrival: true, Stale: true})
	l.Step(3*s, alive(2), nil)
	// Worker 2 leaves before its new instance went out.
	l.Unsent(2, 1)
	sent--
	l.Step(3*s, leave(2), nil)
	c := l.Report().Counts
	if got := c.Originals + c.Resends + c.Replicas; got != sent || c.Originals != 3 {
		t.Errorf("counts %d originals + %d resends + %d replicas = %d; want %d instances sent, 3 originals",
			c.Originals, c.Resends, c.Replicas, got, sent)
	}
}

// A worker answers a held instance's cancel at once but a running one's
// only once it has stopped, so an earlier batch's answer about task t on
// worker w may come before or after the open batch's: told each answer's
// batch, the ledger matches it to that batch's cancel, and each
// generation counts its own outcome and its own instance.
func TestLedgerCancelAnswersOfTwoBatches(t *testing.T) {
	s := time.Second
	stopped := func(l *Ledger) { // batch 0's t0 on w2, stopped at last
		l.Ran(Execution{Worker: 2, Task: 0, Start: 0, End: 3*s + s/2, Cancelled: true, Of: OfEarlierBatch})
	}
	dropped := func(l *Ledger) { l.DroppedOf(3*s, 2, 0, OfLastBatch) } // batch 1's t0 on w2, held
	for _, order := range []struct {
		name  string
		first func(*Ledger)
		then  func(*Ledger)
	}{{"earlier first", stopped, dropped}, {"earlier last", dropped, stopped}} {
		t.Run(order.name, func(t *testing.T) {
			var ins []Instance
			l := NewLedger(LedgerConfig{OnInstance: func(in Instance) {
				if in.Kind != InstanceFinished {
					ins = append(ins, in)
				}
			}})
			l.Step(0, join(1, 1), nil)
			l.Step(0, join(2, 1), nil)
			// Batch 0: t0 to w1 and a replica to w2; w1's wins, w2's is
			// cancelled while it runs, and is slow to stop.
			l.Step(0, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 0, Replica: true}})
			l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
			l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0}})
			// Batch 1: t0 to w2 (held behind the one stopping) and a
			// replica to w1, whose wins: w2's is cancelled while held.
			// The batch is still open (t1 has no result yet): batch 0,
			// waiting for its cancel's answer, is not final yet.
			l.Step(2*s, batch(2), []Action{{Kind: Send, Worker: 2, Task: 0}, {Kind: Send, Worker: 1, Task: 0, Replica: true}})
			l.Ran(Execution{Worker: 1, Task: 0, Start: 2 * s, End: 3 * s})
			l.Step(3*s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0, Held: true}})
			order.first(l)
			order.then(l)
			l.Finish(4 * s)
			rep := l.Report()
			want0 := Counts{Originals: 1, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: 3*s + s/2}
			want1 := Counts{Originals: 1, Replicas: 1, CancelsHeld: 1, Dropped: 1}
			if g := rep.Generations[0].Counts; g != want0 {
				t.Errorf("generation 0 counts %+v, want %+v", g, want0)
			}
			if g := rep.Generations[1].Counts; g != want1 {
				t.Errorf("generation 1 counts %+v, want %+v", g, want1)
			}
			if c := rep.Counts; c.Originals+c.Resends+c.Replicas != 4 || c.CancelsRunning+c.CancelsHeld+c.CancelsLate != 2 {
				t.Errorf("run counts %+v, want 4 instances sent and 2 cancel outcomes", c)
			}
			wantIns := []Instance{
				{Worker: 2, Task: 0, Gen: 0, Replica: true, Known: true, Kind: InstanceCancelledRunning, Start: 0, End: 3*s + s/2},
				{Worker: 2, Task: 0, Gen: 1, Replica: false, Known: true, Kind: InstanceCancelledHeld, Start: 2 * s, End: 3 * s},
			}
			slices.SortFunc(ins, func(a, b Instance) int { return a.Gen - b.Gen })
			if !slices.Equal(ins, wantIns) {
				t.Errorf("cancelled instances %+v, want %+v", ins, wantIns)
			}
		})
	}
}

// An earlier batch's answer whose cancel the ledger has forgotten (sent
// more than 8 generations ago, to a worker given nothing since) answers
// no cancel of the open batch, even of the same task on the same worker.
func TestLedgerForgottenCancelAnswersNone(t *testing.T) {
	s := time.Second
	l := NewLedger(LedgerConfig{})
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	l.Step(0, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 0, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0}})
	at := s
	for range 9 {
		at += s
		l.Step(at, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
		l.Ran(Execution{Worker: 1, Task: 0, Start: at, End: at + s/2})
		l.Step(at+s/2, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}})
	}
	at += s
	l.Step(at, batch(2), []Action{{Kind: Send, Worker: 2, Task: 0}, {Kind: Send, Worker: 1, Task: 0, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: at, End: at + s/2})
	l.Step(at+s/2, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0, Held: true}})
	l.Ran(Execution{Worker: 2, Task: 0, Start: 0, End: at + s/2, Cancelled: true, Of: OfEarlierBatch})
	l.DroppedOf(at+s/2, 2, 0, OfLastBatch)
	want := Counts{Originals: 1, Replicas: 1, CancelsHeld: 1, Dropped: 1}
	if g := l.Report().Generations[10].Counts; g != want {
		t.Errorf("open generation counts %+v, want %+v", g, want)
	}
}

// With a shrinking adaptive depth, a result that sends its worker nothing
// while Q still holds tasks is not the start of the sync wait: the
// policy says when Q is empty.
func TestSyncWaitNotBeforeQEmpty(t *testing.T) {
	p, err := New("rwq", Config{Adaptive: true, AdaptiveMax: 8})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(LedgerConfig{})
	now := time.Duration(0)
	syncAt := time.Duration(-1)
	var out []TaskID // outstanding on w1, in send order
	step := func(ev Event) []Action {
		acts := p.Step(ev, nil)
		l.Step(now, ev, acts)
		for _, a := range acts {
			switch a.Kind {
			case SyncWait:
				syncAt = now
			case Send:
				out = append(out, a.Task)
			}
		}
		return acts
	}
	next := func() TaskID {
		ti := out[0]
		out = out[1:]
		return ti
	}
	step(join(1, 1))
	step(batch(20))
	// A long round trip: the depth grows to 1 + 7 = 8, the worker holds 8.
	now = ms
	step(Event{Kind: ResultArrived, Worker: 1, Task: next(), RTT: 7 * ms, Exec: ms})
	if len(out) != 8 {
		t.Fatalf("w1 holds %d, want 8", len(out))
	}
	// Its tasks get slow: the depth shrinks to the floor, 2, while it
	// holds 8; results now send it nothing, and Q holds 11 tasks.
	now = 2 * ms
	step(Event{Kind: Measured, Worker: 1, Exec: time.Second})
	for i := range 3 {
		now = time.Duration(3+i) * ms
		ti := next()
		if acts := step(res(1, ti)); len(acts) != 1 || acts[0].Kind != Accept {
			t.Fatalf("t%d: actions %v, want only its accept", ti, acts)
		}
	}
	if syncAt >= 0 {
		t.Fatalf("sync wait began at %v with Q not empty", syncAt)
	}
	// Run the batch out: the sync wait begins once Q is empty.
	for len(out) > 0 {
		now += ms
		step(res(1, next()))
		if syncAt >= 0 && p.(*policy).qLive > 0 {
			t.Fatalf("sync wait began at %v with %d tasks in Q", syncAt, p.(*policy).qLive)
		}
	}
	if !p.Done() {
		t.Fatal("batch not done")
	}
	g := l.Report().Generations[0]
	if syncAt < 0 || g.SyncWait != g.End-syncAt {
		t.Errorf("sync wait %v from %v to %v", g.SyncWait, syncAt, g.End)
	}
}

// A batch smaller than the grid's room is sent whole at once, and r3q
// replicates at once onto the idle places. Neither starts the sync wait,
// and the idle places are starved, not comm. Three workers of 1 s per
// task, two tasks, no delay: both finish at 1 s. Total 1 s, sync 0,
// comm 0 (esgrid's), compute 1 s; the paper's comm is the mean
// non-executing time, here 0 (w3 runs a replica, w1 and w2 run theirs).
func TestWholeBatchAtOnce(t *testing.T) {
	ms3 := []machine{{id: 1, slots: 1, taskTime: time.Second}, {id: 2, slots: 1, taskTime: time.Second}, {id: 3, slots: 1, taskTime: time.Second}}
	for _, policy := range []string{"wq", "r3q", "cyclic"} {
		t.Run(policy, func(t *testing.T) {
			d := newHandDriver(t, policy, Config{}, 0, LedgerConfig{}, ms3)
			d.runBatch(2)
			d.drain()
			rep := d.l.Report()
			checkDur(t, "total", rep.Total, time.Second)
			checkDur(t, "sync", rep.SyncWait, 0)
			checkDur(t, "comm", rep.Comm, 0)
			checkDur(t, "compute", rep.Compute, time.Second)
			// wq and cyclic leave w3 idle for the whole second: the
			// paper's comm is its 1 s over three workers.
			want := time.Second / 3
			if policy == "r3q" {
				want = 0
			}
			checkDur(t, "paper's comm", rep.CommPaper, want)
		})
	}
}

// Idle workers before their first result are starved, not comm. Four
// workers of one slot, 1 s per task, two tasks of 1 s and no delay (wq):
// w3 and w4 never get one. esgrid's comm is 0; the paper's is the mean
// time not executing, (0 + 0 + 1 + 1) / 4 = 0.5 s.
func TestStarvedIsNotComm(t *testing.T) {
	var ws []machine
	for id := range 4 {
		ws = append(ws, machine{id: WorkerID(id + 1), slots: 1, taskTime: time.Second})
	}
	d := newHandDriver(t, "wq", Config{}, 0, LedgerConfig{}, ws)
	d.runBatch(2)
	rep := d.l.Report()
	checkDur(t, "total", rep.Total, time.Second)
	checkDur(t, "comm", rep.Comm, 0)
	checkDur(t, "paper's comm", rep.CommPaper, 500*ms)
	checkDur(t, "generation paper's comm", rep.Generations[0].CommPaper, 500*ms)
	for _, w := range rep.Workers {
		if want := time.Duration(0); w.Worker > 2 {
			want = time.Second
			if w.Starved != want || w.Comm != 0 || w.CommPaper != time.Second {
				t.Errorf("w%d: starved %v comm %v paper's %v; want 1s, 0, 1s", w.Worker, w.Starved, w.Comm, w.CommPaper)
			}
		}
	}
}

// LB follows each generation's own pace, not the run's: a worker that
// takes 1 s per task in generation 0 and 0.25 s in generation 1 has LB =
// Total in each (4 s, then 1 s), where a rate from the whole run (0.625 s
// per task) gave 2.5 s for generation 1's 1 s.
func TestLBFollowsTheGenerationsPace(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	l.Step(0, join(1, 1), nil)
	start := time.Duration(0)
	for gi, d := range []time.Duration{time.Second, 250 * ms} {
		var acts []Action
		for i := range 4 {
			acts = append(acts, Action{Kind: Send, Worker: 1, Task: TaskID(i)})
		}
		l.Step(start, batch(4), acts)
		for i := range 4 {
			at := start + time.Duration(i+1)*d
			l.Ran(Execution{Worker: 1, Task: TaskID(i), Start: at - d, End: at})
			l.Step(at, res(1, TaskID(i)), []Action{{Kind: Accept, Worker: 1, Task: TaskID(i)}})
		}
		start += 4 * d
		g := l.Report().Generations[gi]
		checkDur(t, "LB", g.LB, 4*d)
		checkDur(t, "total", g.Total, 4*d)
	}
}

// The master dates an execution at its result's arrival; the ledger moves
// it back one one-way delay (half the smallest round trip), so that comm
// is not inflated. w1 (1 s per task) and w2 (2 s), 100 ms each way, wq,
// two tasks: t0 runs 0.1–1.1 on w1, back at 1.2, where the sync wait
// begins; t1 runs 0.1–2.1 on w2, back at 2.2. Before 1.2, w1 executed
// 1.0 s (comm 0.2 s), w2 1.1 s (comm 0.1 s): comm 0.15 s. Dated at the
// arrival, w2's execution would be [0.2, 2.2]: 1.0 s before the sync
// wait, comm 0.2 s.
func TestExecutionsDatedByClockOffset(t *testing.T) {
	for _, arrival := range []bool{true, false} {
		l := NewLedger(LedgerConfig{})
		l.Step(0, join(1, 1), nil)
		l.Step(0, join(2, 1), nil)
		l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}})
		l.Ran(Execution{Worker: 1, Task: 0, Start: 200 * ms, End: 1200 * ms, Arrival: arrival})
		l.Step(1200*ms, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: SyncWait, Worker: 1}})
		l.Ran(Execution{Worker: 2, Task: 1, Start: 200 * ms, End: 2200 * ms, Arrival: arrival})
		l.Step(2200*ms, res(2, 1), []Action{{Kind: Accept, Worker: 2, Task: 1}})
		rep := l.Report()
		want := 150 * ms
		if !arrival {
			want = 200 * ms // taken as exact: one delay late
		}
		checkDur(t, "sync", rep.SyncWait, time.Second)
		checkDur(t, "comm", rep.Comm, want)
		checkDur(t, "round trip", rep.RoundTrip, 200*ms)
	}
}

// The ledger's incremental output: each generation's figures, once, in
// order, when final; they are what Report says. A generation whose cancel
// is unanswered stays open to its answer until the next one ends.
func TestOnGeneration(t *testing.T) {
	var finals []Generation
	l := NewLedger(LedgerConfig{OnGeneration: func(g Generation) { finals = append(finals, g) }})
	s := time.Second
	l.Step(0, join(1, 1), nil)
	l.Step(0, join(2, 1), nil)
	// Generation 0: a replica on w2 is cancelled at the end.
	l.Step(0, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 0, Replica: true}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0}})
	l.Step(2*s, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
	if len(finals) != 0 {
		t.Fatalf("generation 0 final with its cancel unanswered")
	}
	// The answer comes during generation 1: it counts in generation 0,
	// which is then final.
	l.Ran(Execution{Worker: 2, Task: 0, Start: 0, End: 2100 * ms, Cancelled: true})
	if len(finals) != 1 || finals[0].Index != 0 || !finals[0].Final || finals[0].CancelsRunning != 1 || finals[0].Wasted != 2100*ms {
		t.Fatalf("finals %+v", finals)
	}
	l.Ran(Execution{Worker: 1, Task: 0, Start: 2 * s, End: 3 * s})
	l.Step(3*s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Cancel, Worker: 2, Task: 0}})
	// Generation 2 starts and ends; generation 1's cancel is never
	// answered (an old worker): it is final once generation 2 has ended.
	l.Step(4*s, batch(1), []Action{{Kind: Send, Worker: 1, Task: 0}})
	if len(finals) != 1 {
		t.Fatalf("generation 1 final with its cancel unanswered and generation 2 open")
	}
	l.Ran(Execution{Worker: 1, Task: 0, Start: 4 * s, End: 5 * s})
	l.Step(5*s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}})
	if len(finals) != 2 || finals[1].Index != 1 {
		t.Fatalf("%d final, want 2", len(finals))
	}
	l.Finish(5 * s)
	rep := l.Report()
	if len(finals) != 3 {
		t.Fatalf("%d final after Finish, want 3", len(finals))
	}
	var sum Counts
	for i, g := range rep.Generations {
		if g != finals[i] {
			t.Errorf("generation %d: report %+v, output %+v", i, g, finals[i])
		}
		sum.add(g.Counts)
	}
	if sum != rep.Counts {
		t.Errorf("generations' counts add up to %+v, the run's are %+v", sum, rep.Counts)
	}
}

// A child master's counts join the run's (Elsewhere): a task counts one
// original wherever it was first sent, and a send of it elsewhere after
// one here (or here after one elsewhere) is a resend; an original taken
// back (Unsent) hands its part to a resend elsewhere; counts of an
// earlier batch go to its generation.
func TestLedgerElsewhere(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	s := time.Second
	l.Step(0, join(1, 1), nil)
	l.Step(0, batch(4), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 1, Task: 1}})
	// A child sent tasks 1, 2 and 3 first by its books, replicated one,
	// and saw a cancel stop a running one; task 1 was sent here already.
	if n := l.Elsewhere(0, []TaskID{1, 2, 3}, Counts{Originals: 99, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: s}); n != 2 {
		t.Errorf("%d originals elsewhere, want 2", n)
	}
	if !l.Sent(2) || l.Sent(-1) || l.Sent(MaxTaskID+1) {
		t.Error("Sent does not say what was sent")
	}
	// Task 2 sent again here, task 3 by another child: resends.
	l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}, {Kind: Send, Worker: 1, Task: 2}})
	l.Elsewhere(0, []TaskID{3, -1, MaxTaskID + 1}, Counts{})
	// The original of task 1 never went out: the child's resend of it is
	// the original now.
	l.Unsent(1, 1)
	want := Counts{Originals: 4, Resends: 2, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: s}
	if c := l.Report().Generations[0].Counts; c != want {
		t.Errorf("generation 0 counts %+v, want %+v", c, want)
	}
	// A late cancel's outcome from the child, once the next batch began,
	// belongs to the batch before, whose figures are final already: it
	// counts in the next (as a cancel's outcome here does); a send of
	// that batch, too late to be a first, is a resend.
	l.Step(2*s, batch(1), nil)
	l.Elsewhere(1, []TaskID{0}, Counts{CancelsLate: 1})
	late := Counts{Resends: 1, CancelsLate: 1}
	rep := l.Report()
	if c0, c1 := rep.Generations[0].Counts, rep.Generations[1].Counts; c0 != want || c1 != late {
		t.Errorf("generations' counts %+v and %+v, want %+v and %+v", c0, c1, want, late)
	}
	want.add(late)
	if rep.Counts != want {
		t.Errorf("run counts %+v, want %+v", rep.Counts, want)
	}
}
