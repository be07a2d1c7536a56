package grid

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A task that runs past the task timeout on every worker fails its
// generation once MaxRetries workers more than allowed were dropped for
// it, naming the timeout. Each drop counted for nothing: the workers
// came back (esrun's local agents, esworker) and took the task again, one
// dropped after another, and the run never ended (esrun -task-timeout 3s
// on a task of 5 s: 124 workers dropped in 200 s).
func TestTaskPastTheTimeoutEverywhereFails(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) {
		c.DeadlineFloor = time.Hour // no soft deadline: only the hard one
		c.TaskTimeout = 2 * time.Second
		c.MaxRetries = 1
	})
	a, b := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0)
	a.freeze, b.freeze = true, true
	a.heartbeat, b.heartbeat = 100*time.Millisecond, 100*time.Millisecond
	startWorkers(t, m, a, b)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := m.Evaluate(ctx, 0, [][]float64{{1}})
	var rx *RetriesExhaustedError
	if !errors.As(err, &rx) || len(rx.Failures) != 2 || !strings.Contains(rx.Failures[0].Err, "ran past the task timeout of 2s") {
		t.Fatalf("Evaluate: %v; want the task failed twice, past the task timeout", err)
	}
	if st := m.Stats(); st.Dropped != 2 {
		t.Errorf("%d workers dropped, want 2", st.Dropped)
	}
}

// A slow machine that runs a task past the task timeout, comes back
// under its name and is given the same task again (the queue's head,
// while the other workers are busy) does not fail the generation on its
// own: its drops for that task count once while another worker open for
// work has not run it past the timeout. Each drop counted, and one slow
// machine failed a generation a faster one would have ended. Once every
// worker open has run it past the timeout, the drops count again.
func TestTaskPastTheTimeoutOnOneMachineCountsOnce(t *testing.T) {
	m := &Master{cfg: MasterConfig{MaxRetries: 1, TaskTimeout: 2 * time.Second}, log: testLogger(t)}
	b := &batch{gen: 3, done: make([]bool, 2), failures: map[int32][]TaskFailure{}, reply: make(chan evalReply, 1)}
	m.cur = b
	fast := &mworker{id: 1, name: "fast", slots: 1}
	slow := &mworker{id: 2, name: "slow", slots: 1, left: true}
	m.order = []*mworker{fast, slow}
	m.timedOut(slow, 1)
	back := &mworker{id: 3, name: "slow", slots: 1, left: true} // it came back, was given task 1 again, and was dropped again
	m.order = append(m.order, back)
	m.timedOut(back, 1)
	if b.replied || len(b.failures[1]) != 1 {
		t.Fatalf("after two drops of the slow machine for task 1, the fast worker open: replied %v, failures %v; want one failure, the generation on", b.replied, b.failures[1])
	}
	fast.left = true
	again := &mworker{id: 4, name: "slow", slots: 1, left: true} // now alone
	m.order = append(m.order, again)
	m.timedOut(again, 1)
	var rx *RetriesExhaustedError
	if !b.replied || !errors.As((<-b.reply).err, &rx) || len(rx.Failures) != 2 {
		t.Fatalf("a third drop with no other worker open: replied %v, failures %v; want the generation failed", b.replied, b.failures[1])
	}
}

// dropTwiceBeside drops the machine "slow" twice for running task 1 past
// the task timeout (MaxRetries 1), beside the worker beside makes, and
// says whether the generation failed with both drops counted, and the
// task's failures.
func dropTwiceBeside(t *testing.T, beside func(m *Master, b *batch) *mworker) (failed bool, failures []TaskFailure) {
	t.Helper()
	m := &Master{cfg: MasterConfig{MaxRetries: 1, TaskTimeout: 2 * time.Second}, log: testLogger(t), start: time.Now().Add(-time.Hour)}
	b := &batch{gen: 3, done: make([]bool, 2), failures: map[int32][]TaskFailure{}, reply: make(chan evalReply, 1)}
	m.cur = b
	slow := &mworker{id: 2, name: "slow", slots: 1, left: true}
	m.order = []*mworker{beside(m, b), slow}
	m.timedOut(slow, 1)
	back := &mworker{id: 3, name: "slow", slots: 1, left: true} // it came back, was given task 1 again, and was dropped again
	m.order = append(m.order, back)
	m.timedOut(back, 1)
	if !b.replied && len(b.failures[1]) != 1 {
		t.Errorf("the generation on after two drops of the slow machine: failures %v; want one, the first", b.failures[1])
	}
	var rx *RetriesExhaustedError
	failed = b.replied && errors.As((<-b.reply).err, &rx) && len(rx.Failures) == 2
	return failed, b.failures[1]
}

// A worker late for longer than the task timeout (a silent one:
// connected, late for ever, nothing out) is not one that may run the task:
// a machine dropped again and again for running it past the timeout
// counts each time beside it, and the generation fails after MaxRetries+1.
// It counted as one that may, so that a task that hung on the one machine
// answering ran to the timeout for ever, uncounted (simulation seeds
// 2925468 and 2926884, once a task cut short at the deadlines' ceiling ran
// to the timeout). A worker late a moment still counts.
func TestTaskPastTheTimeoutCountsBesideSilentWorker(t *testing.T) {
	for _, lateFor := range []time.Duration{time.Second, time.Minute} {
		failed, fs := dropTwiceBeside(t, func(m *Master, _ *batch) *mworker {
			return &mworker{id: 1, name: "silent", slots: 1, late: true, lateSince: m.now() - lateFor}
		})
		if want := lateFor >= 2*time.Second; failed != want {
			t.Errorf("two drops of the slow machine for task 1 beside a worker late %v: generation failed %v, failures %v; want %v", lateFor, failed, fs, want)
		}
	}
}

// A worker on which the task went overdue or failed is not one that may
// run it: the policy gives it the task no more while another worker it
// has not failed on is open, which a machine back from its drop under a
// new id always is. Beside it, a machine dropped again for running the
// task past the timeout counts each time. It counted as one that may, and
// two machines took a task that hangs everywhere in turns, each timeout
// uncounted, for ever (TestLongPoints under rwq, cyclic and eft).
func TestTaskPastTheTimeoutCountsBesidePassedOverWorker(t *testing.T) {
	for _, passedOver := range []bool{false, true} {
		failed, fs := dropTwiceBeside(t, func(_ *Master, b *batch) *mworker {
			other := &mworker{id: 1, name: "other", slots: 1}
			if passedOver {
				b.passOver(1, other.id) // task 1 went overdue on it
			}
			return other
		})
		if failed != passedOver {
			t.Errorf("two drops of the slow machine for task 1 beside a worker the task went overdue on (%v): generation failed %v, failures %v; want %v", passedOver, failed, fs, passedOver)
		}
	}
}
