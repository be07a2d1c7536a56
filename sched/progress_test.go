package sched

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

func overdue(w WorkerID, t TaskID) Event  { return Event{Kind: Overdue, Worker: w, Task: t} }
func failed(w WorkerID, t TaskID) Event   { return Event{Kind: Failed, Worker: w, Task: t} }
func returned(w WorkerID, t TaskID) Event { return Event{Kind: Returned, Worker: w, Task: t} }
func draining(w WorkerID) Event           { return Event{Kind: WorkerDraining, Worker: w} }
func alive(w WorkerID) Event              { return Event{Kind: Measured, Worker: w} }

// Progress events, traced by hand. The papers leave a silent worker and a
// failing evaluation to the implementation; here time is an event (the
// driver's clock, given as data, never read), so each of these is a deadline or a report the driver turns into one.
func TestProgressEvents(t *testing.T) {
	tests := []struct {
		name, policy string
		steps        []scriptStep
		done         bool
	}{
		{
			// A silent worker under wq: w1 never answers t0. Overdue
			// cancels w1's instance and gives t0 to the first free worker;
			// w1 gets nothing new.
			name: "wq: an overdue instance is cancelled, its task runs elsewhere, the late worker gets no work", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{overdue(1, 0), "c0w1r"}, // t0 to the head of Q; w2 is busy
				{res(2, 1), "a1w2 s0w2"}, // t0 before t2
				{res(2, 0), "a0w2 s2w2"},
				{res(2, 2), "a2w2"},
			},
			done: true,
		},
		{
			// Its result, come before the cancel reached it.
			name: "wq: the late worker's own result still wins, and it is open again", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(4), "s0w1 s1w2"},
				{overdue(1, 0), "c0w1r"},
				{res(1, 0), "a0w1 s2w1"}, // t0 leaves Q; w1 answered: open again
				{res(2, 1), "a1w2 s3w2"},
				{res(1, 2), "a2w1"},
				{res(2, 3), "a3w2"},
			},
			done: true,
		},
		{
			// rwq with depth 2: w1 runs t0 and holds t2. Overdue withdraws
			// the held t2 (a held cancel) before it cancels t0, and puts
			// t0, t2 back in send order.
			name: "rwq: a late worker's held tasks are withdrawn", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(6), "s0w1 s1w2 s2w1 s3w2"},
				{overdue(1, 0), "c2w1h c0w1r"},
				{res(2, 1), "a1w2 s0w2"},
				{res(2, 3), "a3w2 s2w2"},
				{res(2, 0), "a0w2 s4w2"},
				{res(2, 2), "a2w2 s5w2"},
				{res(2, 4), "a4w2"},
				{res(2, 5), "a5w2"},
			},
			done: true,
		},
		{
			// A silent worker under cyclic: its static share is dealt again
			// over the workers that are not late.
			name: "cyclic: an overdue share is dealt again", policy: "cyclic",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(4), "s0w1 s1w2 s2w1 s3w2"},
				{overdue(1, 0), "c2w1h c0w1r s0w2 s2w2"},
				{res(2, 1), "a1w2"},
				{res(2, 3), "a3w2"},
				{res(2, 0), "a0w2"},
				{res(2, 2), "a2w2"},
			},
			done: true,
		},
		{
			name: "overdue of a task held elsewhere too does not requeue it", policy: "rr",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{res(2, 1), "a1w2 r0w2"}, // R = {t0}: replicated to w2
				{overdue(1, 0), "c0w1r"}, // w2 holds t0 and is not late
				{res(2, 0), "a0w2"},
			},
			done: true,
		},
		{
			// A hung slot beside a healthy one (issue 25): the healthy
			// slot's result makes w1 open again, but the task it overran
			// waits in Q for w2, open too, rather than go back to w1.
			name: "a late worker that answers is open again, but not for the task it overran", policy: "wq",
			steps: []scriptStep{
				{join(1, 2), ""}, {join(2, 1), ""},
				{batch(4), "s0w1 s1w2 s2w1"},
				{overdue(1, 0), "c0w1r"}, // t0 to Q; w2 busy
				{res(1, 2), "a2w1 s3w1"}, // w1 answered: open, but t0 is for w2
				{res(2, 1), "a1w2 s0w2"},
				{res(2, 0), "a0w2"},
				{res(1, 3), "a3w1"},
			},
			done: true,
		},
		{
			// Issue 25: a hung evaluation costs one deadline even when its
			// worker is the only one. Its overdue instance is cancelled
			// and, no other worker being open, the task is sent to it
			// again at once; it is late for new work until it answers
			// (its other slot's result).
			name: "a lone worker runs its overdue task again at once", policy: "wq",
			steps: []scriptStep{
				{join(1, 2), ""},
				{batch(3), "s0w1 s1w1"},
				{overdue(1, 0), "c0w1r s0w1"},
				{res(1, 1), "a1w1 s2w1"}, // answered: open again
				{res(1, 0), "a0w1"},
				{res(1, 2), "a2w1"},
			},
			done: true,
		},
		{
			// Sent again to the lone late worker, the task stays in Q, for
			// a worker that joins before the late one answers.
			name: "a worker that joins takes the task a lone late worker runs again", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1"},
				{overdue(1, 0), "c0w1r s0w1"},
				{join(2, 1), "r0w2"},
				{res(2, 0), "a0w2 c0w1r s1w2"},
				{res(2, 1), "a1w2"},
			},
			done: true,
		},
		{
			// The same with one slot, all of it hung: r3q withdraws the
			// held t1, cancels t0 and sends it again. The cancelled
			// instance's answer (Measured) opens w1 again.
			name: "a lone one-slot worker runs its overdue task again at once", policy: "r3q",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(3), "s0w1 s1w1"},
				{overdue(1, 0), "c1w1h c0w1r s0w1"},
				{alive(1), "s1w1"},
				{res(1, 0), "a0w1 s2w1"},
				{res(1, 1), "a1w1"},
				{res(1, 2), "a2w1"},
			},
			done: true,
		},
		{
			name: "Overdue of an unknown instance, worker or task is ignored", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1"},
				{overdue(1, 1), ""}, // t1 is not on w1
				{overdue(9, 0), ""},
				{overdue(1, 7), ""},
				{res(1, 0), "a0w1 s1w1"}, // w1 was never late
			},
		},
		{
			name: "a stale answer (Measured) ends lateness", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""},
				{batch(2), "s0w1"},
				{overdue(1, 0), "c0w1r s0w1"}, // no one else to take t0
				{batch(1), "c0w1r"},           // abandoned; w1 still late: nothing sent
				{alive(1), "s0w1"},
				{res(1, 0), "a0w1"},
			},
			done: true,
		},
		{
			// Retries: a failed task goes back to the head of Q and to
			// another worker, not back to the one that failed it.
			name: "wq: a failed task is retried elsewhere", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(3), "s0w1 s1w2"},
				{failed(1, 0), "s2w1"}, // t0 back to Q, but w1 failed it: t2
				{res(2, 1), "a1w2 s0w2"},
				{res(2, 0), "a0w2"},
				{res(1, 2), "a2w1"},
			},
			done: true,
		},
		{
			name: "a task every live worker failed may go back to one of them", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{failed(1, 0), ""},          // w1 failed t0; w2 has not, and is busy
				{failed(2, 1), "s1w1 s0w2"}, // each takes the task the other failed
				{failed(2, 0), "s0w2"},      // every live worker failed t0: retried anyway
				{failed(9, 0), ""},          // of an unknown worker: ignored
				{res(2, 0), "a0w2"},
				{res(1, 1), "a1w1"},
			},
			done: true,
		},
		{
			name: "when the last worker that had not failed a task leaves, it may take it", policy: "wq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{failed(1, 0), ""},
				{leave(2), "s1w1"},       // t1 and t0 in Q; w1 may take t1 only
				{res(1, 1), "a1w1 s0w1"}, // now only w1 is live: t0 is its again
				{res(1, 0), "a0w1"},
			},
			done: true,
		},
		{
			name: "a failed copy while another runs is not a failure of the task", policy: "rr",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(2), "s0w1 s1w2"},
				{res(2, 1), "a1w2 r0w2"},
				{failed(2, 0), ""}, // w1 still runs t0: it is not put back
				{res(1, 0), "a0w1"},
			},
			done: true,
		},
		{
			// Drain.Returned is honoured: only the returned tasks go back,
			// the running one stays on the draining worker.
			name: "rwq: a draining worker keeps what it runs", policy: "rwq",
			steps: []scriptStep{
				{join(1, 1), ""}, {join(2, 1), ""},
				{batch(5), "s0w1 s1w2 s2w1 s3w2"},
				{draining(1), ""},
				{returned(1, 2), ""},     // back to the head of Q
				{res(2, 1), "a1w2 s2w2"}, // w1 takes nothing
				{res(1, 0), "a0w1"},
				{res(2, 3), "a3w2 s4w2"},
				{leave(1), ""},
				{res(2, 2), "a2w2"},
				{res(2, 4), "a4w2"},
			},
			done: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc.policy, Config{}, tc.steps, tc.done) })
	}
}

// A silent worker costs at most its overdue instances, under every policy:
// once every instance on it is overdue, the others finish the batch.
func TestSilentWorkerEveryPolicy(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			p, err := New(name, Config{})
			if err != nil {
				t.Fatal(err)
			}
			out := p.Step(join(1, 8), nil) // the silent one claims many slots
			out = p.Step(join(2, 1), out)
			out = p.Step(join(3, 2), out)
			out = p.Step(batch(30), out)
			onSilent := map[TaskID]bool{}
			pending := map[[2]int]bool{}
			note := func(acts []Action) {
				for _, a := range acts {
					k := [2]int{int(a.Worker), int(a.Task)}
					switch a.Kind {
					case Send:
						if a.Worker == 1 {
							onSilent[a.Task] = true
						} else {
							pending[k] = true
						}
					case Cancel:
						delete(pending, k)
						if a.Worker == 1 {
							delete(onSilent, a.Task)
						}
					}
				}
			}
			note(out)
			for steps := 0; !p.Done(); steps++ {
				if steps > 1000 {
					t.Fatal("no progress")
				}
				var acts []Action
				switch {
				case len(onSilent) > 0:
					// Every instance on the silent worker goes overdue.
					for task := range onSilent {
						delete(onSilent, task)
						acts = p.Step(overdue(1, task), acts)
						break
					}
				case len(pending) > 0:
					for k := range pending {
						delete(pending, k)
						acts = p.Step(res(WorkerID(k[0]), TaskID(k[1])), acts)
						break
					}
				default:
					t.Fatal("stalled: nothing outstanding but the batch is not done")
				}
				note(acts)
			}
		})
	}
}

// Departed workers are forgotten: the policy's memory follows the workers
// present, not every worker that ever joined.
func TestDepartedWorkersPruned(t *testing.T) {
	for _, name := range Names {
		p, err := New(name, Config{})
		if err != nil {
			t.Fatal(err)
		}
		p.Step(join(1, 2), nil)
		p.Step(batch(100), nil)
		var before runtime.MemStats
		for i := range 10_000 {
			id := WorkerID(i + 2)
			for _, a := range p.Step(join(id, 4), nil) {
				if a.Kind == Send && a.Worker == id && i%3 == 0 {
					p.Step(res(id, a.Task), nil)
				}
			}
			p.Step(leave(id), nil)
			if i == 100 {
				runtime.GC()
				runtime.ReadMemStats(&before)
			}
		}
		pp := p.(*policy)
		if len(pp.workers) > 2 || len(pp.idx) != 1 {
			t.Errorf("%s: %d worker places and %d ids after 10,000 joins and leaves, want 2 and 1", name, len(pp.workers), len(pp.idx))
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 1<<20 {
			t.Errorf("%s: heap grew by %d bytes over 9,900 joins and leaves", name, grow)
		}
	}
}

// Random progress events (overdue, failed, returned, draining) mixed with
// results, joins and leaves, under every policy, checked against the
// rules of New: nothing is sent to a late, draining or departed worker; a
// worker never holds two instances of one task; only tasks not done are
// sent; each task is accepted once; and the batch always completes while
// healthy workers remain. Events carry a clock (Event.At) that moves
// on at random, results carry measurements at random, and Ticks come in
// between, so eft's model of lateness and its censored measurements are
// exercised too.
func TestProgressEventsRandom(t *testing.T) {
	type wstate struct {
		alive, late, drain bool
		slots              int
		out                []TaskID
	}
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(400) {
				rng := rand.New(rand.NewPCG(seed, 0x13))
				p, err := New(name, Config{})
				if err != nil {
					t.Fatal(err)
				}
				ws := map[WorkerID]*wstate{}
				next := WorkerID(1)
				var n int
				var done []bool
				var now time.Duration
				apply := func(ev Event) {
					now += time.Duration(rng.IntN(50)) * time.Millisecond
					ev.At = now
					for _, a := range p.Step(ev, nil) {
						w := ws[a.Worker]
						switch a.Kind {
						case Send:
							if w == nil || !w.alive || w.late || w.drain {
								t.Fatalf("seed %d: %+v to a worker %+v after %+v", seed, a, w, ev)
							}
							if slices.Contains(w.out, a.Task) || done[a.Task] {
								t.Fatalf("seed %d: %+v: worker holds it already (%v) or done %v", seed, a, w.out, done[a.Task])
							}
							w.out = append(w.out, a.Task)
						case Cancel:
							if w == nil || !slices.Contains(w.out, a.Task) {
								t.Fatalf("seed %d: %+v of an instance not there", seed, a)
							}
							w.out = slices.DeleteFunc(w.out, func(x TaskID) bool { return x == a.Task })
						case Accept:
							if done[a.Task] {
								t.Fatalf("seed %d: t%d accepted twice", seed, a.Task)
							}
							done[a.Task] = true
						}
					}
				}
				join := func() {
					ws[next] = &wstate{alive: true, slots: 1 + rng.IntN(3)}
					apply(Event{Kind: WorkerJoined, Worker: next, Slots: ws[next].slots})
					next++
				}
				for range 3 {
					join()
				}
				for b := range 3 {
					n = 5 + rng.IntN(30)
					done = make([]bool, n)
					for _, w := range ws {
						w.out = w.out[:0]
					}
					apply(Event{Kind: BatchStarted, N: n})
					for step := 0; !p.Done(); step++ {
						if step > 20_000 {
							t.Fatalf("seed %d batch %d: stuck", seed, b)
						}
						var live, busy []WorkerID
						for id, w := range ws {
							if w.alive {
								live = append(live, id)
								if len(w.out) > 0 {
									busy = append(busy, id)
								}
							}
						}
						slices.Sort(live)
						slices.Sort(busy)
						healthy := 0
						for _, id := range live {
							if !ws[id].late && !ws[id].drain {
								healthy++
							}
						}
						if healthy == 0 || rng.IntN(40) == 0 {
							join()
							continue
						}
						if len(busy) == 0 {
							t.Fatalf("seed %d batch %d: nothing outstanding, %d healthy workers, not done", seed, b, healthy)
						}
						id := busy[rng.IntN(len(busy))]
						w := ws[id]
						k := rng.IntN(len(w.out))
						task := w.out[k]
						switch r := rng.IntN(100); {
						case r < 6 && healthy > 1:
							w.late = true
							apply(overdue(id, task))
						case r < 10:
							w.out = slices.Delete(w.out, k, k+1)
							w.late = false
							apply(failed(id, task))
						case r < 12 && healthy > 1:
							w.drain = true
							apply(draining(id))
						case r < 15 && w.drain:
							w.out = slices.Delete(w.out, k, k+1)
							apply(returned(id, task))
						case r < 17 && len(live) > 1:
							w.alive = false
							w.out = nil
							apply(leave(id))
						case r < 25:
							apply(Event{Kind: Tick})
						default:
							w.out = slices.Delete(w.out, k, k+1)
							w.late = false
							ev := res(id, task)
							if rng.IntN(2) == 0 {
								ev.Exec = time.Duration(1+rng.IntN(200)) * time.Millisecond
								ev.RTT = time.Duration(rng.IntN(20)) * time.Millisecond
							}
							apply(ev)
						}
					}
				}
			}
		})
	}
}
