package sched

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Two workers: w1 takes 2.5 s per task (speed 1), w2 takes 1 s (speed 2.5);
// five tasks; no delay. Each schedule below was worked out by hand from
// docs/papers.md §1.
var handMachines = []machine{{id: 1, slots: 1, taskTime: 2500 * time.Millisecond}, {id: 2, slots: 1, taskTime: time.Second}}

// handCase is one hand-worked schedule of handMachines running 5 tasks.
type handCase struct {
	policy string
	trace  []string
	total  time.Duration
	sync   time.Duration
	comm   time.Duration
	counts Counts
}

// With no delay no slot waits while Q holds work: comm is 0 everywhere, and
// compute = total − sync.
func TestHandSchedules(t *testing.T) {
	tests := []handCase{
		{
			policy: "wq",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2",
				"1s accept t1 w2", "1s send t2 w2",
				"2s accept t2 w2", "2s send t3 w2",
				"2.5s accept t0 w1", "2.5s send t4 w1",
				"3s accept t3 w2", "3s sync-wait w2", // Q empty and w2's slot waits: sync wait begins
				"5s accept t4 w1",
			},
			total: 5 * time.Second, sync: 2 * time.Second,
			counts: Counts{Originals: 5},
		},
		{
			// Q empties at 2.5 s with R = {t3 on w2, t4 on w1}. At 3 s t3
			// is done; R = {t4}, replicated to the idle w2, which wins; the
			// original, running on w1 for 1.5 s, is cancelled.
			policy: "rr",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2",
				"1s accept t1 w2", "1s send t2 w2",
				"2s accept t2 w2", "2s send t3 w2",
				"2.5s accept t0 w1", "2.5s send t4 w1",
				"3s accept t3 w2", "3s replica t4 w2", "3s sync-wait w2",
				"4s accept t4 w2", "4s cancel-running t4 w1",
			},
			total: 4 * time.Second, sync: time.Second,
			counts: Counts{Originals: 5, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: 1500 * time.Millisecond},
		},
		{
			// Two per worker, dealt in turn: w1 runs t0 and holds t2, w2 runs
			// t1 and holds t3. t2 waits behind the slow t0.
			policy: "rwq",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2",
				"1s accept t1 w2", "1s send t4 w2",
				"2s accept t3 w2", "2s sync-wait w2", // Q empty: sync wait begins
				"2.5s accept t0 w1",
				"3s accept t4 w2",
				"5s accept t2 w1",
			},
			total: 5 * time.Second, sync: 3 * time.Second,
			counts: Counts{Originals: 5},
		},
		{
			// Q empties at 1 s; R in reverse order of transfer is t4 t3 t2
			// t0. At 2 s t3 is done; the pick t4 is already on w2, so t2
			// (held behind t0 on w1) is replicated. At 2.5 s w1 frees: the
			// round-robin wraps to t4, held behind t2 on w1. At 3 s w2
			// finishes t4: its copy on w1 is cancelled while held. At 4 s w2
			// finishes t2, which w1 has been running since 2.5 s.
			policy: "r3q",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2",
				"1s accept t1 w2", "1s send t4 w2",
				"2s accept t3 w2", "2s replica t2 w2", "2s sync-wait w2",
				"2.5s accept t0 w1", "2.5s replica t4 w1",
				"3s accept t4 w2", "3s cancel-held t4 w1",
				"4s accept t2 w2", "4s cancel-running t2 w1",
			},
			total: 4 * time.Second, sync: 2 * time.Second,
			counts: Counts{Originals: 5, Replicas: 2, CancelsHeld: 1, CancelsRunning: 1, Aborted: 1, Wasted: 1500 * time.Millisecond, Dropped: 1},
		},
		{
			// Static: w1 gets t0 t2 t4, w2 gets t1 t3.
			policy: "cyclic",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2", "0s send t4 w1",
				"1s accept t1 w2", "1s sync-wait w2", // the first slot left without work
				"2s accept t3 w2",
				"2.5s accept t0 w1",
				"5s accept t2 w1",
				"7.5s accept t4 w1",
			},
			total: 7500 * time.Millisecond, sync: 6500 * time.Millisecond,
			counts: Counts{Originals: 5},
		},
	}
	runHandCases(t, 0, tests)
}

// The same machines with 100 ms each way. Comm is measured up to the
// start of the sync wait only; worked out per policy below.
func TestHandSchedulesDelay(t *testing.T) {
	tests := []handCase{
		{
			// w1 runs t0 0.1–2.6 and t4 2.8–5.3; w2 runs t1 0.1–1.1, t2
			// 1.3–2.3, t3 2.5–3.5. Sync wait from 3.6 s. Before it, w1
			// executed 2.5 + 0.8 of 3.6 s (comm 0.3 s), w2 3 of 3.6 s (0.6
			// s): comm 0.45 s.
			policy: "wq",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2",
				"1.2s accept t1 w2", "1.2s send t2 w2",
				"2.4s accept t2 w2", "2.4s send t3 w2",
				"2.7s accept t0 w1", "2.7s send t4 w1",
				"3.6s accept t3 w2", "3.6s sync-wait w2",
				"5.4s accept t4 w1",
			},
			total: 5400 * time.Millisecond, sync: 1800 * time.Millisecond, comm: 450 * time.Millisecond,
			counts: Counts{Originals: 5},
		},
		{
			// As wq until 3.6 s, where w2 gets a replica of t4 instead of
			// waiting (sync wait from there); it runs 3.7–4.7 and wins;
			// w1's original, running since 2.8, stops when the cancel
			// lands at 4.9 (2.1 s wasted). Comm as wq's: 0.45 s.
			policy: "rr",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2",
				"1.2s accept t1 w2", "1.2s send t2 w2",
				"2.4s accept t2 w2", "2.4s send t3 w2",
				"2.7s accept t0 w1", "2.7s send t4 w1",
				"3.6s accept t3 w2", "3.6s replica t4 w2", "3.6s sync-wait w2",
				"4.8s accept t4 w2", "4.8s cancel-running t4 w1",
			},
			total: 4800 * time.Millisecond, sync: 1200 * time.Millisecond, comm: 450 * time.Millisecond,
			counts: Counts{Originals: 5, Replicas: 1, CancelsRunning: 1, Aborted: 1, Wasted: 2100 * time.Millisecond},
		},
		{
			// w1 runs t0 0.1–2.6 then its held t2 2.6–5.1; w2 runs t1
			// 0.1–1.1, its held t3 1.1–2.1, t4 (arrived 1.3, held) 2.1–3.1.
			// Sync wait from 2.2 s (t3's result finds Q empty). Before it,
			// each worker waited only for its first task: comm 0.1 s.
			policy: "rwq",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2",
				"1.2s accept t1 w2", "1.2s send t4 w2",
				"2.2s accept t3 w2", "2.2s sync-wait w2",
				"2.7s accept t0 w1",
				"3.2s accept t4 w2",
				"5.2s accept t2 w1",
			},
			total: 5200 * time.Millisecond, sync: 3 * time.Second, comm: 100 * time.Millisecond,
			counts: Counts{Originals: 5},
		},
		{
			// As rwq until 2.2 s, where R (reverse order of transfer) is t4
			// t3 t2 t0: w2 holds t4, so it gets a replica of t2 (sync wait
			// from here), held behind t4 and run 3.1–4.1. At 2.7 s w1 frees
			// a place: the round-robin wraps to t4, held behind t2 on w1
			// from 2.8. At 3.2 s w2's t4 wins: w1's copy is cancelled while
			// held (dropped at 3.3). At 4.2 s w2's t2 wins: w1's, running
			// since 2.6, stops at 4.3 (1.7 s wasted). Comm as rwq's: 0.1 s.
			policy: "r3q",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2",
				"1.2s accept t1 w2", "1.2s send t4 w2",
				"2.2s accept t3 w2", "2.2s replica t2 w2", "2.2s sync-wait w2",
				"2.7s accept t0 w1", "2.7s replica t4 w1",
				"3.2s accept t4 w2", "3.2s cancel-held t4 w1",
				"4.2s accept t2 w2", "4.2s cancel-running t2 w1",
			},
			total: 4200 * time.Millisecond, sync: 2 * time.Second, comm: 100 * time.Millisecond,
			counts: Counts{Originals: 5, Replicas: 2, CancelsHeld: 1, CancelsRunning: 1, Aborted: 1, Wasted: 1700 * time.Millisecond, Dropped: 1},
		},
		{
			// w1 runs t0 t2 t4 from 0.1 to 7.6, w2 t1 t3 from 0.1 to 2.1.
			// Sync wait from 1.2 s (the first result); before it each
			// worker waited 0.1 s: comm 0.1 s. (Counting w2's idle 2.1–7.7
			// as comm too would make comm 2.95 s and compute −1.75 s.)
			policy: "cyclic",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w2", "0s send t4 w1",
				"1.2s accept t1 w2", "1.2s sync-wait w2",
				"2.2s accept t3 w2",
				"2.7s accept t0 w1",
				"5.2s accept t2 w1",
				"7.7s accept t4 w1",
			},
			total: 7700 * time.Millisecond, sync: 6500 * time.Millisecond, comm: 100 * time.Millisecond,
			counts: Counts{Originals: 5},
		},
	}
	runHandCases(t, 100*time.Millisecond, tests)
}

func runHandCases(t *testing.T, delay time.Duration, tests []handCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			d := newHandDriver(t, tc.policy, Config{}, delay, LedgerConfig{}, handMachines)
			d.l.SetSpeed(1, 1)
			d.l.SetSpeed(2, 2.5)
			end := d.runBatch(5)
			d.drain()
			if got, want := strings.Join(d.trace, "\n"), strings.Join(tc.trace, "\n"); got != want {
				t.Errorf("trace:\n%s\nwant:\n%s", got, want)
			}
			if end != tc.total {
				t.Errorf("batch ended at %v, want %v", end, tc.total)
			}
			rep := d.l.Report()
			if rep.Total != tc.total || rep.SyncWait != tc.sync || rep.Comm != tc.comm {
				t.Errorf("ledger total %v sync %v comm %v, want %v %v %v", rep.Total, rep.SyncWait, rep.Comm, tc.total, tc.sync, tc.comm)
			}
			if rep.Counts != tc.counts {
				t.Errorf("counts %+v, want %+v", rep.Counts, tc.counts)
			}
			// LB = 5 tasks / (1/2.5 s + 1/1 s) = 25/7 s.
			if want := 25 * time.Second / 7; absDur(rep.LB-want) > time.Microsecond {
				t.Errorf("LB %v, want %v", rep.LB, want)
			}
			if want := float64(rep.LB) / float64(tc.total); math.Abs(rep.EfficiencyLB-want) > 1e-9 {
				t.Errorf("efficiency %v, want %v", rep.EfficiencyLB, want)
			}
			if want := tc.total - tc.sync - tc.comm; rep.Compute != want || want < 0 {
				t.Errorf("compute %v, want %v", rep.Compute, want)
			}
		})
	}
}

// The same schedules with a two-slot worker: slots are filled in turn and
// the held instances are the ones after the first Slots in send order.
func TestHandTwoSlots(t *testing.T) {
	ms := []machine{{id: 7, slots: 2, taskTime: time.Second}}
	d := newHandDriver(t, "r3q", Config{}, 0, LedgerConfig{}, ms)
	d.runBatch(5)
	want := []string{
		"0s send t0 w7", "0s send t1 w7", "0s send t2 w7", "0s send t3 w7",
		"1s accept t0 w7", "1s send t4 w7",
		// t1 done; w7 holds every other task of R: nothing to replicate,
		// and the slot t1 freed waits: the sync wait begins.
		"1s accept t1 w7", "1s sync-wait w7",
		"2s accept t2 w7", "2s accept t3 w7",
		"3s accept t4 w7",
	}
	if got := strings.Join(d.trace, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// With unequal slots, every slot gets its running task before any worker
// gets a held one, so the newest transfers, which r3q replicates first, are
// held ones.
func TestHandUnequalSlots(t *testing.T) {
	ms := []machine{{id: 1, slots: 3, taskTime: 10 * time.Second}, {id: 2, slots: 1, taskTime: time.Second}}
	d := newHandDriver(t, "r3q", Config{}, 0, LedgerConfig{}, ms)
	d.step(Event{Kind: BatchStarted, N: 8})
	want := []string{
		"0s send t0 w1", "0s send t1 w2", "0s send t2 w1", "0s send t3 w1", // running
		"0s send t4 w1", "0s send t5 w2", "0s send t6 w1", "0s send t7 w1", // held
	}
	if got := strings.Join(d.trace, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// w2 returns t1 (Q is empty): the newest task it lacks is t7, held on w1.
	d.trace = d.trace[:0]
	d.step(Event{Kind: ResultArrived, Worker: 2, Task: 1})
	want = []string{"0s accept t1 w2", "0s replica t7 w2", "0s sync-wait w2"}
	if got := strings.Join(d.trace, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// w2 returns t5: next in reverse order of transfer, t6 (held on w1).
	d.trace = d.trace[:0]
	d.step(Event{Kind: ResultArrived, Worker: 2, Task: 5})
	want = []string{"0s accept t5 w2", "0s replica t6 w2"}
	if got := strings.Join(d.trace, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// w2 returns t7 first: its held copy on w1 is cancelled as held.
	d.trace = d.trace[:0]
	d.step(Event{Kind: ResultArrived, Worker: 2, Task: 7})
	want = []string{"0s accept t7 w2", "0s cancel-held t7 w1", "0s replica t4 w2"}
	if got := strings.Join(d.trace, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
