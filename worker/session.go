package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
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

	ctx    context.Context // cancelled when the session ends
	cancel context.CancelFunc
	tasks  sync.WaitGroup // running evaluations

	mu       sync.Mutex
	held     *remoteQueue
	running  map[taskKey]*runningTask
	ready    []grid.Result // finished, not yet sent
	gen      int32         // newest generation seen
	draining bool
	closing  bool // SendAndClose issued
	over     bool // the master sent Shutdown
	inbox    *delayLine
}

// runningTask is a task on a slot.
type runningTask struct {
	gen       int32
	task      grid.Task
	cancel    context.CancelFunc
	cancelled bool // by the master (or a newer generation)
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
		gen:     -1 << 31,
	}
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
	s.tasks.Wait()
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
	over, draining := s.over, s.draining
	s.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case over:
		return ErrShutdown
	case draining:
		s.log.Info("drained; leaving")
		return nil
	}
	return fmt.Errorf("worker: connection to the master: %w", s.conn.Err())
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
		s.log.Info("the master ended the run", "reason", m.Reason)
		s.mu.Lock()
		s.over = true
		s.mu.Unlock()
		s.cancel()
		s.conn.Close()
	default:
		s.log.Warn("ignoring an unexpected message from the master", "type", m.Type())
	}
}

func (s *session) addTasks(m *grid.Tasks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Gen < s.gen {
		return // a late send of a finished generation: its results would be discarded
	}
	if m.Gen > s.gen {
		// Generations end in a barrier: once the master sends generation
		// g, every earlier one is decided, and what is left of it here
		// (held or running replicas) is wasted work.
		s.held.RemoveIf(func(h heldTask) bool { return h.gen < m.Gen })
		for _, rt := range s.running {
			if rt.gen < m.Gen {
				rt.cancelled = true
				rt.cancel()
			}
		}
		s.gen = m.Gen
	}
	if s.draining {
		// Sent before the master read our Drain: give them straight back.
		ids := make([]int32, len(m.Items))
		for i, t := range m.Items {
			ids[i] = t.ID
		}
		s.conn.Send(&grid.Drain{Gen: m.Gen, Returned: ids})
		return
	}
	for _, t := range m.Items {
		if _, busy := s.running[taskKey{m.Gen, t.ID}]; !busy {
			s.held.Push(heldTask{gen: m.Gen, task: t})
		}
	}
	s.startHeld()
}

func (s *session) cancelTasks(m *grid.Cancel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range m.IDs {
		k := taskKey{m.Gen, id}
		if s.held.Remove(k) {
			continue // a held task is simply dropped (R3Q's cheap cancel)
		}
		if rt, ok := s.running[k]; ok && !rt.cancelled {
			rt.cancelled = true
			rt.cancel()
		}
	}
}

// startHeld fills free slots from the head of the remote queue. Called
// with s.mu held.
func (s *session) startHeld() {
	for len(s.running) < s.slots && !s.draining && s.ctx.Err() == nil {
		h, ok := s.held.Pop()
		if !ok {
			return
		}
		ctx, cancel := context.WithCancel(s.ctx)
		rt := &runningTask{gen: h.gen, task: h.task, cancel: cancel}
		s.running[h.key()] = rt
		s.tasks.Add(1)
		go s.execute(ctx, rt)
	}
}

// execute runs one task on a slot and queues its result.
func (s *session) execute(ctx context.Context, rt *runningTask) {
	defer s.tasks.Done()
	defer rt.cancel()
	start := time.Now()
	f, err := evaluate(ctx, s.problem, rt.task.X)
	if slow := s.a.cfg.Slowdown; slow > 1 && ctx.Err() == nil {
		// The emulated slower machine: the compute took (F−1)·d longer.
		extra := time.Duration(float64(time.Since(start)) * (slow - 1))
		t := time.NewTimer(extra)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	r := grid.Result{Gen: rt.gen, ID: rt.task.ID, F: f, Exec: int64(time.Since(start))}
	if err != nil {
		r.Err = err.Error()
	}
	s.mu.Lock()
	delete(s.running, taskKey{rt.gen, rt.task.ID})
	if rt.cancelled || ctx.Err() != nil {
		r.Cancelled, r.Err, r.F = true, "", 0
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
		s.conn.Send(&grid.Results{Items: s.ready, Queued: int32(s.held.Len()), Running: int32(len(s.running))})
		clear(s.ready) // Send has encoded them: the slice can be reused
		s.ready = s.ready[:0]
	}
	s.maybeFinishDrain()
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
// run or send. Called with s.mu held.
func (s *session) maybeFinishDrain() {
	if s.draining && !s.closing && len(s.running) == 0 && len(s.ready) == 0 {
		s.closing = true
		s.conn.SendAndClose(nil)
	}
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
