package grid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// DefaultDataPort is the port a master accepts data connections on unless
// told otherwise.
const DefaultDataPort = 7947

// ErrMasterClosed is returned by Evaluate and WaitWorkers once the master
// has shut down.
var ErrMasterClosed = errors.New("grid: master closed")

// MasterConfig configures a Master. Key and Problem are required; every
// other zero field takes the default named in its comment.
type MasterConfig struct {
	// Listen is the address for workers' data connections.
	// Default ":7947" (DefaultDataPort); tests use "127.0.0.1:0".
	Listen string
	// Key is the cluster key; a worker that cannot prove it holds the same
	// key is rejected in the handshake. Required.
	Key *Key
	// Policy names the scheduling policy (one of sched.Names).
	// Default "r3q".
	Policy string
	// Sched parameterises the policy (queue depth per slot). With
	// Sched.Adaptive (rwq and r3q), the master measures each worker's
	// round trip and task time from the results and feeds them to the
	// policy, which sizes that worker's remote queue from them. Default:
	// the policy's fixed depth (2 per slot for rwq and r3q).
	Sched sched.Config
	// Ledger parameterises the time accounting.
	Ledger sched.LedgerConfig
	// Problem is what every worker is told to evaluate, in its Welcome.
	// Required (Name not empty).
	Problem ProblemSpec
	// MinWorkers makes the first Evaluate wait until that many workers
	// have joined (logging while it waits). Default 0: start at once; the
	// tasks wait in the master queue until some worker joins.
	MinWorkers int
	// IdleTimeout closes a data connection on which nothing arrived for
	// that long (workers send heartbeats). Default 30 s.
	IdleTimeout time.Duration
	// Heartbeat is how long the master stays silent on a connection before
	// it sends a heartbeat. Default IdleTimeout/3.
	Heartbeat time.Duration
	// HandshakeTimeout bounds one worker's handshake.
	// Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxFrame caps a frame's length. Default DefaultMaxFrame.
	MaxFrame int
	// MaxHandshakes bounds the handshakes in progress at once; further
	// connections are closed at once. Default 64.
	MaxHandshakes int
	// Progress is how often a long wait (for workers, or for a
	// generation's results) is logged. Default 10 s.
	Progress time.Duration
	// ShutdownGrace bounds how long Close waits for workers to receive
	// their Shutdown. Default 2 s.
	ShutdownGrace time.Duration
	// Logger receives the master's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c MasterConfig) withDefaults() (MasterConfig, error) {
	if c.Key == nil {
		return c, fmt.Errorf("grid: master: %w", ErrNoKey)
	}
	if c.Problem.Name == "" {
		return c, errors.New("grid: master: no problem named")
	}
	if c.Listen == "" {
		c.Listen = fmt.Sprintf(":%d", DefaultDataPort)
	}
	if c.Policy == "" {
		c.Policy = "r3q"
	}
	if c.MinWorkers < 0 {
		c.MinWorkers = 0
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.IdleTimeout / 3
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 64
	}
	if c.Progress <= 0 {
		c.Progress = 10 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// MasterStats counts what the master has done so far.
type MasterStats struct {
	Workers    int   // workers connected and not left
	Joined     int   // workers that ever joined
	Batches    int   // batches started
	TasksSent  int64 // task instances sent (originals and replicas)
	Results    int64 // results received, of any kind
	Stale      int64 // results of an earlier batch, discarded
	Duplicates int64 // results of a task already done, discarded
	Failed     int64 // results reporting an evaluation error
	// Unsolicited counts results of the current batch for a task never
	// sent to the worker that returned it; they are discarded.
	Unsolicited int64
	// Wire traffic of all data connections, closed ones included.
	ConnStats
}

// Master is the grid's master runtime. It accepts workers' data
// connections, drives one sched.Policy across the generations of a run
// and implements es.Evaluator: each Evaluate is one batch of tasks,
// scheduled over the workers connected at the time, and returns when
// every task has an accepted result.
//
// One goroutine, the event loop, owns the policy, the ledger and every
// worker's state. Connections' readers, the acceptor, gossip events and
// Evaluate only pass it messages through a channel; the loop never
// writes to a socket (Conn.Send only enqueues).
type Master struct {
	cfg    MasterConfig
	log    *slog.Logger
	ln     net.Listener
	start  time.Time
	policy sched.Policy // loop-owned
	ledger *sched.Ledger
	// adaptive: the policy sizes remote queues from measurements, so
	// the loop keeps the books that measure (outstanding instances).
	adaptive bool

	in       chan loopMsg
	loopCtx  context.Context
	stopLoop context.CancelFunc
	done     chan struct{} // closed when the loop has exited
	connCtx  context.Context
	stopConn context.CancelFunc
	hsSem    chan struct{}

	nextWorker atomic.Int32
	minReached atomic.Bool
	progress   atomic.Int64 // results accepted in the current batch

	liveMu  sync.Mutex
	live    int
	liveCh  chan struct{} // closed and replaced when live changes
	joinedN int

	closeOnce sync.Once
	stopCtx   func() bool
	wg        sync.WaitGroup

	loopState // owned by the loop goroutine
}

// NewMaster listens on cfg.Listen and starts the master. It shuts down
// when ctx is done or Close is called.
func NewMaster(ctx context.Context, cfg MasterConfig) (*Master, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := sched.New(cfg.Policy, cfg.Sched)
	if err != nil {
		return nil, fmt.Errorf("grid: master: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("grid: master: %w", err)
	}
	m := &Master{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "master"),
		ln:     ln,
		start:  time.Now(),
		policy: p,
		ledger: sched.NewLedger(cfg.Ledger),
		in:     make(chan loopMsg, 4096),
		done:   make(chan struct{}),
		hsSem:  make(chan struct{}, cfg.MaxHandshakes),
		liveCh: make(chan struct{}),
	}
	// Only rwq and r3q use the measurements (sched.Config.Adaptive).
	m.adaptive = cfg.Sched.Adaptive && (p.Name() == "rwq" || p.Name() == "r3q")
	m.loopState.init()
	m.loopCtx, m.stopLoop = context.WithCancel(context.Background())
	m.connCtx, m.stopConn = context.WithCancel(context.Background())
	m.wg.Add(2)
	go m.loop()
	go m.acceptLoop()
	m.stopCtx = context.AfterFunc(ctx, func() { m.Close() })
	m.log.Info("master listening for workers", "addr", m.Addr(), "policy", p.Name(), "problem", cfg.Problem.Name)
	return m, nil
}

// Addr returns the address the master accepts data connections on.
func (m *Master) Addr() string { return m.ln.Addr().String() }

// Policy returns the name of the policy the master drives.
func (m *Master) Policy() string { return m.policy.Name() }

// Workers returns the number of workers connected and not left.
func (m *Master) Workers() int {
	m.liveMu.Lock()
	defer m.liveMu.Unlock()
	return m.live
}

// setLive records the loop's count of live workers and wakes waiters.
func (m *Master) setLive(n int, joined bool) {
	m.liveMu.Lock()
	m.live = n
	if joined {
		m.joinedN++
	}
	close(m.liveCh)
	m.liveCh = make(chan struct{})
	m.liveMu.Unlock()
}

// WaitWorkers blocks until at least n workers are connected, logging a
// line every cfg.Progress while it waits.
func (m *Master) WaitWorkers(ctx context.Context, n int) error {
	tick := time.NewTicker(m.cfg.Progress)
	defer tick.Stop()
	logged := false
	for {
		m.liveMu.Lock()
		live, ch := m.live, m.liveCh
		m.liveMu.Unlock()
		if live >= n {
			if logged {
				m.log.Info("enough workers joined", "workers", live, "wanted", n)
			}
			return nil
		}
		if !logged {
			m.log.Info(fmt.Sprintf("waiting for workers: %d of %d joined; start esworker with -join and the cluster key", live, n),
				"data_addr", m.Addr())
			logged = true
		}
		select {
		case <-ch:
		case <-tick.C:
			m.log.Info(fmt.Sprintf("still waiting for workers: %d of %d joined", live, n), "data_addr", m.Addr())
		case <-ctx.Done():
			return fmt.Errorf("grid: waiting for %d workers: %w", n, ctx.Err())
		case <-m.done:
			return ErrMasterClosed
		}
	}
}

// Evaluate computes f(xs[i]) for every i on the grid's workers: it is the
// es.Evaluator of a distributed run. gen is the ES generation, used in
// logs and errors. The first call waits for cfg.MinWorkers workers.
// Calls must not overlap: a new call supersedes a batch still running,
// whose Evaluate then fails.
//
// A task whose evaluation fails on a worker fails Evaluate with an error
// naming the generation and the task. A worker lost mid-batch costs only
// time: its tasks go back to the master queue.
func (m *Master) Evaluate(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
	if m.cfg.MinWorkers > 0 && !m.minReached.Load() {
		if err := m.WaitWorkers(ctx, m.cfg.MinWorkers); err != nil {
			return nil, fmt.Errorf("grid: generation %d: %w", gen, err)
		}
		m.minReached.Store(true)
	}
	if len(xs) == 0 {
		return []float64{}, nil
	}
	req := &evalReq{gen: gen, xs: xs, reply: make(chan evalReply, 1)}
	select {
	case m.in <- loopMsg{kind: msgEvaluate, eval: req}:
	case <-ctx.Done():
		return nil, fmt.Errorf("grid: generation %d: %w", gen, ctx.Err())
	case <-m.done:
		return nil, fmt.Errorf("grid: generation %d: %w", gen, ErrMasterClosed)
	}
	tick := time.NewTicker(m.cfg.Progress)
	defer tick.Stop()
	for {
		select {
		case r := <-req.reply:
			return r.f, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("grid: generation %d: %w", gen, ctx.Err())
		case <-m.done:
			return nil, fmt.Errorf("grid: generation %d: %w", gen, ErrMasterClosed)
		case <-tick.C:
			w := m.Workers()
			msg := "generation in progress"
			if w == 0 {
				msg = "generation waiting: no worker connected"
			}
			m.log.Info(msg, "gen", gen, "done", m.progress.Load(), "tasks", len(xs), "workers", w)
		}
	}
}

// Report returns the ledger's accounting of the run so far (the paper's
// total, sync wait, comm and compute times, per generation and per
// worker).
func (m *Master) Report() sched.Report {
	var rep sched.Report
	if m.ask(func() { rep = m.ledger.Report() }) {
		return rep
	}
	<-m.done
	return m.ledger.Report()
}

// Stats returns the master's counters so far.
func (m *Master) Stats() MasterStats {
	var st MasterStats
	if m.ask(func() { st = m.stats() }) {
		return st
	}
	<-m.done
	return m.stats()
}

// ask runs f on the loop goroutine and waits for it; false if the loop
// has exited.
func (m *Master) ask(f func()) bool {
	ch := make(chan struct{})
	select {
	case m.in <- loopMsg{kind: msgCall, call: func() { f(); close(ch) }}:
	case <-m.done:
		return false
	}
	select {
	case <-ch:
		return true
	case <-m.done:
		return false
	}
}

// HandleMemberEvent lets gossip tell the master about workers: a worker
// that gossip declares dead (frozen, or cut off with its connection still
// open) or that leaves the cluster is dropped, exactly as if its data
// connection had broken: its tasks go back to the queue and the
// connection is closed. A worker that drained first has already left and
// is not touched. Wire it as the membership's OnEvent. Other events are
// only logged by the membership.
func (m *Master) HandleMemberEvent(ev MemberEvent) {
	if ev.Kind != MemberFailed && ev.Kind != MemberLeft {
		return
	}
	if ev.Member.MetaErr == nil && ev.Member.Meta.Role != RoleWorker {
		return
	}
	select {
	case m.in <- loopMsg{kind: msgMemberGone, name: ev.Member.Name, left: ev.Kind == MemberLeft}:
	case <-m.done:
	}
}

// Close tells every worker the run is over (MsgShutdown), closes the
// connections and the listener, and waits for the master's goroutines. It
// is safe to call more than once.
func (m *Master) Close() error {
	m.closeOnce.Do(func() {
		if m.stopCtx != nil {
			m.stopCtx()
		}
		m.ln.Close()
		m.stopLoop()
		<-m.done
		m.stopConn()
	})
	m.wg.Wait()
	return nil
}

// acceptLoop accepts data connections and hands each to a handshake
// goroutine, at most cfg.MaxHandshakes at once.
func (m *Master) acceptLoop() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.log.Warn("accept failed", "err", err)
			select {
			case <-time.After(backoff):
			case <-m.loopCtx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case m.hsSem <- struct{}{}:
		default:
			m.log.Warn("too many handshakes in progress; connection refused", "peer", nc.RemoteAddr().String())
			nc.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer func() { <-m.hsSem }()
			m.handshake(nc)
		}()
	}
}

// handshake authenticates one worker and hands it to the loop.
func (m *Master) handshake(nc net.Conn) {
	var id int32
	conn, hello, err := Accept(m.connCtx, nc, AcceptConfig{
		Key:     m.cfg.Key,
		Timeout: m.cfg.HandshakeTimeout,
		Welcome: func(h *Hello) (int32, ProblemSpec, error) {
			if h.Name == "" {
				// Gossip failures are matched to connections by name.
				return 0, ProblemSpec{}, errors.New("worker has no name")
			}
			if h.Slots < 1 || h.Slots > MaxMetaSlots {
				return 0, ProblemSpec{}, fmt.Errorf("slots %d outside [1, %d]", h.Slots, MaxMetaSlots)
			}
			if len(h.Problems) > 0 && !slices.Contains(h.Problems, m.cfg.Problem.Name) {
				return 0, ProblemSpec{}, fmt.Errorf("worker does not offer problem %q (offers %v)", m.cfg.Problem.Name, h.Problems)
			}
			id = m.nextWorker.Add(1)
			return id, m.cfg.Problem, nil
		},
		Conn: ConnConfig{
			MaxFrame:    m.cfg.MaxFrame,
			IdleTimeout: m.cfg.IdleTimeout,
			Heartbeat:   m.cfg.Heartbeat,
			Logger:      m.cfg.Logger,
		},
	})
	if err != nil {
		// Accept has logged the reason and sent a Reject where it could.
		return
	}
	w := &mworker{id: sched.WorkerID(id), name: hello.Name, slots: hello.Slots, conn: conn}
	select {
	case m.in <- loopMsg{kind: msgJoined, w: w}:
	case <-m.done:
		conn.SendAndClose(&Shutdown{Reason: "master shutting down"})
		return
	}
	conn.Start(func(msg Message) {
		select {
		case m.in <- loopMsg{kind: msgFrame, w: w, msg: msg}:
		case <-m.done:
		}
	})
	// Report the close once every message before it has been forwarded:
	// Done closes only after the reader has returned.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-conn.Done()
		select {
		case m.in <- loopMsg{kind: msgClosed, w: w}:
		case <-m.done:
		}
	}()
}
