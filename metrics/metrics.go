// Package metrics exports esgrid's figures to Prometheus, from a registry
// of our own (never the global one): the master's time accounting, fed
// by the ledger's per-generation output (sched.LedgerConfig.OnGeneration),
// the master's counters and view of its workers, read when Prometheus
// scrapes, and each worker agent's activity. Nothing here keeps books of
// its own, and nothing costs anything per task: a generation's figures
// are observed once, when the ledger says they are final, and everything
// else is read at scrape time.
//
// Names follow Prometheus's conventions: the esgrid_ prefix, base units
// (seconds, bytes), _total for counters. Per-worker series carry a
// worker label, the name the worker gave; the master's exist only while
// the worker is connected, so the label set follows the workers present.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/sched"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry of our own with the Go runtime and
// process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewRunRegistry returns a registry of our own, to serve, and the
// registerer to register a run's collectors with: every series it
// gathers, the Go runtime's and the process's included, carries the
// label run=name (the run's name, esrun -run-name), so that one
// Prometheus holds many runs apart.
func NewRunRegistry(name string) (*prometheus.Registry, prometheus.Registerer) {
	reg := prometheus.NewRegistry()
	r := prometheus.WrapRegistererWith(prometheus.Labels{"run": name}, reg)
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, r
}

// RunInfo describes a run, for esgrid_run_info.
type RunInfo struct {
	ID       string // unique to the run (esrun makes one at random)
	Seed     uint64
	Policy   string // the scheduling policy
	Problem  string
	Strategy string // es or cma
}

// LastGenerationFigures are the figures of esgrid_last_generation_seconds,
// one series each, all set when a generation's figures are final.
var LastGenerationFigures = []string{"duration", "compute", "sync_wait", "comm", "comm_paper", "between", "lb", "barrier_bound", "busy", "wasted"}

// MasterState is what the master knows when Prometheus scrapes: its
// counters (grid.MasterStats) and its view of each connected worker.
type MasterState struct {
	Workers, Joined int // connected now; joins
	Named           int // workers that joined, each name once
	// Results of an earlier generation, discarded; results for tasks the
	// worker was never sent; evaluations that failed; instances overdue;
	// workers whose connection the master dropped.
	Stale, Unsolicited, Failed, Overdue, Dropped int64
	// Workers lost during the run, by cause (LostCauses; dropped, the
	// master's own drops, included).
	Lost                                   map[string]int64
	BytesIn, BytesOut, FramesIn, FramesOut int64
	// The inbox: its length and capacity now, and docs/papers.md §2's
	// overload signal: tasks assigned, and the messages waiting right
	// after each.
	Inbox, InboxCap           int
	Assignments, InboxWaiting int64
	PerWorker                 []WorkerState
	// Data connections refused, or whose handshake failed, by kind
	// (grid's Refused* kinds: busy, per_source, timeout, wrong_key, ...).
	Refused map[string]int64
	// -verify: results confirmed by a second host, values that differed
	// from the agreed one, hosts excluded for it.
	Verified, Mismatches, Excluded int64
	// docs/papers.md §2, masters that split: the overload test's mean over its
	// window and its decision now; the masters working on this master's
	// batch now (itself and its children's trees); children made, and
	// splits the rule refused.
	OverloadMean       float64
	Overloaded         bool
	Masters            int
	Splits, Suppressed int64
	// Gossip's verdicts (a worker or a relay dead, or left) that the
	// master checked on the data link and found wrong: the link answered,
	// so it kept it.
	GossipKept int64
}

// WorkerState is the master's view of one connected worker.
type WorkerState struct {
	Name            string
	Slots           int
	Queued, Running int // as its last results said
	Exec, RoundTrip time.Duration
}

// LostCauses are the causes of esgrid_workers_lost_total, every one
// exported from the start: closed (the connection ended, not at the
// worker's word, the master's or a split's), gossip_dead (gossip declared
// it dead), left_cluster (it left the gossip cluster), reconnected (it
// connected again: the old connection was lost) and dropped (the master
// dropped it).
var LostCauses = []string{"closed", "gossip_dead", "left_cluster", "reconnected", "dropped"}

// Buckets for per-generation times: 1 ms to about 2.5 min.
var genBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 14)

// Master exports a master's figures. Register it with Register; feed it
// Generation (the ledger's OnGeneration) and Progress (the ES's
// generations); it reads the master's state at each scrape.
type Master struct {
	state atomic.Pointer[func() MasterState]

	info                                          *prometheus.GaugeVec
	generation, best, mean                        prometheus.Gauge
	evals                                         prometheus.Counter
	gens                                          prometheus.Counter
	syncH, commH, commPaperH, computeH, durationH prometheus.Histogram
	syncC, commC, commPaperC, computeC, durationC prometheus.Counter
	lbC, barrierC, busyC, wastedC, betweenC       prometheus.Counter
	tasks, cancels                                *prometheus.CounterVec
	last                                          *prometheus.GaugeVec

	mu         sync.Mutex
	accepted   float64
	duplicates float64
	lastEvals  int

	descs masterDescs
}

type masterDescs struct {
	results, workers, joined, named, unsolicited, failed, overdue, dropped *prometheus.Desc
	lost, gossipKept                                                       *prometheus.Desc
	refused, verified, excluded                                            *prometheus.Desc
	bytes, frames, inbox, inboxCap, assignments, waiting                   *prometheus.Desc
	wRTT, wExec, wSlots, wTasks                                            *prometheus.Desc
	overloadMean, overloaded, masters, splits                              *prometheus.Desc
}

// NewMaster returns the master's metrics; state is called at each scrape
// (nil: no master state exported).
func NewMaster(state func() MasterState) *Master {
	m := &Master{}
	m.SetState(state)
	m.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "esgrid_run_info",
		Help: "Always 1; its labels describe the run: its id (unique to the run), the seed, the scheduling policy, the problem and the strategy."}, []string{"run_id", "seed", "policy", "problem", "strategy"})
	m.generation = prometheus.NewGauge(prometheus.GaugeOpts{Name: "esgrid_generation",
		Help: "The ES generation last completed (selection done)."})
	m.best = prometheus.NewGauge(prometheus.GaugeOpts{Name: "esgrid_best_fitness",
		Help: "The best fitness among the parents after the last generation (lower is better)."})
	m.mean = prometheus.NewGauge(prometheus.GaugeOpts{Name: "esgrid_mean_fitness",
		Help: "The mean fitness of the parents after the last generation."})
	m.evals = prometheus.NewCounter(prometheus.CounterOpts{Name: "esgrid_evaluations_total",
		Help: "Fitness evaluations the ES has used (accepted results)."})
	m.gens = prometheus.NewCounter(prometheus.CounterOpts{Name: "esgrid_generations_total",
		Help: "Generations whose time accounting is final (the series below move once per generation)."})
	hist := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: genBuckets})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m.syncH = hist("esgrid_generation_sync_wait_seconds", "Per generation: the sync wait, from the moment Q is empty and a master-side sender slot waits for work (rr, r3q: the first replica) until the last result (docs/papers.md §1).")
	m.commH = hist("esgrid_generation_comm_seconds", "Per generation: comm as esgrid defines it, the mean time per worker slot before the sync wait that was neither executing nor starved of work (Q empty).")
	m.commPaperH = hist("esgrid_generation_comm_paper_seconds", "Per generation: comm as the paper defines it, the mean time per worker slot not executing a task, sync wait included.")
	m.computeH = hist("esgrid_generation_compute_seconds", "Per generation: compute = duration − sync wait − comm (esgrid's comm).")
	m.durationH = hist("esgrid_generation_duration_seconds", "Per generation: its duration, from its tasks being ready to its last result.")
	m.syncC = counter("esgrid_sync_wait_seconds_total", "Sum of the generations' sync wait.")
	m.commC = counter("esgrid_comm_seconds_total", "Sum of the generations' comm (esgrid's: outside the sync wait, starved slots left out).")
	m.commPaperC = counter("esgrid_comm_paper_seconds_total", "Sum of the generations' comm as the paper defines it (every non-executing moment of a worker slot).")
	m.computeC = counter("esgrid_compute_seconds_total", "Sum of the generations' compute (duration − sync wait − comm).")
	m.durationC = counter("esgrid_generation_seconds_total", "Sum of the generations' durations (the report's total).")
	m.betweenC = counter("esgrid_between_generations_seconds_total", "Sum of the times between generations: from one generation's last result to the next one's tasks being ready (selection, the next batch, a checkpoint); no generation's duration counts them.")
	m.lbC = counter("esgrid_lb_seconds_total", "Sum of the generations' LB: each a lower bound of its duration at the speeds its own executions show (its tasks ÷ the workers' rates there, or its longest task at the fastest pace).")
	m.barrierC = counter("esgrid_barrier_bound_seconds_total", "Sum of the generations' barrier bound: each generation's LB plus the round trip as estimated when its figures were final, the floor of any synchronous generational run.")
	m.busyC = counter("esgrid_slot_busy_seconds_total", "Sum over generations of the time a worker slot executed, averaged over the workers present in each (wasted replicas included): divided by esgrid_generation_seconds_total, the share of the generations' time a slot worked, the master's utilisation. Time between generations is not counted.")
	m.wastedC = counter("esgrid_wasted_seconds_total", "Execution time of instances stopped by a cancel while running.")
	m.tasks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "esgrid_tasks_sent_total",
		Help: "Task instances sent to workers, by kind: original (a task's first instance; one per task), resend (the task sent again from Q once its instances were withdrawn, overdue, failed or lost) or replica (a further instance sent as a replica)."}, []string{"kind"})
	m.cancels = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "esgrid_cancels_total",
		Help: "Cancels by what the worker did: held (dropped from its remote queue before it ran), running (stopped), late (it had finished)."}, []string{"outcome"})
	m.last = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "esgrid_last_generation_seconds",
		Help: "The last generation's figures, set once they are final (a gauge, so that a panel has a value between generations, where rate() over the counters above, which move once per generation, has none), by figure: duration, compute, sync_wait, comm, comm_paper, between (before it), lb, barrier_bound (LB + the round trip), busy (a slot's time executing, averaged over the workers), wasted."}, []string{"figure"})
	for _, f := range LastGenerationFigures {
		m.last.WithLabelValues(f)
	}
	for _, k := range []string{"original", "resend", "replica"} {
		m.tasks.WithLabelValues(k)
	}
	for _, k := range []string{"held", "running", "late"} {
		m.cancels.WithLabelValues(k)
	}
	d := &m.descs
	d.results = prometheus.NewDesc("esgrid_results_total", "Results received, by outcome: accepted (the first for its task), duplicate (another copy had won), stale (of a generation already over).", []string{"outcome"}, nil)
	d.workers = prometheus.NewDesc("esgrid_workers", "Workers connected to the master now.", nil, nil)
	d.joined = prometheus.NewDesc("esgrid_workers_joined_total", "Joins to the master: a worker that connects again, or comes back from a child master, counts again.", nil, nil)
	d.named = prometheus.NewDesc("esgrid_workers_named_total", "Workers that have joined the master, each name counted once however often it joined.", nil, nil)
	d.refused = prometheus.NewDesc("esgrid_refused_connections_total", "Data connections the master refused, or whose handshake failed, by kind (busy, per_source, timeout, closed, bad_frame, wrong_key, version, excluded, other); counted, and logged as one summary line per interval.", []string{"kind"}, nil)
	d.verified = prometheus.NewDesc("esgrid_verified_results_total", "With -verify: results checked on a second host, by outcome (agreed: confirmed; mismatch: a host's value differed from the agreed one).", []string{"outcome"}, nil)
	d.excluded = prometheus.NewDesc("esgrid_excluded_workers_total", "With -verify: hosts (IP addresses, every worker on them) excluded from the run because a value of theirs differed from the one other hosts agreed on.", nil, nil)
	d.unsolicited = prometheus.NewDesc("esgrid_unsolicited_results_total", "Results for tasks never sent to the worker that returned them, discarded.", nil, nil)
	d.failed = prometheus.NewDesc("esgrid_failed_evaluations_total", "Evaluations that returned an error on a worker.", nil, nil)
	d.overdue = prometheus.NewDesc("esgrid_overdue_tasks_total", "Task instances that ran past their deadline and were given to another worker.", nil, nil)
	d.dropped = prometheus.NewDesc("esgrid_workers_dropped_total", "Workers whose connection the master dropped (a task past the task timeout, or a silent session).", nil, nil)
	d.lost = prometheus.NewDesc("esgrid_workers_lost_total", "Workers lost during the run, by cause: closed (their connection ended unasked), gossip_dead, left_cluster, reconnected (the old connection of a worker that connected again), dropped (by the master, as esgrid_workers_dropped_total). A worker a split moves to another master is not lost.", []string{"cause"}, nil)
	d.gossipKept = prometheus.NewDesc("esgrid_gossip_verdicts_kept_total", "Gossip's verdicts that a connected worker or relay was gone (dead, or left) which its data link refuted: the master asked the link, it answered, and the master kept it. A worker dropped on gossip's word is in esgrid_workers_lost_total.", nil, nil)
	d.bytes = prometheus.NewDesc("esgrid_master_bytes_total", "Bytes on the master's data connections, by direction (in: from workers).", []string{"direction"}, nil)
	d.frames = prometheus.NewDesc("esgrid_master_frames_total", "Frames on the master's data connections, by direction.", []string{"direction"}, nil)
	d.inbox = prometheus.NewDesc("esgrid_master_inbox_messages", "Messages waiting in the master's inbox now.", nil, nil)
	d.inboxCap = prometheus.NewDesc("esgrid_master_inbox_capacity_messages", "Capacity of the master's inbox.", nil, nil)
	d.assignments = prometheus.NewDesc("esgrid_master_assignments_total", "Tasks the master has assigned to workers.", nil, nil)
	d.waiting = prometheus.NewDesc("esgrid_master_inbox_waiting_total", "Sum over assignments of the messages waiting in the inbox right after each (docs/papers.md §2: the master is overloaded when its rate over the assignments' reaches 1).", nil, nil)
	d.overloadMean = prometheus.NewDesc("esgrid_master_overload_mean", "Messages waiting in the master's inbox right after an assignment, averaged over the overload test's window (docs/papers.md §2: overloaded at 1 or more).", nil, nil)
	d.overloaded = prometheus.NewDesc("esgrid_master_overloaded", "1 while the overload test says the master is overloaded (over a full window), else 0.", nil, nil)
	d.masters = prometheus.NewDesc("esgrid_masters", "Masters working on this master's generation now: itself and its sub-masters' trees.", nil, nil)
	d.splits = prometheus.NewDesc("esgrid_master_splits_total", "Splits asked for by the overload test, by outcome: made (a worker promoted to a sub-master) or suppressed (too few workers, or no expected gain).", []string{"outcome"}, nil)
	d.wRTT = prometheus.NewDesc("esgrid_master_worker_round_trip_seconds", "The master's smoothed round trip to a connected worker (send to result, less the execution), 0 until measured.", []string{"worker"}, nil)
	d.wExec = prometheus.NewDesc("esgrid_master_worker_exec_seconds", "A connected worker's smoothed execution time per task, as it reports it.", []string{"worker"}, nil)
	d.wSlots = prometheus.NewDesc("esgrid_master_worker_slots", "A connected worker's slots.", []string{"worker"}, nil)
	d.wTasks = prometheus.NewDesc("esgrid_master_worker_tasks", "Tasks on a connected worker as its last results said, by state: held (in its remote queue) or running.", []string{"worker", "state"}, nil)
	return m
}

func (m *Master) owned() []prometheus.Collector {
	return []prometheus.Collector{m.info, m.generation, m.best, m.mean, m.evals, m.gens,
		m.syncH, m.commH, m.commPaperH, m.computeH, m.durationH,
		m.syncC, m.commC, m.commPaperC, m.computeC, m.durationC, m.lbC, m.barrierC, m.busyC, m.wastedC, m.betweenC,
		m.tasks, m.cancels, m.last}
}

// Register registers the master's metrics with reg.
func (m *Master) Register(reg prometheus.Registerer) error {
	for _, c := range append(m.owned(), masterState{m}) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SetState sets the function called at each scrape for the master's
// state (nil: none), for a master created after its metrics.
func (m *Master) SetState(state func() MasterState) {
	if state == nil {
		m.state.Store(nil)
		return
	}
	m.state.Store(&state)
}

// SetRun labels the run (esgrid_run_info).
func (m *Master) SetRun(r RunInfo) {
	m.info.Reset()
	m.info.WithLabelValues(r.ID, strconv.FormatUint(r.Seed, 10), r.Policy, r.Problem, r.Strategy).Set(1)
}

// Seconds is how a generation's durations are counted, here and in
// esrun's -report: in float64 seconds, never below zero, so that a sum of
// them in generation order is the same number in both.
func Seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// Generation takes one generation's final figures: wire it as the
// ledger's OnGeneration. It runs on the master's loop and costs a few
// atomic operations. Every counter adds Seconds of the generation's own
// figure, as the -report's totals do; esgrid_generations_total moves
// last.
func (m *Master) Generation(g sched.Generation) {
	obs := func(h prometheus.Histogram, c prometheus.Counter, d time.Duration) {
		s := Seconds(d)
		h.Observe(s)
		c.Add(s)
	}
	obs(m.syncH, m.syncC, g.SyncWait)
	obs(m.commH, m.commC, g.Comm)
	obs(m.commPaperH, m.commPaperC, g.CommPaper)
	obs(m.computeH, m.computeC, g.Compute)
	obs(m.durationH, m.durationC, g.Total)
	m.betweenC.Add(Seconds(g.Between))
	m.busyC.Add(Seconds(g.Busy))
	m.wastedC.Add(Seconds(g.Wasted))
	m.mu.Lock()
	m.accepted += float64(g.Accepted)
	m.duplicates += float64(max(g.Duplicates, 0))
	m.mu.Unlock()
	if g.LB > 0 {
		m.lbC.Add(Seconds(g.LB))
		m.barrierC.Add(Seconds(g.LB + g.RoundTrip))
	}
	var lb, bound time.Duration // as the counters: no LB, no bound
	if g.LB > 0 {
		lb, bound = g.LB, g.LB+g.RoundTrip
	}
	for f, d := range map[string]time.Duration{"duration": g.Total, "compute": g.Compute, "sync_wait": g.SyncWait,
		"comm": g.Comm, "comm_paper": g.CommPaper, "between": g.Between, "lb": lb, "barrier_bound": bound,
		"busy": g.Busy, "wasted": g.Wasted} {
		m.last.WithLabelValues(f).Set(Seconds(d))
	}
	m.tasks.WithLabelValues("original").Add(float64(max(g.Originals, 0)))
	m.tasks.WithLabelValues("resend").Add(float64(max(g.Resends, 0)))
	m.tasks.WithLabelValues("replica").Add(float64(max(g.Replicas, 0)))
	m.cancels.WithLabelValues("held").Add(float64(max(g.CancelsHeld, 0)))
	m.cancels.WithLabelValues("running").Add(float64(max(g.CancelsRunning, 0)))
	m.cancels.WithLabelValues("late").Add(float64(max(g.CancelsLate, 0)))
	m.gens.Inc()
}

// Progress takes the ES's state after a generation: its number, the best
// and mean fitness of the parents, and the evaluations used so far.
func (m *Master) Progress(gen int, best, mean float64, evals int) {
	m.generation.Set(float64(gen))
	m.best.Set(best)
	m.mean.Set(mean)
	m.mu.Lock()
	if d := evals - m.lastEvals; d > 0 {
		m.evals.Add(float64(d))
	}
	m.lastEvals = evals
	m.mu.Unlock()
}

// masterState collects what is read at scrape time.
type masterState struct{ m *Master }

func (c masterState) Describe(ch chan<- *prometheus.Desc) {
	d := &c.m.descs
	for _, x := range []*prometheus.Desc{d.results, d.workers, d.joined, d.unsolicited, d.failed, d.overdue, d.dropped,
		d.bytes, d.frames, d.inbox, d.inboxCap, d.assignments, d.waiting, d.wRTT, d.wExec, d.wSlots, d.wTasks,
		d.overloadMean, d.overloaded, d.masters, d.splits} {
		ch <- x
	}
	for _, x := range []*prometheus.Desc{d.refused, d.verified, d.excluded, d.lost, d.gossipKept, d.named} {
		ch <- x
	}
}

func (c masterState) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	d := &m.descs
	var st MasterState
	if f := m.state.Load(); f != nil {
		st = (*f)()
	}
	m.mu.Lock()
	accepted, dups := m.accepted, m.duplicates
	m.mu.Unlock()
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter(d.results, accepted, "accepted")
	counter(d.results, dups, "duplicate")
	counter(d.results, float64(st.Stale), "stale")
	gauge(d.workers, float64(st.Workers))
	counter(d.joined, float64(st.Joined))
	counter(d.named, float64(st.Named))
	counter(d.unsolicited, float64(st.Unsolicited))
	counter(d.failed, float64(st.Failed))
	counter(d.overdue, float64(st.Overdue))
	counter(d.dropped, float64(st.Dropped))
	for _, cause := range LostCauses {
		n := st.Lost[cause]
		if cause == "dropped" {
			n = st.Dropped
		}
		counter(d.lost, float64(n), cause)
	}
	counter(d.gossipKept, float64(st.GossipKept))
	counter(d.bytes, float64(st.BytesIn), "in")
	counter(d.bytes, float64(st.BytesOut), "out")
	counter(d.frames, float64(st.FramesIn), "in")
	counter(d.frames, float64(st.FramesOut), "out")
	gauge(d.inbox, float64(st.Inbox))
	gauge(d.inboxCap, float64(st.InboxCap))
	counter(d.assignments, float64(st.Assignments))
	counter(d.waiting, float64(st.InboxWaiting))
	gauge(d.overloadMean, st.OverloadMean)
	overloaded := 0.0
	if st.Overloaded {
		overloaded = 1
	}
	gauge(d.overloaded, overloaded)
	gauge(d.masters, float64(max(st.Masters, 1)))
	counter(d.splits, float64(st.Splits), "made")
	counter(d.splits, float64(st.Suppressed), "suppressed")
	for kind, n := range st.Refused {
		counter(d.refused, float64(n), kind)
	}
	counter(d.verified, float64(st.Verified), "agreed")
	counter(d.verified, float64(st.Mismatches), "mismatch")
	counter(d.excluded, float64(st.Excluded))
	seen := make(map[string]bool, len(st.PerWorker))
	for _, w := range st.PerWorker {
		if seen[w.Name] {
			continue // names are unique among connected workers; be safe
		}
		seen[w.Name] = true
		gauge(d.wRTT, w.RoundTrip.Seconds(), w.Name)
		gauge(d.wExec, w.Exec.Seconds(), w.Name)
		gauge(d.wSlots, float64(w.Slots), w.Name)
		gauge(d.wTasks, float64(w.Queued), w.Name, "held")
		gauge(d.wTasks, float64(w.Running), w.Name, "running")
	}
}

// AgentState is a worker agent's activity (worker.Activity): cumulative
// figures never decrease. Its fields are worker.Activity's, in order, so
// that AgentState(agent.Activity()) converts one.
type AgentState struct {
	Slots                       int
	Connected                   bool
	Held, Running               int
	Finished, Cancelled, Failed int64
	Busy                        time.Duration // slot-time executing
	Session                     time.Duration // time connected to a master
}

// Agent exports one worker agent's activity, labelled worker=name.
type Agent struct {
	name  string
	state func() AgentState

	mu       sync.Mutex
	lastIdle float64 // idle seconds are reported monotonic

	slots, busySlots, held, connected, tasks, busy, idle *prometheus.Desc
}

// NewAgent returns the metrics of the agent named name; state is called
// at each scrape.
func NewAgent(name string, state func() AgentState) *Agent {
	l := prometheus.Labels{"worker": name}
	return &Agent{
		name: name, state: state,
		slots:     prometheus.NewDesc("esgrid_worker_slots", "The worker's slots (tasks it runs at once).", nil, l),
		busySlots: prometheus.NewDesc("esgrid_worker_busy_slots", "The worker's slots running a task now.", nil, l),
		held:      prometheus.NewDesc("esgrid_worker_held_tasks", "Tasks held in the worker's remote queue now, waiting for a slot.", nil, l),
		connected: prometheus.NewDesc("esgrid_worker_connected", "1 while the worker is in a session with a master.", nil, l),
		tasks:     prometheus.NewDesc("esgrid_worker_tasks_total", "Tasks the worker ran, by outcome: finished, cancelled (stopped by the master), failed.", []string{"outcome"}, l),
		busy:      prometheus.NewDesc("esgrid_worker_busy_seconds_total", "Slot-seconds the worker spent executing tasks. Over busy + idle seconds, the worker's utilisation: of its slot-seconds connected to a master, the time before a run's first generation and between generations included (the -report's busy/total counts within generations only).", nil, l),
		idle:      prometheus.NewDesc("esgrid_worker_idle_seconds_total", "Slot-seconds the worker's slots were idle while it was connected to a master: slots × time connected − busy slot-seconds.", nil, l),
	}
}

// Describe implements prometheus.Collector.
func (a *Agent) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{a.slots, a.busySlots, a.held, a.connected, a.tasks, a.busy, a.idle} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	st := a.state()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	conn := 0.0
	if st.Connected {
		conn = 1
	}
	gauge(a.slots, float64(st.Slots))
	gauge(a.busySlots, float64(st.Running))
	gauge(a.held, float64(st.Held))
	gauge(a.connected, conn)
	counter(a.tasks, float64(st.Finished), "finished")
	counter(a.tasks, float64(st.Cancelled), "cancelled")
	counter(a.tasks, float64(st.Failed), "failed")
	counter(a.busy, st.Busy.Seconds())
	a.mu.Lock()
	idle := max(float64(st.Slots)*st.Session.Seconds()-st.Busy.Seconds(), a.lastIdle)
	a.lastIdle = idle
	a.mu.Unlock()
	counter(a.idle, idle)
}

// serveTimeouts bound each connection of Serve, so that clients that
// hold connections open cannot pile them up: a request's headers and
// whole read, a response's write (a scrape of the largest registry takes
// milliseconds; Prometheus gives up after 10 s by default), and an idle
// keep-alive connection (Prometheus scrapes every 5 to 60 s and redials
// when one was closed). Tests shorten them.
var serveTimeouts = struct{ header, read, write, idle time.Duration }{
	header: 10 * time.Second, read: 20 * time.Second, write: time.Minute, idle: 2 * time.Minute,
}

// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB):
// the metrics and the status page take no header worth more than a few
// hundred bytes.
const maxHeaderBytes = 16 << 10

// Serve serves reg's metrics on addr at /metrics until ctx is done, and
// returns the address it listens on; page, when not nil, serves every
// other path (esrun's status page). The server stops with ctx; done is
// closed once it has.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger, page http.Handler) (bound string, done <-chan struct{}, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorLog: slogErrors{log}}))
	if page != nil {
		mux.Handle("/", page)
	} else {
		mux.HandleFunc("/", rootText)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: serveTimeouts.header, ReadTimeout: serveTimeouts.read,
		WriteTimeout: serveTimeouts.write, IdleTimeout: serveTimeouts.idle, MaxHeaderBytes: maxHeaderBytes}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), ch, nil
}

// rootText is / without a page: it says where the metrics are.
func rootText(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("esgrid metrics: see /metrics\n"))
}

// slogErrors passes promhttp's errors to a logger.
type slogErrors struct{ log *slog.Logger }

func (s slogErrors) Println(v ...any) {
	if s.log != nil {
		s.log.Warn("metrics: scrape error", "err", v)
	}
}
