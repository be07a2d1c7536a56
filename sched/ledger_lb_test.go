package sched

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
)

// TestLBNeverExceedsTotalRandomRuns feeds the ledger random runs as a real
// master does (executions dated at their result's arrival, over links
// whose delays vary from message to message) on workers of 1 to 4 slots
// that change pace all the time, join and leave in the middle of
// generations and fail evaluations, with replicas that are cancelled held,
// running or too late: every generation's LB is at most its total,
// exactly, and every complete one has an LB. 300 runs by default, 3000
// under the long build tag.
func TestLBNeverExceedsTotalRandomRuns(t *testing.T) {
	runs := longtest.Pick(300, 3000)
	gens := 0
	var all Counts
	for seed := range uint64(runs) {
		rep := newLBRun(seed).run()
		all.Replicas += rep.Replicas
		all.CancelsHeld += rep.CancelsHeld
		all.CancelsRunning += rep.CancelsRunning
		all.CancelsLate += rep.CancelsLate
		all.Duplicates += rep.Duplicates
		for _, g := range rep.Generations {
			if g.LB > g.Total {
				t.Errorf("seed %d: generation %d: LB %v > total %v", seed, g.Index, g.LB, g.Total)
			}
			if g.Complete && g.LB <= 0 {
				t.Errorf("seed %d: complete generation %d without LB", seed, g.Index)
			}
			gens++
		}
		if rep.LB > rep.Total || rep.EfficiencyLB > 1 {
			t.Errorf("seed %d: LB %v, total %v: efficiency %v", seed, rep.LB, rep.Total, rep.EfficiencyLB)
		}
	}
	t.Logf("%d generations of %d runs: %+v", gens, runs, all)
	if all.Replicas == 0 || all.CancelsHeld == 0 || all.CancelsRunning == 0 || all.CancelsLate == 0 || all.Duplicates == 0 {
		t.Errorf("the runs lack a case: %+v", all)
	}
}

// LB stays at most the total whatever the reports say: executions that
// overlap on a one-slot worker (dated by estimated clock offsets, or a
// stale instance counted in) and an accepted result whose execution was
// never reported (its time unknown).
func TestLBBoundedWhateverTheReports(t *testing.T) {
	s := time.Second
	t.Run("overlapping", func(t *testing.T) {
		l := NewLedger(LedgerConfig{})
		l.Step(0, join(1, 1), nil)
		l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 1, Task: 1}})
		l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
		l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}})
		l.Ran(Execution{Worker: 1, Task: 1, Start: s / 2, End: 3 * s / 2})
		l.Step(3*s/2, res(1, 1), []Action{{Kind: Accept, Worker: 1, Task: 1}})
		// 2 s of execution on one slot in 1.5 s: counted as 1.5 s.
		g := l.Report().Generations[0]
		checkDur(t, "LB", g.LB, 3*s/2)
		checkDur(t, "total", g.Total, 3*s/2)
	})
	t.Run("unreported", func(t *testing.T) {
		l := NewLedger(LedgerConfig{})
		l.Step(0, join(1, 1), nil)
		l.Step(0, join(2, 1), nil)
		l.Step(0, batch(2), []Action{{Kind: Send, Worker: 1, Task: 0}, {Kind: Send, Worker: 2, Task: 1}})
		l.Ran(Execution{Worker: 1, Task: 0, Start: 0, End: s})
		l.Step(s, res(1, 0), []Action{{Kind: Accept, Worker: 1, Task: 0}})
		l.Step(s, res(2, 1), []Action{{Kind: Accept, Worker: 2, Task: 1}})
		// One execution seen: one task at w1's rate, 1 s.
		g := l.Report().Generations[0]
		checkDur(t, "LB", g.LB, s)
		checkDur(t, "total", g.Total, s)
	})
}

// lbRun is a random run: a master that sends up to two instances per slot
// (the rest held), replicates once Q is empty, cancels the other instances
// of a task it accepts and sends a failed or lost task again; workers that
// run their instances in order at their pace of the moment.
type lbRun struct {
	r       *rand.Rand
	l       *Ledger
	now     time.Duration
	evs     lbHeap
	seq     int
	workers []*lbWorker
	batch   int
	open    bool
	n, acc  int
	work    []time.Duration
	taken   []bool
	q       []TaskID
	live    map[TaskID][]*lbInst
	synced  bool
	last    bool // the last batch has started
	acts    []Action
}

type lbInst struct {
	w       *lbWorker
	t       TaskID
	batch   int
	work    time.Duration // on a machine of pace 1
	start   time.Duration
	running bool
	done    bool // finished, or stopped by a cancel
}

type lbWorker struct {
	id      WorkerID
	slots   int
	present bool
	pace    float64
	held    []*lbInst
	running []*lbInst // per slot, nil when idle
	out     int       // instances of the batch the master believes are on it
	link    [2]time.Duration
}

type lbEv struct {
	at  time.Duration
	seq int
	do  func()
}

type lbHeap []lbEv

func (h lbHeap) Len() int { return len(h) }
func (h lbHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h lbHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *lbHeap) Push(x any)   { *h = append(*h, x.(lbEv)) }
func (h *lbHeap) Pop() any {
	x := (*h)[len(*h)-1]
	*h = (*h)[:len(*h)-1]
	return x
}

var lbPaces = []float64{0.1, 0.3, 1, 1, 2, 5, 10}

func newLBRun(seed uint64) *lbRun {
	u := &lbRun{r: rand.New(rand.NewPCG(seed, 0x1b1b)), l: NewLedger(LedgerConfig{}), live: map[TaskID][]*lbInst{}}
	k := 1 + u.r.IntN(6)
	for i := range k {
		w := &lbWorker{id: WorkerID(i + 1), slots: 1 + u.r.IntN(4), pace: lbPaces[u.r.IntN(len(lbPaces))]}
		w.running = make([]*lbInst, w.slots)
		u.workers = append(u.workers, w)
		// Worker 1 is there from start to end; the others join at 0 or
		// later, and some leave.
		join := time.Duration(0)
		if i > 0 && u.r.IntN(2) == 0 {
			join = time.Duration(u.r.IntN(500)) * time.Millisecond
		}
		u.at(join, func() { u.join(w) })
		if i > 0 && u.r.IntN(3) == 0 {
			u.at(join+time.Duration(1+u.r.IntN(800))*time.Millisecond, func() { u.leave(w) })
		}
		u.at(u.paceGap(), func() { u.changePace(w) })
	}
	return u
}

func (u *lbRun) at(d time.Duration, do func()) {
	u.seq++
	heap.Push(&u.evs, lbEv{at: u.now + d, seq: u.seq, do: do})
}

func (u *lbRun) paceGap() time.Duration {
	return time.Duration(1+u.r.IntN(100)) * time.Millisecond
}

// msg delivers do over w's link (0 to it, 1 back) in order, each message
// 0.1 to 30 ms on the way.
func (u *lbRun) msg(w *lbWorker, dir int, do func()) {
	arr := max(u.now+time.Duration(100+u.r.IntN(30_000))*time.Microsecond, w.link[dir])
	w.link[dir] = arr
	u.at(arr-u.now, do)
}

func (u *lbRun) run() Report {
	batches := 1 + u.r.IntN(6)
	u.last = batches == 1
	u.at(0, u.startBatch)
	for u.evs.Len() > 0 {
		e := heap.Pop(&u.evs).(lbEv)
		u.now = e.at
		e.do()
		if !u.open && u.acc == u.n && u.n > 0 && !u.last {
			u.n = 0 // the next batch starts a little later
			u.last = u.batch+1 == batches
			u.at(time.Duration(u.r.IntN(20))*time.Millisecond, u.startBatch)
		}
	}
	u.l.Finish(u.now)
	return u.l.Report()
}

func (u *lbRun) step(ev Event) {
	u.l.Step(u.now, ev, u.acts)
	u.acts = u.acts[:0]
}

func (u *lbRun) startBatch() {
	u.batch++
	u.n, u.acc, u.open, u.synced = 1+u.r.IntN(40), 0, true, false
	u.work, u.taken, u.q = make([]time.Duration, u.n), make([]bool, u.n), nil
	clear(u.live)
	for i := range u.n {
		u.work[i] = time.Duration(1+u.r.IntN(50)) * time.Millisecond
		u.q = append(u.q, TaskID(i))
	}
	for _, w := range u.workers {
		w.out = 0
	}
	u.fillAll()
	u.step(Event{Kind: BatchStarted, N: u.n})
}

func (u *lbRun) join(w *lbWorker) {
	w.present = true
	u.fillAll()
	u.acts = slices.Insert(u.acts, 0) // the join's own actions follow it
	u.step(Event{Kind: WorkerJoined, Worker: w.id, Slots: w.slots})
}

// leave: the worker is gone with what it holds and runs; results already
// on their way still arrive.
func (u *lbRun) leave(w *lbWorker) {
	w.present = false
	w.held, w.out = nil, 0
	for i, x := range w.running {
		if x != nil {
			x.done = true
			w.running[i] = nil
		}
	}
	if u.open {
		for tk, xs := range u.live {
			xs = slices.DeleteFunc(xs, func(x *lbInst) bool { return x.w == w })
			u.live[tk] = xs
			if len(xs) == 0 && !u.taken[tk] && !slices.Contains(u.q, tk) {
				u.q = append([]TaskID{tk}, u.q...)
			}
		}
	}
	u.step(Event{Kind: WorkerLeft, Worker: w.id})
	u.fillAll()
	if len(u.acts) > 0 {
		u.step(Event{Kind: Tick})
	}
}

func (u *lbRun) changePace(w *lbWorker) {
	w.pace = lbPaces[u.r.IntN(len(lbPaces))]
	if u.open || !u.last {
		u.at(u.paceGap(), func() { u.changePace(w) })
	}
}

// fillAll sends Q's head to every worker with room, then replicas.
func (u *lbRun) fillAll() {
	for _, w := range u.workers {
		for w.present && u.open && w.out < 2*w.slots && len(u.q) > 0 {
			u.send(w, u.q[0], false)
			u.q = u.q[1:]
		}
	}
	if !u.open || len(u.q) > 0 {
		return
	}
	for _, w := range u.workers {
		if !w.present || w.out >= w.slots {
			continue
		}
		tk := TaskID(u.r.IntN(u.n))
		if u.taken[tk] || slices.ContainsFunc(u.live[tk], func(x *lbInst) bool { return x.w == w }) {
			continue
		}
		if !u.synced {
			u.synced = true
			u.acts = append(u.acts, Action{Kind: SyncWait, Worker: w.id})
		}
		u.send(w, tk, true)
	}
}

func (u *lbRun) send(w *lbWorker, tk TaskID, replica bool) {
	x := &lbInst{w: w, t: tk, batch: u.batch, work: u.work[tk]}
	u.live[tk] = append(u.live[tk], x)
	w.out++
	u.acts = append(u.acts, Action{Kind: Send, Worker: w.id, Task: tk, Replica: replica})
	u.msg(w, 0, func() {
		if !w.present || x.done {
			return
		}
		w.held = append(w.held, x)
		u.runHeld(w)
	})
}

// runHeld starts held instances on w's idle slots, at its pace of the
// moment.
func (u *lbRun) runHeld(w *lbWorker) {
	for i := range w.running {
		if w.running[i] != nil || len(w.held) == 0 {
			continue
		}
		x := w.held[0]
		w.held = w.held[1:]
		w.running[i], x.running, x.start = x, true, u.now
		d := time.Duration(float64(x.work) * w.pace)
		u.at(d, func() {
			if x.done {
				return // stopped, or its worker left
			}
			x.done, w.running[i] = true, nil
			failed := u.r.IntN(20) == 0
			ex := u.now - x.start
			u.msg(w, 1, func() { u.result(w, x, ex, failed) })
			u.runHeld(w)
		})
	}
}

func (u *lbRun) result(w *lbWorker, x *lbInst, d time.Duration, failed bool) {
	ran := Execution{Worker: w.id, Task: x.t, Start: u.now - d, End: u.now, Arrival: true}
	if x.batch != u.batch || !u.open {
		if !failed {
			u.l.Ran(ran) // stale: it still says how fast w is
		}
		return
	}
	if !slices.Contains(u.live[x.t], x) {
		if !failed {
			u.l.Ran(ran)
			u.step(Event{Kind: ResultArrived, Worker: w.id, Task: x.t}) // a duplicate
		}
		return
	}
	w.out--
	u.live[x.t] = slices.DeleteFunc(u.live[x.t], func(y *lbInst) bool { return y == x })
	if failed {
		if !u.taken[x.t] && len(u.live[x.t]) == 0 {
			u.q = append([]TaskID{x.t}, u.q...)
		}
		u.fillAll()
		u.acts = slices.Insert(u.acts, 0)
		u.step(Event{Kind: Failed, Worker: w.id, Task: x.t})
		return
	}
	u.l.Ran(ran)
	if !u.taken[x.t] {
		u.taken[x.t] = true
		u.acc++
		u.acts = append(u.acts, Action{Kind: Accept, Worker: w.id, Task: x.t})
		for _, y := range u.live[x.t] {
			u.acts = append(u.acts, Action{Kind: Cancel, Worker: y.w.id, Task: x.t, Held: !y.running})
			y.w.out--
			u.cancel(y)
		}
		u.live[x.t] = nil
	}
	if u.acc == u.n {
		u.open = false
	}
	u.fillAll()
	u.step(Event{Kind: ResultArrived, Worker: w.id, Task: x.t})
}

// cancel sends a cancel of x; the worker answers what it did.
func (u *lbRun) cancel(x *lbInst) {
	w := x.w
	u.msg(w, 0, func() {
		if !w.present {
			return
		}
		switch {
		case slices.Contains(w.held, x):
			w.held = slices.DeleteFunc(w.held, func(y *lbInst) bool { return y == x })
			u.msg(w, 1, func() { u.l.Dropped(u.now, w.id, x.t) })
		case x.done:
			u.msg(w, 1, func() { u.l.Late(u.now, w.id, x.t) })
		default: // running
			x.done = true
			for i := range w.running {
				if w.running[i] == x {
					w.running[i] = nil
				}
			}
			ex := u.now - x.start
			u.msg(w, 1, func() {
				u.l.Ran(Execution{Worker: w.id, Task: x.t, Start: u.now - ex, End: u.now, Cancelled: true, Arrival: true})
			})
			u.runHeld(w)
		}
	})
}
