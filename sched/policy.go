package sched

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MaxSlots bounds a worker's slots as a policy counts them: a worker's
// announced slot count comes from the network and must not make a policy
// allocate or overflow.
const MaxSlots = 4096

// MaxDepth is the largest Config.Depth New accepts.
const MaxDepth = 1024

// ErrUnknownPolicy is returned by New for a name not in Names.
var ErrUnknownPolicy = errors.New("sched: unknown policy")

// New returns a fresh policy by name (one of Names) with cfg.
//
// All five policies are one engine with three knobs (docs/papers.md §1, §5):
//
//	name    depth  after Q is empty                 before
//	wq      1      nothing                          a free slot takes the head of Q
//	rr      1      round-robin replication, in      as wq
//	               order of transfer
//	rwq     2      nothing                          a result refills that worker's remote queue
//	r3q     2      round-robin replication, in      as rwq
//	               reverse order of transfer
//	cyclic  —      nothing                          the whole batch dealt round-robin over the
//	                                                slots at BatchStarted (Clop's static baseline)
//
// Assignment. A worker's capacity is Depth × Slots instances, running plus
// held in its remote queue; a worker with room is free. Free workers take
// the head of Q one task at a time in turn, idle slots first: every free
// slot gets a task to run before any worker gets one to hold. No
// Send ever exceeds a worker's capacity, except under cyclic, which sends
// each worker its whole static share at once (cyclic ignores Depth).
//
// Running and held. A worker runs its instances in the order sent, Slots at
// a time: of the instances outstanding on it, the first Slots in send order
// are running and the rest are held. Every Cancel's Held flag follows that
// belief (exact when results come back in the order the slots finish).
//
// Replication (rr, r3q: RR steps 6–11). When Q becomes empty, R is every
// task with a live instance, ordered by its original transfer: oldest first
// for rr, newest first for r3q (the newest are the held ones, so r3q's
// replicas target held tasks and the copies later cancelled are mostly still
// in a remote queue). From then on, whenever some worker is free, the next
// task of R in round-robin order is replicated to every free worker that
// does not already hold it; a free worker that holds it takes the next one;
// a pass stops when every task of R has been tried. With depth 1, "free"
// is the paper's "not running a task"; with a remote queue it is "has room
// in its queue", so a replica waits there as a held task. A task leaves R
// when its first result arrives. With fixed workers and depth 1, at most
// M−1 tasks (M = Σ slots) are ever duplicated. Nothing is replicated while
// Q holds a task.
//
// Results. The first result for a task in a batch wins: it produces one
// Accept, then a Cancel of every other live instance of the task (step 8).
// A result for a task already done or out of range produces nothing. A
// result from a worker that has left (or is unknown) for a task not yet
// done is accepted, since fitness is deterministic, and cancels the other
// instances. Accept names the worker the result came from, whatever its
// state; Send and Cancel only ever name a worker that has joined and not
// left, and Cancel only an instance sent to that worker and still live.
//
// Membership. A worker that leaves loses its instances: each task with no
// other live instance goes back to the head of Q (and, if Q was empty, R is
// taken afresh when it empties again). A worker that joins mid-batch is
// free and takes work from Q at once; when Q is empty rr and r3q give it
// replicas, wq and rwq have nothing for it, and cyclic, being static, gives
// it nothing (cyclic deals tasks given back to Q over the remaining
// workers, and a batch that started with no worker when the first joins).
// WorkerJoined for a known worker is ignored; Slots < 1 counts as 1 and
// Slots > MaxSlots as MaxSlots. WorkerLeft for an unknown or departed
// worker is ignored. A departed worker is forgotten (its place is reused
// by a later join), so a policy's memory follows the workers present, not
// every worker that ever joined; drivers must not reuse ids.
//
// Progress (docs/papers.md leaves it to the driver: time is an event). Overdue
// marks a worker late: its held instances are withdrawn (Cancel, Held) and
// go back to the head of Q, and the overdue instance is given up (a hung
// evaluation, or a stalled worker): it is cancelled (Cancel, last), and its
// task goes back to the head of Q too unless a worker that is not late
// holds it. The late worker gets nothing new until it answers
// (ResultArrived, Failed or Measured from it), and is not given the task
// again while some worker open for work has not failed or overrun it;
// but when no other worker is open, the task is sent to it again at once
// (after the Cancel: a worker takes a task sent again as a fresh instance).
// So a hung evaluation costs one deadline, even on a lone worker. A task
// taken from Q while an instance of it is still live (on a late worker) is
// sent as a replica. Failed frees the instance and puts the task back at
// the head of Q unless another instance is live; a worker that failed a
// task is not given it again while some worker open for work has not
// failed it. Returned (a draining worker's held task) puts the task back
// likewise, and WorkerDraining stops new work to that worker without
// taking back what it runs.
//
// Slots (slots.go). SlotsChanged gives a worker a new number of slots (its
// capacity follows), or with 0 sets it aside: no new work, its held
// instances withdrawn (Cancel, Held) and back at the head of Q, what it runs
// left to finish; SlotsChanged ≥ 1 takes it back.
//
// Batches. BatchStarted cancels every live instance of the previous batch
// (if it was abandoned unfinished; held ones first) and starts afresh with
// Q = 0..N-1; workers stay. The driver must drop results of earlier batches
// before stepping: task ids repeat in every batch, so a policy cannot tell
// them apart.
//
// Time accounting (docs/papers.md §1). A policy knows when Q is empty, so it
// says when the sync wait begins instead of leaving a driver to guess it
// from the sends: SyncWait at the first step of a batch at which a place
// freed on a worker that takes work finds Q empty (the worker has room
// and nothing to fill it with) or gets a replica. Places that never had a
// task because the batch is smaller than the grid's room do not start the
// sync wait (so a batch sent whole at once is not all sync wait); until
// the sync wait begins, Idle reports how many of each worker's slots have
// nothing to run while Q is empty, so that their idleness is not taken
// for time lost on the network.
//
// Adaptive depth (Config.Adaptive, rwq and r3q). Each worker keeps
// exponentially weighted means (gain 1/8) of the RTT and Exec its events
// carry, and its depth per slot is 1 + ceil(RTT/Exec) within [Depth,
// AdaptiveMax]: when a slot finishes a task, its refill arrives one round
// trip later, and the slot's held tasks must last that long. A worker whose
// depth grows is free at once; one whose depth shrinks keeps what it holds
// (nothing is cancelled) and gets no more until it is below the new depth.
// A measurement of an unknown or departed worker is ignored.
//
// Cost. Step is O(Depth × Slots + instances of the task) per event, plus
// O(free workers × tasks of R) while replicating and O(N log N) once per
// batch when Q empties, and O(workers) per step between Q emptying and the
// sync wait's start (usually one or two steps); once the first batch has
// sized its buffers it allocates nothing beyond growing out.
func New(name string, cfg Config) (Policy, error) {
	if cfg.Depth < 0 || cfg.Depth > MaxDepth {
		return nil, fmt.Errorf("sched: policy %q: depth %d out of range 0..%d", name, cfg.Depth, MaxDepth)
	}
	if cfg.AdaptiveMax < 0 || cfg.AdaptiveMax > MaxDepth {
		return nil, fmt.Errorf("sched: policy %q: adaptive max %d out of range 0..%d", name, cfg.AdaptiveMax, MaxDepth)
	}
	p := &policy{name: name, depth: cfg.Depth, idx: make(map[WorkerID]int32)}
	switch name {
	case "wq":
		p.setDepth(1)
	case "rr":
		p.setDepth(1)
		p.replicate = true
	case "rwq":
		p.setDepth(2)
		p.setAdaptive(cfg)
	case "r3q":
		p.setDepth(2)
		p.setAdaptive(cfg)
		p.replicate = true
		p.reverse = true
	case "cyclic":
		p.static = true
	case "eft":
		if err := p.setEFT(cfg); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names)
	}
	return p, nil
}

func (p *policy) setDepth(def int) {
	if p.depth == 0 {
		p.depth = def
	}
}

func (p *policy) setAdaptive(cfg Config) {
	if !cfg.Adaptive {
		return
	}
	p.adaptive = true
	p.maxDepth = cfg.AdaptiveMax
	if p.maxDepth == 0 {
		p.maxDepth = DefaultAdaptiveMax
	}
	p.maxDepth = max(p.maxDepth, p.depth)
}

// policy is the engine behind every name.
type policy struct {
	name      string
	depth     int  // per slot; with adaptive, the floor
	adaptive  bool // rwq, r3q with Config.Adaptive: depth per worker from measurements
	maxDepth  int  // adaptive: the cap
	replicate bool // rr, r3q: round-robin replication once Q is empty
	reverse   bool // r3q: replicate in reverse order of transfer
	static    bool // cyclic

	eft *eftState // eft (eft.go); nil for the paper's policies

	holdMark  []uint32 // per worker place: the stamp of the last task it was found holding (markHolders)
	holdStamp uint32

	// Workers, indexed densely; a departed worker's place is reused by the
	// next join (vacant lists them).
	idx     map[WorkerID]int32
	workers []worker
	vacant  []int32
	live    int // workers joined and not left

	// free holds worker indexes that may have room (a queue; entries are
	// checked when used, since a worker can fill or leave meanwhile).
	free     []int32
	freeHead int

	// The batch.
	n      int
	nDone  int
	tasks  []task
	q      ring // Q: tasks with no live instance, not done
	qLive  int  // tasks in Q (entries of done tasks are skipped lazily)
	seq    uint32
	rBuilt bool     // R was taken when Q last became empty
	r      []TaskID // R in replication order (send order, or reverse)
	rPos   int      // round-robin cursor into r
	rLive  int      // tasks of r still in R
	nFail  int      // tasks not done that some worker failed or overran

	// The time accounting's view (SyncWait, Idle).
	syncBegun   bool    // SyncWait was emitted for this batch
	nIdle       int     // workers whose last Idle was not 0
	freed       []int32 // this step: workers a place was freed on
	stepReplica bool    // this step sent a replica
}

type worker struct {
	id     WorkerID
	slots  int
	cap    int     // depth × slots (cyclic: unbounded)
	rtt    float64 // adaptive: smoothed RTT in ns, 0 until measured
	exec   float64 // adaptive: smoothed Exec in ns, 0 until measured
	alive  bool
	late   bool // an instance was Overdue and the worker has not answered since
	drain  bool // WorkerDraining: no new work
	aside  bool // SlotsChanged to 0: no new work until slots are given back
	inFree bool
	idle   int      // the last Idle emitted for it in this batch
	lo     int      // inst[lo:] are the live instances, in send order
	inst   []TaskID // instances on this worker
}

func (w *worker) count() int { return len(w.inst) - w.lo }

// open says the worker may be given new work (room aside).
func (w *worker) open() bool { return w.alive && !w.late && !w.drain && !w.aside }

// pos is the place of t among w's live instances in send order, or -1.
func (w *worker) pos(t TaskID) int {
	for i := w.lo; i < len(w.inst); i++ {
		if w.inst[i] == t {
			return i - w.lo
		}
	}
	return -1
}

// posOf is w's pos(ti) for worker wi, without a search of w's instances
// when task ti is not on wi (its on list, a copy or two, says so): the
// task of an answer is the worker's to choose, and a frame of 65,536
// copies of an answered result, each searched for in 8,192 instances
// held, held the master's loop a second.
func (p *policy) posOf(wi int32, ti TaskID) int {
	if !slices.Contains(p.tasks[ti].on, wi) {
		return -1
	}
	return p.workers[wi].pos(ti)
}

// remove drops the instance at place i (from pos).
func (w *worker) remove(i int) {
	if i == 0 {
		w.lo++
	} else {
		at := w.lo + i
		copy(w.inst[at:], w.inst[at+1:])
		w.inst = w.inst[:len(w.inst)-1]
	}
	if w.lo == len(w.inst) {
		w.lo, w.inst = 0, w.inst[:0]
	}
}

type task struct {
	done   bool
	inQ    bool
	inR    bool
	seq    uint32     // order of its latest original transfer
	on     []int32    // workers holding a live instance
	failed []WorkerID // workers on which it failed (Failed) or overran (Overdue), in order
	absent bool       // not in this master's batch (split.go); counted as done
}

func (p *policy) Name() string { return p.name }

func (p *policy) Done() bool { return p.nDone == p.n }

func (p *policy) Step(ev Event, out []Action) []Action {
	p.freed, p.stepReplica = p.freed[:0], false
	if p.eft != nil {
		p.eftBegin(ev)
	}
	switch ev.Kind {
	case BatchStarted:
		out = p.startBatch(ev.N, out)
	case WorkerJoined:
		_, known := p.idx[ev.Worker]
		p.join(ev.Worker, ev.Slots)
		if p.eft != nil && !known {
			p.eftJoined(ev) // eft.go
		}
	case WorkerLeft:
		p.leave(ev.Worker)
	case ResultArrived:
		p.measure(ev)
		out = p.result(ev.Worker, ev.Task, out)
	case Measured:
		changed := p.measure(ev)
		if !p.answered(ev.Worker) && !changed {
			return out
		}
	case Overdue:
		out = p.overdue(ev.Worker, ev.Task, out)
	case Failed:
		p.failed(ev.Worker, ev.Task)
	case Returned:
		p.returned(ev.Worker, ev.Task)
	case WorkerDraining:
		if wi, ok := p.idx[ev.Worker]; ok {
			p.workers[wi].drain, p.workers[wi].inFree = true, false
		}
	case TasksAdded:
		p.addTasks(ev.IDs) // split.go
	case TasksTaken:
		out = p.takeTasks(ev.N, out) // split.go
	case SlotsChanged:
		out = p.changeSlots(ev.Worker, ev.Slots, out) // slots.go
	case Tick:
		if p.eft == nil || !p.eftTick() {
			return out
		}
	default:
		return out
	}
	return p.account(p.fill(out))
}

// account appends the time accounting's actions for this step: SyncWait
// once a freed place finds Q empty, else the changes of Idle (see the
// ActionKinds). Between Q emptying and the sync wait's start it looks at
// every worker; otherwise it costs O(freed places).
func (p *policy) account(out []Action) []Action {
	if p.syncBegun || p.nDone == p.n {
		return out
	}
	if p.qLive == 0 {
		for _, wi := range p.freed {
			w := &p.workers[wi]
			if w.open() && (p.stepReplica || w.count() < w.cap) {
				p.syncBegun = true
				return append(out, Action{Kind: SyncWait, Worker: w.id})
			}
		}
	} else if p.nIdle == 0 {
		return out
	}
	for i := range p.workers {
		w := &p.workers[i]
		if !w.alive {
			continue
		}
		idle := 0
		if p.qLive == 0 && w.open() {
			idle = max(w.slots-w.count(), 0)
		}
		if idle != w.idle {
			switch {
			case w.idle == 0:
				p.nIdle++
			case idle == 0:
				p.nIdle--
			}
			w.idle = idle
			out = append(out, Action{Kind: Idle, Worker: w.id, Slots: idle})
		}
	}
	return out
}

// release notes that a place was freed on worker wi at this step.
func (p *policy) release(wi int32) { p.freed = append(p.freed, wi) }

func (p *policy) startBatch(n int, out []Action) []Action {
	// Cancel what an abandoned batch left, held instances first (last sent
	// first), so no held one starts running because a running one stopped.
	for i := range p.workers {
		w := &p.workers[i]
		if w.alive {
			for k := w.count() - 1; k >= 0; k-- {
				out = append(out, Action{Kind: Cancel, Worker: w.id, Task: w.inst[w.lo+k], Held: k >= w.slots})
			}
		}
		w.lo, w.inst = 0, w.inst[:0]
	}
	if n < 0 {
		n = 0
	}
	if cap(p.tasks) < n {
		p.tasks = append(p.tasks[:cap(p.tasks)], make([]task, n-cap(p.tasks))...)
	}
	p.tasks = p.tasks[:n]
	p.q.reset(n)
	for i := range p.tasks {
		t := &p.tasks[i]
		*t = task{on: t.on[:0], failed: t.failed[:0], inQ: true}
		p.q.pushBack(TaskID(i))
	}
	p.n, p.nDone, p.qLive, p.seq, p.nFail = n, 0, n, 0, 0
	p.syncBegun, p.nIdle = false, 0
	for i := range p.workers {
		p.workers[i].idle = 0
	}
	p.clearR()
	// Every live worker has room again.
	p.free, p.freeHead = p.free[:0], 0
	for i := range p.workers {
		p.workers[i].inFree = false
		p.markFree(int32(i))
	}
	return out
}

func (p *policy) join(id WorkerID, slots int) {
	if _, ok := p.idx[id]; ok {
		return
	}
	slots = min(max(slots, 1), MaxSlots)
	c := p.depth * slots
	if p.static {
		c = math.MaxInt
	}
	w := worker{id: id, slots: slots, cap: c, alive: true}
	if !p.static {
		w.inst = make([]TaskID, 0, min(c, 64))
	}
	var wi int32
	if k := len(p.vacant); k > 0 {
		wi = p.vacant[k-1]
		p.vacant = p.vacant[:k-1]
		p.workers[wi] = w
	} else {
		wi = int32(len(p.workers))
		p.workers = append(p.workers, w)
		if p.eft != nil {
			p.eft.grow(len(p.workers))
		}
	}
	p.idx[id] = wi
	p.live++
	p.markFree(wi)
}

// measure folds ev's measurements into its worker's means and sets the
// worker's adaptive depth; it reports whether the depth changed.
func (p *policy) measure(ev Event) bool {
	if p.eft != nil {
		return p.eftMeasure(ev)
	}
	if !p.adaptive || ev.RTT <= 0 && ev.Exec <= 0 {
		return false
	}
	wi, ok := p.idx[ev.Worker]
	if !ok || !p.workers[wi].alive {
		return false
	}
	w := &p.workers[wi]
	Smooth(&w.rtt, ev.RTT)
	Smooth(&w.exec, ev.Exec)
	d := p.depth
	if w.exec > 0 {
		// 1 + ceil(RTT/Exec), clamped in float64 so no ratio overflows.
		d = int(min(max(1+math.Ceil(w.rtt/w.exec), float64(p.depth)), float64(p.maxDepth)))
	}
	c := d * w.slots
	if c == w.cap {
		return false
	}
	w.cap = c
	p.markFree(wi)
	return true
}

func (p *policy) leave(id WorkerID) {
	wi, ok := p.idx[id]
	if !ok || !p.workers[wi].alive {
		return
	}
	w := &p.workers[wi]
	w.alive, w.inFree = false, false
	p.live--
	if w.idle > 0 {
		p.nIdle--
	}
	// Give back, in send order, each task no other worker still holds.
	// Pushing to the front in reverse keeps that order at the head of Q.
	for k := len(w.inst) - 1; k >= w.lo; k-- {
		ti := w.inst[k]
		p.tasks[ti].on = removeWorker(p.tasks[ti].on, wi)
		p.requeue(ti)
	}
	// Forget the worker: no task refers to its place any more, and the
	// free queue must not either once the place is reused.
	*w = worker{}
	delete(p.idx, id)
	p.vacant = append(p.vacant, wi)
	p.compactFree()
}

// requeue puts task ti back at the head of Q, unless it is done, in Q
// already, or live on a worker that is not late. Q is then not empty, so R
// is taken afresh when it empties again.
func (p *policy) requeue(ti TaskID) {
	t := &p.tasks[ti]
	if t.done || t.inQ {
		return
	}
	for _, vi := range t.on {
		if !p.workers[vi].late {
			return
		}
	}
	t.inQ = true
	p.q.pushFront(ti)
	p.qLive++
	if p.rBuilt {
		p.clearR()
	}
}

// answered notes that worker id has answered: a late worker is open for
// work again. It reports whether the worker was late.
func (p *policy) answered(id WorkerID) bool {
	wi, ok := p.idx[id]
	return ok && p.answeredAt(wi)
}

// answeredAt is answered for the worker at place wi.
func (p *policy) answeredAt(wi int32) bool {
	w := &p.workers[wi]
	if !w.late {
		return false
	}
	w.late = false
	// What it holds is no longer only on a late worker: out of Q (a
	// worker never gets a second instance of a task it holds).
	for _, ti := range w.inst[w.lo:] {
		if t := &p.tasks[ti]; t.inQ {
			t.inQ = false
			p.qLive--
		}
	}
	p.markFree(wi)
	return true
}

// overdue handles Overdue: see New.
func (p *policy) overdue(id WorkerID, ti TaskID, out []Action) []Action {
	wi, ok := p.idx[id]
	if !ok || ti < 0 || int(ti) >= p.n || p.tasks[ti].done || p.workers[wi].pos(ti) < 0 {
		return out
	}
	w := &p.workers[wi]
	w.late, w.inFree = true, false
	// Withdraw what it holds, last sent first, so the held tasks come back
	// to Q in send order and none starts on the slot the overdue instance
	// frees; then the overdue instance, unless it was (in the books) held.
	for k := w.count() - 1; k >= w.slots; k-- {
		hi := w.inst[w.lo+k]
		out = append(out, Action{Kind: Cancel, Worker: id, Task: hi, Held: true})
		w.remove(k)
		p.tasks[hi].on = removeWorker(p.tasks[hi].on, wi)
		p.requeue(hi)
	}
	t := &p.tasks[ti]
	if k := w.pos(ti); k >= 0 {
		out = append(out, Action{Kind: Cancel, Worker: id, Task: ti})
		if p.eft != nil {
			p.eftCensor(wi, k)
		}
		w.remove(k)
		t.on = removeWorker(t.on, wi)
	}
	p.exclude(t, id)
	p.requeue(ti)
	if t.inQ && !w.drain && !w.aside && !p.openElsewhere(wi) {
		// No other worker is open: the task runs again here, at once. The
		// cancel before it frees the slot (the worker abandons a cancelled
		// evaluation whose task comes again), so even a hang deaf to its
		// cancel costs one deadline; for new work the worker stays late.
		// Live only on a late worker, the task stays in Q for a worker
		// that joins or answers meanwhile (as a replica).
		if p.eft != nil {
			return p.eftSend(wi, ti, false, out)
		}
		out = p.sendFromQ(wi, ti, out)
	}
	return out
}

// openElsewhere says some worker other than wi is open for work.
func (p *policy) openElsewhere(wi int32) bool {
	for i := range p.workers {
		if int32(i) != wi && p.workers[i].open() {
			return true
		}
	}
	return false
}

// exclude notes that worker id failed or overran task t: it is not given
// t again while some worker open for work has not (excluded).
func (p *policy) exclude(t *task, id WorkerID) {
	if slices.Contains(t.failed, id) {
		return
	}
	if len(t.failed) == 0 {
		p.nFail++
	}
	t.failed = append(t.failed, id)
}

// failed handles Failed: see New.
func (p *policy) failed(id WorkerID, ti TaskID) {
	wi, ok := p.idx[id]
	if !ok || ti < 0 || int(ti) >= p.n {
		return
	}
	w := &p.workers[wi]
	t := &p.tasks[ti]
	if p.eft != nil {
		p.eftW(wi).starting = false // it serves
	}
	if k := p.posOf(wi, ti); k >= 0 {
		w.remove(k)
		t.on = removeWorker(t.on, wi)
		p.markFree(wi)
		p.release(wi)
	}
	p.answered(id)
	if t.done {
		return
	}
	p.exclude(t, id)
	p.requeue(ti)
}

// returned handles Returned: see New.
func (p *policy) returned(id WorkerID, ti TaskID) {
	wi, ok := p.idx[id]
	if !ok || ti < 0 || int(ti) >= p.n {
		return
	}
	w := &p.workers[wi]
	if k := p.posOf(wi, ti); k >= 0 {
		w.remove(k)
		p.tasks[ti].on = removeWorker(p.tasks[ti].on, wi)
		p.markFree(wi)
		p.release(wi)
		p.requeue(ti)
	}
}

// excluded says worker id must not be given task t: it failed or overran
// t, and some worker that may be given work (alive, not late, not
// draining) has not.
// A late or draining worker does not count: it may never take the task.
func (p *policy) excluded(t *task, id WorkerID) bool {
	if !slices.Contains(t.failed, id) {
		return false
	}
	for i := range p.workers {
		if w := &p.workers[i]; w.open() && !slices.Contains(t.failed, w.id) {
			return true
		}
	}
	return false
}

func (p *policy) result(id WorkerID, ti TaskID, out []Action) []Action {
	if ti < 0 || int(ti) >= p.n {
		return out
	}
	t := &p.tasks[ti]
	var wi int32
	var known bool
	if p.eft != nil && p.eft.evSet {
		wi, known = p.eft.evWi, p.eft.evOK // eftBegin's lookup
	} else {
		wi, known = p.idx[id]
	}
	if known {
		// Free the instance whatever the outcome: the slot is free now.
		w := &p.workers[wi]
		if k := p.posOf(wi, ti); k >= 0 {
			w.remove(k)
			t.on = removeWorker(t.on, wi)
			p.markFree(wi)
			p.release(wi)
		}
		p.answeredAt(wi)
	}
	if t.done {
		return out
	}
	t.done = true
	p.nDone++
	if len(t.failed) > 0 {
		p.nFail--
	}
	out = append(out, Action{Kind: Accept, Worker: id, Task: ti})
	for _, vi := range t.on {
		v := &p.workers[vi]
		k := v.pos(ti)
		out = append(out, Action{Kind: Cancel, Worker: v.id, Task: ti, Held: k >= v.slots})
		if p.eft != nil && k < v.slots {
			p.eftCensor(vi, k)
		}
		v.remove(k)
		p.markFree(vi)
		p.release(vi)
	}
	t.on = t.on[:0]
	if t.inQ {
		// A departed worker's result for a task given back to Q.
		t.inQ = false
		p.qLive--
	}
	if t.inR {
		t.inR = false
		p.rLive--
	}
	return out
}

// fill hands out work to free workers: originals from Q first, then (rr,
// r3q, once Q is empty) replicas.
func (p *policy) fill(out []Action) []Action {
	if p.eft != nil {
		return p.fillEFT(out)
	}
	if p.static {
		return p.fillStatic(out)
	}
	// Running places first: sweep the free workers, one task each per
	// sweep, while some has an idle slot. So the tasks sent first run, and
	// the last sent are the held ones, as r3q's reverse order assumes.
	for sent := true; sent && p.qLive > 0; {
		sent = false
		for k, end := p.freeHead, len(p.free); k < end && p.qLive > 0; k++ {
			wi := p.free[k]
			w := &p.workers[wi]
			if w.inFree && w.open() && w.count() < min(w.slots, w.cap) {
				if ti, ok := p.popQFor(wi); ok {
					out = p.sendFromQ(wi, ti, out)
					sent = true
				}
			}
		}
	}
	// Then the held places, one task per free worker in turn, in passes
	// over the free workers until Q is empty or a pass sends nothing (only
	// tasks that the free workers failed are left).
	for sent := true; sent && p.qLive > 0; {
		sent = false
		for k := len(p.free) - p.freeHead; k > 0 && p.qLive > 0; k-- {
			wi, ok := p.popFree()
			if !ok {
				break
			}
			if ti, ok := p.popQFor(wi); ok {
				out = p.sendFromQ(wi, ti, out)
				sent = true
			}
			p.markFree(wi) // back to the tail if it still has room
		}
	}
	if p.qLive == 0 && p.replicate && p.nDone < p.n {
		if !p.rBuilt {
			p.buildR()
		}
		out = p.replicas(out)
	}
	p.compactFree()
	return out
}

// fillStatic deals every task in Q round-robin over the live workers'
// slots (cyclic).
func (p *policy) fillStatic(out []Action) []Action {
	for sent := true; sent && p.qLive > 0; {
		sent = false
		for i := range p.workers {
			if !p.workers[i].open() {
				continue
			}
			for s := 0; s < p.workers[i].slots && p.qLive > 0; s++ {
				ti, ok := p.popQFor(int32(i))
				if !ok {
					break
				}
				out = p.sendFromQ(int32(i), ti, out)
				sent = true
			}
		}
	}
	return out
}

// replicas carries out steps 10 of RR for every free worker: pick the next
// task of R in round-robin order and send a replica of it to every free
// worker that does not hold it already; workers left free (they held the
// pick) get the next pick.
func (p *policy) replicas(out []Action) []Action {
	misses := 0
	for p.rLive > 0 && misses < p.rLive && p.freeHead < len(p.free) {
		ti := p.nextR()
		before := len(out)
		stamp := p.markHolders(ti)
		for k := p.freeHead; k < len(p.free); k++ {
			wi := p.free[k]
			w := &p.workers[wi]
			if !w.inFree || !w.open() || w.count() >= w.cap || p.holdMark[wi] == stamp || p.excluded(&p.tasks[ti], w.id) {
				continue
			}
			out = p.send(wi, ti, true, out)
			if w.count() >= w.cap {
				w.inFree = false
			}
		}
		if len(out) == before {
			misses++
		} else {
			misses = 0
		}
		p.compactFree()
	}
	return out
}

// nextR returns the task under the round-robin cursor and moves it on.
func (p *policy) nextR() TaskID {
	for {
		if p.rPos >= len(p.r) {
			p.rPos = 0
		}
		ti := p.r[p.rPos]
		p.rPos++
		if p.tasks[ti].inR {
			return ti
		}
	}
}

// buildR is step 6: R is every task with a live instance when Q becomes
// empty, in order of transfer (reversed for r3q).
func (p *policy) buildR() {
	p.r = p.r[:0]
	for i := range p.tasks {
		t := &p.tasks[i]
		if !t.done && len(t.on) > 0 {
			t.inR = true
			p.r = append(p.r, TaskID(i))
		}
	}
	tasks := p.tasks
	if p.reverse {
		slices.SortFunc(p.r, func(a, b TaskID) int { return cmpSeq(tasks[b].seq, tasks[a].seq) })
	} else {
		slices.SortFunc(p.r, func(a, b TaskID) int { return cmpSeq(tasks[a].seq, tasks[b].seq) })
	}
	p.rLive, p.rPos, p.rBuilt = len(p.r), 0, true
}

func cmpSeq(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (p *policy) clearR() {
	for _, ti := range p.r {
		if int(ti) < len(p.tasks) {
			p.tasks[ti].inR = false
		}
	}
	p.r, p.rPos, p.rLive, p.rBuilt = p.r[:0], 0, 0, false
}

func (p *policy) send(wi int32, ti TaskID, replica bool, out []Action) []Action {
	w := &p.workers[wi]
	if w.lo > 0 && len(w.inst) == cap(w.inst) {
		// Reuse the room finished instances left at the front rather than
		// grow: a worker that never empties would otherwise grow with the
		// batch.
		n := copy(w.inst, w.inst[w.lo:])
		w.inst, w.lo = w.inst[:n], 0
	}
	w.inst = append(w.inst, ti)
	t := &p.tasks[ti]
	t.on = append(t.on, wi)
	if !replica {
		t.seq = p.seq
		p.seq++
	} else {
		p.stepReplica = true
	}
	return append(out, Action{Kind: Send, Worker: w.id, Task: ti, Replica: replica})
}

// sendFromQ sends task ti, just taken from Q, to worker wi: an original,
// or a replica when an instance of it is still live (on a late worker).
func (p *policy) sendFromQ(wi int32, ti TaskID, out []Action) []Action {
	return p.send(wi, ti, len(p.tasks[ti].on) > 0, out)
}

func (p *policy) popQ() TaskID {
	for {
		ti := p.q.popFront()
		t := &p.tasks[ti]
		if t.inQ {
			t.inQ = false
			p.qLive--
			return ti
		}
	}
}

// popQFor takes from Q the first task that worker wi may be given, and
// reports false if there is none (every task in Q was failed by wi).
func (p *policy) popQFor(wi int32) (TaskID, bool) {
	if p.nFail == 0 {
		return p.popQ(), true
	}
	// Entries of tasks taken already leave from the head, and when they
	// make up most of Q it is compacted: else every call scanned again
	// the entries earlier calls had taken, quadratic in a batch that
	// comes back to Q whole (a late worker's held tasks under cyclic).
	for p.q.size > 0 && !p.tasks[p.q.at(0)].inQ {
		p.q.popFront()
	}
	id := p.workers[wi].id
	dead := 0
	defer func() {
		if dead > 16 && 2*dead > p.q.size {
			p.q.compact(func(ti TaskID) bool { return p.tasks[ti].inQ })
		}
	}()
	for i := 0; i < p.q.size; i++ {
		ti := p.q.at(i)
		t := &p.tasks[ti]
		switch {
		case !t.inQ:
			dead++
		case !p.excluded(t, id):
			// Taken from the middle, its entry stays, skipped as not in
			// Q (and dropped by a compaction); from the head, it leaves.
			t.inQ = false
			p.qLive--
			if i == 0 {
				p.q.popFront()
			}
			return ti, true
		}
	}
	return 0, false
}

// markFree queues worker wi for work if it is alive, has room and is not
// queued already.
func (p *policy) markFree(wi int32) {
	w := &p.workers[wi]
	if w.open() && !w.inFree && w.count() < w.cap {
		w.inFree = true
		p.free = append(p.free, wi)
	}
}

// popFree takes the first queued worker that still has room.
func (p *policy) popFree() (int32, bool) {
	for p.freeHead < len(p.free) {
		wi := p.free[p.freeHead]
		p.freeHead++
		w := &p.workers[wi]
		if w.inFree {
			w.inFree = false
			if w.open() && w.count() < w.cap {
				return wi, true
			}
		}
	}
	return 0, false
}

// compactFree drops consumed and stale entries of the free queue.
func (p *policy) compactFree() {
	j := 0
	for k := p.freeHead; k < len(p.free); k++ {
		wi := p.free[k]
		if p.workers[wi].inFree {
			p.free[j] = wi
			j++
		}
	}
	p.free, p.freeHead = p.free[:j], 0
}

// markHolders stamps the places of the workers that hold task ti, so
// that whether a worker holds it is one look (holdMark[wi] == stamp)
// while its replicas are handed out: O(holders) once, not per worker.
func (p *policy) markHolders(ti TaskID) uint32 {
	if len(p.holdMark) < len(p.workers) {
		p.holdMark = append(p.holdMark, make([]uint32, len(p.workers)-len(p.holdMark))...)
	}
	p.holdStamp++
	if p.holdStamp == 0 { // wrapped: forget every old stamp
		clear(p.holdMark)
		p.holdStamp = 1
	}
	for _, vi := range p.tasks[ti].on {
		p.holdMark[vi] = p.holdStamp
	}
	return p.holdStamp
}

func removeWorker(on []int32, wi int32) []int32 {
	for k, x := range on {
		if x == wi {
			last := len(on) - 1
			on[k] = on[last]
			return on[:last]
		}
	}
	return on
}

// ring is a double-ended queue of task ids with room for a whole batch.
type ring struct {
	buf        []TaskID
	head, size int
}

func (r *ring) reset(n int) {
	if cap(r.buf) < n+1 {
		r.buf = make([]TaskID, n+1)
	}
	r.buf = r.buf[:cap(r.buf)]
	r.head, r.size = 0, 0
}

func (r *ring) pushBack(t TaskID) {
	r.grow()
	r.buf[(r.head+r.size)%len(r.buf)] = t
	r.size++
}

func (r *ring) pushFront(t TaskID) {
	r.grow()
	r.head = (r.head - 1 + len(r.buf)) % len(r.buf)
	r.buf[r.head] = t
	r.size++
}

// grow makes room for one more entry: entries of tasks taken from the
// middle (popQFor) or done while in Q stay until they reach the head.
func (r *ring) grow() {
	if r.size < len(r.buf) {
		return
	}
	buf := make([]TaskID, 2*len(r.buf)+1)
	for i := 0; i < r.size; i++ {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}

// compact keeps only the entries keep is true for, in order.
func (r *ring) compact(keep func(TaskID) bool) {
	n := 0
	for i := 0; i < r.size; i++ {
		if t := r.at(i); keep(t) {
			r.buf[(r.head+n)%len(r.buf)] = t
			n++
		}
	}
	r.size = n
}

// at is the i-th entry from the head.
func (r *ring) at(i int) TaskID { return r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) popFront() TaskID {
	t := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return t
}
