// Package sim is a discrete-event simulator of a master and its workers on a
// virtual clock. It drives the very policies of package sched and feeds the
// same ledger the real master feeds, so a simulated run and a real one are
// accounted by one piece of code.
//
// The model, per machine of a Set: a task time per grain (the paper's
// Table 1) or a speed ratio; a number of CPUs (execution slots); a one-way
// link delay to the master, or to a relay that forwards its messages; a
// cost to send and to receive a message. The master handles one message at
// a time, each costing Set.MasterCost, so it saturates when messages come
// faster than it can handle them. A worker runs the tasks it is sent in the
// order they arrive (its remote queue) on its slots: a cancel of a held task
// removes it, a cancel of a running task stops it and the time it ran is
// wasted, a cancel that arrives after the result left does nothing. Task
// times can carry seeded log-normal noise, a machine can become slower at a
// given time, and a machine can leave. Same Config and seed, same result,
// bit for bit.
//
// Noise is a property of the task, not of the instance: task i of batch b
// has one factor, drawn from (seed, b, i) alone, and every instance of it
// takes that factor times the machine's time. So every policy faces the
// same task times for a seed, and Optimum can compute, from those very
// times, the clairvoyant floor that no schedule beats (see optimum.go).
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Slowdown makes a machine's tasks take Factor times their nominal time from
// time At on (Factor 1 restores it). A task running at At finishes its
// remaining work at the new pace.
type Slowdown struct {
	Machine string
	At      time.Duration
	Factor  float64
}

// Config is one simulated run.
type Config struct {
	// Set is the machine set (required).
	Set *Set
	// Policy is a sched policy name ("wq", "rr", "rwq", "r3q", "cyclic").
	Policy string
	// PolicyConfig parameterises the policy; the zero value takes the
	// policy's defaults.
	PolicyConfig sched.Config
	// NewPolicy, when set, builds the policy instead of Policy.
	NewPolicy func() (sched.Policy, error)
	// PolicyCost is the master's time for one step of its policy (its
	// own CPU, besides the cost of the messages): the master is busy
	// that long with each event it steps, before it hands over the
	// step's sends. 0: the policy's measured cost at the set's size
	// (MeasuredPolicyCost) when the set's master has a cost per
	// message, none when it has none. Negative: none.
	PolicyCost time.Duration
	// Workload is what the master runs (required).
	Workload Workload
	// AddedDelay is added to the one-way delay of every link that starts
	// at the master, except a local machine's: the paper's emulated WAN
	// delay. Machines behind a relay pay it once, on the relay's link.
	AddedDelay time.Duration
	// Noise is the sigma of log-normal multiplicative noise on each task's
	// time (mean-preserving: the factor is exp(sigma*Z - sigma²/2)), the
	// same for every instance of the task. 0 means no noise.
	Noise float64
	// Slowdowns are sudden changes of machine speed, besides those of the
	// set's machines (Machine.Slowdowns).
	Slowdowns []Slowdown
	// Leaves are machines that leave the run, besides those of the set
	// (Machine.LeaveAt).
	Leaves []Leave
	// NoOptimum skips the clairvoyant optimum (Result.Optimum stays zero).
	NoOptimum bool
	// Seed seeds the noise; same seed, same run.
	Seed uint64
	// Tick is how often the master steps sched.Tick and checks its
	// deadlines while a batch runs, as the real master does. Default
	// DefaultTick; negative: never (and no deadlines).
	Tick time.Duration
	// Deadlines are the master's (the rule grid.Master applies, with its
	// defaults), checked at every Tick: a running instance past its
	// deadline is overdue (sched.Overdue). Deadlines.Factor < 0: none.
	// Ceiling 0 is DefaultCeiling, the master's; negative: none. An
	// instance with no deadline (cut short at the ceiling already) that
	// runs past twice the ceiling, the master's task timeout, fails the
	// run, as the real master fails such a task.
	Deadlines sched.Deadlines
}

// DefaultCeiling is Config.Deadlines.Ceiling when 0: the real master's,
// half its default task timeout of 10 minutes (grid.MasterConfig).
const DefaultCeiling = 5 * time.Minute

// DefaultTick is Config.Tick when 0: the real master's deadline check
// interval with its default floor of 1 s (grid.MasterConfig).
const DefaultTick = 250 * time.Millisecond

// Leave makes a machine leave the run at time At: its slots stop, the
// tasks it holds and runs are lost, and the master is told (WorkerLeft).
// Results already sent still reach the master; messages to it are lost.
type Leave struct {
	Machine string
	At      time.Duration
}

// Stats are the simulator's own counters (the time accounting is in the
// ledger).
type Stats struct {
	// Events is the number of simulation events handled.
	Events int
	// Instances is the number of task instances started on a slot.
	Instances int
	// Messages is the number of messages sent (tasks, cancels, results).
	Messages int
	// HeldDropped counts held instances that a cancel removed from a
	// remote queue (the ledger counts the running ones it stopped).
	HeldDropped int
	// LateCancels counts cancels that reached a worker after the task had
	// finished there (the result and the cancel crossed).
	LateCancels int
	// StaleResults counts results that reached the master after their
	// batch had ended.
	StaleResults int
	// Lost counts messages that reached a machine after it had left.
	Lost int
}

// Result is the outcome of one run.
type Result struct {
	// Report is the ledger's accounting of the run.
	Report sched.Report
	// End is the virtual time at which the last batch finished.
	End time.Duration
	// Stats are the simulator's counters.
	Stats Stats
	// Optimum is the clairvoyant floor of the same run (zero with
	// Config.NoOptimum).
	Optimum Optimum
}

// worker is the simulated state of one machine acting as a worker.
type worker struct {
	m *Machine
	// The master's books: its instances on this worker, in send order;
	// sent[sentLo:] holds them, nSent of them not yet taken (taken ones
	// stay as gaps until the front passes them).
	sent     []sentTask
	sentLo   int
	nSent    int
	slots    []slot
	idle     []int32       // indexes of the idle slots (a stack)
	held     []heldTask    // the remote queue Q_r,k, FIFO
	commBusy time.Duration // busy-until of its message handling (send and receive)
	factor   float64       // current slowdown factor
	gone     bool          // the machine has left

	// The master's measurements of it, for its deadlines: smoothed
	// execution time and round trip (ns, gain 1/8, as the master's), and
	// whether Overdue has been stepped and it has not answered since.
	exec, rtt float64
	late      bool
	// overran is the longest run of its instances found overdue since it
	// last finished one (sched.Deadlines.OfWorker).
	overran time.Duration
}

// slot is one execution slot of a worker.
type slot struct {
	busy  bool
	batch int32
	task  int32
	start time.Duration
	end   time.Duration
	ver   uint32 // bumped when the pending done event becomes invalid
}

// sentTask is what the master knows of an instance it sent: when it sent
// it, and whether the worker then had an idle slot in the master's books
// (fewer instances outstanding than CPUs), so the task ran on arrival.
type sentTask struct {
	batch   int32
	task    int32
	at      time.Duration
	started time.Duration // when it started running in the master's books; -1: held
	idle    bool
	taken   bool // cancelled or answered: a gap in the books
	overdue bool // Overdue has been stepped for it
}

// heldTask is a task waiting in a worker's remote queue.
type heldTask struct {
	batch int32
	task  int32
}

// engine is one run in progress.
type engine struct {
	cfg        Config
	now        time.Duration
	q          eventQueue
	pol        sched.Policy
	acts       []sched.Action
	workers    []worker
	routes     []route
	relayBusy  []time.Duration // per machine: busy-until of its forwarding
	masterBusy time.Duration   // busy-until of the master
	policyCost time.Duration   // the master's time per policy step
	batch      int32           // current batch; -1 before the first
	open       bool            // the current batch is running
	exec       float64         // the master's smoothed execution time over the grid, ns
	deadlines  sched.Deadlines // cfg.Deadlines with its defaults
	overran    []uint8         // per task of the batch: its instances that went overdue
	atCeiling  []bool          // per task of the batch: an instance was cut short at the ceiling (sched.Deadlines.AtCeiling)
	end        time.Duration
	acct       accountant
	stats      Stats
	slows      []Slowdown      // cfg.Slowdowns, then every machine's own
	left       int             // machines that have left
	lastLeft   time.Duration   // when the last of them left
	ctx        context.Context // stops the run when done
	err        error           // ends the run (a task overdue for ever)
	// maxEvents, when positive, bounds the events run handles: a test's
	// guard, so that an event loop that spins fails instead of hanging.
	maxEvents int
}

// Run simulates cfg to the end of its workload.
func Run(cfg Config) (Result, error) {
	return RunContext(context.Background(), cfg)
}

// RunContext is Run, stopped with ctx's error once ctx is done: a long
// run (millions of the master's ticks) then ends at Ctrl-C, not when it
// is over.
func RunContext(ctx context.Context, cfg Config) (Result, error) {
	return runLimited(ctx, cfg, 0)
}

// runLimited is RunContext with at most maxEvents events (0: no bound).
func runLimited(ctx context.Context, cfg Config, maxEvents int) (Result, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return Result{}, err
	}
	e.ctx, e.maxEvents = ctx, maxEvents
	led := newLedger(&e.cfg)
	e.acct = ledgerAccountant{led}
	if err := e.run(); err != nil {
		return Result{}, err
	}
	res := Result{Report: led.Report(), End: e.end, Stats: e.stats}
	if !cfg.NoOptimum {
		res.Optimum = ComputeOptimum(cfg)
	}
	return res, nil
}

func newEngine(cfg Config) (*engine, error) {
	if cfg.Set == nil {
		return nil, errors.New("sim: no machine set")
	}
	if err := cfg.Set.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := cfg.Workload.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if cfg.Noise < 0 || math.IsNaN(cfg.Noise) {
		return nil, errors.New("sim: noise must be >= 0")
	}
	if cfg.AddedDelay < 0 {
		return nil, errors.New("sim: negative added delay")
	}
	var pol sched.Policy
	var err error
	if cfg.NewPolicy != nil {
		pol, err = cfg.NewPolicy()
	} else {
		pol, err = sched.New(cfg.Policy, cfg.PolicyConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	e := &engine{
		cfg:       cfg,
		pol:       pol,
		routes:    cfg.Set.routes(cfg.AddedDelay),
		relayBusy: make([]time.Duration, len(cfg.Set.Machines)),
		batch:     -1,
		deadlines: cfg.Deadlines.WithDefaults(),
	}
	if e.deadlines.Ceiling == 0 {
		e.deadlines.Ceiling = DefaultCeiling
	}
	switch {
	case cfg.PolicyCost > 0:
		e.policyCost = cfg.PolicyCost
	case cfg.PolicyCost == 0 && cfg.Set.MasterCost > 0:
		e.policyCost = MeasuredPolicyCost(pol.Name(), len(cfg.Set.Machines))
	}
	e.workers = make([]worker, len(cfg.Set.Machines))
	for k := range e.workers {
		m := &cfg.Set.Machines[k]
		w := worker{m: m, slots: make([]slot, m.CPUs), idle: make([]int32, m.CPUs), factor: 1}
		for i := range w.idle {
			w.idle[i] = int32(m.CPUs - 1 - i) // slot 0 on top
		}
		e.workers[k] = w
	}
	idx := cfg.Set.indexByName()
	e.slows = append(e.slows, cfg.Slowdowns...)
	for _, m := range cfg.Set.Machines {
		e.slows = append(e.slows, m.Slowdowns...)
	}
	for i, s := range e.slows {
		k, ok := idx[s.Machine]
		if !ok {
			return nil, fmt.Errorf("sim: slowdown of unknown machine %q", s.Machine)
		}
		if !(s.Factor > 0) || math.IsInf(s.Factor, 1) || s.At < 0 {
			return nil, fmt.Errorf("sim: slowdown of %s: factor must be > 0 and time >= 0", s.Machine)
		}
		e.q.push(event{at: s.At, kind: evSlowdown, slot: int32(i), m: msg{w: int32(k)}})
	}
	for _, l := range leavesOf(&cfg) {
		k, ok := idx[l.Machine]
		if !ok {
			return nil, fmt.Errorf("sim: leave of unknown machine %q", l.Machine)
		}
		if l.At < 0 {
			return nil, fmt.Errorf("sim: leave of %s: negative time", l.Machine)
		}
		e.q.push(event{at: l.At, kind: evLeave, m: msg{w: int32(k)}})
	}
	return e, nil
}

// leavesOf lists cfg.Leaves, then the set's machines' own leaves.
func leavesOf(cfg *Config) []Leave {
	ls := slices.Clone(cfg.Leaves)
	for _, m := range cfg.Set.Machines {
		if m.LeaveAt > 0 {
			ls = append(ls, Leave{Machine: m.Name, At: m.LeaveAt})
		}
	}
	return ls
}

// run joins every worker, starts the first batch and handles events until
// the last batch is done; then it lets what is still in flight arrive
// (cancels stop the last replicas, whose executions the ledger gets),
// starting nothing new.
func (e *engine) run() error {
	for k := range e.workers {
		e.step(sched.Event{Kind: sched.WorkerJoined, Worker: sched.WorkerID(k), Slots: e.workers[k].m.CPUs})
	}
	e.q.push(event{at: 0, kind: evBatchStart, m: msg{batch: 0}})
	for e.q.len() > 0 {
		ev := e.q.pop()
		e.now = ev.at
		e.stats.Events++
		if e.stats.Events%(1<<14) == 0 {
			if err := e.ctx.Err(); err != nil {
				return fmt.Errorf("sim: stopped at %v of simulated time: %w", e.now, err)
			}
		}
		if e.maxEvents > 0 && e.stats.Events > e.maxEvents {
			return fmt.Errorf("sim: policy %s still running after %d events, at %v in batch %d", e.pol.Name(), e.maxEvents, e.now, e.batch)
		}
		e.handle(ev)
		if e.err != nil {
			return e.err
		}
	}
	if e.open || int(e.batch) < len(e.cfg.Workload.Batches) {
		if e.left == len(e.workers) {
			return fmt.Errorf("sim: every machine had left by %v, with %d of %d batches done", e.lastLeft, e.batch, len(e.cfg.Workload.Batches))
		}
		return fmt.Errorf("sim: policy %s stalled in batch %d at %v with no event pending", e.pol.Name(), e.batch, e.now)
	}
	return nil
}

func (e *engine) handle(ev event) {
	switch ev.kind {
	case evBatchStart:
		e.startBatch(ev.m.batch)
	case evAtRelay:
		e.atRelay(ev.m)
	case evAtWorker:
		e.atWorker(ev.m)
	case evWorkerHandle:
		e.workerHandle(ev.m)
	case evTaskDone:
		w := &e.workers[ev.m.w]
		if s := &w.slots[ev.slot]; s.busy && s.ver == ev.ver {
			e.taskDone(int(ev.m.w), int(ev.slot))
		}
	case evAtMaster:
		e.atMaster(ev.m)
	case evMasterHandle:
		e.masterHandle(ev.m)
	case evSlowdown:
		e.slowdown(int(ev.m.w), e.slows[ev.slot].Factor)
	case evLeave:
		e.leave(int(ev.m.w))
	case evTick:
		e.tick(ev.m.batch)
	}
}

// step feeds ev to the policy and carries out its actions.
func (e *engine) step(ev sched.Event) {
	ev.At = e.now
	e.acts = e.pol.Step(ev, e.acts[:0])
	if e.policyCost > 0 {
		e.masterBusy = max(e.masterBusy, e.now) + e.policyCost
	}
	e.acct.step(e.now, ev, e.acts)
	for _, a := range e.acts {
		switch a.Kind {
		case sched.Send:
			st := sentTask{batch: e.batch, task: int32(a.Task), at: e.now, started: -1, idle: e.workers[a.Worker].nSent < e.workers[a.Worker].m.CPUs}
			if st.idle {
				st.started = e.now
			}
			e.addSent(int(a.Worker), st)
			e.masterSend(msg{kind: msgTask, w: int32(a.Worker), batch: e.batch, task: int32(a.Task)})
		case sched.Cancel:
			e.takeSent(int(a.Worker), e.batch, int32(a.Task))
			e.masterSend(msg{kind: msgCancel, w: int32(a.Worker), batch: e.batch, task: int32(a.Task)})
		}
	}
}

// addSent records an instance sent to worker k, reusing the room that
// taken records left at the front rather than growing.
func (e *engine) addSent(k int, s sentTask) {
	w := &e.workers[k]
	if len(w.sent) == cap(w.sent) && w.sentLo > 0 {
		j := 0
		for _, r := range w.sent[w.sentLo:] {
			if !r.taken {
				w.sent[j] = r
				j++
			}
		}
		w.sent, w.sentLo = w.sent[:j], 0
	}
	w.sent = append(w.sent, s)
	w.nSent++
}

// takeSent removes the master's record of an instance on worker k and
// returns it (ok false when there is none: cancelled already). Results
// come back about in send order, so the search from the front is short.
func (e *engine) takeSent(k int, batch, task int32) (sentTask, bool) {
	w := &e.workers[k]
	for i := w.sentLo; i < len(w.sent); i++ {
		s := &w.sent[i]
		if s.taken || s.batch != batch || s.task != task {
			continue
		}
		s.taken = true
		got := *s
		w.nSent--
		for w.sentLo < len(w.sent) && w.sent[w.sentLo].taken {
			w.sentLo++
		}
		if w.nSent == 0 {
			w.sent, w.sentLo = w.sent[:0], 0
		}
		e.promote(k)
		return got, true
	}
	return sentTask{}, false
}

// promote starts, in the master's books, the held instance that a freed
// slot of worker k takes: the CPUs-th outstanding one, now (as the
// master does when an instance leaves its books).
func (e *engine) promote(k int) {
	w := &e.workers[k]
	if w.nSent < w.m.CPUs {
		return
	}
	n := 0
	for i := w.sentLo; i < len(w.sent); i++ {
		s := &w.sent[i]
		if s.taken {
			continue
		}
		if n++; n == w.m.CPUs {
			if s.started < 0 {
				s.started = e.now
			}
			return
		}
	}
}

// clearSent forgets every record of worker k.
func (e *engine) clearSent(k int) {
	w := &e.workers[k]
	w.sent, w.sentLo, w.nSent = w.sent[:0], 0, 0
}

// startBatch begins batch b.
func (e *engine) startBatch(b int32) {
	e.batch, e.open = b, true
	e.overran = append(e.overran[:0], make([]uint8, e.cfg.Workload.Batches[b].N)...)
	e.atCeiling = append(e.atCeiling[:0], make([]bool, e.cfg.Workload.Batches[b].N)...)
	for k := range e.workers {
		e.clearSent(k) // every instance was settled, or its result is stale now
	}
	e.step(sched.Event{Kind: sched.BatchStarted, N: e.cfg.Workload.Batches[b].N})
	e.checkDone()
	e.nextTick(b)
}

// tickEvery is the interval between Ticks (0: none).
func (e *engine) tickEvery() time.Duration {
	switch t := e.cfg.Tick; {
	case t < 0:
		return 0
	case t == 0:
		return DefaultTick
	default:
		return t
	}
}

// nextTick schedules batch b's next Tick while the batch runs and
// some work is under way (so a stalled policy is still caught). Only
// work counts: a slowdown or a leave still ahead cannot end the batch,
// and one set far off (slow=800000h) kept the ticks going up to it, a
// run without end once every machine had left.
func (e *engine) nextTick(b int32) {
	if d := e.tickEvery(); d > 0 && e.open && e.batch == b && e.q.working() > 0 {
		e.q.push(event{at: e.now + d, kind: evTick, m: msg{batch: b}})
	}
}

// tick steps sched.Tick in batch b, if it still runs.
func (e *engine) tick(b int32) {
	if !e.open || e.batch != b {
		return
	}
	e.checkDeadlines()
	if !e.open || e.batch != b {
		return
	}
	e.step(sched.Event{Kind: sched.Tick})
	e.checkDone()
	e.nextTick(b)
}

// checkDone ends the batch once the policy has every result, and schedules
// the next one after the engine's own cost.
func (e *engine) checkDone() {
	if !e.open || !e.pol.Done() {
		return
	}
	e.open = false
	next := e.batch + 1
	if int(next) == len(e.cfg.Workload.Batches) {
		e.end = e.now
		e.batch = next
		return
	}
	e.q.push(event{at: e.now + e.cfg.Workload.EngineCost, kind: evBatchStart, m: msg{batch: next}})
}

// masterSend has the master encode m (one message's cost, after whatever it
// is already busy with) and puts it on the route to its worker.
func (e *engine) masterSend(m msg) {
	e.masterBusy = max(e.masterBusy, e.now) + e.cfg.Set.MasterCost
	e.stats.Messages++
	e.forward(m, e.masterBusy, 0)
}

// forward moves m, which leaves its sender at time t, along its route from
// hop index hop: down (tasks, cancels) from the master towards the worker,
// up (results) towards the master. A relay with a forwarding cost becomes an
// event, so it handles messages in the order they reach it.
func (e *engine) forward(m msg, t time.Duration, hop int) {
	r := &e.routes[m.w]
	n := len(r.relays)
	for ; hop < n; hop++ {
		var relay int
		if m.kind == msgResult {
			// Up: hop h crosses relay n-1-h after the link below it.
			relay = r.relays[n-1-hop]
			t += r.hops[n-hop]
		} else {
			relay = r.relays[hop]
			t += r.hops[hop]
		}
		if e.cfg.Set.Machines[relay].RelayCost > 0 {
			m.hop = int8(hop)
			e.q.push(event{at: t, kind: evAtRelay, m: m})
			return
		}
	}
	if m.up() {
		e.q.push(event{at: t + r.hops[0], kind: evAtMaster, m: m})
	} else {
		e.q.push(event{at: t + r.hops[n], kind: evAtWorker, m: m})
	}
}

// atRelay: m reached relay hop m.hop, which forwards it after its cost.
func (e *engine) atRelay(m msg) {
	r := &e.routes[m.w]
	n := len(r.relays)
	relay := r.relays[m.hop]
	if m.up() {
		relay = r.relays[n-1-int(m.hop)]
	}
	e.relayBusy[relay] = max(e.relayBusy[relay], e.now) + e.cfg.Set.Machines[relay].RelayCost
	e.forward(m, e.relayBusy[relay], int(m.hop)+1)
}

// atWorker: m reached its worker, which decodes it after whatever it is
// already sending or receiving.
func (e *engine) atWorker(m msg) {
	w := &e.workers[m.w]
	if w.gone {
		e.stats.Lost++
		return
	}
	w.commBusy = max(w.commBusy, e.now) + w.m.RecvCost
	if w.commBusy == e.now {
		e.workerHandle(m)
		return
	}
	e.q.push(event{at: w.commBusy, kind: evWorkerHandle, m: m})
}

// workerHandle applies a decoded task or cancel at its worker.
func (e *engine) workerHandle(m msg) {
	k := int(m.w)
	w := &e.workers[k]
	if w.gone {
		e.stats.Lost++
		return
	}
	switch m.kind {
	case msgTask:
		w.held = append(w.held, heldTask{batch: m.batch, task: m.task})
		e.fillSlots(k)
	case msgCancel:
		for i, h := range w.held {
			if h.batch == m.batch && h.task == m.task {
				// A drop says nothing of the slots: the master takes
				// it as no answer (the real one too).
				w.held = append(w.held[:i], w.held[i+1:]...)
				e.stats.HeldDropped++
				e.acct.dropped(e.now, sched.WorkerID(k), sched.TaskID(m.task))
				return
			}
		}
		e.ackCancel(k, m)
		for i := range w.slots {
			s := &w.slots[i]
			if s.busy && s.batch == m.batch && s.task == m.task {
				s.busy = false
				s.ver++
				w.idle = append(w.idle, int32(i))
				e.acct.ran(sched.Execution{Worker: sched.WorkerID(k), Task: sched.TaskID(m.task),
					Start: s.start, End: e.now, Cancelled: true})
				e.fillSlots(k)
				return
			}
		}
		e.stats.LateCancels++
		if la, ok := e.acct.(lateAccountant); ok {
			la.late(e.now, sched.WorkerID(k), sched.TaskID(m.task))
		}
	}
}

// ackCancel sends the master worker k's answer to a cancel that found its
// instance running or finished: it shows a late worker alive (the real
// worker acknowledges every cancel; only a late worker's answer about a
// slot changes anything).
func (e *engine) ackCancel(k int, m msg) {
	w := &e.workers[k]
	if !w.late {
		return
	}
	w.commBusy = max(w.commBusy, e.now) + w.m.SendCost
	e.stats.Messages++
	e.forward(msg{kind: msgAck, w: m.w, batch: m.batch, task: m.task}, w.commBusy, 0)
}

// fillSlots starts held tasks, oldest first, on the worker's idle slots.
func (e *engine) fillSlots(k int) {
	w := &e.workers[k]
	for len(w.idle) > 0 && len(w.held) > 0 {
		i := w.idle[len(w.idle)-1]
		w.idle = w.idle[:len(w.idle)-1]
		s := &w.slots[i]
		h := w.held[0]
		w.held = w.held[1:]
		b := &e.cfg.Workload.Batches[h.batch]
		d := float64(e.cfg.Set.TaskTime(k, b.grain(int(h.task)))) * w.factor
		d *= NoiseFactor(e.cfg.Seed, h.batch, h.task, e.cfg.Noise)
		s.busy, s.batch, s.task, s.start = true, h.batch, h.task, e.now
		s.end = e.now + time.Duration(math.Round(d))
		s.ver++
		e.stats.Instances++
		e.q.push(event{at: s.end, kind: evTaskDone, slot: i, ver: s.ver, m: msg{w: int32(k)}})
	}
}

// taskDone: slot i of worker k finished its task; the result goes back and
// the slot takes the next held task.
func (e *engine) taskDone(k, i int) {
	w := &e.workers[k]
	s := &w.slots[i]
	s.busy = false
	w.idle = append(w.idle, int32(i))
	e.acct.ran(sched.Execution{Worker: sched.WorkerID(k), Task: sched.TaskID(s.task), Start: s.start, End: e.now})
	w.commBusy = max(w.commBusy, e.now) + w.m.SendCost
	e.stats.Messages++
	e.forward(msg{kind: msgResult, w: int32(k), batch: s.batch, task: s.task, exec: execMicros(e.now - s.start)}, w.commBusy, 0)
	e.fillSlots(k)
}

// atMaster: a result reached the master, which decodes it after whatever it
// is already doing.
func (e *engine) atMaster(m msg) {
	e.masterBusy = max(e.masterBusy, e.now) + e.cfg.Set.MasterCost
	if e.masterBusy == e.now {
		e.masterHandle(m)
		return
	}
	e.q.push(event{at: e.masterBusy, kind: evMasterHandle, m: m})
}

// masterHandle gives a decoded result to the policy, unless its batch is
// over (a replica's late result).
//
// The result carries what a real master can measure (for Config.Adaptive):
// Exec as the worker reports it (whole microseconds), and, for an instance sent while the
// worker had an idle slot in the master's books (so it did not wait in the
// remote queue), RTT = now − sent − Exec: the network both ways plus both
// sides' message handling and queueing. Instances sent to be held give no
// RTT, since the master cannot tell how long they waited.
func (e *engine) masterHandle(m msg) {
	w := &e.workers[m.w]
	if m.kind == msgAck {
		e.answered(int(m.w))
		return
	}
	exec := time.Duration(m.exec) * time.Microsecond
	sched.Smooth(&w.exec, exec)
	sched.Smooth(&e.exec, exec)
	w.overran = 0 // measured: its mean says how long it takes
	if !e.open || m.batch != e.batch {
		e.stats.StaleResults++
		e.answered(int(m.w))
		return
	}
	w.late = false
	ev := sched.Event{Kind: sched.ResultArrived, Worker: sched.WorkerID(m.w), Task: sched.TaskID(m.task), Exec: exec}
	if s, ok := e.takeSent(int(m.w), m.batch, m.task); ok && s.idle && m.exec > 0 {
		ev.RTT = max(e.now-s.at-ev.Exec, 0)
		sched.Smooth(&w.rtt, ev.RTT)
	}
	e.step(ev)
	e.checkDone()
}

// answered: worker k answered the master other than with a result of
// the running batch (a stale result, an answer to a cancel): a late
// worker is alive, and the policy is told (Measured), as the master does.
func (e *engine) answered(k int) {
	w := &e.workers[k]
	if !w.late || w.gone {
		return
	}
	w.late = false
	if e.open {
		e.step(sched.Event{Kind: sched.Measured, Worker: sched.WorkerID(k)})
		e.checkDone()
	}
}

// checkDeadlines steps Overdue for every running instance, in the
// master's books, past its worker's deadline.
func (e *engine) checkDeadlines() {
	if e.deadlines.Factor < 0 {
		return
	}
	for k := range e.workers {
		w := &e.workers[k]
		if w.gone || w.nSent == 0 {
			continue
		}
		d := e.deadlines.OfWorker(w.exec, e.exec, w.rtt, sched.Overran(w.overran, w.late))
		n := 0
		for i := w.sentLo; i < len(w.sent) && n < w.m.CPUs; i++ {
			s := &w.sent[i]
			if s.taken {
				continue
			}
			n++
			if s.started < 0 || s.overdue || s.batch != e.batch {
				continue
			}
			ceilinged := int(s.task) < len(e.atCeiling) && e.atCeiling[s.task]
			n := e.overruns(s.task)
			run, again := e.now-s.started, e.deadlines.Again(d, n, ceilinged)
			if again == 0 {
				// Cut short at the ceiling already: no deadline; the
				// master's task timeout alone ends it. Past it, the
				// master drops the worker, and after MaxRetries+1 such
				// timeouts fails the run; the simulator, which has no
				// retries of its own, fails it at the first.
				if timeout := 2 * e.deadlines.Ceiling; run > timeout && e.err == nil {
					e.err = fmt.Errorf("sim: task %d of batch %d ran %v on %s, past the task timeout of %v (twice the deadlines' ceiling), after it was cut short at the ceiling: a real master fails it once it has run past the timeout MaxRetries+1 times",
						s.task, e.batch, run, w.m.Name, timeout)
				}
				continue
			}
			if run <= again {
				continue
			}
			s.overdue = true
			w.late = true
			w.overran = max(w.overran, run)
			if e.deadlines.AtCeiling(d, n) && int(s.task) < len(e.atCeiling) {
				e.atCeiling[s.task] = true
			}
			if int(s.task) < len(e.overran) && e.overran[s.task] < math.MaxUint8 {
				e.overran[s.task]++
				if e.overran[s.task] >= maxOverdue && e.err == nil {
					e.err = fmt.Errorf("sim: task %d of batch %d went overdue %d times, the last %v into its run on %s: longer than its deadlines on every machine it was sent to (a real master fails it at its task timeout)",
						s.task, e.batch, maxOverdue, e.now-s.started, w.m.Name)
				}
			}
			e.step(sched.Event{Kind: sched.Overdue, Worker: sched.WorkerID(k), Task: sched.TaskID(s.task)})
			if !e.open {
				return
			}
		}
	}
}

// maxOverdue is how many of a task's instances in a batch may go
// overdue before the run fails. Each doubles the task's next deadline,
// ten times at most (sched.Deadlines.Again); without a ceiling
// (Deadlines.Ceiling < 0), a task longer than the longest deadline (30 s
// × 2¹⁰, 8.5 h, on a machine not yet measured) was cancelled and sent
// again for ever, and the run never ended. With one, the task timeout
// ends it first.
const maxOverdue = 20

// overruns is how many instances of task t of the batch went overdue.
func (e *engine) overruns(t int32) int {
	if t < 0 || int(t) >= len(e.overran) {
		return 0
	}
	return int(e.overran[t])
}

// execMicros is an execution time as a result message carries it: whole
// microseconds, 0 (unknown) beyond what 32 bits hold (71 minutes).
func execMicros(d time.Duration) uint32 {
	us := d / time.Microsecond
	if us < 0 || us > math.MaxUint32 {
		return 0
	}
	return uint32(us)
}

// slowdown sets machine k's pace; running tasks finish their remaining
// work at the new pace.
func (e *engine) slowdown(k int, f float64) {
	w := &e.workers[k]
	if w.gone {
		return
	}
	old := w.factor
	w.factor = f
	if sa, ok := e.acct.(speedAccountant); ok {
		// The worker report's speed: the ratio at the workload's mean grain, f times slower.
		grain := e.cfg.Workload.MeanGrain()
		sa.speed(e.now, sched.WorkerID(k), float64(grain)/float64(e.cfg.Set.TaskTime(k, grain))/f)
	}
	for i := range w.slots {
		s := &w.slots[i]
		if !s.busy {
			continue
		}
		rem := float64(s.end-e.now) * f / old
		s.end = e.now + time.Duration(math.Round(rem))
		s.ver++
		e.q.push(event{at: s.end, kind: evTaskDone, slot: int32(i), ver: s.ver, m: msg{w: int32(k)}})
	}
}

// leave: machine k leaves. What it runs and holds is lost, with no word to
// the master but the WorkerLeft it is told now.
func (e *engine) leave(k int) {
	w := &e.workers[k]
	if w.gone {
		return
	}
	w.gone = true
	e.left++
	e.lastLeft = e.now
	for i := range w.slots {
		w.slots[i].busy = false
		w.slots[i].ver++
	}
	w.held = nil
	e.clearSent(k)
	e.step(sched.Event{Kind: sched.WorkerLeft, Worker: sched.WorkerID(k)})
	e.checkDone()
}

// NoiseFactor is the noise of task task of batch batch: exp(sigma·Z −
// sigma²/2) with Z a standard normal drawn from (seed, batch, task) alone
// (mean 1; 1 when sigma is 0). Every instance of the task, on any machine
// and under any policy, is slowed by this same factor.
func NoiseFactor(seed uint64, batch, task int32, sigma float64) float64 {
	if sigma == 0 {
		return 1
	}
	h := mix64(seed ^ mix64(uint64(uint32(batch))<<32|uint64(uint32(task))))
	u1 := (float64(h>>11) + 0.5) / (1 << 53) // in (0, 1)
	u2 := float64(mix64(h+0x9e3779b97f4a7c15)>>11) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	return math.Exp(sigma*z - sigma*sigma/2)
}

// mix64 is splitmix64's finaliser.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
