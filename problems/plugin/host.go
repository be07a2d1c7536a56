// Package plugin runs problems that live in other processes, in any
// language: a plugin is an executable that speaks length-prefixed msgpack
// frames (package grid/wire) on its standard input and output. This
// package is both ends of that protocol: Open starts a plugin and makes it
// a problems.Problem (the host), and Serve and Main turn any
// problems.Problem into a plugin (the Go SDK). docs/plugins.md
// specifies the protocol for plugin authors.
//
// A plugin Problem keeps a pool of long-lived processes, one per slot,
// started lazily up to the concurrency asked for, with at most one
// evaluation in flight on each. A process that crashes, hangs past a
// cancel, or writes anything but well-formed frames is killed; the
// evaluation fails with an error naming the plugin and the slot, and the
// slot starts a fresh process on its next evaluation. A plugin that dies
// at start-up is reported once with its stderr and is not restarted in a
// tight loop: further starts back off, and evaluations meanwhile fail at
// once. The back-off may outlive the Problem (Config.Starts): a worker
// that opens the plugin for each session keeps backing off across them.
package plugin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/problems"
)

// Errors of a plugin Problem; each error it returns names the plugin and
// the slot, and wraps one of these (or the context's error).
var (
	// ErrClosed: Eval after (or during) Close.
	ErrClosed = errors.New("plugin closed")
	// ErrStart: the process could not be started, or died, hung or said
	// something wrong before its hello.
	ErrStart = errors.New("plugin failed to start")
	// ErrCrashed: the process exited during an evaluation.
	ErrCrashed = errors.New("plugin process exited")
	// ErrProtocol: the process wrote something that is not the protocol
	// (garbage, a frame over the cap, an answer to the wrong id).
	ErrProtocol = errors.New("plugin broke the protocol")
	// ErrEval: the plugin answered with an error.
	ErrEval = errors.New("plugin evaluation failed")
	// ErrBackingOff (with ErrStart): no start was tried, since earlier
	// starts failed and the back-off is not over; the failure that began
	// it was reported.
	ErrBackingOff = errors.New("not restarted")
)

// errNotRead (with ErrCrashed): the process ended before it read the
// evaluation's request, which therefore never ran: Eval runs it on a new
// process.
var errNotRead = errors.New("before it read the evaluation's request")

// Config says which plugin to run and how.
type Config struct {
	// Name is the problem name the plugin is listed under; its hello
	// must say the same. Required.
	Name string
	// Path is the executable. Required.
	Path string
	// Dim is the dimension of the vectors Eval is given; the plugin must
	// accept it. 0: any the plugin accepts (to probe a plugin).
	Dim int
	// Procs is the most processes (slots) run at once; they start as
	// evaluations need them. Default 1.
	Procs int
	// StartAll makes Open start every slot's process, not only the
	// first, at once: for a caller that will run them all (a worker), so
	// that no evaluation waits for a start, nor is timed with one. A slot
	// whose start fails is reported; while another slot has a process,
	// evaluations go to those, and the slot is started again in the
	// background (see Eval). Default false.
	StartAll bool
	// Logger receives the plugin's stderr and what happens to its
	// processes. Default slog.Default().
	Logger *slog.Logger
	// MaxFrame caps a frame's length both ways. Default
	// wire.DefaultMaxFrame (4 MiB).
	MaxFrame int
	// StartTimeout bounds the wait for a new process's hello, at Open
	// and at every restart. Default DefaultStartTimeout (30 s).
	StartTimeout time.Duration
	// CancelGrace is how long a plugin that honours cancels has to
	// answer one before it is killed. A plugin that does not honour
	// cancels is killed at once, unless its evaluations are quicker than
	// its starts: it then has as long as a start takes, at most
	// CancelGrace, to finish the cancelled evaluation (see Eval).
	// Default 1 s.
	CancelGrace time.Duration
	// StopGrace is how long Close lets a process exit after its standard
	// input ends before it is killed. Default 2 s.
	StopGrace time.Duration
	// WriteTimeout bounds one write to a process's standard input.
	// Default 5 s.
	WriteTimeout time.Duration
	// RetryMin and RetryMax bound the back-off after failed starts: the
	// wait doubles from RetryMin with each failure in a row. Defaults 1 s
	// and 1 min.
	RetryMin, RetryMax time.Duration
	// Starts, when not nil, is the plugin's start history shared with
	// other Problems of the same plugin: their failed starts and this
	// one's back off together, Open included. Default: this Problem's
	// own.
	Starts *Starts
	// StderrRate is how many stderr lines a second are logged (in bursts
	// of up to 5 s' worth). Default 20.
	StderrRate float64
	// Counters, when not nil, count the plugin's process events with
	// other Problems' given the same (a Catalog's, for a process's
	// metrics). Default: this Problem's own.
	Counters *Counters

	// silentAfter is how long a process's first evaluation goes without
	// an answer before warnSilent speaks. Default StartTimeout; tests
	// set it apart from the hello's limit.
	silentAfter time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if err := CheckName(c.Name); err != nil {
		return c, err
	}
	if c.Path == "" {
		return c, fmt.Errorf("plugin %s: no path", c.Name)
	}
	if c.Dim < 0 || c.Dim > MaxDim {
		return c, fmt.Errorf("plugin %s: dimension %d outside [0, %d]", c.Name, c.Dim, MaxDim)
	}
	if c.Procs <= 0 {
		c.Procs = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = time.Second
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 2 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.RetryMin <= 0 {
		c.RetryMin = time.Second
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(time.Minute, c.RetryMin)
	}
	if c.StderrRate <= 0 {
		c.StderrRate = 20
	}
	if c.Starts == nil {
		c.Starts = new(Starts)
	}
	if c.Counters == nil {
		c.Counters = new(Counters)
	}
	if c.silentAfter <= 0 {
		c.silentAfter = c.StartTimeout
	}
	return c, nil
}

// Counters count what happens to a plugin's processes, for metrics:
// cumulative, over every Problem given them (Config.Counters), so that a
// worker's counts go on across its sessions. The zero value is ready to
// use; it is safe for concurrent use.
type Counters struct {
	started, startFailed, crashed, killed, protocolErrors atomic.Int64
}

// Counts are Counters read at one moment.
type Counts struct {
	Started     int64 // processes started and greeted
	StartFailed int64 // starts that failed (no process, no hello, a bad hello)
	// Crashed counts processes that exited during an evaluation: a
	// non-zero status, a signal, or status 0 before the answer.
	Crashed int64
	// Killed counts processes killed because an evaluation was
	// cancelled (a replica lost its race, a deadline, -task-timeout)
	// and they did not answer the cancel in time.
	Killed int64
	// ProtocolErrors counts processes killed for writing what is not the
	// protocol.
	ProtocolErrors int64
}

// Counts returns the counts so far; a nil *Counters has none.
func (c *Counters) Counts() Counts {
	if c == nil {
		return Counts{}
	}
	return Counts{Started: c.started.Load(), StartFailed: c.startFailed.Load(), Crashed: c.crashed.Load(),
		Killed: c.killed.Load(), ProtocolErrors: c.protocolErrors.Load()}
}

// Stats counts what happened to a plugin Problem's processes.
type Stats struct {
	Starts        int64 // processes started and greeted
	StartFailures int64 // starts that failed
	Crashes       int64 // processes that exited during an evaluation
	Kills         int64 // processes killed (hung, cancelled, broke the protocol)
	Cancels       int64 // cancels the plugin honoured in time
	// RanOut counts cancelled evaluations of a plugin that does not
	// honour cancels that were let finish, cheaper than a kill and a
	// restart (their answers are dropped).
	RanOut int64
	// Waits counts evaluations that waited for another slot's process
	// because their own slot's failed to start (see Eval).
	Waits int64
}

// Problem is a plugin as a problems.Problem: a pool of processes. It is
// safe for concurrent use; Close stops the processes.
type Problem struct {
	cfg         Config
	hello       Hello
	log         *slog.Logger
	sem         chan struct{} // one token per slot in use
	closing     chan struct{} // closed by Close
	stderrLimit *limiter

	mu        sync.Mutex
	idle      []*slot       // slots not in use
	released  chan struct{} // closed (and replaced) when a slot is released
	slots     []*slot
	closed    bool
	inflight  sync.WaitGroup
	closeOnce sync.Once

	starts, startFailures, crashes, kills, cancels, ranOut, waits atomic.Int64

	// Smoothed durations (ns) of a start (spawn to hello) and of an
	// answered evaluation (request to answer): what a kill costs, and
	// what letting a cancelled evaluation finish costs (cancelWait).
	startNs, evalNs atomic.Int64
	warnedKill      atomic.Bool // a kill for ignoring a cancel was logged at Warn
	warnedSilent    atomic.Bool // a first evaluation without an answer was logged (warnSilent)
}

// slot is one process place; proc is nil until started, and after the
// process is gone. Its owner (the evaluation or start that took it)
// alone touches it; up, fails and retryAt are read under Problem.mu
// while it is idle, and up (set as it is released) also while it is not.
type slot struct {
	n    int
	proc *proc
	// up: it had a process when last released (or opened): a slot in
	// use that is up will be free for an evaluation that waits for one.
	up bool
	// fails counts its starts that failed in a row; retryAt is when the
	// next may be tried (in the background, while another slot is up).
	fails   int
	retryAt time.Time
}

var _ problems.Problem = (*Problem)(nil)
var _ io.Closer = (*Problem)(nil)

// Open starts the plugin's first process, reads its hello, checks it
// (protocol version, name, Dim among the accepted dimensions, bounds)
// and returns the Problem. Further processes start as Eval needs them.
// A plugin that cannot start fails Open with its stderr in the error;
// while earlier failed starts (Config.Starts) back off, Open fails at
// once, without a start.
func Open(ctx context.Context, cfg Config) (*Problem, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Problem{
		cfg:         cfg,
		log:         cfg.Logger.With("plugin", cfg.Name),
		sem:         make(chan struct{}, cfg.Procs),
		closing:     make(chan struct{}),
		released:    make(chan struct{}),
		stderrLimit: newLimiter(cfg.StderrRate, int(5*cfg.StderrRate)),
	}
	for i := range cfg.Procs {
		s := &slot{n: i + 1}
		p.slots = append(p.slots, s)
	}
	// Idle slots are taken from the end: slot 1 first.
	for i := len(p.slots) - 1; i >= 0; i-- {
		p.idle = append(p.idle, p.slots[i])
	}
	if err := p.restart(ctx, p.slots[0]); err != nil {
		return nil, err
	}
	p.slots[0].up = true
	if cfg.StartAll {
		var wg sync.WaitGroup
		for _, s := range p.slots[1:] {
			wg.Go(func() { p.restartSlot(ctx, s) }) // a failure is logged; the slot is tried again later
		}
		wg.Wait()
	}
	for _, s := range p.slots {
		s.up = s.proc != nil
	}
	return p, nil
}

// Probe starts the plugin once, reads its hello and stops it.
func Probe(ctx context.Context, cfg Config) (Hello, error) {
	p, err := Open(ctx, cfg)
	if err != nil {
		return Hello{}, err
	}
	h := p.Hello()
	return h, p.Close()
}

// Name is the plugin's problem name.
func (p *Problem) Name() string { return p.cfg.Name }

// Bounds is the box the plugin's hello gave.
func (p *Problem) Bounds() (lower, upper float64) { return p.hello.Lower, p.hello.Upper }

// Hello is what the plugin said about itself.
func (p *Problem) Hello() Hello { return p.hello }

// Stats returns the counts so far.
func (p *Problem) Stats() Stats {
	return Stats{
		Starts: p.starts.Load(), StartFailures: p.startFailures.Load(), Crashes: p.crashes.Load(),
		Kills: p.kills.Load(), Cancels: p.cancels.Load(), RanOut: p.ranOut.Load(), Waits: p.waits.Load(),
	}
}

// Eval returns f(x) as computed by one of the plugin's processes. A slot
// whose process fails to start does not fail the evaluation while
// another slot has a process: the evaluation waits for that one, and
// the slot is started again in the background, backing off (RetryMin
// doubled per failure, at most RetryMax), so that one slot that cannot
// start (slow, short of a licence or a device) costs its share of the
// work, not every evaluation given to it. When ctx
// is cancelled it returns promptly with an error wrapping ctx.Err(): a
// plugin that honours cancels is sent one and given CancelGrace to
// answer; any other, or one that does not answer in time, is killed, and
// the slot starts a fresh process on its next evaluation; a process being
// started for it is started all the same, for the next. A kill costs
// that start, so a plugin that does not honour cancels but whose
// evaluations are quicker than its starts (as measured so far) is let
// finish the cancelled evaluation, within as long as a start takes (at
// most CancelGrace), and killed only if it has not answered by then:
// a cancel never costs it much more than a kill would.
func (p *Problem) Eval(ctx context.Context, x []float64) (float64, error) {
	if p.cfg.Dim > 0 && len(x) != p.cfg.Dim {
		return 0, fmt.Errorf("plugin %s: vector of length %d, want %d", p.cfg.Name, len(x), p.cfg.Dim)
	}
	resent := false
	var s *slot
	for {
		if s == nil {
			var err error
			if s, err = p.acquire(ctx); err != nil {
				return 0, fmt.Errorf("plugin %s: %w", p.cfg.Name, err)
			}
			if err := ctx.Err(); err != nil {
				// Cancelled while it waited for a slot: nothing to stop.
				p.release(s)
				return 0, p.errorf(s, "%w", err)
			}
		}
		if s.proc == nil {
			// The start outlives a cancel of this evaluation (within
			// StartTimeout, and Close): the next one needs the
			// process, and a start that every losing replica cut
			// short would never end.
			if err := p.restartSlot(context.WithoutCancel(ctx), s); err != nil {
				p.release(s)
				if p.othersUp(s) {
					s = nil
					continue // another slot's process evaluates it
				}
				return 0, err
			}
			if err := ctx.Err(); err != nil {
				p.release(s)
				return 0, p.errorf(s, "%w", err)
			}
		}
		f, err := p.evalOn(ctx, s, x)
		if errors.Is(err, errNotRead) && !resent && ctx.Err() == nil {
			// A process that ends between evaluations (one that
			// serves so many, then exits to start afresh) did not
			// run this one: it runs on a new process, once, started
			// on this slot (another slot's may be ending too).
			resent = true
			p.log.Debug("plugin process ended before it read an evaluation; it runs on a new process", "slot", s.n, "err", err)
			continue
		}
		p.release(s)
		return f, err
	}
}

// Close stops every process: evaluations in flight end with ErrClosed
// (their processes killed), idle processes are told to exit by the end of
// their standard input and killed after StopGrace. Close waits for all of
// it; it is safe to call more than once.
func (p *Problem) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		close(p.closing)
		p.mu.Unlock()
		p.inflight.Wait()
		var wg sync.WaitGroup
		for _, s := range p.slots {
			if pr := s.proc; pr != nil {
				s.proc = nil
				wg.Go(func() { pr.stop(p.cfg.StopGrace) })
			}
		}
		wg.Wait()
	})
	return nil
}

// acquire takes a slot, preferring one whose process is running, then
// one with no process that has not failed to start (it starts for this
// evaluation). A slot whose start failed is taken only while no other
// slot is up (its start then fails at once, backing off, as the
// plugin's); else the evaluation waits for a slot with a process, and
// hands the failed slot, once its back-off is over, to a start in the
// background.
func (p *Problem) acquire(ctx context.Context) (*slot, error) {
	waited := false
	for {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.closing:
			return nil, ErrClosed
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.sem
			return nil, ErrClosed
		}
		i, behind := p.pick()
		if i >= 0 {
			s := p.idle[i]
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.inflight.Add(1)
			p.mu.Unlock()
			if !behind {
				return s, nil
			}
			// The token just taken is the background start's; this
			// evaluation takes another.
			go p.startBehind(s)
			continue
		}
		// Only slots that failed to start are free, and another slot
		// has a process: wait for it to be released.
		released := p.released
		p.mu.Unlock()
		<-p.sem
		if !waited {
			waited = true
			p.waits.Add(1)
		}
		select {
		case <-released:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.closing:
			return nil, ErrClosed
		}
	}
}

// pick chooses an idle slot for acquire, under p.mu: its index, with
// behind true for a failed slot to start in the background rather than
// evaluate on; -1 when the evaluation must wait for a slot in use.
func (p *Problem) pick() (i int, behind bool) {
	for j := len(p.idle) - 1; j >= 0; j-- {
		if p.idle[j].proc != nil {
			return j, false
		}
	}
	for j := len(p.idle) - 1; j >= 0; j-- {
		if p.idle[j].fails == 0 {
			return j, false // never started, or its process ended: start it
		}
	}
	if !p.anyUp(nil) {
		return len(p.idle) - 1, false // the plugin has no process at all
	}
	now := p.cfg.Starts.clock()
	for j := len(p.idle) - 1; j >= 0; j-- {
		if !now.Before(p.idle[j].retryAt) {
			return j, true
		}
	}
	return -1, false
}

// anyUp reports whether a slot other than s is up, under p.mu.
func (p *Problem) anyUp(s *slot) bool {
	for _, o := range p.slots {
		if o != s && o.up {
			return true
		}
	}
	return false
}

// othersUp reports whether a slot other than s is up.
func (p *Problem) othersUp(s *slot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && p.anyUp(s)
}

// startBehind starts a slot whose start failed before, for no
// evaluation, and releases it (acquire took it).
func (p *Problem) startBehind(s *slot) {
	p.restartSlot(context.Background(), s) // a failure is logged, and backs off
	p.release(s)
}

func (p *Problem) release(s *slot) {
	p.mu.Lock()
	s.up = s.proc != nil
	p.idle = append(p.idle, s)
	close(p.released)
	p.released = make(chan struct{})
	p.mu.Unlock()
	p.inflight.Done()
	<-p.sem
}

// errorf names the plugin and slot in an error.
func (p *Problem) errorf(s *slot, format string, args ...any) error {
	return fmt.Errorf("plugin %s (slot %d): "+format, append([]any{p.cfg.Name, s.n}, args...)...)
}

// restartSlot is restart, counting the slot's own failed starts in a
// row, which set when it may be tried again.
func (p *Problem) restartSlot(ctx context.Context, s *slot) error {
	err := p.restart(ctx, s)
	switch {
	case err == nil:
		s.fails, s.retryAt = 0, time.Time{}
	case ctx.Err() == nil && !errors.Is(err, ErrClosed):
		s.fails++
		wait := p.cfg.RetryMin << min(s.fails-1, 20)
		if wait <= 0 || wait > p.cfg.RetryMax {
			wait = p.cfg.RetryMax
		}
		s.retryAt = p.cfg.Starts.clock().Add(wait)
	}
	return err
}

// restart starts s's process, unless starts are backing off after
// failures: then it fails at once with the last start's error.
func (p *Problem) restart(ctx context.Context, s *slot) error {
	st := p.cfg.Starts
	if wait, fails, last := st.wait(); wait > 0 {
		return p.errorf(s, "%w: %w for another %v after %d failed start(s); last: %v",
			ErrStart, ErrBackingOff, wait.Round(time.Millisecond), fails, last)
	}
	pr, err := p.start(ctx, s)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return err
		}
		if p.othersUp(s) {
			// Another slot's process works: the failure is this
			// slot's (restartSlot backs it off), not the plugin's,
			// whose back-off would refuse the other slots' restarts
			// and the next session.
			if s.fails == 0 {
				p.logLimited(slog.LevelWarn, "plugin failed to start on one slot; evaluations go to the slots that work, and it is started again in the background", "slot", s.n, "err", err)
			} else {
				p.log.Debug("plugin failed to start again on one slot", "slot", s.n, "failures", s.fails+1, "err", err)
			}
			return err
		}
		fails, wait, logIt := st.failed(err, &p.cfg)
		switch {
		case fails == 1:
			// Reported once, with its stderr (in err), within the limit
			// on crash lines (a plugin that fails, works, fails … is
			// one); the failures that follow in a row at debug level,
			// and in a summary a minute.
			p.logLimited(slog.LevelError, "plugin failed to start; further starts back off", "slot", s.n, "err", err, "retry_in", wait)
		case logIt:
			p.log.Warn("plugin still fails to start (summary)", "failures", fails, "err", err, "retry_in", wait)
		default:
			p.log.Debug("plugin failed to start again", "slot", s.n, "failures", fails, "retry_in", wait)
		}
		return err
	}
	s.proc = pr
	return nil
}

// start runs a new process for s and waits for its hello.
func (p *Problem) start(ctx context.Context, s *slot) (*proc, error) {
	began := time.Now()
	pr, err := p.spawn(s)
	if err != nil {
		p.startFailures.Add(1)
		p.cfg.Counters.startFailed.Add(1)
		if errors.Is(err, syscall.ENOEXEC) { // the usual cause: a script written without its #! line
			return nil, p.errorf(s, "%w: %v%s", ErrStart, err, execFormatHint(p.cfg.Path))
		}
		if errors.Is(err, syscall.ENOENT) {
			return nil, p.errorf(s, "%w: %v%s", ErrStart, err, interpreterHint(p.cfg.Path))
		}
		return nil, p.errorf(s, "%w: %v", ErrStart, err)
	}
	t := time.NewTimer(p.cfg.StartTimeout)
	defer t.Stop()
	var f frame
	select {
	case f = <-pr.frames:
	case <-pr.exited:
		f = pr.lastFrame(exitGrace)
	case <-t.C:
		f.err = fmt.Errorf("no hello within %v%s", p.cfg.StartTimeout, silenceHint(pr.stdoutBytes.Load()))
	case <-ctx.Done():
		pr.kill()
		return nil, p.errorf(s, "starting: %w", ctx.Err())
	case <-p.closing:
		pr.kill()
		return nil, p.errorf(s, "%w", ErrClosed)
	}
	if f.err == nil {
		f.err = p.checkHello(&f.hello)
	}
	if f.err != nil {
		what := pr.describe(f.err)
		pr.kill()
		p.startFailures.Add(1)
		p.cfg.Counters.startFailed.Add(1)
		return nil, p.errorf(s, "%w: %v (%s); stderr: %s%s", ErrStart, what, pr.status(), pr.tail.String(), crlfHint(p.cfg.Path))
	}
	p.starts.Add(1)
	p.cfg.Counters.started.Add(1)
	smooth(&p.startNs, time.Since(began))
	p.log.Debug("plugin process started", "slot", s.n, "pid", pr.cmd.Process.Pid)
	return pr, nil
}

// checkHello checks a process's hello against the configuration and, from
// the second process on, against the first one's.
func (p *Problem) checkHello(h *Hello) error {
	if err := h.check(); err != nil {
		return err
	}
	if h.Name != p.cfg.Name {
		return fmt.Errorf("listed as %q, but its hello names the problem %q", p.cfg.Name, h.Name)
	}
	if p.cfg.Dim > 0 && !h.Accepts(p.cfg.Dim) {
		return fmt.Errorf("dimension %d not accepted (accepts %s)", p.cfg.Dim, h.Dims())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hello.Version == 0 {
		p.hello = *h
	} else if *h != p.hello {
		return fmt.Errorf("hello %+v differs from the first process's %+v", *h, p.hello)
	}
	return nil
}

// evalOn evaluates x on s's process.
func (p *Problem) evalOn(ctx context.Context, s *slot, x []float64) (float64, error) {
	pr := s.proc
	pr.nextID++
	id := pr.nextID
	sent := time.Now()
	if err := pr.send(MsgEval, &Eval{ID: id, X: x}, p.cfg.WriteTimeout); err != nil {
		if errors.Is(err, wire.ErrFrameTooLarge) {
			return 0, p.errorf(s, "vector of length %d: %w", len(x), err)
		}
		p.discard(s)
		// No one reads its input: it has ended. A process that answered
		// before ended between evaluations (a plugin may start afresh
		// every N answers), and the request runs on a new one; one that
		// never answered is broken, and its end is a crash.
		if errors.Is(err, syscall.EPIPE) && pr.answered {
			return 0, p.errorf(s, "%w %w (%s); stderr: %s", ErrCrashed, errNotRead, pr.status(), pr.tail.String())
		}
		p.crashes.Add(1)
		p.cfg.Counters.crashed.Add(1)
		return 0, p.errorf(s, "%w: writing the request: %v (%s); stderr: %s", ErrCrashed, err, pr.status(), pr.tail.String())
	}
	// A process's first answer that does not come is most often one
	// written but left in its stdout's buffer: the plugin waits for its
	// next request, the host for the answer, both for ever. Whether the
	// answer is in that buffer cannot be seen from here, and a long
	// evaluation is no fault, so it is said once, as a warning, after as
	// long as a start may take.
	var silent <-chan time.Time
	if !pr.answered && !p.warnedSilent.Load() {
		t := time.NewTimer(p.cfg.silentAfter)
		defer t.Stop()
		silent = t.C
	}
	var f frame
wait:
	for {
		select {
		case f = <-pr.frames:
			break wait
		case <-pr.exited:
			f = pr.lastFrame(exitGrace)
			break wait
		case <-silent:
			silent = nil
			p.warnSilent(s, id)
		case <-ctx.Done():
			return 0, p.cancelEval(ctx, s, id)
		case <-p.closing:
			p.discard(s)
			return 0, p.errorf(s, "%w", ErrClosed)
		}
	}
	if f.err == nil && f.res.ID == id {
		smooth(&p.evalNs, time.Since(sent))
	}
	return p.answer(s, id, f)
}

// warnSilent says, once per Problem, that s's process has not answered
// its first evaluation, id, within silentAfter (StartTimeout), and the
// likely cause.
func (p *Problem) warnSilent(s *slot, id uint64) {
	if p.warnedSilent.Swap(true) {
		return
	}
	request := "read"
	switch n := unread(s.proc.stdin); {
	case n > 0:
		request = "not read yet"
	case n < 0:
		request = "unknown"
	}
	p.log.Warn("plugin has not answered its first evaluation; if it wrote the answer, the answer is in its stdout's buffer: "+
		"flush stdout after every frame (C: fflush(stdout); Rust: stdout().flush(); Perl: $| = 1; Python: sys.stdout.buffer.flush()); "+
		"if it is still reading, it waits for more than the frame (a read of a line, or of all input): read the 4-byte length, then that many bytes; "+
		"a long evaluation needs no cure, it goes on",
		"slot", s.n, "id", id, "waited", p.cfg.silentAfter, "request", request)
}

// answer turns the frame that answered evaluation id into the result.
func (p *Problem) answer(s *slot, id uint64, f frame) (float64, error) {
	pr := s.proc
	switch {
	case f.err != nil && isEOF(f.err) && pr.answered && unread(pr.stdin) > 0:
		// Its request is still in the pipe: the process ended (or
		// closed its output) before it read it, having answered before
		// (as for a broken pipe in evalOn).
		p.discard(s)
		return 0, p.errorf(s, "%w %w (%s); stderr: %s", ErrCrashed, errNotRead, pr.status(), pr.tail.String())
	case f.err != nil && isEOF(f.err):
		p.discard(s)
		p.crashes.Add(1)
		p.cfg.Counters.crashed.Add(1)
		err := p.errorf(s, "%w during an evaluation (%s); it restarts on the next one; stderr: %s", ErrCrashed, pr.status(), pr.tail.String())
		p.logCrash("plugin process exited during an evaluation", "slot", s.n, "err", err)
		return 0, err
	case f.err != nil:
		p.discard(s)
		p.kills.Add(1)
		p.cfg.Counters.protocolErrors.Add(1)
		err := p.errorf(s, "%w: %v; killed, it restarts on the next evaluation", ErrProtocol, f.err)
		p.logCrash("plugin broke the protocol; killed", "slot", s.n, "err", err)
		return 0, err
	case f.res.ID != id:
		p.discard(s)
		p.kills.Add(1)
		p.cfg.Counters.protocolErrors.Add(1)
		err := p.errorf(s, "%w: answered id %d, the evaluation running is %d (a result echoes its eval's id); killed", ErrProtocol, f.res.ID, id)
		p.logCrash("plugin broke the protocol; killed", "slot", s.n, "err", err)
		return 0, err
	}
	select {
	case <-pr.exited:
		// It answered, then exited (not during an evaluation): the
		// next evaluation needs a new one.
		p.discard(s)
	default:
	}
	if !pr.answered {
		// A process that answers ends a run of failed starts (Starts).
		pr.answered = true
		if fails := p.cfg.Starts.worked(); fails > 0 {
			p.logLimited(slog.LevelInfo, "plugin works again after failed starts", "slot", s.n, "failures", fails)
		}
	}
	if f.res.Err != "" {
		// Escaped: the text reaches the master's log and its final
		// line, and a terminal.
		return 0, p.errorf(s, "%w: %s", ErrEval, logx.Printable(clip(f.res.Err, 1024)))
	}
	return f.res.F, nil
}

// logCrash logs that a process crashed or was killed, as a warning
// within the plugin's limit (Starts.crashLine), which the next line
// allowed counts the lines held back in, and at debug level beyond it:
// a plugin that crashes at every evaluation, on every slot, session
// after session, must not write a line per evaluation.
func (p *Problem) logCrash(msg string, args ...any) {
	p.logLimited(slog.LevelWarn, msg, args...)
}

// logLimited logs at level within the plugin's limit on crash and retry
// lines, and at debug level beyond it.
func (p *Problem) logLimited(level slog.Level, msg string, args ...any) {
	held, ok := p.cfg.Starts.crashLine()
	if !ok {
		level = slog.LevelDebug
	} else if held > 0 {
		args = append(args, "held_back_since_last", held)
	}
	p.log.Log(context.Background(), level, msg, args...)
}

// cancelEval stops evaluation id after ctx ended: a plugin that honours
// cancels is sent one and has CancelGrace to answer (any answer to id
// will do); one that does not is given cancelWait to finish it. If it
// has not answered by then, it is killed. The error wraps ctx.Err().
func (p *Problem) cancelEval(ctx context.Context, s *slot, id uint64) error {
	pr := s.proc
	wait := p.cancelWait()
	ignored := true // killed for not answering, not for exiting or Close
	if p.hello.Cancel && pr.send(MsgCancel, &Cancel{ID: id}, p.cfg.WriteTimeout) != nil {
		wait, ignored = 0, false // it cannot be told: its input is gone
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case f := <-pr.frames:
			if f.err == nil && f.res.ID == id {
				if p.hello.Cancel {
					p.cancels.Add(1)
				} else {
					p.ranOut.Add(1) // its answer is dropped: the caller gave up on it
				}
				return p.errorf(s, "%w", ctx.Err())
			}
			ignored = false
		case <-pr.exited:
			ignored = false
		case <-t.C:
		case <-p.closing:
			ignored = false
		}
	}
	p.discard(s)
	p.kills.Add(1)
	p.cfg.Counters.killed.Add(1)
	if ignored {
		p.logKill(s, wait)
	}
	return p.errorf(s, "%w", ctx.Err())
}

// cancelWait is how long a cancelled evaluation may go on before its
// process is killed: CancelGrace for a plugin that honours cancels; for
// one that does not, as long as a start takes (at most CancelGrace) when
// its evaluations are quicker than its starts, since a kill costs a
// start, and else nothing.
func (p *Problem) cancelWait() time.Duration {
	if p.hello.Cancel {
		return p.cfg.CancelGrace
	}
	start, eval := p.startNs.Load(), p.evalNs.Load()
	if eval <= 0 || eval >= start {
		return 0
	}
	return min(time.Duration(start), p.cfg.CancelGrace)
}

// logKill reports a process killed for ignoring a cancel: the first time
// for this Problem at warning level, saying why, later ones at debug
// level (a plugin that declares cancel:false may be killed at every
// cancel).
func (p *Problem) logKill(s *slot, wait time.Duration) {
	level := slog.LevelDebug
	if p.warnedKill.CompareAndSwap(false, true) {
		level = slog.LevelWarn
	}
	why := "its hello says cancel:false"
	switch {
	case p.hello.Cancel:
		why = "it did not answer a cancel within the cancel grace"
	case wait > 0:
		why = "its hello says cancel:false, and it did not finish the cancelled evaluation within a start's time"
	}
	p.log.Log(context.Background(), level, "plugin killed for ignoring a cancel; it restarts on the slot's next evaluation (only the first such kill is logged as a warning)",
		"slot", s.n, "why", why, "waited", wait.Round(time.Millisecond), "cancel_grace", p.cfg.CancelGrace)
}

// smooth folds d into the exponentially weighted mean at mean (gain 1/8;
// the first measurement is taken as it is). Concurrent slots may lose an
// update to each other, which a mean can afford.
func smooth(mean *atomic.Int64, d time.Duration) {
	if d <= 0 {
		return
	}
	m := mean.Load()
	if m == 0 {
		mean.Store(int64(d))
		return
	}
	mean.Store(m + (int64(d)-m)/8)
}

// discard kills s's process (and reaps it, when it already exited) and
// leaves the slot empty.
func (p *Problem) discard(s *slot) {
	pr := s.proc
	s.proc = nil
	if pr != nil {
		pr.kill()
	}
}

// exitGrace is how long an exited process's last frame, or its exit
// status, may lag behind the news of its exit.
const exitGrace = 500 * time.Millisecond

// proc is one plugin process.
type proc struct {
	slot   int
	cmd    *exec.Cmd
	stdin  *os.File // our ends of its pipes
	stdout *os.File
	stderr *os.File

	buf bytes.Buffer
	enc *wire.Encoder

	frames     chan frame    // what readFrames decoded
	quit       chan struct{} // closed by kill: readers stop delivering
	readDone   chan struct{} // closed when readFrames returns
	stderrDone chan struct{} // closed when readStderr returns
	exited     chan struct{} // closed when the process has been waited for
	exitErr    error         // cmd.Wait's error, once exited is closed
	tail       tail
	// stdoutBytes counts what readFrames has read: whether a plugin that
	// never says hello wrote nothing or part of a frame.
	stdoutBytes atomic.Int64
	nextID      uint64
	answered    bool // it answered an evaluation (Starts.worked)
	killOnce    sync.Once
}

// frame is one decoded frame from a process, or why reading stopped.
type frame struct {
	hello Hello
	res   Result
	err   error
}

// spawn starts the process with its three pipes and its readers.
func (p *Problem) spawn(s *slot) (*proc, error) {
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command(p.cfg.Path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.Env = append(pluginEnv(), "ESGRID_PLUGIN_NAME="+p.cfg.Name, "ESGRID_PLUGIN_SLOT="+strconv.Itoa(s.n))
	setProcAttr(cmd)
	pr := &proc{
		slot: s.n, cmd: cmd, stdin: inW, stdout: outR, stderr: errR,
		frames:     make(chan frame, 1),
		quit:       make(chan struct{}),
		readDone:   make(chan struct{}),
		stderrDone: make(chan struct{}),
		exited:     make(chan struct{}),
	}
	err := startLive(cmd, pr) // live.go: KillAll reaches it
	// The child has its ends now; ours of them must go, so that we see
	// EOF when it exits.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	pr.enc = wire.NewEncoder(&pr.buf, p.cfg.MaxFrame)
	go func() {
		pr.exitErr = cmd.Wait()
		waited(pr)
		// What it started outside its group dies once no plugin
		// process runs any more (Subreap); before exited is closed,
		// so that a Close (esworker's drain, then its exit) returns
		// only once that is done.
		reapOrphans()
		close(pr.exited)
	}()
	go p.readStderr(pr)
	go pr.readFrames(p.cfg.MaxFrame)
	return pr, nil
}

// keyEnv is the environment variable that may hold the cluster key
// (grid.KeyEnv; this package does not import grid, which a plugin built
// with the SDK would then carry).
const keyEnv = "ESGRID_KEY"

// pluginEnv is this program's environment without the cluster key: a
// plugin has no use for it, and one that prints its environment (a crash
// report, a simulator's debug output) would put it in the log.
func pluginEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, keyEnv+"=") })
}

// readFrames decodes what the process writes: a hello first, then
// results. It delivers every frame, and then the error that ended the
// stream (io.EOF when the process closed it), on pr.frames.
func (pr *proc) readFrames(maxFrame int) {
	defer close(pr.readDone)
	fr := wire.NewReader(countingReader{pr.stdout, &pr.stdoutBytes}, maxFrame)
	var d wire.Decoder
	for first := true; ; first = false {
		var f frame
		t, body, err := fr.Next()
		switch {
		case err != nil && errors.Is(err, wire.ErrMalformed):
			err = fmt.Errorf("%w%s%s", err, textHint(fr.Header()), endianHint(err, fr.Header(), maxFrame))
		case err != nil:
		case first && MsgType(t) == MsgHello:
			err = d.Decode("hello", body, &f.hello)
		case first:
			err = fmt.Errorf("%w: the first frame is %v, not a hello", wire.ErrMalformed, MsgType(t))
		case MsgType(t) == MsgResult:
			err = d.Decode("result", body, &f.res)
		default:
			err = fmt.Errorf("%w: a frame of type %d (%v) from a plugin, which sends a result (type 3) for each eval", wire.ErrMalformed, t, MsgType(t))
		}
		if err != nil && body != nil && wire.Validate(body) != nil {
			// Not one msgpack value in the length said: the length
			// prefix is likely wrong.
			err = fmt.Errorf("%w%s", err, lengthHint(fr.Header()))
		}
		f.err = err
		select {
		case pr.frames <- f:
		case <-pr.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// lastFrame is what the process wrote before it exited, if it arrives
// within d, else io.EOF.
func (pr *proc) lastFrame(d time.Duration) frame {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case f := <-pr.frames:
		return f
	case <-t.C:
		return frame{err: io.EOF}
	}
}

// send writes one frame to the process's standard input.
func (pr *proc) send(t MsgType, v any, timeout time.Duration) error {
	pr.buf.Reset()
	if err := pr.enc.Encode(byte(t), v); err != nil {
		return err
	}
	pr.stdin.SetWriteDeadline(time.Now().Add(timeout))
	_, err := pr.stdin.Write(pr.buf.Bytes())
	return err
}

// kill kills the process and its group at once, and releases its pipes
// and goroutines (waiting a bounded time for the exit status and the last
// of its stderr).
func (pr *proc) kill() {
	pr.killOnce.Do(func() {
		killGroup(pr.cmd)
		forget(pr)
		pr.release()
	})
}

// stop ends the process's standard input, which asks it to exit, and
// kills it if it has not within grace.
func (pr *proc) stop(grace time.Duration) {
	pr.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-pr.exited:
	case <-t.C:
	}
	pr.kill()
}

func (pr *proc) release() {
	pr.stdin.Close()
	wait := func(ch <-chan struct{}, d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ch:
		case <-t.C:
		}
	}
	wait(pr.exited, 2*time.Second)
	wait(pr.stderrDone, 200*time.Millisecond)
	close(pr.quit)
	pr.stdout.Close() // unblocks the readers, whoever else holds the pipes
	pr.stderr.Close()
	<-pr.readDone
	<-pr.stderrDone
}

// status describes how the process ended, if it has.
func (pr *proc) status() string {
	select {
	case <-pr.exited:
		if pr.exitErr == nil {
			return "exit status 0"
		}
		return pr.exitErr.Error()
	default:
		return "still running"
	}
}

// textHint recognises text where a frame's length should be: a plugin
// that prints to its standard output.
func textHint(hdr [4]byte) string {
	for _, c := range hdr {
		if c != '\n' && c != '\t' && c != '\r' && (c < 0x20 || c == 0x7f) {
			return ""
		}
	}
	// UTF-8 too (a "✓" or an "é" in a debug line): four bytes of text
	// are never a length under the cap. But only UTF-8, which a line
	// begins with: bytes of 0x80 and up that are not (a msgpack map's
	// first byte, 0x80 to 0x8f) are no text.
	if !utf8Prefix(hdr[:]) {
		return ""
	}
	return fmt.Sprintf(" (it wrote text, %q…, on stdout, which is for frames only: print to stderr)", hdr[:])
}

// utf8Prefix says whether b is valid UTF-8, but for a rune cut short at
// its end.
func utf8Prefix(b []byte) bool {
	for cut := 0; cut < utf8.UTFMax && cut < len(b); cut++ {
		head, rest := b[:len(b)-cut], b[len(b)-cut:]
		if utf8.Valid(head) && (cut == 0 || utf8.RuneStart(rest[0]) && !utf8.FullRune(rest)) {
			return true
		}
	}
	return false
}

// endianHint explains a length over the cap that, read little-endian,
// would fit: the prefix written in the machine's byte order (C's plain
// uint32_t, Perl's "V", Node's writeUInt32LE) rather than big-endian,
// with both readings when the big-endian one may be a genuine frame over
// the cap; one that begins with a newline, a stray one before a frame;
// or one that begins a msgpack map, a message sent without its length.
func endianHint(err error, hdr [4]byte, maxFrame int) string {
	if !errors.Is(err, wire.ErrFrameTooLarge) || textHint(hdr) != "" {
		return ""
	}
	if hdr[0] == '\n' || hdr[0] == '\r' {
		// Not a length at all: a newline printed after a frame (Perl's
		// print …, "\n"; C's puts) shifts every frame that follows.
		return fmt.Sprintf(" (its first byte is a newline, %q: did the plugin print one on stdout after the previous frame? stdout is for frames only)", hdr[:1])
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n == 0 || int64(n) > int64(maxFrame) {
		if isMapCode(hdr[0]) {
			// A message written without its length and type byte.
			return fmt.Sprintf(" (its first byte, 0x%02x, begins a msgpack map: a frame begins with its 4-byte big-endian length, then the type byte)", hdr[0])
		}
		return ""
	}
	if hdr[0] == 0 {
		// Under 16 MiB big-endian: as likely a genuine frame over the
		// cap as a little-endian length that is a multiple of 256.
		return fmt.Sprintf(" (a frame over the cap; or, if its length was written little-endian, one of %d: the length prefix is big-endian, most significant byte first)", n)
	}
	return fmt.Sprintf(" (read little-endian, it would be %d: the length prefix is big-endian, most significant byte first)", n)
}

// isMapCode says whether c begins a msgpack map.
func isMapCode(c byte) bool {
	return c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf
}

// lengthHint explains a frame whose body is not one msgpack value of
// the length its prefix hdr says: the mistake of counting a body's keys,
// or its characters before encoding, rather than its encoded bytes.
func lengthHint(hdr [4]byte) string {
	return fmt.Sprintf(" (the frame's length prefix says %d bytes follow: it must count the type byte plus the encoded msgpack body's bytes, len(packed)+1, not the body's keys)",
		binary.BigEndian.Uint32(hdr[:]))
}

// interpreterHint explains "no such file or directory" for a plugin
// that is there: the kernel says so of a script whose #! line names an
// interpreter that is not, most often one that ends in a carriage return
// (a script saved with Windows line ends).
func interpreterHint(path string) string {
	line := shebang(path)
	if line == nil {
		return ""
	}
	if bytes.HasSuffix(line, []byte("\r")) {
		return fmt.Sprintf(" (the file is there, but its first line, %q, ends in a carriage return: the file has Windows line ends; convert them (dos2unix))", line)
	}
	return fmt.Sprintf(" (the file is there, but not the interpreter its first line names: %q)", line)
}

// shebang returns the #! line of the script at path (read from its first
// 256 bytes, without its newline), or nil if it has none.
func shebang(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := io.ReadFull(f, b)
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return nil
	}
	return line
}

// execFormatHint explains "exec format error" for a plugin: most often a
// script without its #! line, or one whose #! an editor hid behind a
// UTF-8 byte order mark, which the kernel does not skip.
func execFormatHint(path string) string {
	const usual = " (a script needs a first line such as #!/usr/bin/env python3)"
	f, err := os.Open(path)
	if err != nil {
		return usual
	}
	defer f.Close()
	b := make([]byte, 5)
	n, _ := io.ReadFull(f, b)
	if bytes.HasPrefix(b[:n], []byte("\xef\xbb\xbf")) {
		return " (the file begins with a UTF-8 byte order mark, the bytes EF BB BF, so its first line is not read as #!: save it as UTF-8 without a BOM)"
	}
	return usual
}

// crlfHint explains a failed start of a script whose #! line ends in a
// carriage return where the kernel found the interpreter: with
// "#!/usr/bin/env python3\r" it runs env, which looks for "python3\r",
// says so on stderr and exits 127.
func crlfHint(path string) string {
	line := shebang(path)
	if !bytes.HasSuffix(line, []byte("\r")) {
		return ""
	}
	return fmt.Sprintf(" (its first line, %q, ends in a carriage return: the file has Windows line ends; convert them (dos2unix))", line)
}

// silenceHint explains a plugin that said no hello, by what it wrote on
// its stdout: nothing, or part of a frame. Both are most often a buffer
// not flushed (Python's sys.stdout is buffered when it is a pipe).
func silenceHint(n int64) string {
	if n == 0 {
		return " (nothing on its stdout: a plugin writes its hello at once and flushes its stdout after every frame; did it flush?)"
	}
	return fmt.Sprintf(" (%d bytes on its stdout, not a whole frame: did the plugin flush its stdout after the frame? does its length prefix count the type byte plus the encoded msgpack body's bytes?)", n)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed)
}

// describe says what a read error before the hello means for a plugin:
// the end of its output is its exit, or, if it ran on until killed, its
// closing it. A process not reaped within exitGrace is killed here, and
// how it ended decides, so that a slow machine's late reaping does not
// change the words: killed by a signal, it ran on (or something else
// killed it); any exit status, it ended by itself.
func (pr *proc) describe(err error) string {
	if !isEOF(err) {
		return err.Error()
	}
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-pr.exited:
		return "exited before its hello"
	case <-t.C:
	}
	pr.kill()
	t.Reset(killWait)
	select {
	case <-pr.exited:
	case <-t.C:
		return "closed its standard output before its hello"
	}
	var ee *exec.ExitError
	if errors.As(pr.exitErr, &ee) && ee.ProcessState != nil && ee.ProcessState.ExitCode() == -1 {
		return "closed its standard output before its hello"
	}
	return "exited before its hello"
}

// killWait bounds the wait for a killed process to be reaped, where its
// status is read (describe); a process group killed ends at once.
const killWait = 10 * time.Second

// clip cuts s to at most n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s[:n]) + "…"
}
