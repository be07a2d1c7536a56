package grid

import (
	"context"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Issue 25: a lone worker that lost the tasks of a frame (as an agent
// took a task sent again for its cancelled instance, still running) costs
// a deadline, not the run. The rule "a late worker gets nothing new until
// it answers" stalled it: nothing was left for it to answer. Now the
// overdue instances are cancelled and, no other worker being open, sent
// to it again at once.
func TestMasterLoneWorkerLostTasksSentAgain(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, func(c *MasterConfig) {
				c.DeadlineFloor, c.FirstDeadline = 50*time.Millisecond, 50*time.Millisecond
				c.TaskTimeout = -1 // only the deadlines may end the loss
			})
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
		plain = d.Of(w.exec, m.exec, w.rtt)
		grown = d.OfWorker(w.exec, m.exec, w.rtt, w.overran)
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
			m := startMaster(t, policy, func(c *MasterConfig) {
				c.DeadlineFloor, c.FirstDeadline = 50*time.Millisecond, 50*time.Millisecond
				c.TaskTimeout = -1
			})
			w := newTestWorker("crossing", 1, 0)
			w.freeze = true // it runs nothing: the test answers
			cancels := make(chan []int32, 16)
			w.onCancel = func(c *Cancel) {
				select { // the worker's reader must not outlive the test
				case cancels <- slices.Clone(c.IDs):
				case <-t.Context().Done():
				}
			}
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
			startWorkers(t, m, w)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			x := []float64{1, 2, 3, 4, 5}
			f, err := m.Evaluate(ctx, 0, [][]float64{x})
			if err != nil || f[0] != sphere(x) {
				t.Fatalf("Evaluate: %v, %v; want [%v]", f, err, sphere(x))
			}
			// Each overdue instance is cancelled (Overdue counts before its
			// cancel goes): one cancel more than them is the instance's
			// sent again, however many deadlines a loaded machine missed.
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
					t.Fatalf("%d cancels of task 0, each of an overdue instance: the one sent again, held on the worker out of the books, was never cancelled", n-1)
				}
			}
		})
	}
}
