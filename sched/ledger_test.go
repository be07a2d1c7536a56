package sched

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// One worker (1 s per task), 100 ms each way, two batches of two tasks with
// 600 ms of master work between them:
//
//	0    send t0; it runs 0.1–1.1; result back at 1.2, send t1
//	1.2  t1 runs 1.3–2.3; result back at 2.4: batch 0 ends
//	3.0  batch 1: the same, shifted by 3 s, ends at 5.4
func TestLedgerWQDelay(t *testing.T) {
	d := newHandDriver(t, "wq", Config{}, 100*ms, LedgerConfig{}, []machine{{id: 1, slots: 1, taskTime: time.Second}})
	d.l.SetSpeed(1, 1)
	if end := d.runBatch(2); end != 2400*ms {
		t.Fatalf("batch 0 ended at %v", end)
	}
	d.now = 3 * time.Second
	if end := d.runBatch(2); end != 5400*ms {
		t.Fatalf("batch 1 ended at %v", end)
	}
	rep := d.l.Report()
	checkDur(t, "total", rep.Total, 5400*ms)
	checkDur(t, "sync", rep.SyncWait, 0) // the last result is the first to find Q empty
	// Present 5.4 s, executing 4 s; the 0.6 s between batches is not
	// executing either.
	checkDur(t, "comm", rep.Comm, 1400*ms)
	checkDur(t, "compute", rep.Compute, 4*time.Second)
	checkDur(t, "round trip", rep.RoundTrip, 200*ms) // 1.2 − 0 − 1.0
	checkDur(t, "LB", rep.LB, 4*time.Second)
	checkDur(t, "barrier bound", rep.BarrierBound, 4400*ms)
	checkFloat(t, "efficiency vs LB", rep.EfficiencyLB, 4.0/5.4)
	checkFloat(t, "efficiency vs barrier", rep.EfficiencyBarrier, 4.4/5.4)
	if len(rep.Generations) != 2 {
		t.Fatalf("%d generations", len(rep.Generations))
	}
	for i, g := range rep.Generations {
		start := time.Duration(i) * 3 * time.Second
		if g.Index != i || g.Tasks != 2 || !g.Complete || g.Start != start || g.End != start+2400*ms {
			t.Errorf("generation %d: %+v", i, g)
		}
		checkDur(t, "generation total", g.Total, 2400*ms)
		checkDur(t, "generation comm", g.Comm, 400*ms)
		checkDur(t, "generation busy", g.Busy, 2*time.Second)
		checkDur(t, "generation LB", g.LB, 2*time.Second)
		if g.Originals != 2 {
			t.Errorf("generation %d: %d originals", i, g.Originals)
		}
	}
	w := rep.Workers[0]
	if w.Worker != 1 || w.Accepted != 4 || w.Executions != 4 || w.MeanExec != time.Second || w.RoundTrip != 200*ms || w.Busy != 4*time.Second {
		t.Errorf("worker report %+v", w)
	}
}

// Without speeds the rate comes from observed executions: the same run
// gives the same LB, flagged as estimated.
func TestLedgerEstimatedSpeeds(t *testing.T) {
	d := newHandDriver(t, "rwq", Config{}, 100*ms, LedgerConfig{RoundTrip: 250 * ms}, []machine{
		{id: 1, slots: 1, taskTime: time.Second},
		{id: 2, slots: 2, taskTime: 500 * ms},
	})
	d.runBatch(10)
	rep := d.l.Report()
	// Rates: 1/1 s + 2/0.5 s = 5 tasks/s: LB of 10 tasks = 2 s.
	checkDur(t, "LB", rep.LB, 2*time.Second)
	checkDur(t, "barrier bound", rep.BarrierBound, 2250*ms)
	checkDur(t, "round trip", rep.RoundTrip, 250*ms)
}

// A run written by hand, to pin every definition: two workers (w1 one slot,
// w2 two slots), a replica, a cancel of a running instance, a duplicate
// result, a worker leaving, and a run finished in the middle of a batch.
func TestLedgerByHand(t *testing.T) {
	l := NewLedger(LedgerConfig{RoundTrip: 100 * ms})
	l.SetSpeed(1, 0.5) // before the join
	s := time.Second
	l.Step(0, Event{Kind: WorkerJoined, Worker: 1, Slots: 1}, nil)
	l.Step(0, Event{Kind: WorkerJoined, Worker: 2, Slots: 2}, nil)
	l.SetSpeed(2, 1) // after it
	l.Step(0, Event{Kind: BatchStarted, N: 2}, []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}})
	l.Ran(Execution{Worker: 2, Task: 1, Start: 0, End: 2 * s})
	l.Step(2*s, Event{Kind: ResultArrived, Worker: 2, Task: 1}, []Action{{Kind: Accept, Worker: 2, Task: 1}, {Kind: Send, Worker: 2, Task: 0, Replica: true}, {Kind: SyncWait, Worker: 2}})
	l.Ran(Execution{Worker: 2, Task: 0, Start: 2 * s, End: 3 * s})
	l.Step(3*s, Event{Kind: ResultArrived, Worker: 2, Task: 0}, []Action{{Kind: Accept, Worker: 2, Task: 0}, {Kind: Cancel, Worker: 1, Task: 0}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: 3 * s, Cancelled: true})
	l.Step(3500*ms, Event{Kind: ResultArrived, Worker: 2, Task: 1}, nil) // a duplicate
	l.Dropped(3600*ms, 2, 1)                                             // a made-up drop: no cancel of t1 on w2 was sent
	l.Step(5*s, Event{Kind: WorkerLeft, Worker: 2}, nil)
	l.Step(6*s, Event{Kind: BatchStarted, N: 1}, []Action{{Kind: Send, Worker: 1, Task: 0}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 6 * s, End: 7 * s})
	l.Finish(7500 * ms)

	rep := l.Report()
	// Generation 0 (0–3 s): sync wait from the policy's SyncWait (with the
	// replica) at 2 s, so comm is
	// measured over 0–2 s. w1 executed throughout: 0. w2 executed t1 on one
	// of its 2 slots for 2 s: 2 slot-seconds / 2 slots = 1 s of 2 s, so 1 s
	// without work. Mean 0.5 s; compute 3 − 1 − 0.5 = 1.5 s. Busy: w1 3 s,
	// w2 (t1 0–2 s, the replica 2–3 s) 3 slot-seconds / 2 = 1.5 s; mean
	// 2.25 s.
	g := rep.Generations[0]
	if !g.Complete || g.End != 3*s {
		t.Errorf("generation 0: %+v", g)
	}
	checkDur(t, "gen 0 sync", g.SyncWait, s)
	checkDur(t, "gen 0 comm", g.Comm, 500*ms)
	checkDur(t, "gen 0 compute", g.Compute, 1500*ms)
	checkDur(t, "gen 0 busy", g.Busy, 2250*ms)
	// LB from gen 0's finished executions: w1 has none (its only one was
	// aborted), w2 two in 3 slot-seconds on 2 slots: 2 tasks / 1.5 s. The
	// work bound, 2 / (2/1.5 s) = 1.5 s, is below the longest execution
	// (2 s, on the only worker with a rate): LB 2 s.
	checkDur(t, "gen 0 LB", g.LB, 2*s)
	wantG0 := Counts{Originals: 2, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: 3 * s, Duplicates: 1}
	if g.Counts != wantG0 {
		t.Errorf("gen 0 counts %+v, want %+v", g.Counts, wantG0)
	}
	// Generation 1 (6–7.5 s, cut by Finish): only w1 present, 1 s executing.
	g = rep.Generations[1]
	if g.Complete || g.End != 7500*ms || g.SyncWait != 0 || g.LB != 0 {
		t.Errorf("generation 1: %+v", g)
	}
	checkDur(t, "gen 1 comm", g.Comm, 500*ms)
	// Between them, 3–6 s: no generation's time, a figure of its own.
	checkDur(t, "gen 0 between", rep.Generations[0].Between, 0)
	checkDur(t, "gen 1 between", g.Between, 3*s)
	checkDur(t, "gen 1 busy", g.Busy, s)
	// The run: 7.5 s, of which 2–3 s is sync wait. w1: present 7.5 s, 1 s
	// of it in the sync wait; executing 4 s, 1 s of it in the sync wait
	// (the aborted t0, 0–3 s): 6.5 − 3 = 3.5 s (idle 3–6 s and 7–7.5 s).
	// w2: present 0–5 s, 1 s in the sync wait: 4 s; executing 3
	// slot-seconds, 1 in the sync wait (the replica): 4 − 2/2 = 3 s. Mean
	// 3.25 s; compute 7.5 − 1 − 3.25 = 3.25 s. Busy: w1 4 s, w2 3/2 s.
	checkDur(t, "total", rep.Total, 7500*ms)
	checkDur(t, "sync", rep.SyncWait, s)
	checkDur(t, "comm", rep.Comm, 3250*ms)
	checkDur(t, "compute", rep.Compute, 3250*ms)
	checkDur(t, "busy", rep.Busy, 2750*ms)
	checkDur(t, "LB", rep.LB, 2*s)
	checkDur(t, "barrier bound", rep.BarrierBound, 2100*ms) // generation 1 accepted nothing
	checkFloat(t, "efficiency", rep.EfficiencyLB, 2/7.5)
	wantRun := wantG0
	wantRun.Originals++
	if rep.Counts != wantRun {
		t.Errorf("run counts %+v, want %+v", rep.Counts, wantRun)
	}
	// w2 left and is forgotten: it is listed first, its figures intact.
	if rep.Departed != 1 || len(rep.Workers) != 2 {
		t.Fatalf("departed %d, workers %d; want 1 and 2", rep.Departed, len(rep.Workers))
	}
	w2, w1 := rep.Workers[0], rep.Workers[1]
	if w1.Worker != 1 || w1.Speed != 0.5 || w1.Accepted != 0 || w1.Executions != 2 || w1.MeanExec != s ||
		w1.Present != 7500*ms || w1.Busy != 4*s || w1.SyncWait != s || w1.SyncBusy != s || w1.Comm != 3500*ms ||
		w1.CancelsRunning != 1 || w1.Aborted != 1 || w1.Wasted != 3*s || w1.Originals != 2 {
		t.Errorf("w1 %+v", w1)
	}
	if w2.Worker != 2 || w2.Slots != 2 || w2.Accepted != 2 || w2.MeanExec != 1500*ms || w2.Present != 5*s ||
		w2.Busy != 3*s || w2.SyncWait != s || w2.SyncBusy != s || w2.Comm != 3*s || w2.Originals != 1 || w2.Replicas != 1 || w2.RoundTrip != 0 || w2.Dropped != 0 {
		t.Errorf("w2 %+v", w2)
	}
	// w2 finished tasks of 1 s and 2 s: a spread of √0.5 / 1.5; w1 one.
	checkFloat(t, "w2 spread", w2.ExecSpread, math.Sqrt(0.5)/1.5)
	checkFloat(t, "w1 spread", w1.ExecSpread, 0)
}

// Report on an empty ledger, and on a run in progress.
func TestLedgerPartial(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	if rep := l.Report(); rep.Total != 0 || len(rep.Generations) != 0 {
		t.Errorf("empty report %+v", rep)
	}
	l.Step(0, Event{Kind: WorkerJoined, Worker: 3, Slots: 0}, nil) // counts as one slot
	l.Step(time.Second, Event{Kind: BatchStarted, N: 3}, []Action{{Kind: Send, Worker: 3, Task: 0}})
	l.Ran(Execution{Worker: 3, Task: 0, Start: time.Second, End: 2 * time.Second})
	l.Step(2*time.Second, Event{Kind: ResultArrived, Worker: 3, Task: 0}, []Action{{Kind: Accept, Worker: 3, Task: 0}})
	rep := l.Report()
	if g := rep.Generations[0]; g.Complete || g.End != 2*time.Second || rep.Total != time.Second || rep.Comm != 0 {
		t.Errorf("open generation %+v, run %v comm %v", g, rep.Total, rep.Comm)
	}
	if rep.Workers[0].Slots != 1 || rep.Workers[0].Present != time.Second {
		t.Errorf("worker %+v", rep.Workers[0])
	}
	// A second call gives the same answer.
	if rep2 := l.Report(); rep2.Total != rep.Total || rep2.Comm != rep.Comm || len(rep2.Generations) != 1 {
		t.Errorf("report changed: %+v", rep2)
	}
}

func checkDur(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if absDur(got-want) > time.Microsecond {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func checkFloat(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// A ledger forgets departed workers once their figures are final: its
// memory follows the workers present, and the run's figures still count
// every worker.
func TestLedgerForgetsDeparted(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	l.Step(0, Event{Kind: WorkerJoined, Worker: 1, Slots: 1}, nil)
	at := time.Duration(0)
	for i := range 10_000 {
		id := WorkerID(i + 2)
		at += ms
		l.Step(at, Event{Kind: WorkerJoined, Worker: id, Slots: 1}, nil)
		if i%100 == 0 {
			l.Step(at, Event{Kind: BatchStarted, N: 1}, []Action{{Kind: Send, Worker: id, Task: 0}})
			l.Ran(Execution{Worker: id, Task: 0, Start: at, End: at + ms})
			at += ms
			l.Step(at, Event{Kind: ResultArrived, Worker: id, Task: 0}, []Action{{Kind: Accept, Worker: id, Task: 0}})
		}
		at += ms
		l.Step(at, Event{Kind: WorkerLeft, Worker: id}, nil)
	}
	l.Finish(at)
	// Three places at most: w1, the worker of a generation not final yet
	// (until the next one starts), and the one joining.
	if len(l.workers) > 3 || len(l.idx) != 1 {
		t.Errorf("%d worker places, %d ids after 10,000 joins and leaves; want ≤ 3 and 1", len(l.workers), len(l.idx))
	}
	rep := l.Report()
	if rep.Departed != 10_000 || len(rep.Workers) != DepartedKept+1 {
		t.Errorf("departed %d, listed %d; want 10000 and %d", rep.Departed, len(rep.Workers), DepartedKept+1)
	}
	if len(rep.Generations) != 100 || rep.Generations[99].Busy == 0 || rep.Generations[99].LB == 0 {
		t.Errorf("generations lost their departed workers' figures: %d, last %+v", len(rep.Generations), rep.Generations[len(rep.Generations)-1])
	}
}

// A worker set aside as it joins (a plan) is not present: its idle slots
// are no one's comm; given slots before it works, it counts with those.
func TestLedgerSetAsideAtJoin(t *testing.T) {
	l := NewLedger(LedgerConfig{})
	s := time.Second
	l.Step(0, Event{Kind: WorkerJoined, Worker: 1, Slots: 1}, nil)
	l.Step(0, Event{Kind: WorkerJoined, Worker: 2, Slots: 4}, nil)
	l.Step(0, Event{Kind: SlotsChanged, Worker: 2, Slots: 0}, nil)
	l.Step(0, Event{Kind: WorkerJoined, Worker: 3, Slots: 4}, nil)
	l.Step(0, Event{Kind: SlotsChanged, Worker: 3, Slots: 2}, nil)
	l.Step(0, Event{Kind: BatchStarted, N: 1}, []Action{{Kind: Send, Worker: 1, Task: 0}})
	l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
	l.Step(s, Event{Kind: ResultArrived, Worker: 1, Task: 0}, []Action{{Kind: Accept, Worker: 1, Task: 0}})
	l.Finish(s)
	rep := l.Report()
	for _, w := range rep.Workers {
		switch w.Worker {
		case 2:
			if w.Present != 0 {
				t.Errorf("the set-aside worker is present for %v", w.Present)
			}
		case 3:
			if w.Slots != 2 || w.Present != s {
				t.Errorf("worker 3: %d slots, present %v; want 2 and 1s", w.Slots, w.Present)
			}
		}
	}
	l.Step(2*s, Event{Kind: WorkerLeft, Worker: 2}, nil)
	if _, ok := l.idx[2]; ok {
		t.Error("a set-aside worker that left is still kept")
	}
}
