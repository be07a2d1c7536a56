package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/cputime"
	"github.com/esgrid/esgrid/problems"
)

// session is the agent's work on one connection. Its tasks live and die
// with the connection: a lost master gets nothing back.
type session struct {
	a       *Agent
	log     *slog.Logger
	conn    *grid.Conn
	problem problems.Problem
	slots   int
	byCPU   bool // Slowdown is timed by the evaluation's CPU time (Config.Slowdown)

	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc
	tasks  sync.WaitGroup // running evaluations (and the delay line)
	evals  atomic.Int32   // evaluations not returned yet, abandoned ones included

	mu      sync.Mutex
	held    *remoteQueue
	running map[taskKey]*runningTask
	ready   []grid.Result // finished, not yet sent
	gen     int32         // newest generation seen
	// done holds the tasks of generation gen whose result left: a cancel
	// of one is acknowledged as late, once; a cancel of a task this
	// session neither holds, runs nor finished gets no answer, so that a
	// Cancel frame's acknowledgements never outnumber the work it names.
	done     map[int32]struct{}
	draining bool
	closing  bool // SendAndClose issued
	over     bool // the master sent Shutdown
	restart  bool // ... saying it will be back
	sentAt   time.Time
	inbox    *delayLine
	next     error         // a promotion or a move: where the agent goes next (split.go)
	welcome  *grid.Welcome // the master's, for a promotion
	admitted admission     // what the agent accepted of it (limits.go); zero: no checks
	served   bool          // a task's value was sent: the session did work (split.go's redirects)
}

// runningTask is a task on a slot.
type runningTask struct {
	gen       int32
	task      grid.Task
	start     time.Time
	cancel    context.CancelFunc
	cancelled bool        // by the master (or a newer generation)
	abandoned bool        // it ignored its cancel for AbandonGrace: its slot is free
	abandon   *time.Timer // set once cancelled
}

func newSession(ctx context.Context, a *Agent, conn *grid.Conn, p problems.Problem) *session {
	s := &session{
		a:       a,
		log:     a.log,
		conn:    conn,
		problem: p,
		slots:   a.cfg.Slots,
		held:    newRemoteQueue(),
		running: make(map[taskKey]*runningTask),
		done:    make(map[int32]struct{}),
		gen:     -1 << 31,
	}
	// A problem that holds resources (a plugin) computes elsewhere: its
	// CPU time is not this thread's.
	_, elsewhere := p.(io.Closer)
	s.byCPU = !a.cfg.SlowdownWall && !elsewhere
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// run serves the connection until it ends; see Agent.serve.
func (s *session) run(ctx context.Context, drain <-chan struct{}) error {
	handler := s.handle
	if d := s.a.cfg.Delay; d > 0 {
		s.inbox = newDelayLine(d, s.handle)
		handler = s.inbox.push
		s.tasks.Add(1)
		go func() {
			defer s.tasks.Done()
			s.inbox.run(s.ctx)
		}()
	}
	s.conn.Start(handler)
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		s.reportStatus()
	}()
	defer func() { <-reports }()
	select {
	case <-s.conn.Done():
	case <-ctx.Done():
	case <-drain:
		s.startDrain()
		select {
		case <-s.conn.Done():
		case <-ctx.Done():
		}
	}
	s.cancel() // stops running tasks, and startHeld starts no more
	s.conn.Close()
	s.mu.Lock()
	s.held.RemoveIf(func(heldTask) bool { return true }) // a lost master gets nothing back
	s.mu.Unlock()
	s.waitTasks()
	if s.inbox != nil {
		// With an emulated delay the master's last word (Shutdown) may
		// still be on its way when the connection closes behind it.
		for _, m := range s.inbox.undelivered() {
			if sd, ok := m.(*grid.Shutdown); ok {
				s.handle(sd)
			}
		}
	}
	s.mu.Lock()
	over, restart, draining, next := s.over, s.restart, s.draining, s.next
	s.mu.Unlock()
	switch {
	case next != nil && !over:
		return next // split.go: the agent waits for its child master, or moves
	case ctx.Err() != nil:
		return ctx.Err()
	case over && restart:
		return errRestart
	case over:
		return ErrShutdown
	case draining:
		s.log.Info("drained; leaving")
		return nil
	}
	return fmt.Errorf("worker: connection to the master: %w", s.conn.Err())
}

// waitTasks waits for the session's evaluations to return, but no longer
// than AbandonGrace: an evaluation that ignores its cancel is abandoned
// (its goroutine returns when it returns), so that the agent can go on.
func (s *session) waitTasks() {
	done := make(chan struct{})
	go func() {
		s.tasks.Wait()
		close(done)
	}()
	t := time.NewTimer(s.a.cfg.AbandonGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		if n := s.evals.Load(); n > 0 {
			s.log.Warn("abandoning evaluations that ignored their cancel; their goroutines run on until they return",
				"evaluations", n, "grace", s.a.cfg.AbandonGrace)
		}
	}
}

// reportStatus sends the master a status report (Results without items:
// the slots' state) whenever no results went for a heartbeat interval.
// It comes from the session, not the connection's writer, so the master
// knows the slots are served, not just that the socket is open.
func (s *session) reportStatus() {
	every := s.conn.Config().Heartbeat
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.conn.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		if time.Since(s.sentAt) >= every && !s.closing {
			s.sentAt = time.Now()
			s.conn.Send(&grid.Results{Queued: int32(s.held.Len()), Running: int32(len(s.running))})
		}
		s.mu.Unlock()
	}
}

// status is the remote queue's length and the number of running tasks.
func (s *session) status() (queued, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held.Len(), len(s.running)
}

// handle acts on one message from the master. It only changes state,
// starts goroutines and enqueues sends, so it never blocks the reader.
func (s *session) handle(m grid.Message) {
	switch m := m.(type) {
	case *grid.Tasks:
		s.addTasks(m)
	case *grid.Cancel:
		s.cancelTasks(m)
	case *grid.Shutdown:
		s.log.Info("the master ended the run", "reason", m.Reason, "restart", m.Restart)
		s.mu.Lock()
		s.over, s.restart = true, m.Restart
		s.mu.Unlock()
		s.cancel()
		s.conn.Close()
	case *grid.Promote:
		s.onPromote(m) // split.go
	case *grid.Move:
		s.onMove(m) // split.go
	default:
		s.a.odd.Warn("ignoring an unexpected message from the master", "type", m.Type())
	}
}

func (s *session) addTasks(m *grid.Tasks) {
	if s.takeTasks(m) {
		s.flush()
	}
}

// takeTasks is addTasks with s.mu held; it reports whether results are
// ready to send (a cancelled instance abandoned for a new one).
func (s *session) takeTasks(m *grid.Tasks) (ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Gen < s.gen {
		return false // a late send of a finished generation: its results would be discarded
	}
	if m.Gen > s.gen {
		// Generations end in a barrier: once the master sends generation
		// g, every earlier one is decided, and what is left of it here
		// (held or running replicas) is wasted work.
		s.held.RemoveIf(func(h heldTask) bool { return h.gen < m.Gen })
		for _, rt := range s.running {
			if rt.gen < m.Gen {
				s.cancelRunning(rt)
			}
		}
		s.gen = m.Gen
		clear(s.done)
	}
	if s.draining {
		// Sent before the master read our Drain: give them straight back.
		ids := make([]int32, len(m.Items))
		for i, t := range m.Items {
			ids[i] = t.ID
		}
		s.conn.Send(&grid.Drain{Gen: m.Gen, Returned: ids})
		return false
	}
	for _, t := range m.Items {
		k := taskKey{m.Gen, t.ID}
		if s.held.Has(k) {
			continue
		}
		if rt, busy := s.running[k]; busy {
			if !rt.cancelled {
				continue
			}
			// Sent again after its cancel (the master gave up on an
			// overdue instance and has no other worker for it): the
			// cancelled instance, still stopping or deaf to its cancel,
			// is abandoned now rather than after AbandonGrace, so the
			// new one is not taken for it.
			s.abandonLocked(rt)
			ready = true
		}
		if err := s.checkTask(&t); err != nil {
			// Refused, as an evaluation that failed: the master logs
			// why and gives the task to another worker.
			s.ready = append(s.ready, grid.Result{Gen: m.Gen, ID: t.ID, Err: err.Error(), Token: t.Token})
			ready = true
			continue
		}
		s.held.Push(heldTask{gen: m.Gen, task: t})
	}
	s.startHeld()
	return ready
}

// checkTask says why a task cannot be held (limits.go), if it cannot.
// Called with s.mu held.
func (s *session) checkTask(t *grid.Task) error {
	if s.admitted.dim == 0 {
		return nil // a session made without the agent's admission (tests)
	}
	return s.admitted.checkTask(t, s.held.Bytes())
}

// cancelTasks carries out a Cancel and acknowledges each of its tasks to
// the master, with the results: dropped while held, or finished already
// (a running one is acknowledged by its Cancelled result, with the
// compute it used, once it has stopped). A task this session never had,
// or whose finish it acknowledged already, is not answered (s.done).
func (s *session) cancelTasks(m *grid.Cancel) {
	s.mu.Lock()
	acked := false
	for _, id := range m.IDs {
		k := taskKey{m.Gen, id}
		ack := grid.Result{Gen: m.Gen, ID: id, Cancelled: true, Ack: grid.AckLate}
		if h, ok := s.held.Take(k); ok {
			ack.Ack = grid.AckDropped // a held task is simply dropped (R3Q's cheap cancel)
			ack.Token = h.task.Token
		} else if rt, ok := s.running[k]; ok {
			s.cancelRunning(rt)
			continue
		} else if _, ok := s.done[id]; ok && m.Gen == s.gen {
			delete(s.done, id)
		} else {
			continue // not this session's
		}
		s.ready = append(s.ready, ack)
		acked = true
	}
	s.mu.Unlock()
	if acked {
		s.flush()
	}
}

// cancelRunning cancels a running task's context and, should the
// evaluation ignore it for AbandonGrace, abandons it. Called with s.mu
// held.
func (s *session) cancelRunning(rt *runningTask) {
	if rt.cancelled {
		return
	}
	rt.cancelled = true
	rt.cancel()
	rt.abandon = time.AfterFunc(s.a.cfg.AbandonGrace, func() { s.abandonTask(rt) })
}

// abandonTask frees the slot of a cancelled evaluation that has not
// returned, and tells the master it was cancelled.
func (s *session) abandonTask(rt *runningTask) {
	s.mu.Lock()
	if s.running[taskKey{rt.gen, rt.task.ID}] != rt {
		s.mu.Unlock()
		return
	}
	s.log.Warn("an evaluation ignored its cancel; abandoning it and freeing its slot (its goroutine runs on until it returns)",
		"gen", rt.gen, "task", rt.task.ID, "grace", s.a.cfg.AbandonGrace)
	s.abandonLocked(rt)
	s.startHeld()
	s.mu.Unlock()
	s.flush()
}

// abandonLocked frees the slot of cancelled task rt and queues its
// acknowledgement; its evaluation's result, should it come, is dropped.
// Called with s.mu held.
func (s *session) abandonLocked(rt *runningTask) {
	delete(s.running, taskKey{rt.gen, rt.task.ID})
	rt.abandoned = true
	if rt.abandon != nil {
		rt.abandon.Stop()
	}
	s.ready = append(s.ready, grid.Result{Gen: rt.gen, ID: rt.task.ID, Cancelled: true, Ack: grid.AckStopped, Exec: int64(time.Since(rt.start)), Token: rt.task.Token})
}

// startHeld fills free slots from the head of the remote queue. Called
// with s.mu held.
func (s *session) startHeld() {
	for len(s.running) < s.slots && !s.draining && s.ctx.Err() == nil && !s.a.cfg.Faults.Silent {
		h, ok := s.held.Pop()
		if !ok {
			return
		}
		ctx, cancel := context.WithCancel(s.ctx)
		rt := &runningTask{gen: h.gen, task: h.task, cancel: cancel, start: time.Now()}
		s.running[h.key()] = rt
		s.tasks.Add(1)
		s.evals.Add(1)
		go s.execute(ctx, rt)
	}
}

// execute runs one task on a slot and queues its result.
func (s *session) execute(ctx context.Context, rt *runningTask) {
	defer s.tasks.Done()
	defer rt.cancel()
	start := time.Now()
	slow := s.a.cfg.Slowdown
	locked := slow > 1 && s.byCPU
	var cpu0, cpu1 time.Duration
	ok0, ok1 := false, false
	if locked {
		// The evaluation's CPU time is its thread's only while it keeps
		// the thread.
		runtime.LockOSThread()
		cpu0, ok0 = cputime.Thread()
	}
	f, err := evaluate(ctx, s.problem, rt.task.X)
	if locked {
		cpu1, ok1 = cputime.Thread()
		runtime.UnlockOSThread()
	}
	byCPU := ok0 && ok1
	s.evals.Add(-1)
	if slow > 1 && ctx.Err() == nil {
		// The emulated slower machine.
		extra := slowdownWait(slow, time.Since(start), cpu1-cpu0, byCPU)
		t := time.NewTimer(extra)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// The task's token goes back with its result: the master believes
	// nothing without it.
	r := grid.Result{Gen: rt.gen, ID: rt.task.ID, F: f, Exec: int64(time.Since(start)), Token: rt.task.Token}
	if err != nil {
		r.Err = err.Error()
	}
	s.mu.Lock()
	// The agent's activity (metrics): the slot was busy from rt.start.
	s.a.busy.Add(int64(time.Since(rt.start)))
	switch {
	case rt.cancelled || ctx.Err() != nil:
		s.a.cancelled.Add(1)
	case err != nil:
		s.a.failed.Add(1)
	default:
		s.a.finished.Add(1)
	}
	if rt.abandon != nil {
		rt.abandon.Stop()
	}
	if rt.abandoned {
		s.mu.Unlock()
		return // its slot was freed and the master told long ago
	}
	delete(s.running, taskKey{rt.gen, rt.task.ID})
	if rt.cancelled || ctx.Err() != nil {
		r.Cancelled, r.Err, r.F = true, "", 0
		if rt.cancelled {
			r.Ack = grid.AckStopped
		}
	}
	if !r.Cancelled && rt.gen == s.gen {
		s.done[rt.task.ID] = struct{}{}
	}
	s.ready = append(s.ready, r)
	s.startHeld()
	s.mu.Unlock()
	// Results that finished meanwhile on other slots go in the same frame.
	s.flush()
}

// flush sends every ready result in one frame, with the status as it is
// now, and closes the connection when a drain has finished.
func (s *session) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) > 0 {
		for _, r := range s.ready {
			s.served = s.served || !r.Cancelled && r.Err == ""
		}
		s.sentAt = time.Now()
		for rest := s.ready; len(rest) > 0; {
			n := resultsChunk(rest, s.masterFrame())
			s.conn.Send(&grid.Results{Items: rest[:n], Queued: int32(s.held.Len()), Running: int32(len(s.running))})
			rest = rest[n:]
		}
		clear(s.ready) // Send has encoded them: the slice can be reused
		s.ready = s.ready[:0]
	}
	s.maybeFinishDrain()
}

// resultsChunk is how many of rs, at least one, go in one Results frame:
// at most grid.MaxItemsPerFrame, which the master's decoder allows, and
// within half of its frame cap, maxFrame, counting a result generously
// (80 bytes and its error text). The acknowledgements of a cancel of a
// whole share of a large generation were one frame, over the master's
// cap or count, and broke the connection.
func resultsChunk(rs []grid.Result, maxFrame int) int {
	n, size := 0, 0
	for n < len(rs) && n < grid.MaxItemsPerFrame {
		size += 80 + len(rs[n].Err)
		if n > 0 && size > maxFrame/2 {
			break
		}
		n++
	}
	return n
}

// masterFrame is the cap of the frames the master reads: its own, from
// its Welcome, which may be below this connection's.
func (s *session) masterFrame() int {
	f := s.conn.Config().MaxFrame
	if s.welcome != nil && s.welcome.MaxFrame > 0 {
		f = min(f, s.welcome.MaxFrame)
	}
	return f
}

// startDrain gives the held tasks back and stops taking new ones.
func (s *session) startDrain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.draining = true
	returned := s.held.RemoveIf(func(heldTask) bool { return true })
	s.log.Info("draining: giving back the held tasks, finishing the running ones",
		"held", len(returned), "running", len(s.running))
	byGen := map[int32][]int32{}
	var gens []int32
	for _, h := range returned {
		if _, seen := byGen[h.gen]; !seen {
			gens = append(gens, h.gen)
		}
		byGen[h.gen] = append(byGen[h.gen], h.task.ID)
	}
	slices.Sort(gens)
	if len(gens) == 0 {
		gens = append(gens, max(s.gen, 0))
	}
	for _, g := range gens {
		s.conn.Send(&grid.Drain{Gen: g, Returned: byGen[g]})
	}
	s.maybeFinishDrain()
}

// maybeFinishDrain closes the connection once a drain has nothing left to
// run or send. A promoted worker says so first (Drain.Last): its master
// tells by it a worker that leaves as planned, its child master maybe
// still on its way, from one that died before its child master said
// hello. Called with s.mu held.
func (s *session) maybeFinishDrain() {
	if s.draining && !s.closing && len(s.running) == 0 && len(s.ready) == 0 {
		s.closing = true
		var last grid.Message
		if _, promoted := s.next.(*promotedError); promoted {
			last = &grid.Drain{Gen: max(s.gen, 0), Last: true}
		}
		s.conn.SendAndClose(last)
	}
}

// slowdownWait is how long a slot slowed down by F waits after an
// evaluation that took d and, when byCPU, used cpu of its thread: until
// F·cpu has passed since it began (the machine F times slower computes
// for F·cpu, whatever else shares this one's cores), or (F−1)·d more
// when the CPU time is not known.
func slowdownWait(f float64, d, cpu time.Duration, byCPU bool) time.Duration {
	if !byCPU {
		return time.Duration(float64(d) * (f - 1))
	}
	return max(time.Duration(float64(cpu)*f)-d, 0)
}

// evaluate calls the problem, turning a panic into an error: a bad
// evaluation fails its task, not the worker.
func evaluate(ctx context.Context, p problems.Problem, x []float64) (f float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("worker: evaluation panicked: %v", r)
		}
	}()
	return p.Eval(ctx, x)
}

// delayLine hands messages on in order, each a fixed delay after it
// arrived, without blocking whoever pushes: the receiving half of an
// emulated WAN link.
type delayLine struct {
	d    time.Duration
	next func(grid.Message)
	mu   sync.Mutex
	q    []delayed
	wake chan struct{}
}

type delayed struct {
	due time.Time
	m   grid.Message
}

func newDelayLine(d time.Duration, next func(grid.Message)) *delayLine {
	return &delayLine{d: d, next: next, wake: make(chan struct{}, 1)}
}

// push queues m to be handed on d from now.
func (l *delayLine) push(m grid.Message) {
	l.mu.Lock()
	l.q = append(l.q, delayed{time.Now().Add(l.d), m})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// undelivered takes the messages not handed on yet. Call it once run has
// returned.
func (l *delayLine) undelivered() []grid.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]grid.Message, len(l.q))
	for i, d := range l.q {
		out[i] = d.m
	}
	l.q = nil
	return out
}

// run hands messages on until ctx is done.
func (l *delayLine) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		l.mu.Lock()
		var head delayed
		ok := len(l.q) > 0
		if ok {
			head = l.q[0]
		}
		l.mu.Unlock()
		if ok {
			if wait := time.Until(head.due); wait > 0 {
				t.Reset(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
			l.mu.Lock()
			l.q[0] = delayed{}
			l.q = l.q[1:]
			l.mu.Unlock()
			l.next(head.m)
			continue
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return
		}
	}
}
