package sched

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Two workers: w1 takes 2.5 s per task (speed 1), w2 takes 1 s (speed 2.5);
// five tasks; no delay. Each schedule below was worked out by hand from
// papers.md §1.
var handMachines = []machine{{id: 1, slots: 1, taskTime: 2500 * time.Millisecond}, {id: 2, slots: 1, taskTime: time.Second}}

func TestHandSchedules(t *testing.T) {
	tests := []struct {
		policy string
		trace  []string
		total  time.Duration
		sync   time.Duration
		counts Counts
	}{
		{
			policy: "wq",
			trace: []string{
				"0s send t0 w1", "0s send t1 w2",
				"1s accept t1 w2", "1s send t2 w2",
				"2s accept t2 w2", "2s send t3 w2",
				"2.5s accept t0 w1", "2.5s send t4 w1",
				"3s accept t3 w2", // Q empty and w2's slot waits: sync wait begins
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
				"3s accept t3 w2", "3s replica t4 w2",
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
				"2s accept t3 w2", // Q empty: sync wait begins
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
				"2s accept t3 w2", "2s replica t2 w2",
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
				"1s accept t1 w2", // the first slot left without work
				"2s accept t3 w2",
				"2.5s accept t0 w1",
				"5s accept t2 w1",
				"7.5s accept t4 w1",
			},
			total: 7500 * time.Millisecond, sync: 6500 * time.Millisecond,
			counts: Counts{Originals: 5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			d := newHandDriver(t, tc.policy, Config{}, 0, LedgerConfig{TaskWork: 2500 * time.Millisecond}, handMachines)
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
			if rep.Total != tc.total || rep.SyncWait != tc.sync {
				t.Errorf("ledger total %v sync %v, want %v %v", rep.Total, rep.SyncWait, tc.total, tc.sync)
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
			if rep.Compute != rep.Total-rep.SyncWait-rep.Comm {
				t.Errorf("compute %v != total − sync − comm", rep.Compute)
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
		// t1 done; w7 holds every other task of R: nothing to replicate.
		"1s accept t1 w7",
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
	want = []string{"0s accept t1 w2", "0s replica t7 w2"}
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
