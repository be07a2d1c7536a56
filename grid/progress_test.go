package grid

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// quickDeadlines makes overdue instances show within a test's patience.
func quickDeadlines(c *MasterConfig) { c.DeadlineFloor = 100 * time.Millisecond }

// A worker that takes tasks and never answers, while its connection's
// heartbeats keep flowing, costs about one deadline under every policy,
// never the run.
func TestMasterSilentWorkerEveryPolicy(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, quickDeadlines)
			silent := newTestWorker("silent", 64, 0)
			silent.freeze = true
			startWorkers(t, m, newTestWorker("good", 2, time.Millisecond), silent)
			evalAndCheck(t, m, 3, 20)
			if silent.got.Load() == 0 {
				t.Fatal("the silent worker never got a task: nothing was tested")
			}
			st := m.Stats()
			switch policy {
			case "rr", "r3q", "eft":
				// They replicate the silent worker's tasks (eft once they
				// are late beyond the spread of task times) rather than
				// wait for the deadline: some task went out twice.
				if st.TasksSent <= st.Results {
					t.Errorf("nothing was sent again: %+v", st)
				}
			default:
				if st.Overdue == 0 && st.Duplicates == 0 {
					t.Errorf("no instance went overdue: %+v", st)
				}
			}
		})
	}
}

// A failed evaluation is retried on another worker; the run goes on, even
// when one worker fails everything it is given.
func TestMasterRetriesFailedEvaluationElsewhere(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy)
			flaky := newTestWorker("flaky", 8, 0)
			flaky.failAll = true
			// The good worker answers only once the master has counted a
			// failure, so that the flaky one's failures arrive while the
			// batch runs (under replication the good worker could finish
			// a batch first, and a failure for a finished batch is
			// stale, not failed).
			good := newTestWorker("good", 1, 0)
			good.hold = make(chan struct{})
			go func() {
				for m.Stats().Failed == 0 && t.Context().Err() == nil {
					time.Sleep(time.Millisecond)
				}
				close(good.hold)
			}()
			startWorkers(t, m, flaky, good)
			evalAndCheck(t, m, 2, 20)
			// A copy that fails after another copy won is not retried.
			if st := m.Stats(); st.Failed == 0 || st.Retried == 0 || st.Retried > st.Failed {
				t.Errorf("failed %d, retried %d; want some, and retried ≤ failed", st.Failed, st.Retried)
			}
		})
	}
}

// A deterministic failure everywhere fails the run, naming the generation,
// the task and every worker's error.
func TestMasterFailureEverywhereNamesEachWorker(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) { c.MaxRetries = 2 })
	a, b := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0)
	a.failTask, b.failTask = 4, 4
	startWorkers(t, m, a, b)
	_, err := m.Evaluate(t.Context(), 9, randomBatch(rand.New(rand.NewPCG(1, 1)), 10, 3))
	if err == nil {
		t.Fatal("a task that fails everywhere did not fail the run")
	}
	for _, want := range []string{"generation 9", "task 4", "3 times", "a: boom", "b: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// The same, for a program to read (esrun's report): each failure
	// with its worker, in the order they came.
	var rx *RetriesExhaustedError
	if !errors.As(err, &rx) {
		t.Fatalf("error %q is not a *RetriesExhaustedError", err)
	}
	if rx.Gen != 9 || rx.Task != 4 || rx.MaxRetries != 2 || len(rx.Failures) != 3 {
		t.Fatalf("%+v, want generation 9, task 4, max retries 2, 3 failures", *rx)
	}
	seen := map[string]int{}
	for _, f := range rx.Failures {
		seen[f.Worker]++
		if !strings.Contains(f.Err, "boom") || strings.Contains(f.Err, f.Worker+":") {
			t.Errorf("failure %+v: want the worker's error alone", f)
		}
	}
	if seen["a"] == 0 || seen["b"] == 0 || seen["a"]+seen["b"] != 3 {
		t.Errorf("failures %+v, want a's and b's", rx.Failures)
	}
}

// Past the hard timeout a worker's connection is dropped and its tasks
// go elsewhere; a worker whose session says nothing while it has tasks is
// dropped too. The limits apply to the good worker as well, whose tasks
// take a millisecond: they are 2 s so that a loaded machine cannot make
// it look hung (the test waits them out once).
func TestMasterDropsHungWorkers(t *testing.T) {
	cases := []struct {
		name string
		opt  masterOpt
	}{
		{"task timeout", func(c *MasterConfig) {
			c.DeadlineFloor = time.Hour // no soft deadline: only the hard one
			c.TaskTimeout = 2 * time.Second
		}},
		{"silent session", func(c *MasterConfig) {
			c.DeadlineFloor = time.Hour
			c.IdleTimeout = 2 * time.Second
			c.Heartbeat = 100 * time.Millisecond
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := startMaster(t, "wq", c.opt)
			// Heartbeats keep both connections open: only the hung
			// worker's silence can drop it.
			hung, good := newTestWorker("hung", 2, 0), newTestWorker("good", 1, time.Millisecond)
			hung.freeze = true
			hung.heartbeat, good.heartbeat = 100*time.Millisecond, 100*time.Millisecond
			startWorkers(t, m, hung, good)
			evalAndCheck(t, m, 1, 10)
			if st := m.Stats(); st.Dropped != 1 {
				t.Errorf("%d workers dropped, want 1", st.Dropped)
			}
			select {
			case <-hung.conn.Done():
			case <-time.After(time.Minute):
				t.Fatal("the hung worker's connection is still open")
			}
		})
	}
}

// A batch whose tasks cannot fit a frame fails at once with a message
// naming the cap and the flag; one that fits the master's raised cap
// reaches a worker whose own cap is the default (it takes the master's).
func TestMasterFrameCap(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) { c.MaxFrame = 1 << 20 })
	startWorkers(t, m, newTestWorker("w", 1, 0))
	_, err := m.Evaluate(t.Context(), 0, [][]float64{make([]float64, 200_000)})
	if err == nil || !strings.Contains(err.Error(), "frame cap") || !strings.Contains(err.Error(), "-max-frame") {
		t.Errorf("oversized task: %v, want an error naming the frame cap and -max-frame", err)
	}

	// Under -race on a loaded machine a 4 MB frame takes seconds to
	// seal, send and decode, and the test worker, unlike the agent, says
	// nothing while it has no result: past the idle timeout (30 s) its
	// session was dropped as silent, it never came back, and Evaluate
	// waited for ever. The timeout is the task timeout's, 10 minutes, so
	// that the test asserts what the frame cap lets through, not the
	// machine's speed. (Tasks that overrun their deadline meanwhile are
	// sent again, each overrun doubling it: they end.)
	big := startMaster(t, "rwq", func(c *MasterConfig) { c.MaxFrame, c.IdleTimeout = 16<<20, 10*time.Minute })
	startWorkers(t, big, newTestWorker("w", 1, 0))
	xs := randomBatch(rand.New(rand.NewPCG(5, 6)), 3, 500_000)
	f, err := big.Evaluate(t.Context(), 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		if f[i] != sphere(xs[i]) {
			t.Errorf("task %d: %v, want %v", i, f[i], sphere(xs[i]))
		}
	}
}

// A master that runs for weeks sees workers come and go without end: its
// memory (and the policy's and the ledger's) follows the workers present.
// Bound: after 10,000 join/leave cycles through real handshakes, the live
// heap is within 1 MiB of what it was after the first 1,000 (a leak of
// even 100 bytes a cycle would break it).
func TestMasterJoinLeaveHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 handshakes")
	}
	// Logs are dropped: a test's log keeps every line in memory.
	quiet := slog.New(slog.DiscardHandler)
	m := startMaster(t, "r3q", func(c *MasterConfig) { c.Logger = quiet })
	startWorkers(t, m, newTestWorker("stayer", 1, 0))
	rng := rand.New(rand.NewPCG(7, 8))
	var before runtime.MemStats
	for i := range 10_000 {
		w := newTestWorker("visitor", 2, 0)
		w.log = quiet
		if err := w.connect(t.Context(), m.Addr(), m.cfg.Key); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%500 == 0 {
			// A batch now and then, so that visitors take (and drop) work.
			if _, err := m.Evaluate(t.Context(), i, randomBatch(rng, 8, 3)); err != nil {
				t.Fatal(err)
			}
		}
		w.stop()
		if i == 999 {
			settle(t, m)
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
	}
	settle(t, m)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grow := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap %d → %d bytes over 9,000 join/leave cycles (%+d)", before.HeapAlloc, after.HeapAlloc, grow)
	if grow > 1<<20 {
		t.Errorf("heap grew by %d bytes over 9,000 join/leave cycles", grow)
	}
	rep := m.Report()
	if rep.Departed < 9_000 || len(rep.Workers) > sched.DepartedKept+16 {
		t.Errorf("report: %d departed, %d listed", rep.Departed, len(rep.Workers))
	}
}

// settle waits until the master has seen every visitor go.
func settle(t *testing.T, m *Master) {
	t.Helper()
	eventually(t, "visitors to be gone", func() bool { return m.Workers() == 1 })
	var st MasterStats
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if st = m.Stats(); st.Workers == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal(errors.New("master did not settle"))
}
