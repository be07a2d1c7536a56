package sched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
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
// All five policies are one engine with three knobs (papers.md §1, §5):
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
// WorkerJoined for a known worker is ignored (ids are never reused); Slots
// < 1 counts as 1 and Slots > MaxSlots as MaxSlots. WorkerLeft for an
// unknown or departed worker is ignored.
//
// Batches. BatchStarted cancels every live instance of the previous batch
// (if it was abandoned unfinished; held ones first) and starts afresh with
// Q = 0..N-1; workers stay. The driver must drop results of earlier batches
// before stepping: task ids repeat in every batch, so a policy cannot tell
// them apart.
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
// batch when Q empties; once the first batch has sized its buffers it
// allocates nothing beyond growing out.
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

	// Workers, indexed densely in join order; departed ones stay (ids are
	// never reused).
	idx     map[WorkerID]int32
	workers []worker
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
}

type worker struct {
	id     WorkerID
	slots  int
	cap    int     // depth × slots (cyclic: unbounded)
	rtt    float64 // adaptive: smoothed RTT in ns, 0 until measured
	exec   float64 // adaptive: smoothed Exec in ns, 0 until measured
	alive  bool
	inFree bool
	lo     int      // inst[lo:] are the live instances, in send order
	inst   []TaskID // instances on this worker
}

func (w *worker) count() int { return len(w.inst) - w.lo }

// pos is the place of t among w's live instances in send order, or -1.
func (w *worker) pos(t TaskID) int {
	for i := w.lo; i < len(w.inst); i++ {
		if w.inst[i] == t {
			return i - w.lo
		}
	}
	return -1
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
	done bool
	inQ  bool
	inR  bool
	seq  uint32  // order of its latest original transfer
	on   []int32 // workers holding a live instance
}

func (p *policy) Name() string { return p.name }

func (p *policy) Done() bool { return p.nDone == p.n }

func (p *policy) Step(ev Event, out []Action) []Action {
	switch ev.Kind {
	case BatchStarted:
		out = p.startBatch(ev.N, out)
	case WorkerJoined:
		p.join(ev.Worker, ev.Slots)
	case WorkerLeft:
		p.leave(ev.Worker)
	case ResultArrived:
		p.measure(ev)
		out = p.result(ev.Worker, ev.Task, out)
	case Measured:
		if !p.measure(ev) {
			return out
		}
	default:
		return out
	}
	return p.fill(out)
}

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
		*t = task{on: t.on[:0], inQ: true}
		p.q.pushBack(TaskID(i))
	}
	p.n, p.nDone, p.qLive, p.seq = n, 0, n, 0
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
	wi := int32(len(p.workers))
	p.idx[id] = wi
	w := worker{id: id, slots: slots, cap: c, alive: true}
	if !p.static {
		w.inst = make([]TaskID, 0, min(c, 64))
	}
	p.workers = append(p.workers, w)
	p.live++
	p.markFree(wi)
}

// measureGain is the weight of a new measurement in a worker's smoothed
// RTT and Exec: a slowdown shows within a few tasks, one outlier moves the
// mean by an eighth.
const measureGain = 1.0 / 8

// measure folds ev's measurements into its worker's means and sets the
// worker's adaptive depth; it reports whether the depth changed.
func (p *policy) measure(ev Event) bool {
	if !p.adaptive || ev.RTT <= 0 && ev.Exec <= 0 {
		return false
	}
	wi, ok := p.idx[ev.Worker]
	if !ok || !p.workers[wi].alive {
		return false
	}
	w := &p.workers[wi]
	smooth(&w.rtt, ev.RTT)
	smooth(&w.exec, ev.Exec)
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

func smooth(mean *float64, x time.Duration) {
	if x <= 0 {
		return
	}
	if *mean == 0 {
		*mean = float64(x)
		return
	}
	*mean += (float64(x) - *mean) * measureGain
}

func (p *policy) leave(id WorkerID) {
	wi, ok := p.idx[id]
	if !ok || !p.workers[wi].alive {
		return
	}
	w := &p.workers[wi]
	w.alive, w.inFree = false, false
	p.live--
	// Give back, in send order, each task no other worker still holds.
	// Pushing to the front in reverse keeps that order at the head of Q.
	for k := len(w.inst) - 1; k >= w.lo; k-- {
		ti := w.inst[k]
		t := &p.tasks[ti]
		t.on = removeWorker(t.on, wi)
		if len(t.on) == 0 && !t.done {
			t.inQ = true
			p.q.pushFront(ti)
			p.qLive++
			if t.inR {
				t.inR = false
				p.rLive--
			}
		}
	}
	w.lo, w.inst = 0, w.inst[:0]
	if p.qLive > 0 && p.rBuilt {
		// Q is not empty any more: R is taken afresh when it empties again.
		p.clearR()
	}
}

func (p *policy) result(id WorkerID, ti TaskID, out []Action) []Action {
	if ti < 0 || int(ti) >= p.n {
		return out
	}
	t := &p.tasks[ti]
	wi, known := p.idx[id]
	if known {
		// Free the instance whatever the outcome: the slot is free now.
		w := &p.workers[wi]
		if k := w.pos(ti); k >= 0 {
			w.remove(k)
			t.on = removeWorker(t.on, wi)
			p.markFree(wi)
		}
	}
	if t.done {
		return out
	}
	t.done = true
	p.nDone++
	out = append(out, Action{Kind: Accept, Worker: id, Task: ti})
	for _, vi := range t.on {
		v := &p.workers[vi]
		k := v.pos(ti)
		out = append(out, Action{Kind: Cancel, Worker: v.id, Task: ti, Held: k >= v.slots})
		v.remove(k)
		p.markFree(vi)
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
			if w.inFree && w.alive && w.count() < min(w.slots, w.cap) {
				out = p.send(wi, p.popQ(), false, out)
				sent = true
			}
		}
	}
	// Then the held places, one task per free worker in turn.
	for p.qLive > 0 {
		wi, ok := p.popFree()
		if !ok {
			break
		}
		out = p.send(wi, p.popQ(), false, out)
		p.markFree(wi) // back to the tail if it still has room
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
	if p.live == 0 {
		return out
	}
	for p.qLive > 0 {
		for i := range p.workers {
			if !p.workers[i].alive {
				continue
			}
			for s := 0; s < p.workers[i].slots && p.qLive > 0; s++ {
				out = p.send(int32(i), p.popQ(), false, out)
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
		for k := p.freeHead; k < len(p.free); k++ {
			wi := p.free[k]
			w := &p.workers[wi]
			if !w.inFree || w.count() >= w.cap || holds(p.tasks[ti].on, wi) {
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
	}
	return append(out, Action{Kind: Send, Worker: w.id, Task: ti, Replica: replica})
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

// markFree queues worker wi for work if it is alive, has room and is not
// queued already.
func (p *policy) markFree(wi int32) {
	w := &p.workers[wi]
	if w.alive && !w.inFree && w.count() < w.cap {
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
			if w.alive && w.count() < w.cap {
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

func holds(on []int32, wi int32) bool {
	for _, x := range on {
		if x == wi {
			return true
		}
	}
	return false
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
	r.buf[(r.head+r.size)%len(r.buf)] = t
	r.size++
}

func (r *ring) pushFront(t TaskID) {
	r.head = (r.head - 1 + len(r.buf)) % len(r.buf)
	r.buf[r.head] = t
	r.size++
}

func (r *ring) popFront() TaskID {
	t := r.buf[r.head]
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return t
}
