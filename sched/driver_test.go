package sched

import (
	"container/heap"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A tiny deterministic discrete-event driver for hand-checked schedules:
// machines with a fixed time per task, a one-way delay to the master, FIFO
// remote queues, slots that run the head of the queue. It feeds the policy
// and the ledger exactly as a real driver would.

type machine struct {
	id       WorkerID
	slots    int
	taskTime time.Duration
}

type evKind int

const (
	evTaskArrives   evKind = iota // a Send reaches the worker
	evCancelArrives               // a Cancel reaches the worker
	evFinish                      // a slot finishes its task
	evResultArrives               // a result reaches the master
)

type simEv struct {
	at   time.Duration
	seq  int
	kind evKind
	w    WorkerID
	t    TaskID
	b    int // batch the task belongs to
	slot int
}

type evHeap []simEv

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(simEv)) }
func (h *evHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type slotState struct {
	busy  bool
	t     TaskID
	b     int
	start time.Duration
	gen   int // bumps on cancel so a stale finish is ignored
}

type simWorker struct {
	m     machine
	queue []qInst // held, in arrival order
	slots []slotState
}

type handDriver struct {
	t       *testing.T
	p       Policy
	l       *Ledger
	delay   time.Duration
	now     time.Duration
	seq     int
	events  evHeap
	workers map[WorkerID]*simWorker
	trace   []string
	acts    []Action
	batch   int
	onStep  func([]Action) // if set, sees every step's actions
}

// qInst is a held instance: task t of batch b (workers key tasks by batch,
// as real ones do by generation).
type qInst struct {
	b int
	t TaskID
}

func newHandDriver(t *testing.T, policy string, cfg Config, delay time.Duration, lc LedgerConfig, ms []machine) *handDriver {
	t.Helper()
	p, err := New(policy, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := &handDriver{t: t, p: p, l: NewLedger(lc), delay: delay, workers: map[WorkerID]*simWorker{}}
	for _, m := range ms {
		d.workers[m.id] = &simWorker{m: m, slots: make([]slotState, m.slots)}
		d.step(Event{Kind: WorkerJoined, Worker: m.id, Slots: m.slots})
	}
	return d
}

func (d *handDriver) push(at time.Duration, kind evKind, w WorkerID, t TaskID, slot int) {
	d.seq++
	heap.Push(&d.events, simEv{at: at, seq: d.seq, kind: kind, w: w, t: t, b: d.batch, slot: slot})
}

// step applies ev to the policy and the ledger and carries out the actions.
func (d *handDriver) step(ev Event) {
	d.acts = d.p.Step(ev, d.acts[:0])
	d.l.Step(d.now, ev, d.acts)
	if d.onStep != nil {
		d.onStep(d.acts)
	}
	for _, a := range d.acts {
		switch a.Kind {
		case Send:
			kind := "send"
			if a.Replica {
				kind = "replica"
			}
			d.trace = append(d.trace, fmt.Sprintf("%v %s t%d w%d", d.now, kind, a.Task, a.Worker))
			d.push(d.now+d.delay, evTaskArrives, a.Worker, a.Task, 0)
		case Cancel:
			state := "running"
			if a.Held {
				state = "held"
			}
			d.trace = append(d.trace, fmt.Sprintf("%v cancel-%s t%d w%d", d.now, state, a.Task, a.Worker))
			d.push(d.now+d.delay, evCancelArrives, a.Worker, a.Task, 0)
		case Accept:
			d.trace = append(d.trace, fmt.Sprintf("%v accept t%d w%d", d.now, a.Task, a.Worker))
		case SyncWait:
			d.trace = append(d.trace, fmt.Sprintf("%v sync-wait w%d", d.now, a.Worker))
		}
	}
}

// startIdle starts queued tasks on w's idle slots.
func (d *handDriver) startIdle(w *simWorker) {
	for i := range w.slots {
		s := &w.slots[i]
		if s.busy || len(w.queue) == 0 {
			continue
		}
		s.busy, s.t, s.b, s.start = true, w.queue[0].t, w.queue[0].b, d.now
		w.queue = w.queue[1:]
		d.push(d.now+w.m.taskTime, evFinish, w.m.id, s.t, i*1_000_000+s.gen)
	}
}

// handle carries out one simulated event.
func (d *handDriver) handle(e simEv) {
	d.now = e.at
	w := d.workers[e.w]
	switch e.kind {
	case evTaskArrives:
		w.queue = append(w.queue, qInst{e.b, e.t})
		d.startIdle(w)
	case evCancelArrives:
		if i := indexOf(w.queue, qInst{e.b, e.t}); i >= 0 {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			d.l.Dropped(d.now, e.w, e.t)
			return
		}
		for i := range w.slots {
			s := &w.slots[i]
			if s.busy && s.t == e.t && s.b == e.b {
				d.l.Ran(Execution{Worker: e.w, Task: e.t, Start: s.start, End: d.now, Cancelled: true})
				s.busy = false
				s.gen++
			}
		}
		d.startIdle(w)
	case evFinish:
		s := &w.slots[e.slot/1_000_000]
		if !s.busy || s.gen != e.slot%1_000_000 || s.t != e.t {
			return // cancelled meanwhile
		}
		d.l.Ran(Execution{Worker: e.w, Task: e.t, Start: s.start, End: d.now})
		s.busy = false
		d.seq++
		heap.Push(&d.events, simEv{at: d.now + d.delay, seq: d.seq, kind: evResultArrives, w: e.w, t: e.t, b: s.b})
		d.startIdle(w)
	case evResultArrives:
		if e.b != d.batch {
			return // a result of an earlier batch: the driver drops it
		}
		d.step(Event{Kind: ResultArrived, Worker: e.w, Task: e.t})
	}
}

// runBatch runs one batch of n tasks until the policy is done and returns
// the time it ended. Cancels and late results still in flight stay queued
// and are carried out by the next batch (or drain).
func (d *handDriver) runBatch(n int) time.Duration {
	d.batch++
	d.step(Event{Kind: BatchStarted, N: n})
	for !d.p.Done() {
		if d.events.Len() == 0 {
			d.t.Fatalf("stuck at %v:\n%s", d.now, strings.Join(d.trace, "\n"))
		}
		d.handle(heap.Pop(&d.events).(simEv))
	}
	return d.now
}

// drain carries out everything still in flight.
func (d *handDriver) drain() {
	for d.events.Len() > 0 {
		d.handle(heap.Pop(&d.events).(simEv))
	}
}

func indexOf(ts []qInst, t qInst) int {
	for i, x := range ts {
		if x == t {
			return i
		}
	}
	return -1
}
