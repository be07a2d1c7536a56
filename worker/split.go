package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/esgrid/esgrid/grid"
)

// A worker in masters that split (docs/papers.md §2, Fig. 4): told Promote,
// it gives back its held tasks, finishes its running ones, and runs the
// master (grid.RunChild) over the tasks and workers it was handed; when
// that is done, it connects to its parent as a worker again. Told Move,
// it gives back its held tasks, finishes its running ones, and connects
// to the master named (a child, or the parent it returns to). Both go
// through the drain a leaving worker does, so the master that loses the
// worker gets its held tasks back at once.

// promotedError ends a session whose worker became a child master.
type promotedError struct {
	done   chan struct{} // closed when the child master has returned
	cancel context.CancelFunc
	err    error // RunChild's, once done is closed
}

func (e *promotedError) Error() string { return "worker: promoted to a child master" }

// movedError ends a session whose master moved the worker elsewhere.
type movedError struct{ addr string }

func (e *movedError) Error() string { return "worker: moved to the master at " + e.addr }

// redirect is where the next connection goes, when a promotion or a move
// says so; back, if set, is where to go after that (the master that
// moved the worker): a moved worker whose new master is gone, or ends,
// goes back the way it came before it looks for a master afresh. home is
// the master found the usual way, before any move: when both are gone
// (child masters that ended with the run), it is tried last, so that a
// worker still on its way hears from the root that the run is over
// rather than wait for a master.
type redirect struct {
	addr string
	set  bool
	back string
	home string
}

// nextAddr is the address to dial: the redirect's, once, or the usual.
func (a *Agent) nextAddr(ctx context.Context, ms *grid.Membership, attempt int, next *redirect) (string, error) {
	if next.set {
		addr := next.addr
		switch {
		case next.back != "":
			*next = redirect{addr: next.back, set: true, home: next.home}
		case next.home != "" && next.home != addr:
			*next = redirect{addr: next.home, set: true}
		default:
			*next = redirect{}
		}
		return addr, nil
	}
	addr, err := a.masterAddr(ctx, ms, attempt)
	if err == nil {
		next.home = addr
	}
	return addr, err
}

// redirected handles a session that ended in a promotion (it waits for
// the child master, then goes back to the parent at dialled) or a move;
// it reports false for any other end. A child master whose parent ended
// the run (or was interrupted) ends the session as the master's Shutdown
// would have: *err becomes ErrShutdown (or errRestart), and it reports
// false.
func (a *Agent) redirected(ctx context.Context, err *error, dialled string, next *redirect) bool {
	var pe *promotedError
	var me *movedError
	switch {
	case errors.As(*err, &pe):
		select {
		case <-pe.done:
		case <-ctx.Done():
			pe.cancel()
			<-pe.done
		case <-a.drain:
			pe.cancel()
			<-pe.done
		}
		pe.cancel()
		switch {
		case errors.Is(pe.err, grid.ErrRunOver):
			a.log.Info("child master done: the run is over")
			*err = ErrShutdown
			return false
		case errors.Is(pe.err, grid.ErrParentInterrupted):
			*err = errRestart
			return false
		}
		if pe.err != nil && !errors.Is(pe.err, context.Canceled) {
			a.log.Warn("child master stopped", "err", pe.err)
		} else {
			a.log.Info("child master done; back to work as a worker", "parent", dialled)
		}
		*next = redirect{addr: dialled, set: true, home: next.home}
		return true
	case errors.As(*err, &me):
		if me.addr != "" {
			a.log.Info("moving to another master", "addr", me.addr)
		}
		*next = redirect{addr: me.addr, set: me.addr != "", back: dialled, home: next.home}
		if me.addr == "" {
			*next = redirect{home: next.home}
		}
		return true
	}
	return false
}

// onPromote starts the child master and drains this session.
func (s *session) onPromote(pr *grid.Promote) {
	s.mu.Lock()
	if s.next != nil || s.over || s.draining || s.welcome == nil {
		s.mu.Unlock()
		return
	}
	if err := s.admitted.checkPromote(pr); err != nil {
		s.mu.Unlock()
		// The parent takes the tasks back when no child master greets it.
		s.a.odd.Warn("refusing to be promoted to a child master; working on as a worker", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(s.ctx))
	pe := &promotedError{done: make(chan struct{}), cancel: cancel}
	s.next = pe
	problem := s.welcome.Problem
	s.mu.Unlock()
	parent := s.conn.RemoteAddr().String()
	host := "127.0.0.1"
	if ta, ok := s.conn.LocalAddr().(*net.TCPAddr); ok {
		host = ta.IP.String()
	}
	s.log.Info("promoted to a child master", "tasks", len(pr.Tasks), "gen", pr.ESGen, "parent", parent)
	cfg := grid.ChildConfig{
		Promote: pr, Parent: parent, Listen: net.JoinHostPort(host, strconv.Itoa(s.a.cfg.ChildPort)),
		Key: s.a.cfg.Key, Name: s.a.cfg.Name, Problem: problem, MaxFrame: s.conn.Config().MaxFrame,
		Network: s.a.cfg.Network,
	}
	mc := grid.MasterConfig{Logger: s.a.cfg.Logger.With("child", s.a.cfg.Name)}
	go func() {
		defer close(pe.done)
		pe.err = grid.RunChild(ctx, cfg, mc)
	}()
	s.startDrain()
}

// onMove drains this session toward another master.
func (s *session) onMove(mv *grid.Move) {
	s.mu.Lock()
	if s.next != nil || s.over {
		s.mu.Unlock()
		return
	}
	s.next = &movedError{addr: mv.Addr}
	s.mu.Unlock()
	s.startDrain()
}

// redirectHops counts the redirects in a row that led to no work, so
// that a master that keeps sending the worker on (to itself, to a master
// that sends it on again, to a child master that cannot start) costs a
// failed attempt's back-off each time rather than a tight loop. A real
// split stays prompt: a worker that served is moved at once, and one
// hop without work is allowed (a worker that reaches a child master
// already done is sent back at once).
type redirectHops struct{ idle int }

// failed says why the redirect that ended a session (err, from
// redirected; dialled the master's address; served whether the session
// sent a task's value) counts as a failed attempt, or "".
func (h *redirectHops) failed(err error, dialled string, served bool) string {
	var pe *promotedError
	var me *movedError
	switch {
	case errors.As(err, &pe) && pe.err != nil && !errors.Is(pe.err, context.Canceled):
		return "the child master failed: " + pe.err.Error()
	case errors.As(err, &pe):
		*h = redirectHops{}
		return ""
	case errors.As(err, &me) && me.addr == dialled:
		return "the master moved this worker to itself"
	case served:
		*h = redirectHops{}
		return ""
	}
	h.idle++
	if h.idle > 1 {
		return fmt.Sprintf("moved on %d times in a row without a task served", h.idle)
	}
	return ""
}
