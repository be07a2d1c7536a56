// Package worker is esgrid's worker agent: it connects to a master, keeps
// the tasks it is sent in its remote queue Q_r,k, runs them on its slots in
// the order sent, and returns each result with its queue status (docs/papers.md
// §1 RWQ/R3Q, §5 Clop). cmd/esworker runs one agent per machine; esrun's
// local grid runs several in-process, through the same code.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// Config configures an Agent. Zero fields take the defaults named in their
// comments.
type Config struct {
	// Master is the master's data address (host:port). When empty, the
	// address is found through gossip (Join). It may list several
	// addresses, comma-separated (a relay, then another path to the
	// master): each failure to connect moves on to the next.
	Master string
	// Join lists gossip addresses (host:port) of cluster members, usually
	// the master's. With Join the agent becomes a gossip member (so the
	// master sees it come and go) and, unless Master is set, asks gossip
	// for the master's data address, again after every lost connection.
	Join []string
	// GossipBind is the host:port this agent's gossip binds to. Default
	// "0.0.0.0:0" (the OS picks the port); set a fixed port where a
	// firewall sits between the machines.
	GossipBind string
	// Key is the cluster key. Required.
	Key *grid.Key
	// Name identifies the worker to the master and in gossip; unique in
	// the cluster. Default hostname-pid (with a suffix for further agents
	// in the same process).
	Name string
	// Slots is how many tasks run at once. Default runtime.NumCPU().
	Slots int
	// Problems are the problem names offered to the master. Default every
	// registered problem (problems.Names()).
	Problems []string
	// Slowdown F ≥ 1 makes every evaluation take F times as long: it
	// emulates a slower machine. An evaluation that used c of CPU on its
	// thread and took d ends F·c after it began: the slot waits F·c − d
	// more (cut short by a cancel). Timing by CPU keeps emulated machines
	// that share one host's cores at their speeds while the cores are
	// oversubscribed less than F times. Where the CPU time is not the
	// evaluation's own — SlowdownWall is set, the problem holds resources
	// (a plugin, computing in its own process: it is an io.Closer), or
	// the system cannot tell a thread's CPU time — the wall clock stands
	// for it: the slot waits (F−1)·d. Default 1.
	Slowdown float64
	// SlowdownWall times Slowdown by the wall clock even for a problem
	// that computes on the evaluating goroutine: for one that waits
	// (sleeps, I/O) rather than computes. Default false.
	SlowdownWall bool
	// Faults emulates a misbehaving machine (failing, hanging or silent
	// evaluations). Default: none.
	Faults Faults
	// Delay adds a one-way delay to every message on the link to the
	// master, both ways: outgoing frames leave Delay late, incoming ones are
	// acted on Delay after they arrive. It emulates a WAN (the paper's
	// Sleep).
	Delay time.Duration
	// MinBackoff and MaxBackoff bound the wait between connection attempts;
	// it doubles after each failure. Defaults 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Serve makes the agent serve run after run: when a master ends its
	// run, the agent waits for the next master instead of returning
	// ErrShutdown (a lab agent; esworker without -once). Default false.
	Serve bool
	// IdleTimeout, when > 0, makes Run return ErrIdle once the agent has
	// been without a working session for that long: it cannot reach a
	// master, is refused, or cannot build the master's problem (a plugin
	// that does not start). Default 0: wait for a master for ever.
	IdleTimeout time.Duration
	// AbandonGrace is how long a cancelled evaluation may take to return
	// before the agent gives up on it: its slot is freed and the master
	// told it was cancelled, and a session that ends stops waiting for it
	// (a Go evaluation that ignores its context cannot be stopped; its
	// goroutine runs on until it returns). Default 5 s.
	AbandonGrace time.Duration
	// Limits bound what a master may ask: the problem's dimension, its
	// load, the memory it needs (limits.go). A spec over them is refused
	// before Build sees it. Default: see Limits.
	Limits Limits
	// Build turns the master's problem spec into a problem. Default:
	// problems.New(Name, Dim) wrapped in problems.WithLoad(·, LoadN).
	Build func(grid.ProblemSpec) (problems.Problem, error)
	// BuildContext, when set, is used instead of Build, with a context
	// that ends when Run's does or Drain is called: a build that takes
	// long (a plugin that starts slowly, or says nothing until its start
	// timeout) must not hold back a drain or an exit. PluginBuildContext
	// is one.
	BuildContext func(context.Context, grid.ProblemSpec) (problems.Problem, error)
	// StartBound is how long building a problem that is not built-in may
	// take (a plugin's processes start: PluginOptions.StartBound). When
	// > 0, the agent tells the master so before such a build
	// (grid.Heartbeat.Starting), and once it serves: the master then times
	// the tasks it sent meanwhile from then, not from their send, so that
	// a plugin slower to start than the task timeout does not fail the
	// run. 0: the master times them from their send.
	StartBound time.Duration
	// Conn tunes the data connection (timeouts, frame cap). Its Delay is
	// set from Delay.
	Conn grid.ConnConfig
	// ChildPort is the TCP port the child master listens on when the
	// agent is promoted (a master that splits, -split): the workers moved
	// to it connect there, so where a firewall stands between the
	// machines it must be fixed and open. Default 0: any free port.
	ChildPort int
	// Network opens the agent's connections, and the listener of a child
	// master it is promoted to. Default grid.TCP; a simulated network in
	// tests.
	Network grid.Network
	// Rand draws the jitter of reconnection waits. Default: a generator
	// seeded at random. A simulation seeds it, so that one seed replays
	// one run.
	Rand *rand.Rand
	// Logger is the agent's logger. Default slog.Default().
	Logger *slog.Logger
}

// agents counts the agents created in this process, for default names.
var agents atomic.Int64

func (c Config) withDefaults() (Config, error) {
	if c.Key == nil {
		return c, grid.ErrNoKey
	}
	if c.Master == "" && len(c.Join) == 0 {
		return c, errors.New("worker: no master: set the master's data address or a gossip address to join")
	}
	if c.Slots <= 0 {
		c.Slots = runtime.NumCPU()
	}
	if c.Slowdown == 0 {
		c.Slowdown = 1
	}
	if c.Slowdown < 1 {
		return c, fmt.Errorf("worker: slowdown %v < 1", c.Slowdown)
	}
	if c.Delay < 0 {
		return c, fmt.Errorf("worker: negative delay %v", c.Delay)
	}
	if c.ChildPort < 0 || c.ChildPort > 65535 {
		return c, fmt.Errorf("worker: child port %d is not in [0, 65535]", c.ChildPort)
	}
	if err := c.Faults.check(); err != nil {
		return c, err
	}
	if c.Name == "" {
		c.Name = DefaultName()
	}
	if c.Problems == nil {
		c.Problems = problems.Names()
	}
	if c.GossipBind == "" {
		c.GossipBind = "0.0.0.0:0"
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(grid.DefaultMaxBackoff, c.MinBackoff)
	}
	if c.Build == nil {
		c.Build = BuildProblem
	}
	var err error
	if c.Limits, err = c.Limits.withDefaults(); err != nil {
		return c, err
	}
	if c.IdleTimeout < 0 {
		return c, fmt.Errorf("worker: negative idle timeout %v", c.IdleTimeout)
	}
	if c.Network == nil {
		c.Network = grid.TCP
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.AbandonGrace <= 0 {
		c.AbandonGrace = grid.DefaultAbandonGrace
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Conn.Delay = c.Delay
	if c.Conn.Logger == nil {
		c.Conn.Logger = c.Logger
	}
	return c, nil
}

// DefaultName is hostname-pid for the first agent of the process and
// hostname-pid-N for the N-th.
func DefaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	name := host + "-" + strconv.Itoa(os.Getpid())
	if n := agents.Add(1); n > 1 {
		name += "-" + strconv.FormatInt(n, 10)
	}
	return name
}

// BuildProblem is the default Config.Build: the registered problem of that
// name and dimension, with the spec's LU load.
func BuildProblem(spec grid.ProblemSpec) (problems.Problem, error) {
	if spec.LoadN > problems.MaxLoadN {
		return nil, fmt.Errorf("load of %d×%d is more than this worker takes (%d×%d)", spec.LoadN, spec.LoadN, problems.MaxLoadN, problems.MaxLoadN)
	}
	p, err := problems.New(spec.Name, spec.Dim)
	if err != nil {
		return nil, err
	}
	return problems.WithLoad(p, spec.LoadN), nil
}

// admit checks the master's problem spec against the agent's limits and
// builds it, on a connection configured as cc (the master's frame cap
// taken): what the agent does with a Welcome before it serves it. The
// error is the refusal the master is sent. starting, if not nil, is
// called with the build's bound before a build that may take long
// (Config.StartBound).
func (a *Agent) admit(ctx context.Context, spec grid.ProblemSpec, cc grid.ConnConfig, starting func(time.Duration)) (problems.Problem, admission, error) {
	own := a.cfg.Conn.MaxFrame
	if own <= 0 {
		own = grid.DefaultMaxFrame
	}
	ad, err := a.cfg.Limits.admit(spec, a.cfg.Slots, cc, own, sysmem.Available)
	if err == nil {
		if a.cfg.StartBound > 0 && starting != nil && !slices.Contains(problems.Names(), spec.Name) {
			starting(a.cfg.StartBound)
		}
		var p problems.Problem
		if a.cfg.BuildContext != nil {
			// Drain ends the build too.
			bctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-a.drain:
					cancel()
				case <-bctx.Done():
				}
			}()
			p, err = a.cfg.BuildContext(bctx, spec)
			cancel()
		} else {
			p, err = a.cfg.Build(spec)
		}
		if err == nil {
			return p, ad, nil
		}
	}
	return nil, admission{}, fmt.Errorf("worker: cannot build problem %s (dim %d): %w", clipName(spec.Name), spec.Dim, err)
}

// ErrShutdown is what Run returns when the master ended the run (and the
// agent does not Serve run after run).
var ErrShutdown = errors.New("worker: the master ended the run")

// ErrIdle is what Run returns when the agent was without a working
// session for Config.IdleTimeout.
var ErrIdle = errors.New("worker: no working session with a master for the idle timeout")

// errRestart ends a session whose master was interrupted and will be
// back (Shutdown.Restart): the agent waits for it.
var errRestart = errors.New("worker: the master was interrupted; it will be back")

// Agent is one worker: it connects to the master, reconnects whenever the
// connection is lost (the master restarted, the network broke), and runs
// the tasks it is sent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	odd   *slog.Logger // rate-limited: what a master should not have sent (grid.LimitLog)
	drain chan struct{}
	once  sync.Once

	mu        sync.Mutex
	current   *session      // the live session, if any
	since     time.Time     // when the live session started
	connected time.Duration // time in sessions that ended

	// Executions by outcome, and the slot-time of those that ended
	// (Activity).
	finished, cancelled, failed atomic.Int64
	busy                        atomic.Int64 // ns

	evals    atomic.Int64  // evaluations so far (Faults)
	stop     chan struct{} // closed when Run returns: ends emulated hangs
	stopOnce sync.Once
}

// New checks cfg and returns an agent ready to Run.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("worker", cfg.Name)
	return &Agent{
		cfg:   cfg,
		log:   log,
		odd:   grid.LimitLog(log, 1, 10),
		drain: make(chan struct{}),
		stop:  make(chan struct{}),
	}, nil
}

// Run is New followed by Agent.Run.
func Run(ctx context.Context, cfg Config) error {
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// Name is the worker's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Drain asks the agent to leave gracefully: it takes no more tasks, gives
// the held ones back to the master (a Drain message), finishes the running
// ones and sends their results, then closes, and Run returns nil. Calling
// it again does nothing; cancel Run's context to stop at once.
func (a *Agent) Drain() {
	a.once.Do(func() { close(a.drain) })
}

// Status reports the agent's held (queued) and running task counts, zero
// while it is not connected.
func (a *Agent) Status() (queued, running int) {
	a.mu.Lock()
	s := a.current
	a.mu.Unlock()
	if s == nil {
		return 0, 0
	}
	return s.status()
}

// Activity is an agent's work so far, for its metrics: cumulative
// figures never decrease.
type Activity struct {
	Slots     int
	Connected bool          // in a session with a master now
	Held      int           // tasks held in the remote queue now
	Running   int           // tasks on a slot now
	Finished  int64         // executions that finished (with a value)
	Cancelled int64         // executions stopped by a cancel
	Failed    int64         // executions that returned an error
	Busy      time.Duration // slot-time executing, the running tasks' so far included
	Session   time.Duration // time in sessions with a master, the live one's so far included
}

// Activity reports the agent's work so far.
func (a *Agent) Activity() Activity {
	act := Activity{
		Slots: a.cfg.Slots, Finished: a.finished.Load(), Cancelled: a.cancelled.Load(), Failed: a.failed.Load(),
		Busy: time.Duration(a.busy.Load()),
	}
	a.mu.Lock()
	s := a.current
	act.Session = a.connected
	if s != nil {
		act.Connected = true
		act.Session += time.Since(a.since)
	}
	a.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		act.Held, act.Running = s.held.Len(), len(s.running)
		now := time.Now()
		for _, rt := range s.running {
			act.Busy += now.Sub(rt.start)
		}
		s.mu.Unlock()
	}
	return act
}

// Run connects and serves the master until the master ends the run
// (ErrShutdown), Drain completes (nil), or ctx is done (ctx's error, at
// once: running evaluations are cancelled, and Run waits for them to
// return). A lost connection drops the tasks it carried, and Run connects
// again, with backoff.
func (a *Agent) Run(ctx context.Context) (err error) {
	defer a.stopOnce.Do(func() { close(a.stop) })
	if a.cfg.Faults.any() {
		a.log.Warn("emulating faults", "faults", fmt.Sprintf("%+v", a.cfg.Faults))
	}
	var ms *grid.Membership
	if len(a.cfg.Join) > 0 {
		if ms, err = a.joinGossip(ctx); err != nil {
			return err
		}
		defer func() {
			if errors.Is(err, ErrShutdown) {
				// The master ended the run and is going away: no one
				// needs to learn in time that this worker leaves.
				ms.CloseQuickly()
				return
			}
			// A drain (or a stop): the master lives on, and must learn
			// that this worker left rather than wait for gossip to
			// declare it dead.
			ms.Close()
		}()
	}
	backoff := a.cfg.MinBackoff
	var quiet quietLog
	since := time.Now() // without a working session since
	// Where a promotion or a move sends the agent next, and the
	// redirects in a row that led to no work (split.go).
	var next redirect
	var hops redirectHops
	for failures := 0; ; failures++ {
		if a.draining() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d := a.cfg.IdleTimeout; d > 0 && time.Since(since) >= d {
			a.log.Warn("no working session with a master for the idle timeout; exiting", "idle_timeout", d)
			return ErrIdle
		}
		addr, err := a.nextAddr(ctx, ms, failures, &next) // split.go
		var conn *grid.Conn
		var welcome *grid.Welcome
		if err == nil {
			conn, welcome, err = grid.Dial(ctx, addr, grid.DialConfig{
				Key: a.cfg.Key, Name: a.cfg.Name, Slots: a.cfg.Slots, Problems: a.cfg.Problems,
				Conn: a.cfg.Conn, Dial: a.cfg.Network.Dial,
			})
		}
		if err == nil {
			var worked, served bool
			worked, served, err = a.serve(ctx, conn, welcome)
			moved := a.redirected(ctx, &err, addr, &next) // split.go: promoted, or moved
			if moved && ctx.Err() != nil {
				return ctx.Err()
			}
			failed := ""
			if moved {
				failed = hops.failed(err, addr, served) // split.go
			} else if served {
				hops = redirectHops{}
			}
			if worked && failed == "" {
				// Only a session that could work resets the idle clock and
				// the backoff: a master that this agent dials and then
				// refuses at once (its problem does not build), or that
				// sends it on before it served anything, is no master, and
				// redialling it must not be a tight loop.
				since = time.Now()
				backoff = a.cfg.MinBackoff
				quiet = quietLog{}
			}
			switch {
			case moved && failed == "":
				failures = -1
				continue
			case moved:
				failures = -1
				quiet.log(a.log, "redirected to no working session", errors.New(failed), "retry_in", backoff.Round(time.Millisecond))
			case ctx.Err() != nil:
				return ctx.Err()
			case err == nil:
				return nil // drained
			case errors.Is(err, ErrShutdown) && !a.cfg.Serve:
				return err
			case errors.Is(err, ErrShutdown):
				a.log.Info("the run is over; waiting for the next master")
				failures = -1
			case errors.Is(err, errRestart):
				a.log.Info("the master was interrupted; waiting for it to come back")
				failures = -1
			case !worked && a.draining():
				return nil // drained while the problem was being built
			case !worked && errors.Is(err, plugin.ErrBackingOff):
				// The plugin's failure that began its back-off was logged.
				a.log.Debug("refusing the master's problem", "err", err, "retry_in", backoff.Round(time.Millisecond))
			case !worked:
				quiet.log(a.log, "refusing the master's problem", err, "retry_in", backoff.Round(time.Millisecond))
			default:
				a.log.Warn("lost the master; reconnecting", "err", err)
			}
		} else if ctx.Err() == nil {
			quiet.log(a.log, "cannot reach the master", err, "addr", addr, "retry_in", backoff.Round(time.Millisecond))
		}
		a.log.Debug("next connection attempt", "retry_in", backoff)
		if !a.sleep(ctx, jitter(a.cfg.Rand, backoff)) {
			if a.draining() {
				return nil
			}
			return ctx.Err()
		}
		backoff = min(2*backoff, a.cfg.MaxBackoff)
	}
}

func (a *Agent) draining() bool {
	select {
	case <-a.drain:
		return true
	default:
		return false
	}
}

// sleep waits d, and reports false if ctx or a drain cut it short.
func (a *Agent) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-a.drain:
		return false
	}
}

// quietLog logs failed attempts (to reach a master, or to serve the one
// reached): the first, and then only a changed reason or one line a
// minute, which counts the attempts since the last, so that an agent
// waiting for a master, or for its plugin, for days writes one line per
// attempt at most, and usually far fewer. Reasons that differ only in
// their figures (a back-off that counts down, a count of failures) are
// the same reason.
type quietLog struct {
	last     string
	lastAt   time.Time
	repeated int
}

func (q *quietLog) log(log *slog.Logger, what string, err error, args ...any) {
	msg := err.Error()
	key := what + ": " + figures.ReplaceAllString(msg, "#")
	if key == q.last && time.Since(q.lastAt) < time.Minute {
		q.repeated++
		return
	}
	if key == q.last {
		args = append(args, "attempts_since_last_line", q.repeated+1)
	}
	q.last, q.lastAt, q.repeated = key, time.Now(), 0
	if errors.Is(err, errNoMasterYet) {
		log.Info("waiting for a master to join the cluster")
		return
	}
	log.Warn(what, append([]any{"err", msg}, args...)...)
}

// figures are the numbers in a reason, durations included.
var figures = regexp.MustCompile(`[0-9][0-9.]*(ns|µs|ms|s|m|h)?`)

// jitter spreads reconnections of many workers by ±20 %.
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*r.Float64()))
}

// serve runs one session on a fresh connection until it ends. It returns
// nil after a completed drain, ErrShutdown when the master ended the run,
// ctx's error, or why the connection was lost; worked is false when the
// session could not work at all: the problem did not build, and the
// master was refused with the reason (Run logs it, rate-limited).
func (a *Agent) serve(ctx context.Context, conn *grid.Conn, w *grid.Welcome) (worked, served bool, err error) {
	// A build that may take long is announced, so that the master does
	// not time the tasks it sends meanwhile (grid.Heartbeat.Starting), and
	// its end too, before the session reads them.
	starting := false
	p, ad, err := a.admit(ctx, w.Problem, conn.Config(), func(bound time.Duration) {
		starting = conn.Send(&grid.Heartbeat{Starting: int64(bound)}) == nil
	})
	if err != nil {
		conn.SendAndClose(&grid.Reject{Reason: err.Error()})
		<-conn.Done()
		return false, false, err
	}
	if starting {
		conn.Send(&grid.Results{}) // it serves: a status report, all slots idle
	}
	defer closeProblem(p) // a plugin's processes end with the session (worker/plugins.go)
	a.log.Info("connected to the master", "addr", conn.RemoteAddr().String(), "worker_id", w.Worker,
		"problem", w.Problem.Name, "dim", w.Problem.Dim, "load_n", w.Problem.LoadN, "slots", a.cfg.Slots)
	s := newSession(ctx, a, conn, withFaults(p, a.cfg.Faults, &a.evals, a.stop))
	s.welcome, s.admitted = w, ad
	a.mu.Lock()
	a.current, a.since = s, time.Now()
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.current = nil
		a.connected += time.Since(a.since)
		a.mu.Unlock()
	}()
	err = s.run(ctx, a.drain)
	s.mu.Lock()
	served = s.served
	s.mu.Unlock()
	return true, served, err
}
