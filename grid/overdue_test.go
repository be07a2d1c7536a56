package grid

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// deadlinesOnly gives a test master 50 ms deadlines and no task
// timeout: only a deadline ends an instance the test never answers.
func deadlinesOnly(c *MasterConfig) {
	c.DeadlineFloor, c.FirstDeadline = 50*time.Millisecond, 50*time.Millisecond
	c.TaskTimeout = -1
}

// Issue 25: a lone worker that lost the tasks of a frame (as an agent
// took a task sent again for its cancelled instance, still running) costs
// a deadline, not the run. The rule "a late worker gets nothing new until
// it answers" stalled it: nothing was left for it to answer. Now the
// overdue instances are cancelled and, no other worker being open, sent
// to it again at once.
func TestMasterLoneWorkerLostTasksSentAgain(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, deadlinesOnly)
			w := newTestWorker("lossy", 2, 0)
			var lost atomic.Bool
			w.onTasks = func(*testWorker, net.Conn) bool { return lost.CompareAndSwap(false, true) }
			startWorkers(t, m, w)
			evalAndCheck(t, m, 3, 10)
			if st := m.Stats(); st.Overdue == 0 || st.Dropped != 0 {
				t.Errorf("%d overdue, %d dropped; want some and none", st.Overdue, st.Dropped)
			}
		})
	}
}

// A late worker (found overdue, silent since) is judged by its plain
// deadline: its overrun does not make the other instances it holds wait
// DeadlineFactor times longer, as the overrun of a worker that then
// answers does (sched.Overran). It may be silent, and a silent worker
// costs one deadline: seed 235220 of the simulation had a silent worker
// hold three tasks of a batch sent at moments apart, cut at 30 s, then
// 2 min, then 5 min, while a free worker waited.
func TestMasterLateWorkerDeadlineNotGrown(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) {
		c.DeadlineFloor, c.FirstDeadline = 100*time.Millisecond, 100*time.Millisecond
	})
	silent := newTestWorker("silent", 1, 0)
	silent.freeze = true
	startWorkers(t, m, silent, newTestWorker("alive", 1, time.Millisecond))
	evalAndCheck(t, m, 1, 4)
	eventually(t, "the silent worker to be late", func() bool {
		return slices.ContainsFunc(m.WorkerStats(), func(s WorkerStat) bool { return s.Name == "silent" && s.Late })
	})
	var got, plain, grown time.Duration
	m.ask(func() {
		w, d := m.byName["silent"], m.cfg.deadlines()
		got = m.deadline(w)
		plain = d.Of(w.exec, m.hosts.grid(), w.rtt)
		grown = d.OfWorker(w.exec, m.hosts.grid(), w.rtt, w.overran)
	})
	if grown <= plain {
		t.Fatalf("setup: its overrun would not grow its deadline (%v, plain %v)", grown, plain)
	}
	if got != plain {
		t.Errorf("the late worker's deadline is %v, want its plain deadline %v (not %v, grown by its overrun)", got, plain, grown)
	}
}

// An overdue instance sent again to its worker (no other is open) while
// its result is on the way: the result, which arrives before the answer
// to the cancel, ends the task, and the instance sent again is cancelled
// too. Seed 510859 of the simulation: that instance ran on out of the
// books, hung and held the worker's one slot, and the tasks sent to it
// since waited behind it for hours.
func TestMasterCancelsInstanceSentAgainWhenResultCrossesCancel(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, deadlinesOnly)
			w, cancels := crossingWorker(t)
			frames := 0 // the connection's reader calls forge, one frame at a time
			w.forge = func(ts *Tasks) []Result {
				frames++
				if frames != 2 || len(ts.Items) != 1 || ts.Items[0].ID != 0 {
					return nil // the first send is held until overdue
				}
				// Task 0 sent again after its cancel: its first instance's
				// result left before the cancel came, and the cancel found
				// it finished. The instance sent again stays held.
				it := ts.Items[0]
				return []Result{
					{Gen: ts.Gen, ID: 0, F: sphere(it.X), Exec: int64(time.Millisecond), Token: it.Token},
					{Gen: ts.Gen, ID: 0, Cancelled: true, Ack: AckLate},
				}
			}
			ctx := evaluateOneOn(t, m, w)
			// Each overdue instance is cancelled (Overdue counts before its
			// cancel goes): one cancel more than them is the instance's
			// sent again, however many deadlines a loaded machine missed.
			awaitCancelPastOverdue(ctx, t, m, cancels, "the one sent again")
		})
	}
}

// An overdue instance sent again, twice, to a lone worker (no other is
// open) over a slow link: the answer to the first cancel, then the
// result of the second instance (which left before the second cancel
// came) arrive as the third instance is on its way. The first answer
// must not make the master forget the second cancel: the result is
// then taken for the third instance's, which ran on out of the books.
// Seed 51001522 of the simulation (-sim.faults2: a lone worker whose
// every eighth evaluation hangs, its link slow by up to 4 s a write):
// such an instance hung and held the worker's one slot; the task the
// master then waited for stayed queued behind it for two hours.
func TestMasterCancelsInstanceSentAgainTwiceWhenResultCrossesCancels(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, deadlinesOnly)
			w, cancels := crossingWorker(t)
			frames := 0 // the connection's reader calls forge, one frame at a time
			var second Task
			w.forge = func(ts *Tasks) []Result {
				frames++
				if len(ts.Items) != 1 || ts.Items[0].ID != 0 {
					return nil
				}
				switch frames {
				case 2:
					second = ts.Items[0] // held, as the first, until overdue
				case 3:
					// The first instance stopped on its cancel; the
					// second finished before its own cancel came, whose
					// answer is yet to come. The third stays held.
					return []Result{
						{Gen: ts.Gen, ID: 0, Cancelled: true, Ack: AckStopped, Exec: int64(time.Millisecond), Token: second.Token},
						{Gen: ts.Gen, ID: 0, F: sphere(second.X), Exec: int64(time.Millisecond), Token: second.Token},
					}
				}
				return nil
			}
			ctx := evaluateOneOn(t, m, w)
			if frames < 3 {
				t.Fatalf("setup: task 0 was sent %d times, want 3", frames)
			}
			// Each overdue instance is cancelled: one cancel more than
			// them is the third instance's, held out of the books.
			awaitCancelPastOverdue(ctx, t, m, cancels, "the third instance")
		})
	}
}

// A lone one-slot worker holds task 1 behind task 0, and has finished
// both, their results on the way, when task 0 goes overdue: the master
// cancels 0 and withdraws the held 1, and sends 0 again. The worker's
// results then come in one frame with its answers to the cancels (it had
// finished both). The first makes it open again, and the policy sends it
// task 1 again, before the second, which the instance held was sent for,
// ends task 1 in the books. That instance sent again must be cancelled
// (or never sent): seed 2570043 of the simulation, where such instances
// stayed in the worker's queue out of the books, one of them hung its
// slot, and the master, which knew nothing of it, waited for hours.
func TestMasterCancelsHeldInstanceSentAgainWhenResultCrossesWithdrawal(t *testing.T) {
	// The policies that give a one-slot worker a task to hold in the
	// first batch (wq and rr give one a slot, eft one a slot to a worker
	// not yet measured, cyclic deals its share at once).
	for _, policy := range []string{"rwq", "r3q"} {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, deadlinesOnly)
			w := newTestWorker("crossing", 1, 0)
			w.freeze = true // it runs nothing: the test answers
			// What the worker holds, as the agent would: every instance
			// it was sent, until a cancel takes it away. The reader calls
			// forge and onCancel one frame at a time, in order.
			var mu sync.Mutex
			held := map[int32]int{}
			frames, forged := 0, false
			var first []Task
			w.onCancel = func(c *Cancel) {
				mu.Lock()
				defer mu.Unlock()
				for _, id := range c.IDs {
					if held[id] > 0 {
						held[id]--
					}
				}
			}
			w.forge = func(ts *Tasks) []Result {
				mu.Lock()
				defer mu.Unlock()
				frames++
				for _, it := range ts.Items {
					held[it.ID]++
				}
				if frames == 1 {
					first = slices.Clone(ts.Items) // held until task 0 is overdue
					return nil
				}
				if forged || len(first) != 2 || !slices.ContainsFunc(ts.Items, func(it Task) bool { return it.ID == 0 }) {
					return nil
				}
				// Task 0 sent again after the cancels: both first
				// instances' results left before those came, and the
				// cancels found both finished.
				forged = true
				var rs []Result
				for _, it := range first {
					rs = append(rs, Result{Gen: ts.Gen, ID: it.ID, F: sphere(it.X), Exec: int64(time.Millisecond), Token: it.Token})
				}
				for _, it := range first {
					rs = append(rs, Result{Gen: ts.Gen, ID: it.ID, Cancelled: true, Ack: AckLate})
				}
				return rs
			}
			startWorkers(t, m, w)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			xs := [][]float64{{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}}
			f, err := m.Evaluate(ctx, 0, xs)
			if err != nil || f[0] != sphere(xs[0]) || f[1] != sphere(xs[1]) {
				t.Fatalf("Evaluate: %v, %v; want [%v %v]", f, err, sphere(xs[0]), sphere(xs[1]))
			}
			mu.Lock()
			if len(first) != 2 || !forged {
				mu.Unlock()
				t.Fatalf("setup: the worker was first sent %d tasks (want both, one held) and answered crossing the cancels: %v", len(first), forged)
			}
			mu.Unlock()
			// The batch is over: nothing may stay on the worker.
			eventually(t, "every instance the worker holds to be cancelled (an instance sent again, held out of the books, was not)", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range held {
					if n > 0 {
						return false
					}
				}
				return true
			})
		})
	}
}

// Both instances a worker ran were cancelled as overdue while another
// worker was open, so neither was sent to it again; the other then went
// late too. The worker answers both in one frame: the first answer makes
// it open again and the policy sends it the second task afresh, in the
// same turn, before the second answer (whose cancel it crossed) comes
// and withdraws that unsent instance. The ledger takes that send back,
// as TasksSent does, and not the cancelled instance's: seed 610713 of the simulation counted it (sent 24
// instances, counted 20 originals + 5 resends + 1 replica).
func TestMasterCountsInstanceWithdrawnByCrossedResult(t *testing.T) {
	for _, policy := range []string{"wq", "rwq"} {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, deadlinesOnly)
			// Both run nothing: the test answers. a joins first, so its
			// overdue instances come first in the same deadline check.
			a, b := newTestWorker("a", 2, 0), newTestWorker("b", 1, 0)
			a.freeze, b.freeze = true, true
			frames := make(chan []Task, 16)
			a.forge = func(ts *Tasks) []Result {
				select { // the worker's reader must not outlive the test
				case frames <- slices.Clone(ts.Items):
				case <-t.Context().Done():
				}
				return nil
			}
			startWorkers(t, m, a)
			if err := b.start(t, m.Addr(), m.cfg.Key); err != nil {
				t.Fatal(err)
			}
			eventually(t, "b to join", func() bool { return m.Workers() == 2 })
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			xs := [][]float64{{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}, {1, 1, 1, 1, 1}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				m.Evaluate(ctx, 0, xs)
			}()
			var mine []Task
			select {
			case mine = <-frames:
			case <-ctx.Done():
				t.Fatal("worker a got no task")
			}
			if len(mine) != a.slots {
				t.Fatalf("setup: worker a was sent %d tasks, want one per slot (%d)", len(mine), a.slots)
			}
			eventually(t, "both workers late", func() bool {
				late := 0
				for _, s := range m.WorkerStats() {
					if s.Late {
						late++
					}
				}
				return late == 2
			})
			// Both results left before their cancels came, which then
			// found them finished.
			var rs []Result
			for _, it := range mine {
				rs = append(rs, Result{Gen: 0, ID: it.ID, F: sphere(it.X), Exec: int64(time.Millisecond), Token: it.Token})
			}
			for _, it := range mine {
				rs = append(rs, Result{Gen: 0, ID: it.ID, Cancelled: true, Ack: AckLate})
			}
			if err := a.conn.Send(&Results{Items: rs}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the frame taken", func() bool { return m.Stats().CancelAcks >= 2 })
			var st MasterStats
			var c sched.Counts
			m.ask(func() { st, c = m.stats(), m.ledger.RunCounts() })
			if st.TasksSent != int64(c.Originals+c.Resends+c.Replicas) || c.Originals != len(xs) {
				t.Errorf("sent %d instances of %d tasks, the ledger counts %d originals + %d resends + %d replicas",
					st.TasksSent, len(xs), c.Originals, c.Resends, c.Replicas)
			}
			// The instance withdrawn is the one sent again, not the one
			// cancelled: both cancels are answered.
			if c.CancelsLate != len(mine) {
				t.Errorf("%d cancels found their instance finished, want %d", c.CancelsLate, len(mine))
			}
			cancel() // b holds the last task for ever
			<-done
		})
	}
}

// crossingWorker is a one-slot worker that runs nothing (the test answers
// through its forge), with the ids of each cancel it hears.
func crossingWorker(t *testing.T) (*testWorker, chan []int32) {
	w := newTestWorker("crossing", 1, 0)
	w.freeze = true
	cancels := make(chan []int32, 16)
	w.onCancel = func(c *Cancel) {
		select { // the worker's reader must not outlive the test
		case cancels <- slices.Clone(c.IDs):
		case <-t.Context().Done():
		}
	}
	return w, cancels
}

// awaitCancelPastOverdue waits for one cancel of task 0 more than m's
// overdue instances: that of the instance what names, held on the worker
// out of the books unless the master cancels it.
func awaitCancelPastOverdue(ctx context.Context, t *testing.T, m *Master, cancels chan []int32, what string) {
	t.Helper()
	for n := int64(1); ; n++ {
		select {
		case ids := <-cancels:
			if !slices.Equal(ids, []int32{0}) {
				t.Fatalf("cancel %d of %v, want of task 0", n, ids)
			}
			if n > m.Stats().Overdue {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%d cancels of task 0, each of an overdue instance: %s, held on the worker out of the books, was never cancelled", n-1, what)
		}
	}
}

// evaluateOneOn starts w on m and has m evaluate one point, which must
// come back right; it returns the context, which ends with the test or a
// minute after.
func evaluateOneOn(t *testing.T, m *Master, w *testWorker) context.Context {
	t.Helper()
	startWorkers(t, m, w)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	x := []float64{1, 2, 3, 4, 5}
	f, err := m.Evaluate(ctx, 0, [][]float64{x})
	if err != nil || f[0] != sphere(x) {
		t.Fatalf("Evaluate: %v, %v; want [%v]", f, err, sphere(x))
	}
	return ctx
}
