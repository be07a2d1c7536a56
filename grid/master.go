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

	"github.com/esgrid/esgrid/grid/member"
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
	// Listener, when not nil, is used instead of listening on Listen
	// (transports are given, not opened: a sub-master's listener, an
	// in-memory one in tests). The master owns it from then on and
	// closes it on Close.
	Listener net.Listener
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
	// MaxFrame caps a frame's length. Default DefaultMaxFrame; at most
	// MaxFrameLimit. Workers take the master's cap when theirs is smaller.
	// A batch whose tasks do not fit (see TaskFrameSize) fails at once.
	MaxFrame int
	// DeadlineFactor and DeadlineFloor set when a running task instance is
	// overdue: after DeadlineFactor × its worker's smoothed execution time
	// (before the worker has one, the upper median of the hosts' times,
	// which no one host can shorten) plus the worker's smoothed round
	// trip, and never before DeadlineFloor. An overdue instance is a
	// policy event (sched.Overdue): it is cancelled and its task runs
	// again, on another worker if one is open, else on the same one once
	// it answers; the late worker gets nothing new until it answers. Each
	// time a task overruns, its next instance's deadline doubles
	// (sched.Deadlines.Again), so a long task ends, up to half the
	// TaskTimeout and ten times at most; an instance of a task cut short
	// there already has no deadline, and only TaskTimeout ends it. Defaults 4 and 1 s
	// (sched.Deadlines, the rule the simulator applies too).
	DeadlineFactor float64
	DeadlineFloor  time.Duration
	// FirstDeadline is the deadline while no execution has been measured
	// anywhere (a silent worker may have taken the whole first batch).
	// Default 30 × DeadlineFloor.
	FirstDeadline time.Duration
	// TaskTimeout is the hard limit: a worker with an instance running
	// longer than this has its connection dropped (its tasks go back to
	// the queue; it may reconnect), and that task counts as failed,
	// towards MaxRetries. It alone decides past half of it, where the
	// deadlines stop (sched.Deadlines.Ceiling): a task between the two
	// ends, one that always hangs fails. Default 10 min; negative: none.
	TaskTimeout time.Duration
	// MaxRetries is how often one task may fail (an evaluation error on
	// some worker) and be retried on another before Evaluate fails with
	// every worker's error. Default 3; negative: no retry.
	MaxRetries int
	// MaxFailures is how many evaluations in a row may fail on one
	// worker (an error, or a non-finite value from a problem that does
	// not declare them) before it is set aside: it gets no more tasks
	// while its connection lasts, and its tasks go to the others. It is
	// set aside only if another worker can take them (one late for less
	// than FirstDeadline counts), or in exchange for those set aside
	// before: the last worker is never set aside, and MaxRetries then
	// says whether the task itself fails everywhere. Workers set aside
	// are given tasks again once no other has been open to tasks for
	// FirstDeadline. Default 3; negative: never.
	MaxFailures int
	// MaxHandshakes bounds the handshakes in progress at once, and
	// MaxHandshakesPerSource those from one address; three quarters of
	// the slots are kept for addresses with none in progress (admit.go).
	// Further connections are told why and closed at once. Defaults 64
	// and DefaultMaxHandshakesPerSource.
	MaxHandshakes          int
	MaxHandshakesPerSource int
	// MaxWorkers bounds the connections the master holds at once:
	// workers, relays, and child masters' links, each about 80 KiB of
	// memory and, unless relayed, a file descriptor; a key holder could
	// otherwise open them by the thousand under new names. One past it
	// is refused once its key is checked, with the reason ("master
	// full: …"), and its worker retries with backoff. Default
	// DefaultMaxWorkers().
	MaxWorkers int
	// RelayBuffered bounds the bytes that the streams of every relay
	// connected hold together, waiting for the master to read them (a
	// stream alone holds 64 MiB at most, and 16 KiB before its
	// handshake ends). A stream that would pass it is closed, and the
	// relay told; its worker reconnects. Default DefaultRelayBuffered
	// (256 MiB).
	RelayBuffered int
	// HelloTimeout bounds the wait for a worker's Hello once the master
	// has sent its Challenge. Default DefaultHelloTimeout.
	HelloTimeout time.Duration
	// Verify, in [0, 1], is the fraction of tasks whose accepted result is
	// checked by evaluating the task again on a worker on another host
	// and comparing the two values bit for bit (verify.go). A host whose
	// value differs from the agreed one is excluded from the run, and its
	// accepted results of the generation are evaluated again. Hosts vote,
	// not workers: a host is the IP address a worker's connection comes
	// from (behind a relay, the relay's), and an excluded host's every
	// connection is refused for the rest of the run. A master that
	// verifies does not split (Split.Rule is then as SplitOff): a child
	// master's results would reach it unverified. Default 0.
	Verify float64
	// VerifyWait is how long a check whose hosts disagree, and that has
	// asked every host connected, waits for a worker on another host to
	// break the tie before its generation fails with ErrUndecided.
	// Default FirstDeadline: the wait for workers on their way.
	VerifyWait time.Duration
	// Excluded are hosts excluded from the run before the master starts:
	// a resumed run's, kept in its checkpoint (Master.Excluded gives
	// them). Each is said once when the master starts, and its every
	// connection is refused with its reason, as a host Verify excludes,
	// whether or not this master verifies. Each must pass
	// Exclusion.Validate; a host listed twice keeps its first reason.
	// Default none.
	Excluded []Exclusion
	// Progress is how often a long wait (for workers, or for a
	// generation's results) is logged. Default 10 s.
	Progress time.Duration
	// ShutdownGrace bounds how long Close waits for workers to receive
	// their Shutdown. Default 5 s.
	ShutdownGrace time.Duration
	// Split configures docs/papers.md §2: the overload test, masters that
	// split, and the emulated per-message cost of a slow master
	// (submaster.go). Default: the overload test is kept, no split.
	Split SplitConfig
	// Plan, when not nil, gives each worker that joins the slots the plan
	// has for it, or sets it aside (slots 0: it receives no tasks), as the
	// policy event sched.SlotsChanged (plan.go). Default nil: every worker
	// has the slots it announced.
	Plan *Plan
	// OnAccept, when set, is called on the master's loop for every result
	// accepted (the first of its task in its generation): the generation,
	// the task, the worker's name and how long the task executed there as
	// the worker reported it. It must return at once. A bag runner learns
	// from it each worker's speed on the very tasks it ran (cmd/esbag).
	OnAccept func(gen, task int, worker string, exec time.Duration)
	// Logger receives the master's logs. Default slog.Default().
	Logger *slog.Logger

	// stopNotes, when > 0, is stopNotesBudget for a test (master_loop.go).
	stopNotes int
}

// deadlines is the config's deadline rule (defaults set).
func (c *MasterConfig) deadlines() sched.Deadlines {
	return sched.Deadlines{Factor: c.DeadlineFactor, Floor: c.DeadlineFloor, First: c.FirstDeadline, Ceiling: c.TaskTimeout / 2}
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
		c.IdleTimeout = defaultIdleTimeout
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
	c.MaxFrame = min(c.MaxFrame, MaxFrameLimit)
	d := sched.Deadlines{Factor: max(c.DeadlineFactor, 0), Floor: c.DeadlineFloor, First: c.FirstDeadline}.WithDefaults()
	c.DeadlineFactor, c.DeadlineFloor, c.FirstDeadline = d.Factor, d.Floor, d.First
	switch {
	case c.TaskTimeout == 0:
		c.TaskTimeout = 10 * time.Minute
	case c.TaskTimeout < 0:
		c.TaskTimeout = 0
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = 3
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	switch {
	case c.MaxFailures == 0:
		c.MaxFailures = 3
	case c.MaxFailures < 0:
		c.MaxFailures = 0
	}
	if c.VerifyWait <= 0 {
		c.VerifyWait = c.FirstDeadline
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 64
	}
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = DefaultMaxWorkers()
	}
	if c.MaxHandshakesPerSource <= 0 {
		c.MaxHandshakesPerSource = DefaultMaxHandshakesPerSource
	}
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = DefaultHelloTimeout
	}
	if !(c.Verify >= 0 && c.Verify <= 1) {
		return c, fmt.Errorf("grid: master: verify fraction %v outside [0, 1]", c.Verify)
	}
	for _, x := range c.Excluded {
		if err := x.Validate(); err != nil {
			return c, fmt.Errorf("grid: master: %w", err)
		}
	}
	if err := c.Split.check(); err != nil {
		return c, fmt.Errorf("grid: master: %w", err)
	}
	if c.Progress <= 0 {
		c.Progress = 10 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// MasterStats counts what the master has done so far.
type MasterStats struct {
	Workers    int   // workers connected and not left
	Joined     int   // joins: a worker back from a child master, or reconnecting, counts again
	Named      int   // workers that ever joined, each name once (a name past the first 4,096 at each join)
	Batches    int   // batches started
	TasksSent  int64 // task instances sent (originals and replicas)
	Results    int64 // results received, of any kind (cancel acknowledgements aside)
	Stale      int64 // results of an earlier batch, discarded
	Duplicates int64 // results of a task already done, discarded
	Failed     int64 // results reporting an evaluation error
	// Unsolicited counts results that carry no token the master gave
	// the worker that returned them for that task instance (forged, or
	// for a task never sent to it); they are discarded, and counted
	// nowhere else. (The tokens of a worker's last two batches are
	// kept: a result of an older batch is counted Stale, and feeds
	// nothing else.)
	Unsolicited int64
	Overdue     int64 // instances that passed their deadline (sched.Overdue)
	Retried     int64 // failed evaluations given to another worker
	Returned    int64 // held tasks a draining worker gave back
	// Verification (MasterConfig.Verify, verify.go): results checked and
	// confirmed by a second host, checks given up (no second host, or
	// every worker asked failed), values evaluated again because their
	// host was excluded, votes that differed from the agreed value, and
	// hosts excluded for it.
	Verified, Unverified, Reevaluated, Mismatches, Excluded int64
	// SetAside counts workers set aside because their evaluations kept
	// failing (MasterConfig.MaxFailures), and TakenBack those given tasks
	// again because no other worker was open.
	SetAside, TakenBack int64
	// Refused counts data connections refused, or whose handshake
	// failed (admit.go; by kind: Master.Refused).
	Refused int64
	// Dropped counts workers whose connection the master dropped: an
	// instance past TaskTimeout, or a session silent for IdleTimeout.
	Dropped int64
	// Lost counts the other workers lost during the run, by cause; a
	// worker a split moves to another master is not lost.
	Lost LostStats
	// GossipKept counts gossip's verdicts (dead, or left) on a connected
	// worker or relay whose connection answered the master's probe: it
	// was kept, and is counted nowhere else.
	GossipKept int64
	// CancelAcks counts workers' answers to cancels (what they did with
	// the instance goes to the ledger's cancel counts).
	CancelAcks int64
	// Assignments counts tasks handed to workers, and InboxWaiting the
	// messages waiting in the master's inbox right after each (docs/papers.md
	// §2: the master is overloaded when InboxWaiting / Assignments, over
	// recent assignments, reaches 1). Inbox is the inbox's length now,
	// InboxCap its capacity.
	Assignments, InboxWaiting int64
	Inbox, InboxCap           int
	// SplitStats: the overload test's window, mean and decision, and
	// what splitting did (submaster.go).
	SplitStats
	// Wire traffic of all data connections, closed ones included.
	ConnStats
}

// LostStats counts workers lost, by cause.
type LostStats struct {
	Closed      int64 // its connection ended, not at its word or the master's
	Dead        int64 // gossip declared it dead
	Left        int64 // it left the gossip cluster with its connection open
	Reconnected int64 // it connected again under its name: the old connection was lost
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
	conns  *slog.Logger // handshakes and connections: rate-limited (ratelog.go)
	vlog   *slog.Logger // a line per task (retries, checks given up): rate-limited
	glog   *slog.Logger // gossip verdicts the link refuted, which a key holder can forge: rate-limited
	nlog   *slog.Logger // joins and losses of names past maxNamesKept (joinLog): rate-limited
	ln     net.Listener
	start  time.Time
	policy sched.Policy // loop-owned
	ledger *sched.Ledger
	// adaptive: the policy sizes remote queues from measurements.
	adaptive bool
	restart  atomic.Bool // Interrupt: workers are told the master will be back

	in       chan loopMsg
	loopCtx  context.Context
	stopLoop context.CancelFunc
	done     chan struct{} // closed when the loop has exited
	connCtx  context.Context
	stopConn context.CancelFunc
	gate     *gate // handshakes in progress (admit.go)
	// refusals counts refused connections and failed handshakes, and
	// logs them as a summary (admit.go).
	refusals *member.Tally

	checkEvery time.Duration // how often the loop looks for overdue instances
	// clock is the master's own pauses, which now leaves out (heartbeat);
	// nil: none counted.
	clock atomic.Pointer[pauseClock]

	nextWorker atomic.Int32
	minReached atomic.Bool
	progress   atomic.Int64 // results accepted in the current batch

	liveMu  sync.Mutex
	live    int
	liveCh  chan struct{} // closed and replaced when live changes
	joinedN int
	workers workerBook // name and host of every worker that joined (workers.go)

	// closing is won by the first Close, which closes closed when it is
	// done; the others wait on the channel (a wait that a simulation's
	// virtual clock sees as such, unlike one on a mutex).
	closing atomic.Bool
	closed  chan struct{}
	quit    chan struct{} // closed when Close begins: the loop stops waiting (messageCost)
	stopCtx func() bool
	wg      sync.WaitGroup

	relayReg relays      // relays connected (relay.go)
	unable   unableState // workers that refused the problem (refusals.go)
	// relayBudget bounds what the relays' streams hold together, and
	// relayOdd logs the streams closed over it (relay.go).
	relayBudget *relayBudget
	relayOdd    *slog.Logger
	// connected counts the connections held, against cfg.MaxWorkers.
	connected atomic.Int64

	loopState // owned by the loop goroutine
}

// NewMaster listens on cfg.Listen (or serves cfg.Listener) and starts the
// master. It shuts down when ctx is done or Close is called.
func NewMaster(ctx context.Context, cfg MasterConfig) (*Master, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := sched.New(cfg.Policy, cfg.Sched)
	if err != nil {
		return nil, fmt.Errorf("grid: master: %w", err)
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("grid: master: %w", err)
		}
	}
	m := &Master{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "master"),
		conns:  LimitLog(cfg.Logger, 5, 20),
		vlog:   LimitLog(cfg.Logger.With("component", "master"), 1, 10),
		glog:   LimitLog(cfg.Logger.With("component", "master"), 1, 10),
		nlog:   LimitLog(cfg.Logger.With("component", "master"), 1, 10),
		ln:     ln,
		start:  time.Now(),
		policy: p,
		ledger: sched.NewLedger(cfg.Ledger),
		in:     make(chan loopMsg, 4096),
		done:   make(chan struct{}),
		closed: make(chan struct{}),
		quit:   make(chan struct{}),
		gate:   newGate(cfg.MaxHandshakes, cfg.MaxHandshakesPerSource),
		liveCh: make(chan struct{}),
	}
	m.relayBudget = newRelayBudget(cfg.RelayBuffered)
	m.relayOdd = LimitLog(m.log, 1, 10)
	// Only eft, and rwq and r3q with sched.Config.Adaptive, use the
	// measurements.
	m.adaptive = sched.Measures(p.Name(), cfg.Sched)
	m.refusals = member.NewTally(cfg.Logger.With("component", "master"), slog.LevelWarn,
		"data connections refused or whose handshake failed (summary)", 0)
	m.checkEvery = min(max(cfg.DeadlineFloor/4, 10*time.Millisecond), time.Second)
	m.loopState.init()
	m.excludeBefore(cfg.Excluded) // verify.go
	m.loopCtx, m.stopLoop = context.WithCancel(context.Background())
	m.connCtx, m.stopConn = context.WithCancel(context.Background())
	m.wg.Add(3)
	go m.loop()
	go m.heartbeat() // master_loop.go
	go m.acceptLoop()
	m.stopCtx = context.AfterFunc(ctx, func() { m.Close() })
	m.log.Debug("master listening for workers", "addr", m.Addr(), "policy", p.Name(), "problem", cfg.Problem.Name)
	if cfg.Verify > 0 && cfg.Split.Rule != SplitOff {
		m.log.Info("a master that verifies does not split: a child master's results would come unverified", "split", cfg.Split.Rule.String())
	}
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
		if err := m.unableErr(); err != nil { // refusals.go
			return fmt.Errorf("grid: waiting for %d workers: %w", n, err)
		}
		if live >= n {
			if logged {
				m.log.Info("enough workers joined", "workers", live, "wanted", n)
			}
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
			// Said only when the wait is long: workers that are already
			// on their way (a local grid) need no word.
			m.log.Info(fmt.Sprintf("still waiting for workers: %d of %d joined; start esworker with -join and the cluster key", live, n), "addr", m.Addr())
			logged = true
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
	if need := TaskFrameSize(len(xs[0])); need > m.cfg.MaxFrame {
		return nil, fmt.Errorf("grid: generation %d: a task of dimension %d needs %d bytes, over the frame cap of %d bytes: raise the cap (esrun -max-frame, in MiB, at most %d)",
			gen, len(xs[0]), need, m.cfg.MaxFrame, MaxFrameLimit>>20)
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
			if w := m.Workers(); w == 0 {
				m.log.Warn("generation waiting: no worker connected", "gen", gen, "done", m.progress.Load(), "tasks", len(xs))
			} else {
				m.log.Info("generation in progress", "gen", gen, "done", m.progress.Load(), "tasks", len(xs), "workers", w)
			}
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

// WorkerStat is the master's view of one connected worker, for metrics:
// its name (as it introduced itself), slots, status (Clop's table: tasks
// held and running, as its last results said), the smoothed execution
// time and round trip the master measured, and whether it is late,
// draining or set aside.
type WorkerStat struct {
	ID              sched.WorkerID
	Name            string
	Slots           int
	Queued, Running int
	Outstanding     int // instances the master's books have on it
	Exec, RoundTrip time.Duration
	Late, Draining  bool
	Aside           bool // set aside for failing (MaxFailures)
}

// WorkerStats returns the master's view of every connected worker, in no
// particular order.
func (m *Master) WorkerStats() []WorkerStat {
	var out []WorkerStat
	m.ask(func() {
		out = make([]WorkerStat, 0, len(m.byID))
		for _, w := range m.order {
			if w.left {
				continue
			}
			out = append(out, WorkerStat{
				ID: w.id, Name: w.name, Slots: w.slots, Queued: int(w.queued), Running: int(w.running),
				Outstanding: len(w.out), Exec: time.Duration(w.exec), RoundTrip: time.Duration(w.rtt),
				Late: w.late, Draining: w.draining, Aside: w.aside,
			})
		}
	})
	return out
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
// open) or that leaves the cluster, and a relay with every worker behind
// it, is dropped as if its data connection had broken (its tasks go back
// to the queue and the connection is closed), unless its connection
// answers the master's probe within 2 s: gossip's word is not proof
// (probe.go). A worker that drained first has already left and is not
// touched. A worker on its way here (back from a child master) has no
// link to ask, and gossip's verdict does not end the wait for it: the
// verdict may be forged, and one about a frozen machine that thaws is
// taken back only when memberlist's push-pull next reaches it, up to
// half a minute later; the wait has a bound of its own (expectWorkers).
// Wire it as the membership's OnEvent. Other events are only logged by
// the membership.
func (m *Master) HandleMemberEvent(ev MemberEvent) {
	worker := ev.Member.MetaErr != nil || ev.Member.Meta.Role == RoleWorker
	if ev.Kind != MemberFailed && ev.Kind != MemberLeft {
		return
	}
	select {
	case m.in <- loopMsg{kind: msgMemberGone, name: ev.Member.Name, left: ev.Kind == MemberLeft, worker: worker}:
	case <-m.done:
	}
}

// Interrupt is Close, but tells the workers that the master will be back
// (Shutdown.Restart): they wait for a master to return, so a resumed run
// finds them.
func (m *Master) Interrupt() error {
	m.restart.Store(true)
	return m.Close()
}

// Close tells every worker the run is over (MsgShutdown), closes the
// connections and the listener, and waits for the master's goroutines. It
// is safe to call more than once.
func (m *Master) Close() error {
	if m.closing.CompareAndSwap(false, true) {
		close(m.quit)
		m.ask(m.endChildren) // split.go: the children hear it now, and say their workers did
		m.awaitReturns()     // split.go: workers on their way back from a child master
		if m.stopCtx != nil {
			m.stopCtx()
		}
		m.ln.Close()
		m.stopLoop()
		<-m.done
		m.relayReg.awaitByes() // relay.go: each relay is told the run is over
		m.stopConn()
		close(m.closed)
	}
	<-m.closed
	m.wg.Wait()
	m.refusals.Close()
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
		ip := sourceIP(nc.RemoteAddr())
		if kind, reason := m.gate.enter(ip); kind != "" {
			m.refuseConn(nc, kind, reason)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.handshake(nc, func() { m.gate.leave(ip) })
		}()
	}
}

// maxWorkersCeiling is the most connections DefaultMaxWorkers allows:
// about 1.3 GiB of the master's memory, at 80 KiB a connection.
const maxWorkersCeiling = 16384

// DefaultMaxWorkers is MasterConfig.MaxWorkers by default: three
// quarters of the process's open-file limit (the rest for gossip,
// handshakes, checkpoints and the like), at least 64 and at most
// 16,384.
func DefaultMaxWorkers() int {
	n := maxWorkersCeiling
	if lim := openFileLimit(); lim > 0 {
		n = min(n, max(lim*3/4, 64))
	}
	return n
}

// holdConn takes a place among the connections the master holds,
// unless all MaxWorkers are taken.
func (m *Master) holdConn() error {
	if m.connected.Add(1) > int64(m.cfg.MaxWorkers) {
		m.connected.Add(-1)
		return fmt.Errorf("master full: %d connections, its most (esrun -max-workers); try again later", m.cfg.MaxWorkers)
	}
	return nil
}

// handshake authenticates one worker and hands it to the loop. It calls
// done once the handshake is over (its slot in the gate is free again).
func (m *Master) handshake(nc net.Conn, done func()) {
	var id int32
	held := false // a place among MaxWorkers is taken for the connection
	conn, hello, err := Accept(m.connCtx, nc, AcceptConfig{
		Key:          m.cfg.Key,
		Timeout:      m.cfg.HandshakeTimeout,
		HelloTimeout: m.cfg.HelloTimeout,
		Refused: func(peer net.Addr, reason string) {
			m.refusals.Add(refusedKind(reason), peer.String()+": "+reason)
		},
		Welcome: func(h *Hello) (int32, ProblemSpec, error) {
			if h.Name == "" {
				// Gossip failures are matched to connections by name.
				return 0, ProblemSpec{}, errors.New("worker has no name")
			}
			if len(h.Name) > MaxWorkerName {
				return 0, ProblemSpec{}, fmt.Errorf("worker name of %d bytes, at most %d", len(h.Name), MaxWorkerName)
			}
			if helloRole(h) != "" {
				// A child master's link or a relay (splitmsg.go).
				if err := m.holdConn(); err != nil {
					return 0, ProblemSpec{}, err
				}
				held = true
				id = m.nextWorker.Add(1)
				return id, m.cfg.Problem, nil
			}
			if why := m.excludedWhy(hostOf(nc.RemoteAddr())); why != "" { // verify.go: by host, whatever the name
				return 0, ProblemSpec{}, errors.New(why)
			}
			if h.Slots < 1 || h.Slots > MaxMetaSlots {
				return 0, ProblemSpec{}, fmt.Errorf("slots %d outside [1, %d]", h.Slots, MaxMetaSlots)
			}
			if len(h.Problems) > 0 && !slices.Contains(h.Problems, m.cfg.Problem.Name) {
				return 0, ProblemSpec{}, fmt.Errorf("worker does not offer problem %q (offers %v)", m.cfg.Problem.Name, h.Problems)
			}
			if err := m.holdConn(); err != nil {
				return 0, ProblemSpec{}, err
			}
			held = true
			id = m.nextWorker.Add(1)
			return id, m.cfg.Problem, nil
		},
		Conn: ConnConfig{
			MaxFrame:    m.cfg.MaxFrame,
			IdleTimeout: m.cfg.IdleTimeout,
			Heartbeat:   m.cfg.Heartbeat,
			Logger:      m.conns, // one line per refused connection, rate-limited
		},
	})
	done()
	if err != nil {
		// Accept has logged the reason and sent a Reject where it could.
		if held {
			m.connected.Add(-1)
		}
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-conn.Done() // closed with the master's connections, at the latest
		m.connected.Add(-1)
	}()
	if role := helloRole(hello); role != "" {
		m.acceptRole(role, conn, hello) // split.go
		return
	}
	w := &mworker{id: sched.WorkerID(id), name: hello.Name, host: hostOf(conn.RemoteAddr()), slots: hello.Slots, conn: conn, lastHeard: m.now()}
	m.workers.add(w.id, hello.Name, conn.RemoteAddr())
	// A loop that has ended never takes the worker: it is told the run
	// is over here. Asked first, since m.in has room after the loop's end
	// too, and a select would pick either case at random.
	select {
	case <-m.done:
		m.byeLate(conn)
		return
	default:
	}
	select {
	case m.in <- loopMsg{kind: msgJoined, w: w}:
	case <-m.done:
		m.byeLate(conn)
		return
	}
	conn.Start(func(msg Message) {
		lm := loopMsg{kind: msgFrame, w: w, msg: msg}
		select { // a send alone first: cheaper than the select below
		case m.in <- lm:
			return
		default:
		}
		select {
		case m.in <- lm:
		case <-m.done:
		}
	})
	// Report the close once every message before it has been forwarded:
	// Done closes only after the reader has returned.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-conn.Done():
		case <-m.done:
			if !w.taken {
				// The loop was ending as the join came (its last
				// select, or shutdownWorkers): nobody else tells it.
				m.byeLate(conn)
			}
			<-conn.Done()
		}
		select {
		case m.in <- loopMsg{kind: msgClosed, w: w}:
		case <-m.done:
		}
	}()
}

// byeLate tells a worker whose join the loop never took what the loop's
// shutdown tells the others (shutdownWorkers): the run is over or, when
// the master was interrupted, that it will be back, so that the worker
// waits for the resumed run rather than leave.
func (m *Master) byeLate(conn *Conn) { conn.SendAndClose(m.bye()) }
