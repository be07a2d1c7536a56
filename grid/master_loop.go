package grid

import (
	"fmt"
	"math"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// loopMsgKind says what a loopMsg carries.
type loopMsgKind uint8

const (
	msgJoined     loopMsgKind = iota + 1 // w finished its handshake
	msgFrame                             // w sent msg
	msgClosed                            // w's connection is closed
	msgMemberGone                        // gossip says the worker named name failed (or left)
	msgEvaluate                          // start batch eval
	msgCall                              // run call on the loop
)

// loopMsg is everything that reaches the event loop, by value (no
// allocation per message beyond what it points to).
type loopMsg struct {
	kind loopMsgKind
	w    *mworker
	msg  Message
	name string
	left bool // msgMemberGone: a leave, not a failure
	eval *evalReq
	call func()
}

type evalReq struct {
	gen   int
	xs    [][]float64
	reply chan evalReply // capacity 1: the loop never blocks on it
}

type evalReply struct {
	f   []float64
	err error
}

// mworker is the loop's view of one connected worker.
type mworker struct {
	id    sched.WorkerID
	name  string
	slots int
	conn  *Conn

	left   bool // WorkerLeft has been stepped (drained, lost or replaced)
	closed bool // the connection is closed

	// Status from the worker's last Results (Clop's status table).
	queued, running int32

	// out lists the instances of the current batch outstanding on this
	// worker in the master's books (sent, not yet answered or cancelled),
	// kept only for the adaptive depth's measurements (measure).
	out []outInstance

	// sent has bit t set for every task t of batch sentBatch that was
	// sent to this worker: only those results are believed.
	sent      []uint64
	sentBatch int32
	warned    bool // an unsolicited result was logged

	// Frames being built during one turn of the loop.
	dirty      bool
	tasks      []Task
	cancels    []int32
	cancelsGen int32
	// Reused message values: Send encodes before it returns.
	tasksMsg  Tasks
	cancelMsg Cancel
}

// outInstance is one instance outstanding on a worker: when the master
// sent it, and whether the worker had an idle slot then (fewer instances
// outstanding than slots), so that the instance ran on arrival and its
// round trip is send → result less its execution.
type outInstance struct {
	task int32
	at   time.Duration
	idle bool
}

// takeOut removes task t from w's outstanding instances and returns it.
func (w *mworker) takeOut(t int32) (outInstance, bool) {
	for i, o := range w.out {
		if o.task == t {
			last := len(w.out) - 1
			w.out[i] = w.out[last]
			w.out = w.out[:last]
			return o, true
		}
	}
	return outInstance{}, false
}

// markSent records that task t of batch b (of n tasks) went to w.
func (w *mworker) markSent(b int32, n int, t int32) {
	if w.sentBatch != b || len(w.sent) == 0 {
		words := (n + 63) / 64
		if cap(w.sent) < words {
			w.sent = make([]uint64, words)
		}
		w.sent = w.sent[:words]
		clear(w.sent)
		w.sentBatch = b
	}
	w.sent[t/64] |= 1 << (t % 64)
}

// wasSent reports whether task t of batch b was ever sent to w.
func (w *mworker) wasSent(b int32, t int32) bool {
	return w.sentBatch == b && t >= 0 && int(t/64) < len(w.sent) && w.sent[t/64]&(1<<(t%64)) != 0
}

// batch is the generation being evaluated (or the last one).
type batch struct {
	id      int32 // Tasks.Gen on the wire
	gen     int   // the ES generation
	xs      [][]float64
	f       []float64
	done    []bool // an accepted result is in f
	replied bool
	reply   chan evalReply
}

// loopState is everything the event loop owns.
type loopState struct {
	byID    map[sched.WorkerID]*mworker
	byName  map[string]*mworker // workers not left, by Hello name
	nLive   int
	acts    []sched.Action
	dirty   []*mworker
	cur     *batch
	lastID  int32
	batches int
	counts  MasterStats // Workers and ConnStats are filled in by stats()
	gone    ConnStats   // traffic of closed connections
}

func (s *loopState) init() {
	s.byID = make(map[sched.WorkerID]*mworker)
	s.byName = make(map[string]*mworker)
	s.lastID = -1
}

func (m *Master) now() time.Duration { return time.Since(m.start) }

// loop is the master's single event loop.
func (m *Master) loop() {
	defer m.wg.Done()
	defer close(m.done)
	for {
		select {
		case <-m.loopCtx.Done():
			m.shutdownWorkers()
			return
		case lm := <-m.in:
			m.handle(lm)
		}
		// Take what else is waiting before writing, so that several
		// results from one worker become one frame back.
	more:
		for range 256 {
			select {
			case lm := <-m.in:
				m.handle(lm)
			default:
				break more
			}
		}
		m.flush()
	}
}

func (m *Master) handle(lm loopMsg) {
	switch lm.kind {
	case msgJoined:
		m.joined(lm.w)
	case msgFrame:
		switch v := lm.msg.(type) {
		case *Results:
			m.results(lm.w, v)
		case *Drain:
			if !lm.w.left {
				m.log.Info("worker draining; its held tasks go back to the queue",
					"worker", lm.w.name, "id", lm.w.id, "returned", len(v.Returned))
				m.workerLeft(lm.w)
			}
		default:
			m.log.Warn("unexpected message from worker; closing its connection",
				"worker", lm.w.name, "type", lm.msg.Type())
			lm.w.conn.SendAndClose(&Reject{Reason: fmt.Sprintf("unexpected %v from a worker", lm.msg.Type())})
		}
	case msgClosed:
		w := lm.w
		w.closed = true
		st := w.conn.Stats()
		m.gone.FramesIn += st.FramesIn
		m.gone.FramesOut += st.FramesOut
		m.gone.BytesIn += st.BytesIn
		m.gone.BytesOut += st.BytesOut
		m.gone.Writes += st.Writes
		delete(m.byID, w.id)
		if !w.left {
			m.log.Warn("worker lost; its tasks go back to the queue", "worker", w.name, "id", w.id, "cause", w.conn.Err())
			m.workerLeft(w)
		} else {
			m.log.Info("worker disconnected", "worker", w.name, "id", w.id)
		}
	case msgMemberGone:
		if w := m.byName[lm.name]; w != nil && !w.left {
			what := "gossip declared worker dead"
			if lm.left {
				what = "worker left the cluster"
			}
			m.log.Warn(what+"; dropping its connection, its tasks go back to the queue", "worker", w.name, "id", w.id)
			m.workerLeft(w)
			w.conn.Close()
		}
	case msgEvaluate:
		m.startBatch(lm.eval)
	case msgCall:
		lm.call()
	}
}

func (m *Master) joined(w *mworker) {
	if old := m.byName[w.name]; old != nil && !old.left {
		// One node, one data connection: a worker that reconnects under
		// the same name has lost the old one, whether or not we noticed.
		m.log.Warn("worker reconnected; dropping its old connection", "worker", w.name, "old_id", old.id, "id", w.id)
		m.workerLeft(old)
		old.conn.Close()
	}
	m.byID[w.id] = w
	m.byName[w.name] = w
	m.nLive++
	m.counts.Joined++
	m.setLive(m.nLive, true)
	m.log.Info("worker joined", "worker", w.name, "id", w.id, "slots", w.slots, "addr", w.conn.RemoteAddr().String())
	m.step(sched.Event{Kind: sched.WorkerJoined, Worker: w.id, Slots: w.slots}, 0)
}

// workerLeft steps WorkerLeft once for w: the policy puts back in the
// queue every task that no other worker holds.
func (m *Master) workerLeft(w *mworker) {
	if w.left {
		return
	}
	w.left = true
	w.tasks = w.tasks[:0] // never sent: the policy has taken them back
	if m.byName[w.name] == w {
		delete(m.byName, w.name)
	}
	m.nLive--
	m.setLive(m.nLive, false)
	m.step(sched.Event{Kind: sched.WorkerLeft, Worker: w.id}, 0)
}

func (m *Master) startBatch(req *evalReq) {
	// What this turn built for the old batch goes out under its id.
	m.flush()
	prev := m.cur
	if prev != nil && !prev.replied {
		prev.replied = true
		prev.reply <- evalReply{err: fmt.Errorf("grid: generation %d superseded by generation %d", prev.gen, req.gen)}
	}
	// Batch ids on the wire only grow, so a result is of the current batch
	// or stale, never ambiguous; they equal the generation unless one was
	// asked twice.
	id := m.lastID + 1
	if req.gen > int(id) && req.gen <= math.MaxInt32 {
		id = int32(req.gen)
	}
	m.lastID = id
	m.cur = &batch{id: id, gen: req.gen, xs: req.xs, f: make([]float64, len(req.xs)), done: make([]bool, len(req.xs)), reply: req.reply}
	m.batches++
	m.progress.Store(0)
	for _, w := range m.byID {
		// Whatever is still out belongs to the old batch: its results
		// will be stale, and the worker counts as free in the books.
		w.out = w.out[:0]
	}
	prevID := int32(-1)
	if prev != nil {
		prevID = prev.id
	}
	m.stepWith(sched.Event{Kind: sched.BatchStarted, N: len(req.xs)}, 0, prevID)
}

// results handles one Results frame from w.
func (m *Master) results(w *mworker, rs *Results) {
	w.queued, w.running = rs.Queued, rs.Running
	b := m.cur
	for i := range rs.Items {
		m.result(w, b, &rs.Items[i])
	}
	if b != nil && !b.replied && m.policy.Done() {
		b.replied = true
		b.reply <- evalReply{f: b.f}
		m.log.Debug("generation evaluated", "gen", b.gen, "tasks", len(b.f))
	}
}

// result handles one result from w while batch b is current. Only a result
// for a task of b that was sent to w can decide (or fail) a task; the rest
// feed the accounting at most.
func (m *Master) result(w *mworker, b *batch, r *Result) {
	m.counts.Results++
	now := m.now()
	exec := time.Duration(r.Exec)
	if exec < 0 || exec > now {
		exec = 0 // not to be trusted; only the accounting uses it
	}
	ran := sched.Execution{Worker: w.id, Task: sched.TaskID(r.ID), Start: now - exec, End: now, Cancelled: true}
	switch {
	case b == nil || r.Gen != b.id:
		// An earlier batch: its compute was wasted, its value unused,
		// but how long it ran still says how fast the worker is.
		m.counts.Stale++
		if m.adaptive && !r.Cancelled && r.Err == "" && exec > 0 && !w.left {
			m.step(sched.Event{Kind: sched.Measured, Worker: w.id, Exec: exec}, 0)
		}
	case !w.wasSent(b.id, r.ID):
		// Never given to this worker: believing it would let a broken or
		// hostile worker decide (or fail) a batch with made-up values.
		m.counts.Unsolicited++
		if !w.warned {
			w.warned = true
			m.log.Warn("worker sent a result for a task it was never given; discarded",
				"worker", w.name, "id", w.id, "gen", b.gen, "task", r.ID)
		}
		return
	case r.Cancelled:
		// Its instance left the books when the policy cancelled it.
	case r.Err != "":
		w.takeOut(r.ID)
		m.counts.Failed++
		if r.ID >= 0 && int(r.ID) < len(b.done) && !b.done[r.ID] && !b.replied {
			b.replied = true
			b.reply <- evalReply{err: fmt.Errorf("grid: generation %d, task %d: evaluation failed on worker %s: %s", b.gen, r.ID, w.name, r.Err)}
		}
		return
	default:
		// NaN and ±Inf are results like any other: the ES ranks them.
		if exec > 0 {
			ran.Cancelled = false
			m.ledger.Ran(ran)
		}
		ev := sched.Event{Kind: sched.ResultArrived, Worker: w.id, Task: sched.TaskID(r.ID)}
		if m.adaptive {
			m.measure(&ev, w, r.ID, now, exec)
		}
		if !m.step(ev, r.F) {
			m.counts.Duplicates++
		}
		return
	}
	if exec > 0 {
		m.ledger.Ran(ran)
	}
}

// measure adds to ev, the result of task t from w handled at now, what
// the adaptive depth needs (sched.Config.Adaptive), as the simulator
// measures it: Exec as the worker reported it (the time its slot was
// busy, an emulated slowdown included), and RTT = now − sent − Exec, but
// only for an instance sent while w had an idle slot in the master's
// books: one sent to be held waited in the remote queue for a time the
// master cannot know.
func (m *Master) measure(ev *sched.Event, w *mworker, t int32, now, exec time.Duration) {
	ev.Exec = exec
	if o, ok := w.takeOut(t); ok && o.idle && exec > 0 {
		ev.RTT = max(now-o.at-exec, 0)
	}
}

// step applies ev to the policy and the ledger and carries out the
// actions; f is the value of a ResultArrived. It reports whether a result
// was accepted.
func (m *Master) step(ev sched.Event, f float64) bool {
	cancelGen := int32(-1)
	if m.cur != nil {
		cancelGen = m.cur.id
	}
	return m.stepWith(ev, f, cancelGen)
}

// stepWith is step with the batch id that Cancel actions refer to (the
// previous batch's, for BatchStarted).
func (m *Master) stepWith(ev sched.Event, f float64, cancelGen int32) bool {
	m.acts = m.policy.Step(ev, m.acts[:0])
	at := m.now()
	m.ledger.Step(at, ev, m.acts)
	accepted := false
	for _, a := range m.acts {
		switch a.Kind {
		case sched.Send:
			w := m.byID[a.Worker]
			if w == nil || w.left || m.cur == nil || int(a.Task) >= len(m.cur.xs) {
				m.log.Error("policy sent a task to an unknown worker", "worker", a.Worker, "task", a.Task)
				continue
			}
			w.tasks = append(w.tasks, Task{ID: int32(a.Task), X: m.cur.xs[a.Task]})
			w.markSent(m.cur.id, len(m.cur.xs), int32(a.Task))
			if m.adaptive {
				w.out = append(w.out, outInstance{task: int32(a.Task), at: at, idle: len(w.out) < w.slots})
			}
			m.counts.TasksSent++
			m.markDirty(w)
		case sched.Cancel:
			w := m.byID[a.Worker]
			if w == nil {
				continue
			}
			if ev.Kind != sched.BatchStarted {
				// An old batch's instances left the books when it ended.
				w.takeOut(int32(a.Task))
				if dropTask(&w.tasks, int32(a.Task)) {
					continue // not sent yet: never send it
				}
			}
			if len(w.cancels) > 0 && w.cancelsGen != cancelGen {
				m.sendCancels(w)
			}
			w.cancelsGen = cancelGen
			w.cancels = append(w.cancels, int32(a.Task))
			m.markDirty(w)
		case sched.Accept:
			if b := m.cur; b != nil && int(a.Task) < len(b.f) {
				b.f[a.Task] = f
				b.done[a.Task] = true
				accepted = true
				m.progress.Add(1)
			}
		}
	}
	return accepted
}

// dropTask removes task id from a frame not yet sent.
func dropTask(tasks *[]Task, id int32) bool {
	ts := *tasks
	for i := range ts {
		if ts[i].ID == id {
			copy(ts[i:], ts[i+1:])
			ts[len(ts)-1] = Task{}
			*tasks = ts[:len(ts)-1]
			return true
		}
	}
	return false
}

func (m *Master) markDirty(w *mworker) {
	if !w.dirty {
		w.dirty = true
		m.dirty = append(m.dirty, w)
	}
}

// flush turns this turn's actions into frames: per worker, one Cancel
// frame, then the tasks (one frame, or several if they would not fit).
func (m *Master) flush() {
	for _, w := range m.dirty {
		w.dirty = false
		if w.closed {
			w.tasks, w.cancels = w.tasks[:0], w.cancels[:0]
			continue
		}
		if len(w.cancels) > 0 {
			m.sendCancels(w)
		}
		if len(w.tasks) > 0 {
			m.sendTasks(w)
		}
	}
	clear(m.dirty)
	m.dirty = m.dirty[:0]
}

func (m *Master) sendCancels(w *mworker) {
	w.cancelMsg = Cancel{Gen: w.cancelsGen, IDs: w.cancels}
	if err := w.conn.Send(&w.cancelMsg); err != nil {
		m.log.Debug("cancel not sent", "worker", w.name, "err", err)
	}
	w.cancels = w.cancels[:0]
}

func (m *Master) sendTasks(w *mworker) {
	// Keep each frame well under the cap: a task is at most 9 bytes per
	// coordinate plus a few of framing.
	per := 16
	if len(w.tasks) > 0 {
		per += 9 * len(w.tasks[0].X)
	}
	chunk := max(1, min(maxItemsPerFrame, m.cfg.MaxFrame/2/per))
	for lo := 0; lo < len(w.tasks); lo += chunk {
		hi := min(lo+chunk, len(w.tasks))
		w.tasksMsg = Tasks{Gen: m.cur.id, Items: w.tasks[lo:hi]}
		if err := w.conn.Send(&w.tasksMsg); err != nil {
			m.log.Debug("tasks not sent", "worker", w.name, "err", err)
			break
		}
	}
	clear(w.tasks) // drop references to the batch's vectors
	w.tasks = w.tasks[:0]
	w.tasksMsg = Tasks{}
}

// stats is Stats on the loop goroutine.
func (m *Master) stats() MasterStats {
	st := m.counts
	st.Workers = m.nLive
	st.Batches = m.batches
	st.ConnStats = m.gone
	for _, w := range m.byID {
		if !w.closed {
			s := w.conn.Stats()
			st.FramesIn += s.FramesIn
			st.FramesOut += s.FramesOut
			st.BytesIn += s.BytesIn
			st.BytesOut += s.BytesOut
			st.Writes += s.Writes
		}
	}
	return st
}

// shutdownWorkers runs as the loop exits: every worker is told the run is
// over, given a moment to read it, and its connection closed.
func (m *Master) shutdownWorkers() {
	m.ledger.Finish(m.now())
	if b := m.cur; b != nil && !b.replied {
		b.replied = true
		b.reply <- evalReply{err: fmt.Errorf("grid: generation %d: %w", b.gen, ErrMasterClosed)}
	}
	var conns []*Conn
	for _, w := range m.byID {
		if !w.closed {
			w.conn.SendAndClose(&Shutdown{Reason: "run over"})
			conns = append(conns, w.conn)
		}
	}
	t := time.NewTimer(m.cfg.ShutdownGrace)
	defer t.Stop()
	for _, c := range conns {
		select {
		case <-c.Done():
		case <-t.C:
			return
		}
	}
}
