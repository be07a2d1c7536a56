package sched

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// propDriver feeds a policy random events (results in random order, joins,
// leaves, stale and late results) and checks every action against its own
// record of what was sent where.
type propDriver struct {
	t      *testing.T
	name   string
	p      Policy
	rng    *rand.Rand
	depth  int  // effective depth (adaptive: the floor)
	maxDep int  // adaptive: the cap; 0 when the policy does not adapt
	fifo   bool // results only from running instances: Held must be exact
	eft    bool // eft: room per worker from its measurements; Q may wait for the plan
	churn  bool // joins and leaves
	static bool
	repl   bool

	workers map[WorkerID]*propWorker
	order   []WorkerID // every worker ever joined, in join order
	nextID  WorkerID
	ghosts  []inst // instances of departed workers: their results may still come
	crossed []inst // cancelled instances whose result may cross the cancel

	n        int
	accepted []bool
	nAcc     int
	live     []int    // live instances per task (on workers still joined)
	seq      []int    // original transfer order of each task
	nextSeq  int      // ...
	dup      []bool   // tasks replicated in this batch
	nDup     int      // ...
	firstRep bool     // the batch's first replica has been checked
	syncSeen bool     // the batch's SyncWait has come
	acts     []Action // reused
	steps    int
}

type propWorker struct {
	id    WorkerID
	slots int
	alive bool
	out   []TaskID // instances the policy placed here, in send order
	depth int      // the depth per slot it must keep to

	// Adaptive: the worker's round trip and execution time, the same in
	// every measurement, so its depth is known exactly once measured.
	rtt, exec time.Duration
	rttSeen   bool // an RTT has been measured: until then it counts as 0
	execSeen  bool // eft: an Exec has been measured
}

// room is how many instances w may hold: depth × slots, or under eft,
// once an Exec is measured, maxDep × slots (how many it is sent below
// that is eft's model, checked by its hand traces).
func (d *propDriver) room(w *propWorker) int {
	if !d.eft || !w.execSeen {
		return w.depth * w.slots
	}
	return d.maxDep * w.slots
}

// measured is the depth an adaptive policy must give a worker once it has
// measured its Exec: 1 + ceil(RTT/Exec) within [floor, cap], worked out
// here in integers (with RTT 0 while none has been measured).
func (d *propDriver) measured(w *propWorker) int {
	var q time.Duration
	if w.rttSeen {
		q = (w.rtt + w.exec - 1) / w.exec
	}
	return min(max(1+int(q), d.depth), d.maxDep)
}

// withMeasure adds w's measurements to ev, at random: none, Exec alone
// or both (an RTT alone does not set a depth).
func (d *propDriver) withMeasure(ev Event, w *propWorker) Event {
	switch d.rng.IntN(3) {
	case 1:
		ev.Exec = w.exec
	case 2:
		ev.RTT, ev.Exec = w.rtt, w.exec
	}
	return ev
}

type inst struct {
	w WorkerID
	t TaskID
}

func (d *propDriver) fatalf(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s step %d: %s", d.name, d.steps, fmt.Sprintf(format, args...))
}

func (d *propDriver) liveWorkers() []*propWorker {
	var ws []*propWorker
	for _, id := range d.order {
		if w := d.workers[id]; w.alive {
			ws = append(ws, w)
		}
	}
	return ws
}

// step applies ev and checks the actions it causes.
func (d *propDriver) step(ev Event) {
	d.t.Helper()
	d.steps++
	if w := d.workers[ev.Worker]; d.maxDep > 0 && !d.eft && w != nil && w.alive && ev.Exec > 0 &&
		(ev.Kind == ResultArrived || ev.Kind == Measured) {
		w.rttSeen = w.rttSeen || ev.RTT > 0
		w.depth = d.measured(w)
	}
	if w := d.workers[ev.Worker]; d.eft && w != nil && w.alive && ev.Exec > 0 &&
		(ev.Kind == ResultArrived || ev.Kind == Measured) {
		w.rttSeen = w.rttSeen || ev.RTT > 0
		w.execSeen = true
	}
	d.acts = d.p.Step(ev, d.acts[:0])
	acts := d.acts
	if ev.Kind == BatchStarted {
		// Cancels of an abandoned batch come first; then the new batch.
		i := 0
		for ; i < len(acts) && acts[i].Kind == Cancel; i++ {
			d.cancel(ev, acts[i])
		}
		for _, w := range d.workers {
			if w.alive && len(w.out) > 0 {
				d.fatalf("batch started with w%d still holding %v", w.id, w.out)
			}
		}
		d.n = ev.N
		d.accepted = make([]bool, d.n)
		d.live = make([]int, d.n)
		d.seq = make([]int, d.n)
		d.dup = make([]bool, d.n)
		d.nAcc, d.nDup, d.nextSeq, d.firstRep, d.syncSeen = 0, 0, 0, false, false
		d.ghosts, d.crossed = nil, nil
		acts = acts[i:]
	}
	wantAccept := ev.Kind == ResultArrived && ev.Task >= 0 && int(ev.Task) < d.n && !d.accepted[ev.Task]
	accepts := 0
	for _, a := range acts {
		switch a.Kind {
		case Accept:
			accepts++
			if ev.Kind != ResultArrived || a.Worker != ev.Worker || a.Task != ev.Task {
				d.fatalf("accept %+v for event %+v", a, ev)
			}
			if !wantAccept {
				d.fatalf("accept of t%d, done already or out of range", a.Task)
			}
			d.accepted[a.Task] = true
			d.nAcc++
		case Send:
			d.send(a)
		case Cancel:
			d.cancel(ev, a)
		case SyncWait:
			// Once per batch, while results are still due, with Q empty.
			d.aliveWorker(a.Worker, a)
			if d.syncSeen || d.nAcc == d.n || d.inQ() >= 0 {
				d.fatalf("sync wait at %+v (seen %v, %d of %d accepted, Q holds t%d)", ev, d.syncSeen, d.nAcc, d.n, d.inQ())
			}
			d.syncSeen = true
		case Idle:
			// Before the sync wait, the slots with nothing to run while Q
			// is empty.
			w := d.aliveWorker(a.Worker, a)
			if d.syncSeen || a.Slots < 0 || a.Slots > w.slots || a.Slots > 0 && (d.inQ() >= 0 || a.Slots != w.slots-len(w.out)) {
				d.fatalf("idle %+v with w%d holding %v of %d slots, Q holds t%d, sync seen %v", a, w.id, w.out, w.slots, d.inQ(), d.syncSeen)
			}
		default:
			d.fatalf("unknown action %+v", a)
		}
	}
	if wantAccept && accepts != 1 || !wantAccept && accepts != 0 {
		d.fatalf("event %+v produced %d accepts", ev, accepts)
	}
	if d.p.Done() != (d.nAcc == d.n) {
		d.fatalf("Done() = %v with %d of %d accepted", d.p.Done(), d.nAcc, d.n)
	}
	if d.p.Done() {
		for _, w := range d.workers {
			if w.alive && len(w.out) > 0 {
				d.fatalf("batch done but w%d still holds %v", w.id, w.out)
			}
		}
	}
	// Work-conserving: while a task waits in Q, every worker is full to its
	// depth (an adaptive one to the depth its measurements give).
	if !d.static && !d.eft && d.inQ() >= 0 {
		for _, w := range d.liveWorkers() {
			if len(w.out) != w.depth*w.slots {
				d.fatalf("t%d waits in Q while w%d holds %d, room for %d × %d", d.inQ(), w.id, len(w.out), w.depth, w.slots)
			}
		}
	}
	// eft keeps a task in Q for a faster worker only while some worker
	// has an instance out, whose answer brings the plan on.
	if d.eft && d.inQ() >= 0 {
		live, out := d.liveWorkers(), false
		for _, w := range live {
			out = out || len(w.out) > 0
		}
		if len(live) > 0 && !out {
			d.fatalf("t%d waits in Q with nothing out on %d live workers", d.inQ(), len(live))
		}
	}
}

// inQ returns a task in Q (not done, no live instance), or -1.
func (d *propDriver) inQ() int {
	for t := range d.n {
		if !d.accepted[t] && d.live[t] == 0 {
			return t
		}
	}
	return -1
}

func (d *propDriver) aliveWorker(id WorkerID, a Action) *propWorker {
	d.t.Helper()
	w, ok := d.workers[id]
	if !ok || !w.alive {
		d.fatalf("%+v names an unknown or departed worker", a)
	}
	return w
}

func (d *propDriver) send(a Action) {
	d.t.Helper()
	w := d.aliveWorker(a.Worker, a)
	if a.Task < 0 || int(a.Task) >= d.n || d.accepted[a.Task] {
		d.fatalf("send of t%d: out of range or done", a.Task)
	}
	if slices.Contains(w.out, a.Task) {
		d.fatalf("send of t%d to w%d, which holds it already", a.Task, w.id)
	}
	if a.Replica != (d.live[a.Task] > 0) {
		d.fatalf("send %+v: replica flag wrong (%d live instances)", a, d.live[a.Task])
	}
	if a.Replica {
		if !d.repl {
			d.fatalf("%s sent a replica", d.name)
		}
		// RR steps 5–6: replication only once Q is empty, i.e. every task
		// not done has a live instance.
		for t := range d.n {
			if !d.accepted[t] && d.live[t] == 0 {
				d.fatalf("replica of t%d while t%d is still in Q", a.Task, t)
			}
		}
		if !d.firstRep && !d.churn && !d.eft {
			d.checkFirstPick(w, a.Task)
		}
		d.firstRep = true
		if !d.dup[a.Task] {
			d.dup[a.Task] = true
			d.nDup++
		}
	} else {
		d.seq[a.Task] = d.nextSeq
		d.nextSeq++
	}
	w.out = append(w.out, a.Task)
	d.live[a.Task]++
	if !d.static && len(w.out) > d.room(w) {
		d.fatalf("w%d holds %d instances, more than its room %d (depth %d × %d slots)", w.id, len(w.out), d.room(w), w.depth, w.slots)
	}
	if d.eft && d.live[a.Task] > DefaultCopies {
		d.fatalf("t%d has %d live instances, more than %d copies", a.Task, d.live[a.Task], DefaultCopies)
	}
}

// checkFirstPick: the batch's first replica goes to the task of R that
// comes first in replication order among those the receiving worker lacks:
// the last transferred for r3q (reverse order of transfer), the first for rr.
func (d *propDriver) checkFirstPick(w *propWorker, got TaskID) {
	d.t.Helper()
	want, best := TaskID(-1), 0
	for t := range d.n {
		if d.accepted[t] || d.live[t] == 0 || slices.Contains(w.out, TaskID(t)) {
			continue
		}
		s := d.seq[t]
		if d.name == "r3q" {
			s = -s
		}
		if want < 0 || s < best {
			want, best = TaskID(t), s
		}
	}
	if got != want {
		d.fatalf("first replica is t%d, want t%d (R in %s order)", got, want, d.name)
	}
}

func (d *propDriver) cancel(ev Event, a Action) {
	d.t.Helper()
	w := d.aliveWorker(a.Worker, a)
	k := slices.Index(w.out, a.Task)
	if k < 0 {
		d.fatalf("cancel of t%d on w%d, which has no such instance (%v)", a.Task, w.id, w.out)
	}
	if ev.Kind != BatchStarted && !d.accepted[a.Task] {
		d.fatalf("cancel of t%d before it is done", a.Task)
	}
	if d.fifo && a.Held != (k >= w.slots) {
		d.fatalf("cancel %+v at place %d of w%d (%d slots): held flag wrong", a, k, w.id, w.slots)
	}
	w.out = slices.Delete(w.out, k, k+1)
	if ev.Kind != BatchStarted {
		d.live[a.Task]--
		d.crossed = append(d.crossed, inst{w.id, a.Task})
	}
}

func (d *propDriver) join() {
	d.nextID++
	id := d.nextID
	w := &propWorker{id: id, slots: 1 + d.rng.IntN(3), alive: true, depth: d.depth}
	// Round trips from none to 20 task times; task times 1 ms to 1 s.
	w.exec = time.Duration(1+d.rng.IntN(1000)) * time.Millisecond
	w.rtt = time.Duration(d.rng.Int64N(int64(20*w.exec) + 1))
	d.workers[id] = w
	d.order = append(d.order, id)
	d.step(Event{Kind: WorkerJoined, Worker: id, Slots: w.slots})
}

func (d *propDriver) leave(w *propWorker) {
	w.alive = false
	for _, t := range w.out {
		d.live[t]--
		d.ghosts = append(d.ghosts, inst{w.id, t})
	}
	w.out = nil
	d.step(Event{Kind: WorkerLeft, Worker: w.id})
}

// result delivers the result of one instance of a random worker.
func (d *propDriver) result() bool {
	var busy []*propWorker
	for _, w := range d.liveWorkers() {
		if len(w.out) > 0 {
			busy = append(busy, w)
		}
	}
	if len(busy) == 0 {
		return false
	}
	w := busy[d.rng.IntN(len(busy))]
	k := d.rng.IntN(len(w.out))
	if d.fifo {
		k = d.rng.IntN(min(w.slots, len(w.out)))
	}
	t := w.out[k]
	w.out = slices.Delete(w.out, k, k+1)
	d.live[t]--
	d.step(d.withMeasure(Event{Kind: ResultArrived, Worker: w.id, Task: t}, w))
	return true
}

// stale delivers a result the policy must cope with: a late copy that
// crossed its cancel, a departed worker's result, nonsense ids.
func (d *propDriver) stale() {
	switch d.rng.IntN(5) {
	case 0:
		if len(d.crossed) > 0 {
			i := d.rng.IntN(len(d.crossed))
			c := d.crossed[i]
			d.crossed = slices.Delete(d.crossed, i, i+1)
			d.step(Event{Kind: ResultArrived, Worker: c.w, Task: c.t})
		}
	case 1:
		if len(d.ghosts) > 0 {
			i := d.rng.IntN(len(d.ghosts))
			g := d.ghosts[i]
			d.ghosts = slices.Delete(d.ghosts, i, i+1)
			d.step(Event{Kind: ResultArrived, Worker: g.w, Task: g.t})
		}
	case 2:
		d.step(Event{Kind: ResultArrived, Worker: d.nextID, Task: TaskID(d.n + d.rng.IntN(5))})
		d.step(Event{Kind: ResultArrived, Worker: d.nextID, Task: -1 - TaskID(d.rng.IntN(5))})
	case 3:
		// A worker id never seen, for a task already done.
		for t := range d.n {
			if d.accepted[t] {
				d.step(Event{Kind: ResultArrived, Worker: 1_000_000, Task: TaskID(t)})
				break
			}
		}
	case 4:
		// Measurements alone: of a live worker (it may get work at
		// once), of a departed or unknown one, and nonsense values.
		if live := d.liveWorkers(); len(live) > 0 {
			w := live[d.rng.IntN(len(live))]
			d.step(d.withMeasure(Event{Kind: Measured, Worker: w.id}, w))
		}
		for _, w := range d.workers {
			if !w.alive {
				d.step(Event{Kind: Measured, Worker: w.id, RTT: time.Hour, Exec: time.Nanosecond})
				break
			}
		}
		d.step(Event{Kind: Measured, Worker: 1_000_001, RTT: time.Second, Exec: time.Millisecond})
		if live := d.liveWorkers(); len(live) > 0 {
			d.step(Event{Kind: Measured, Worker: live[0].id, RTT: -time.Second, Exec: -time.Second})
		}
	}
}

func (d *propDriver) runBatch(n int, abandon bool) {
	d.t.Helper()
	d.step(Event{Kind: BatchStarted, N: n})
	machines := d.totalSlots()
	for i := 0; !d.p.Done(); i++ {
		if i > 100_000 {
			d.fatalf("batch of %d not finished after %d events", n, i)
		}
		if abandon && i == n/2 {
			return
		}
		live := d.liveWorkers()
		r := d.rng.Float64()
		switch {
		case len(live) == 0:
			d.join()
		case d.churn && r < 0.04:
			d.join()
		case d.churn && r < 0.08:
			d.leave(live[d.rng.IntN(len(live))])
		case r < 0.12:
			d.stale()
		default:
			if !d.result() {
				d.fatalf("stuck: %d of %d done, no instance on %d live workers", d.nAcc, d.n, len(live))
			}
		}
	}
	if d.name == "rr" && !d.churn && d.depth == 1 && d.nDup > machines-1 {
		d.fatalf("rr duplicated %d tasks on %d slots, more than M−1", d.nDup, machines)
	}
}

func (d *propDriver) totalSlots() int {
	m := 0
	for _, w := range d.liveWorkers() {
		m += w.slots
	}
	return m
}

func TestPoliciesRandom(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	modes := []struct {
		name                  string
		fifo, churn, adaptive bool
	}{
		{"fifo", true, false, false},
		{"fifo-churn", true, true, false},
		{"any-order-churn", false, true, false},
		{"fifo-adaptive", true, false, true},
		{"any-order-churn-adaptive", false, true, true},
	}
	for _, name := range Names {
		for _, mode := range modes {
			t.Run(name+"/"+mode.name, func(t *testing.T) {
				for seed := range uint64(seeds) {
					rng := rand.New(rand.NewPCG(seed, 0xe5))
					cfg := Config{Adaptive: mode.adaptive}
					if rng.IntN(3) == 0 {
						cfg.Depth = 1 + rng.IntN(3)
					}
					if mode.adaptive && rng.IntN(2) == 0 {
						cfg.AdaptiveMax = rng.IntN(8) // 0: the default
					}
					p, err := New(name, cfg)
					if err != nil {
						t.Fatal(err)
					}
					depth := cfg.Depth
					if depth == 0 {
						depth = map[string]int{"wq": 1, "rr": 1, "rwq": 2, "r3q": 2, "eft": 2}[name]
					}
					maxDep := 0
					if mode.adaptive && (name == "rwq" || name == "r3q") {
						maxDep = cfg.AdaptiveMax
						if maxDep == 0 {
							maxDep = DefaultAdaptiveMax
						}
						maxDep = max(maxDep, depth)
					}
					if name == "eft" { // measures always, within AdaptiveMax
						maxDep = max(cmp.Or(cfg.AdaptiveMax, DefaultAdaptiveMax), depth)
					}
					d := &propDriver{
						t: t, name: name, p: p, rng: rng, depth: depth, maxDep: maxDep,
						fifo: mode.fifo, churn: mode.churn,
						static: name == "cyclic", repl: name == "rr" || name == "r3q" || name == "eft",
						eft:     name == "eft",
						workers: map[WorkerID]*propWorker{},
					}
					for range 1 + rng.IntN(6) {
						d.join()
					}
					for b := range 4 {
						n := rng.IntN(50)
						if b == 0 {
							n = rng.IntN(3) // tiny batches: 0, 1, 2 tasks
						}
						d.runBatch(n, mode.churn && rng.IntN(10) == 0)
					}
				}
			})
		}
	}
}

func TestNew(t *testing.T) {
	for _, name := range Names {
		p, err := New(name, Config{})
		if err != nil || p.Name() != name {
			t.Errorf("New(%q) = %v, %v", name, p, err)
		}
		if !p.Done() {
			t.Errorf("%s: Done before any batch", name)
		}
	}
	if _, err := New("fifo", Config{}); err == nil {
		t.Error("unknown policy accepted")
	}
	if _, err := New("wq", Config{Depth: -1}); err == nil {
		t.Error("negative depth accepted")
	}
	if _, err := New("r3q", Config{Depth: MaxDepth + 1}); err == nil {
		t.Error("huge depth accepted")
	}
	// A worker announcing absurd slots is bounded, not trusted.
	p, _ := New("r3q", Config{})
	p.Step(Event{Kind: WorkerJoined, Worker: 1, Slots: 1 << 62}, nil)
	out := p.Step(Event{Kind: BatchStarted, N: 3 * MaxSlots}, nil)
	if len(out) != 2*MaxSlots {
		t.Errorf("%d sends to a worker bounded at %d slots × depth 2", len(out), MaxSlots)
	}
}
