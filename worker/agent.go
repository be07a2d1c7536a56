// Package worker is esgrid's worker agent: it connects to a master, keeps
// the tasks it is sent in its remote queue Q_r,k, runs them on its slots in
// the order sent, and returns each result with its queue status (papers.md
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
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// Config configures an Agent. Zero fields take the defaults named in their
// comments.
type Config struct {
	// Master is the master's data address (host:port). When empty, the
	// address is found through gossip (Join).
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
	// Slowdown F ≥ 1 makes every evaluation take F times as long: after
	// computing for d, the slot waits (F−1)·d more (cut short by a
	// cancel). It emulates a slower machine. Default 1.
	Slowdown float64
	// Delay adds a one-way delay to every message on the link to the
	// master, both ways: outgoing frames leave Delay late, incoming ones are
	// acted on Delay after they arrive. It emulates a WAN (the paper's
	// Sleep).
	Delay time.Duration
	// MinBackoff and MaxBackoff bound the wait between connection attempts;
	// it doubles after each failure. Defaults 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Build turns the master's problem spec into a problem. Default:
	// problems.New(Name, Dim) wrapped in problems.WithLoad(·, LoadN).
	Build func(grid.ProblemSpec) (problems.Problem, error)
	// Conn tunes the data connection (timeouts, frame cap). Its Delay is
	// set from Delay.
	Conn grid.ConnConfig
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
		c.MaxBackoff = max(5*time.Second, c.MinBackoff)
	}
	if c.Build == nil {
		c.Build = BuildProblem
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
	p, err := problems.New(spec.Name, spec.Dim)
	if err != nil {
		return nil, err
	}
	return problems.WithLoad(p, spec.LoadN), nil
}

// ErrShutdown is what Run returns when the master ended the run.
var ErrShutdown = errors.New("worker: the master ended the run")

// Agent is one worker: it connects to the master, reconnects whenever the
// connection is lost (the master restarted, the network broke), and runs
// the tasks it is sent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	drain chan struct{}
	once  sync.Once

	mu      sync.Mutex
	current *session // the live session, if any
}

// New checks cfg and returns an agent ready to Run.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Agent{
		cfg:   cfg,
		log:   cfg.Logger.With("worker", cfg.Name),
		drain: make(chan struct{}),
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

// Run connects and serves the master until the master ends the run
// (ErrShutdown), Drain completes (nil), or ctx is done (ctx's error, at
// once: running evaluations are cancelled, and Run waits for them to
// return). A lost connection drops the tasks it carried, and Run connects
// again, with backoff.
func (a *Agent) Run(ctx context.Context) (err error) {
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
	for failures := 0; ; failures++ {
		if a.draining() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		addr, err := a.masterAddr(ctx, ms, failures)
		var conn *grid.Conn
		var welcome *grid.Welcome
		if err == nil {
			conn, welcome, err = grid.Dial(ctx, addr, grid.DialConfig{
				Key: a.cfg.Key, Name: a.cfg.Name, Slots: a.cfg.Slots, Problems: a.cfg.Problems,
				Conn: a.cfg.Conn,
			})
		}
		if err == nil {
			backoff = a.cfg.MinBackoff
			err = a.serve(ctx, conn, welcome)
			if err == nil || errors.Is(err, ErrShutdown) || ctx.Err() != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return err
			}
			a.log.Warn("lost the master; reconnecting", "err", err)
		} else if ctx.Err() == nil {
			a.log.Warn("cannot reach the master", "addr", addr, "err", err, "retry_in", backoff.Round(time.Millisecond))
		}
		if !a.sleep(ctx, jitter(backoff)) {
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

// jitter spreads reconnections of many workers by ±20 %.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// serve runs one session on a fresh connection until it ends. It returns
// nil after a completed drain, ErrShutdown when the master ended the run,
// ctx's error, or why the connection was lost.
func (a *Agent) serve(ctx context.Context, conn *grid.Conn, w *grid.Welcome) error {
	p, err := a.cfg.Build(w.Problem)
	if err != nil {
		err = fmt.Errorf("worker: cannot build problem %q (dim %d): %w", w.Problem.Name, w.Problem.Dim, err)
		a.log.Error("refusing the master's problem", "err", err)
		conn.SendAndClose(&grid.Reject{Reason: err.Error()})
		<-conn.Done()
		return err
	}
	a.log.Info("connected to the master", "addr", conn.RemoteAddr().String(), "worker_id", w.Worker,
		"problem", w.Problem.Name, "dim", w.Problem.Dim, "load_n", w.Problem.LoadN, "slots", a.cfg.Slots)
	s := newSession(ctx, a, conn, p)
	a.mu.Lock()
	a.current = s
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.current = nil
		a.mu.Unlock()
	}()
	return s.run(ctx, a.drain)
}
