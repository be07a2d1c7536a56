package sched

import (
	"math"
	"slices"
	"time"
)

// LedgerConfig parameterises a Ledger. The zero value is usable: the round
// trip is then estimated from observations.
type LedgerConfig struct {
	// RoundTrip is one master–worker round trip (request out, result back,
	// excluding execution), used for the barrier bound. Zero: estimated from
	// observations.
	RoundTrip time.Duration
	// OnGeneration, when set, is given each generation's figures once they
	// are final (Generation.Final), in the order of the generations, on
	// the goroutine that feeds the ledger, from within the call that made
	// them final. It is the ledger's incremental output: metrics and
	// progress displays read it instead of keeping books of their own. It
	// must not call back into the ledger.
	OnGeneration func(Generation)
	// OnInstance, when set, is given each instance once it has ended
	// (see Instance), on the goroutine that feeds the ledger, from within
	// the call that ended it. The ledger keeps none of them: a driver
	// that wants a timeline keeps what it can afford. It must not call
	// back into the ledger.
	OnInstance func(Instance)
}

// InstanceKind is how an instance of a task ended.
type InstanceKind uint8

// The ways an instance ends.
const (
	// InstanceFinished: it ran to the end and its result came back.
	InstanceFinished InstanceKind = iota + 1
	// InstanceCancelledHeld: a cancel removed it from the worker's remote
	// queue before it ran; Start is when it was sent (End if the ledger
	// did not know), End when the worker said it dropped it.
	InstanceCancelledHeld
	// InstanceCancelledRunning: a cancel stopped it while it ran.
	InstanceCancelledRunning
	// InstanceFailed: the evaluation returned an error; Start is when it
	// was sent, End when the failure reached the driver.
	InstanceFailed
)

// Instance is one instance of a task on a worker, as the ledger saw it
// end: for OnInstance, a timeline of the run.
type Instance struct {
	Worker  WorkerID
	Task    TaskID
	Gen     int // index of the generation running at Start, as Generation.Index; -1 before the first
	Replica bool
	// Known says whether Replica is: false for a finished instance the
	// ledger no longer had on its books (the result of an earlier batch).
	Known      bool
	Kind       InstanceKind
	Start, End time.Duration // the ledger's timeline, as Execution
}

// Execution reports one instance of a task that ran on a worker: it started
// at Start and ended at End (in the ledger's timeline), either by finishing
// (Cancelled false) or by being stopped by a cancel (Cancelled true). An
// instance cancelled while still held never ran and is not reported (see
// Ledger.Dropped).
type Execution struct {
	Worker    WorkerID
	Task      TaskID
	Start     time.Duration
	End       time.Duration
	Cancelled bool
	// Arrival says Start and End are dated on the driver's clock at the
	// moment the result reached it (End is its arrival, End − Start the
	// execution time the worker reported), as a real master dates them:
	// the execution really ended one one-way delay earlier. The ledger
	// moves it back by half the worker's smallest round trip observed so
	// far (its clock offset, this instance's own round trip included).
	// A simulator, which knows when an execution ended, leaves it false.
	Arrival bool
	// Stale says the instance was of an earlier batch than the open one
	// (its result is stale): it counts for the worker's busy time and
	// speed, but is none of the open batch's instances, even one of the
	// same task on the same worker (Instance.Known false). A finished
	// execution only: a cancelled one says its batch with Of.
	Stale bool
	// Of says, of a cancelled execution, which batch's cancel stopped it
	// (see AckOf).
	Of AckOf
}

// AckOf names the batch whose cancel a worker's acknowledgement answers,
// for a driver that knows it (a real master gets the batch id back with
// it). A worker answers a held instance's cancel at once but a running
// one's only once it has stopped, so an earlier batch's answer can come
// after the open batch's, about the same task on the same worker: told
// the batch, the ledger matches each to its own cancel.
type AckOf uint8

const (
	// OfAnyBatch: not known; the oldest cancel of the task on the
	// worker still unanswered.
	OfAnyBatch AckOf = iota
	// OfLastBatch: a cancel sent since the last BatchStarted.
	OfLastBatch
	// OfEarlierBatch: a cancel sent before it.
	OfEarlierBatch
)

// Counts are the scheduling events of a generation or a run. The cancel
// outcomes are what the workers did with the cancels, as they report it
// (a real master gets an acknowledgement of each cancel with the results):
// facts, where the Held flag of a Cancel action is only the policy's
// belief. Every count is of instances the driver really sent: a report
// of a cancel, an aborted execution or a drop that matches no cancel the
// ledger saw sent counts for nothing.
type Counts struct {
	// Originals counts the tasks sent: the first instance of each task
	// in its batch. Every further instance is a resend or a replica:
	// Resends counts those the policy sent as the task itself, from Q,
	// once its instances were withdrawn, cancelled as overdue, failed or
	// lost with their worker; Replicas those it sent as replicas (Send
	// with Replica). So a batch whose tasks were all sent counts as many
	// originals as tasks, and originals + resends + replicas are the
	// instances sent.
	Originals int
	Resends   int
	Replicas  int
	// CancelsHeld counts cancels that found their instance held in the
	// worker's remote queue and dropped it before it ran.
	CancelsHeld int
	// CancelsRunning counts cancels that found their instance running and
	// stopped it.
	CancelsRunning int
	// CancelsLate counts cancels that found their instance finished: its
	// result had left the worker (it arrives as a duplicate or stale).
	CancelsLate int
	Aborted     int           // executions stopped by a cancel (= CancelsRunning)
	Wasted      time.Duration // execution time of the Aborted instances
	Dropped     int           // held instances removed by a cancel (= CancelsHeld)
	Duplicates  int           // results stepped that produced no Accept
}

// Generation is the accounting of one batch.
type Generation struct {
	Index    int           // 0 for the first BatchStarted the ledger saw
	Tasks    int           // the batch's N
	Start    time.Duration // BatchStarted step
	End      time.Duration // step that accepted the last result
	Complete bool          // every result was accepted; else End is when the next batch started, Finish, or (still open) the latest time seen
	// Between is the time from the previous generation's End to this
	// one's Start (0 for the first): the ES's selection and the next
	// batch's making, which no generation's Total counts.
	Between time.Duration
	// Final says the figures will not change any more (see Ledger): the
	// generation has ended and its instances have been accounted for.
	Final    bool
	Total    time.Duration
	SyncWait time.Duration
	// Comm is ours: per worker, the time before the sync wait that its
	// slots spent neither executing nor starved of work (Q empty),
	// averaged over the workers; see Ledger.
	Comm time.Duration
	// CommPaper is the paper's: per worker, the time it did not execute
	// within the generation, sync wait included, averaged over the
	// workers present.
	CommPaper time.Duration
	Busy      time.Duration // mean time a slot executed, over the workers present
	Compute   time.Duration // Total − SyncWait − Comm, never below zero
	// LB is a lower bound of Total: of the generation's makespan given the
	// speeds its own executions show (see Ledger); 0 before any of its
	// executions finished.
	LB       time.Duration
	Workers  int // workers present at some time during it
	Accepted int // results accepted (Tasks once Complete)
	// RoundTrip is the run's round trip as the ledger had it when the
	// figures were made (see Report.RoundTrip): LB + RoundTrip is the
	// generation's barrier bound.
	RoundTrip time.Duration
	Counts
}

// WorkerReport is the accounting of one worker over the run.
type WorkerReport struct {
	Worker   WorkerID
	Slots    int
	Speed    float64       // as given to SetSpeed or SetSpeedAt (the latest); 0 when unknown
	Present  time.Duration // time in the run's interval while joined
	Busy     time.Duration // Σ execution time over its slots (slot-time)
	SyncWait time.Duration // of Present, the time inside generations' sync wait
	SyncBusy time.Duration // of Busy, the slot-time inside generations' sync wait
	// Starved is the slot-time before the sync waits during which its
	// slots had nothing to run and Q was empty (Idle).
	Starved time.Duration
	// Comm is ours: (Present − SyncWait) − (Busy − SyncBusy + Starved)/Slots.
	Comm time.Duration
	// CommPaper is the paper's: Present − Busy/Slots.
	CommPaper  time.Duration
	Accepted   int           // results accepted from it
	Executions int           // executions reported, finished or aborted
	MeanExec   time.Duration // mean time of its finished executions
	// ExecSpread is the standard deviation of its finished executions'
	// times over their mean (0 with fewer than two): how much task times
	// vary on it.
	ExecSpread float64
	RoundTrip  time.Duration // smallest observed result arrival − send − execution; 0 when none
	Counts                   // sends to it; the outcomes of cancels to it; its Aborted, Wasted, Dropped (Duplicates stay 0)
	// Joined is when it joined and Left when it left, -1 while it is
	// present (the ledger's timeline; both 0 for a worker that never
	// joined).
	Joined, Left time.Duration
}

// Report is the accounting of the run so far.
type Report struct {
	Total    time.Duration
	SyncWait time.Duration
	// Comm is ours (the comm the dashboards show): per worker, the time
	// outside the sync waits that it neither executed nor was starved of
	// work, averaged over the workers; see Ledger.
	Comm time.Duration
	// CommPaper is the paper's comm (docs/papers.md §1): per worker, the time
	// over the whole run that it did not execute a task, averaged over
	// the workers. Set it beside the paper's Fig. 5; the paper's compute
	// is then Total − SyncWait − CommPaper, which may be negative (the
	// barrier's idleness is counted twice).
	CommPaper time.Duration
	Busy      time.Duration // mean time a slot executed, over the workers present
	Compute   time.Duration // Total − SyncWait − Comm, never below zero
	// LB and BarrierBound are lower bounds on Total; see Ledger for how
	// they are obtained.
	LB           time.Duration
	BarrierBound time.Duration
	RoundTrip    time.Duration // as configured or estimated
	// EfficiencyLB is LB/Total and EfficiencyBarrier BarrierBound/Total
	// (0 when Total is 0).
	EfficiencyLB      float64
	EfficiencyBarrier float64
	Counts
	Generations []Generation
	// Workers lists the last DepartedKept workers that left, in the order
	// they were forgotten, then the workers present, in order of first
	// appearance; every departed worker, listed or not, counts in the
	// run's figures.
	Workers  []WorkerReport
	Departed int // workers that left and were forgotten, listed or not
}

// DepartedKept is how many departed workers a Report still lists one by
// one. A master that runs for weeks sees workers come and go without end;
// the ledger keeps each departed worker's figures in aggregate and only the
// last DepartedKept in full.
const DepartedKept = 256

// maxPendingCancels bounds the cancels a ledger remembers per worker while
// it waits for their outcome (a worker that never reports them, an old
// one, must not grow it without end).
const maxPendingCancels = 4096

// Ledger is the paper's time accounting (docs/papers.md §1 "Time accounting")
// computed from what a driver already has in hand: every policy step with its
// timestamp, and what the workers report they did. A simulator passes
// virtual times, a real master passes time.Since(runStart); neither keeps
// books of its own.
//
// Feeding it:
//
//	acts = p.Step(ev, acts[:0])
//	ledger.Step(now, ev, acts)   // every event the policy sees (joins and leaves too), in order
//	ledger.Ran(Execution{...})   // each execution that ended, finished or stopped by a cancel, before any later Step
//	ledger.Dropped(now, w, t)    // a cancel removed a held instance
//	ledger.Late(now, w, t)       // a cancel found its instance finished
//	                             // (DroppedOf, LateOf and Execution.Of: the cancel's batch, when known)
//	ledger.Unsent(w, t)          // the driver never sent an instance a Send asked for
//	ledger.Finish(now)           // optional: the run ends
//	rep := ledger.Report()       // at any time; LedgerConfig.OnGeneration for each final generation
//
// A driver that knows the speeds may say so with SetSpeed, for the
// workers' reports; LB never relies on it.
//
// Definitions (per generation g = one batch, from its BatchStarted step to
// the step that accepts its last result):
//
//   - Total: End − Start of the generation; for the run, from the first
//     BatchStarted to the last generation's end (or Finish, if later).
//   - SyncWait: from the moment Q is empty and a master-side sender slot
//     waits for work, until every result of the generation is back. The
//     policy says when that moment comes (the SyncWait action): the first
//     step at which a place freed on a worker finds Q empty, or gets a
//     replica (RR, R3Q: "from the first replica sent").
//   - Comm (ours): for each worker, the time it was present before the
//     sync wait began, less the time its slots spent executing there and
//     the time they were starved of work (nothing to run while Q was
//     empty, as the policy's Idle actions say), divided by its slots;
//     averaged over the workers present before the sync wait. For the
//     run, the same over the run's interval less every generation's sync
//     wait (so time between generations counts as comm).
//   - CommPaper (the paper's): for each worker, the time it was present
//     less the time its slots executed, divided by its slots, averaged
//     over the workers present: sync wait, starvation and time between
//     generations included.
//   - Compute: Total − SyncWait − Comm, the paper's definition with our
//     comm; it is never negative, since our comm lies outside the sync
//     wait.
//   - Busy: the mean, over the workers present, of the time its slots
//     spent executing divided by its slots (within the generation or the
//     run): how much of Total a CPU worked, wasted replicas included.
//   - LB: a lower bound of the generation's Total, the makespan any
//     schedule of its accepted tasks needs at the speeds its own finished
//     executions show (whatever the workers did in other generations:
//     a lab PC changes pace when its owner uses it). The executions of a
//     generation are the finished ones that lie within its interval
//     (aborted ones do no task's work). For each worker w with n_w of
//     them, of total time D_w on its s_w slots, let its time per slot be
//     b_w = min(D_w/s_w, T) (T the generation's Total) and its rate
//     r_w = n_w/b_w tasks per second; a worker with none contributes no
//     capacity. With N = min(accepted, Σ n_w) tasks,
//     LB = max(N / Σ r_w, the longest execution d run at the fastest
//     per-slot rate: d · (r_w/s_w) / max (r_v/s_v)).
//     Why LB ≤ T by construction: b_w ≤ T, so r_w ≥ n_w/T and
//     Σ r_w ≥ Σ n_w/T ≥ N/T, hence N/Σ r_w ≤ T; and a scaled execution
//     is no longer than itself, which lies within the interval. Replicas,
//     cancelled instances, failures, workers joining or leaving midway
//     and multi-slot workers change none of these steps (b_w's min only
//     matters when reports overlap: positions dated by estimated clock
//     offsets, a stale instance counted in). So efficiency against LB
//     never exceeds 100 %. The run's LB is the sum over generations,
//     which lie within the run.
//   - BarrierBound: Σ over generations with results of (LB_g + RoundTrip),
//     the floor of any synchronous generational run. RoundTrip is
//     LedgerConfig.RoundTrip or, when zero, estimated: for each worker the
//     smallest observed (result arrival − send − execution time), averaged
//     over the workers that have one.
//   - Efficiency: LB / Total and BarrierBound / Total (fractions, 1 = 100 %).
//
// Why our comm stops at the sync wait, and leaves out starved slots: the
// paper defines comm as the time a worker is not executing, and notes that
// for RR and R3Q sync wait and comm overlap "somewhat" (replicas are
// transferred during the sync wait), so for WQ and RWQ it means them not
// to overlap. A worker idle while the barrier is pending is idle because
// of the barrier, which sync wait already charges; counting it again as
// comm charged the barrier twice (compute went negative under cyclic, and
// a fast worker's wait at the barrier passed for a network cost). A slot
// with nothing to run because the batch is smaller than the grid is not
// waiting on the network either. Our comm is thus the CPU time lost to
// transfers and to waiting on the network while there was work to hand
// out. As in the paper, a CPU running an instance that is later cancelled
// is executing, not idle. The paper's own comm is reported beside it
// (CommPaper), to be set beside its figures.
//
// Counts: Originals, Resends and Replicas count Send actions (less those
// the driver reports Unsent), the first instance of each task sent as its
// original and every further one as a resend (sent as the task) or a
// replica (sent as one); the cancel outcomes come from the workers' reports
// (Dropped, Late, and Ran with Cancelled for a running instance stopped),
// each matched to a Cancel the ledger saw for that worker and task, once;
// Duplicates counts results that arrived with no Accept. A cancel's
// outcome counts in the generation that sent it (or, if that generation's
// figures are final already, in the first one that is not).
//
// Final figures: a generation's figures are final once it has ended, the
// next one has started (what arrives in between, a late duplicate or the
// outcome of a cancel, still belongs to it) and every cancel it sent has
// been answered, or at the latest when the next generation ends (or
// Finish). LedgerConfig.OnGeneration then receives
// them, once, in order; Report copies them, and computes only the
// generations not final yet, so that a Report costs O(generations +
// workers), not O(generations × workers).
//
// Departed workers: once a worker has left and every generation it was
// present in is final, the ledger folds its figures into per-run
// aggregates and forgets it (its place is reused), so its memory follows
// the workers present, not every worker that ever joined. A report about
// a forgotten worker counts in the run's Counts only.
//
// The driver must drop results of earlier batches before stepping the
// policy (task ids repeat in every batch); the ledger relies on the same.
// A Ledger is not safe for concurrent use.
type Ledger struct {
	cfg LedgerConfig

	idx     map[WorkerID]int32
	workers []ledgerWorker
	vacant  []int32 // places of forgotten workers, for reuse
	idleW   []int32 // workers whose Idle was not 0 in the open generation

	// Departed workers, in aggregate.
	gone      workerAgg
	departed  []WorkerReport // the last DepartedKept, oldest first
	departedN int

	gens      []genRec
	open      bool // the last generation has not ended
	firstLive int  // index of the first generation not final
	last      time.Duration
	finish    time.Duration
	started   bool
	finished  bool

	inst [][]instRec // live instances per task of the open batch
	// sends counts, per task of the open batch, the instances sent (Send
	// less Unsent): the first is the task's original.
	sends []int32
	// elsewhere counts, per task of the open batch, the resends that
	// another driver sent (Elsewhere), so that one of them becomes the
	// original when the original's send is taken back (unsend).
	elsewhere map[TaskID]int32
	run       Counts

	// Sums over final generations.
	finSync time.Duration
	finLB   time.Duration
	finLBN  int
}

// workerAgg sums what departed workers contribute to the run's averages.
type workerAgg struct {
	present     int           // workers present
	busy        time.Duration // Σ busy / slots
	comm        time.Duration // Σ comm (ours)
	commPaper   time.Duration // Σ comm (the paper's)
	commPresent int           // workers present outside the sync waits
	rtt         time.Duration // Σ minRTT of those with one
	rttN        int
}

type ledgerWorker struct {
	id       WorkerID
	slots    int
	speed    float64
	joined   bool
	used     bool // the place holds a worker (not vacant)
	joinAt   time.Duration
	leftAt   time.Duration // forever while present
	accepted int
	execs    int
	busy     time.Duration // slot-time executing within the run so far
	tail     time.Duration // slot-time executing after the last generation ended
	finished int
	finSum   time.Duration
	finSq    float64       // Σ d² of the finished executions, in s²
	minRTT   time.Duration // -1: none observed
	counts   Counts

	// From final generations: presence and slot-time inside their sync
	// waits, starved slot-time before them.
	syncPresent, syncBusy, starved time.Duration

	// The open generation, before its sync wait: slots starved since.
	idle   int
	idleAt time.Duration

	cancels []pendingCancel // sent, outcome not reported yet, oldest first
}

// pendingCancel is a cancel the ledger saw sent and whose outcome has not
// been reported.
type pendingCancel struct {
	task    TaskID
	gen     int32 // the generation that sent it
	batch   int32 // the last batch started when it was sent (its AckOf)
	replica bool  // the instance was not the task's original
	resend  bool  // of a replica: it was a resend
	sent    time.Duration
}

type genRec struct {
	tasks     int
	start     time.Duration
	end       time.Duration // valid once closed
	closed    bool
	complete  bool
	final     bool
	accepted  int
	syncStart time.Duration // -1: sync wait has not begun
	counts    Counts
	pending   int             // its cancels whose outcome has not been reported
	ran       []ranAcc        // its finished executions, per worker index; nil once final
	busy      []time.Duration // slot-time executing within it, per worker index; nil once final
	syncBusy  []time.Duration // of busy, the part inside its sync wait
	starved   []time.Duration // slot-time starved of work before its sync wait
	out       Generation      // once final
}

type instRec struct {
	wi                 int32
	replica            bool // not the task's original
	resend             bool // of a replica: a resend (see Counts)
	sent, arrived, ran time.Duration
	has                uint8 // hasArrived | hasRan
}

const (
	hasArrived = 1 << iota
	hasRan
)

const forever = time.Duration(1<<63 - 1)

// NewLedger returns an empty ledger.
func NewLedger(cfg LedgerConfig) *Ledger {
	return &Ledger{cfg: cfg, idx: make(map[WorkerID]int32)}
}

// worker returns the index of w's record, creating it if needed.
func (l *Ledger) worker(w WorkerID) int32 {
	if wi, ok := l.idx[w]; ok {
		return wi
	}
	rec := ledgerWorker{id: w, used: true, leftAt: forever, minRTT: -1}
	var wi int32
	if k := len(l.vacant); k > 0 {
		wi = l.vacant[k-1]
		l.vacant = l.vacant[:k-1]
		l.workers[wi] = rec
	} else {
		wi = int32(len(l.workers))
		l.workers = append(l.workers, rec)
	}
	l.idx[w] = wi
	return wi
}

// SetSpeed records worker w's speed ratio per slot against the reference
// machine (time of a task on the reference / time on w), as a driver that
// knows it has it, for WorkerReport.Speed; the latest call counts. LB does
// not use it: it takes the speeds each generation's executions show. It
// may be called before or after w joins.
func (l *Ledger) SetSpeed(w WorkerID, ratio float64) {
	l.workers[l.worker(w)].speed = ratio
}

func growTo[T any](s *[]T, wi int32) {
	if len(*s) <= int(wi) {
		*s = append(*s, make([]T, int(wi)+1-len(*s))...)
	}
}

// Step records one policy step: at is when the driver applied ev (its
// clock, since the run started), acts the actions Step returned for it.
// Steps must come in the order they were applied, with non-decreasing at.
func (l *Ledger) Step(at time.Duration, ev Event, acts []Action) {
	if at > l.last {
		l.last = at
	}
	switch ev.Kind {
	case BatchStarted:
		// The cancels of an abandoned batch come first; they belong to it.
		prev := int32(len(l.gens) - 1)
		i := 0
		for ; i < len(acts) && acts[i].Kind == Cancel; i++ {
			if wi, ok := l.idx[acts[i].Worker]; ok {
				l.cancel(wi, acts[i].Task, prev)
			}
		}
		acts = acts[i:]
		l.closeGen(at, false)
		// The time since the last generation ended is inside the run now.
		for i := range l.workers {
			l.workers[i].busy += l.workers[i].tail
			l.workers[i].tail = 0
		}
		n := max(ev.N, 0)
		l.gens = append(l.gens, genRec{tasks: n, start: at, syncStart: -1})
		l.open, l.started = true, true
		for i := range l.inst {
			l.inst[i] = l.inst[i][:0]
		}
		if cap(l.inst) < n {
			l.inst = append(l.inst[:cap(l.inst)], make([][]instRec, n-cap(l.inst))...)
		}
		l.inst = l.inst[:n]
		l.sends = append(l.sends[:0], make([]int32, n)...)
		clear(l.elsewhere)
		l.prunePending()
		l.advance() // the previous generation may be final now
	case WorkerJoined:
		wi := l.worker(ev.Worker)
		if w := &l.workers[wi]; !w.joined {
			w.joined, w.joinAt, w.slots = true, at, min(max(ev.Slots, 1), MaxSlots)
		}
	case SlotsChanged:
		l.slotsChanged(at, ev)
	case WorkerLeft:
		if wi, ok := l.idx[ev.Worker]; ok && !l.workers[wi].joined && l.workers[wi].execs == 0 && l.workers[wi].counts == (Counts{}) {
			// Set aside from the start (slotsChanged): nothing to keep.
			delete(l.idx, ev.Worker)
			l.workers[wi] = ledgerWorker{}
			l.vacant = append(l.vacant, wi)
		} else if ok {
			if w := &l.workers[wi]; w.joined && w.leftAt == forever {
				l.setIdle(wi, at, 0)
				w.leftAt = at
				// Its instances never end, its cancels will never be
				// answered.
				for t := range l.inst {
					l.dropInst(TaskID(t), wi)
				}
				cancels := w.cancels
				w.cancels = nil
				for _, p := range cancels {
					l.answered(p.gen)
				}
			}
		}
		defer l.forgetDeparted()
	}
	var g *genRec
	gi := int32(-1)
	if l.open {
		gi = int32(len(l.gens) - 1)
		g = &l.gens[gi]
	}
	accepted := false
	for _, a := range acts {
		wi, known := l.idx[a.Worker]
		if !known {
			// A forgotten worker's result (or a policy's action for a
			// worker never seen): the run's counts only.
			if a.Kind == Accept {
				accepted = true
				if g != nil {
					g.accepted++
				}
			}
			if a.Kind == SyncWait {
				l.syncWait(at)
			}
			continue
		}
		w := &l.workers[wi]
		switch a.Kind {
		case Send:
			// The task's first instance sent is its original, whatever
			// the policy calls it: one sent again after its instances
			// were withdrawn is not a new task.
			replica := a.Replica
			if a.Task >= 0 && a.Task <= MaxTaskID {
				growTo(&l.sends, int32(a.Task))
				replica = l.sends[a.Task] > 0
				l.sends[a.Task]++
			}
			resend := replica && !a.Replica
			l.add(g, w, sends(replica, resend, 1))
			if a.Task >= 0 && int(a.Task) < len(l.inst) {
				l.dropInst(a.Task, wi)
				l.inst[a.Task] = append(l.inst[a.Task], instRec{wi: wi, sent: at, replica: replica, resend: resend})
			}
		case Cancel:
			l.cancel(wi, a.Task, gi)
		case Accept:
			w.accepted++
			accepted = true
			if g != nil {
				g.accepted++
			}
		case SyncWait:
			l.syncWait(at)
		case Idle:
			if g != nil && g.syncStart < 0 {
				l.setIdle(wi, at, a.Slots)
			}
		}
	}
	if ev.Kind == Failed && l.cfg.OnInstance != nil {
		if wi, ok := l.idx[ev.Worker]; ok {
			if r := l.findInst(ev.Task, wi); r != nil {
				l.instance(Instance{Worker: ev.Worker, Task: ev.Task, Replica: r.replica, Known: true,
					Kind: InstanceFailed, Start: r.sent, End: at})
			}
		}
	}
	if ev.Kind == ResultArrived {
		if !accepted {
			// A late copy belongs to the last batch, even once it has ended.
			l.add(l.countGen(l.genIndexAt(at)), nil, Counts{Duplicates: 1})
		}
		if wi, ok := l.idx[ev.Worker]; ok {
			if r := l.findInst(ev.Task, wi); r != nil {
				r.arrived, r.has = at, r.has|hasArrived
				l.settle(ev.Task, r)
			}
		}
	}
	if g != nil && g.accepted >= g.tasks {
		l.closeGen(at, true)
	}
}

// cancel records a Cancel of task t on worker wi sent by generation gi
// (-1: none): the instance leaves the books, and its outcome is awaited.
func (l *Ledger) cancel(wi int32, t TaskID, gi int32) {
	p := pendingCancel{task: t, gen: gi, batch: int32(len(l.gens) - 1), sent: -1}
	if r := l.findInst(t, wi); r != nil {
		p.replica, p.resend, p.sent = r.replica, r.resend, r.sent
		l.dropInst(t, wi)
	}
	w := &l.workers[wi]
	if len(w.cancels) == maxPendingCancels {
		l.answered(w.cancels[0].gen)
		w.cancels = slices.Delete(w.cancels, 0, 1)
	}
	w.cancels = append(w.cancels, p)
	if gi >= 0 && !l.gens[gi].final {
		l.gens[gi].pending++
	}
}

// takeCancel finds and removes the oldest pending cancel of task t on
// worker wi of the batch of.
func (l *Ledger) takeCancel(wi int32, t TaskID, of AckOf) (pendingCancel, bool) {
	w := &l.workers[wi]
	last := int32(len(l.gens) - 1)
	for i, p := range w.cancels {
		if p.task == t && (of == OfAnyBatch || (p.batch == last) == (of == OfLastBatch)) {
			w.cancels = slices.Delete(w.cancels, i, i+1)
			return p, true
		}
	}
	return pendingCancel{}, false
}

// answered notes that one cancel of generation gi is settled.
func (l *Ledger) answered(gi int32) {
	if gi < 0 || int(gi) >= len(l.gens) || l.gens[gi].final {
		return
	}
	if g := &l.gens[gi]; g.pending > 0 {
		g.pending--
		if g.closed && g.pending == 0 {
			l.advance()
		}
	}
}

// prunePending forgets cancels sent more than 8 generations ago: their
// outcome will not come (a worker too old to report it).
func (l *Ledger) prunePending() {
	cut := int32(len(l.gens) - 9)
	if cut <= 0 {
		return
	}
	for wi := range l.workers {
		w := &l.workers[wi]
		if len(w.cancels) > 0 && w.cancels[0].gen < cut {
			w.cancels = slices.DeleteFunc(w.cancels, func(p pendingCancel) bool { return p.gen < cut })
		}
	}
}

// syncWait begins the open generation's sync wait at at.
func (l *Ledger) syncWait(at time.Duration) {
	if !l.open {
		return
	}
	g := &l.gens[len(l.gens)-1]
	if g.syncStart >= 0 {
		return
	}
	l.flushIdle(at)
	g.syncStart = at
}

// slotsChanged handles SlotsChanged exactly while the worker has done
// nothing yet (a plan applied as it joins): set aside, it is not present
// at all; given slots, it is present from then on with that many. A change
// once the worker has worked keeps its slots and presence as they were
// (the accounting per slot stays that of its join): an approximation for
// a plan changed mid-run.
func (l *Ledger) slotsChanged(at time.Duration, ev Event) {
	wi, ok := l.idx[ev.Worker]
	if !ok {
		return
	}
	w := &l.workers[wi]
	if w.leftAt != forever || w.execs > 0 || w.counts != (Counts{}) {
		return
	}
	if ev.Slots <= 0 {
		w.joined = false
		return
	}
	w.joined, w.joinAt, w.slots = true, at, min(ev.Slots, MaxSlots)
}

// setIdle records that idle of worker wi's slots are starved of work from
// at on, in the open generation before its sync wait.
func (l *Ledger) setIdle(wi int32, at time.Duration, idle int) {
	w := &l.workers[wi]
	if l.open && w.idle > 0 {
		g := &l.gens[len(l.gens)-1]
		if d := at - max(w.idleAt, g.start); d > 0 {
			growTo(&g.starved, wi)
			g.starved[wi] += time.Duration(w.idle) * d
		}
	}
	if w.idle == 0 && idle > 0 {
		l.idleW = append(l.idleW, wi)
	}
	w.idle, w.idleAt = max(min(idle, w.slots), 0), at
}

// flushIdle ends every starved interval at at.
func (l *Ledger) flushIdle(at time.Duration) {
	for _, wi := range l.idleW {
		if l.workers[wi].idle > 0 {
			l.setIdle(wi, at, 0)
		}
	}
	l.idleW = l.idleW[:0]
}

// Unsent says the driver never sent the instance of task t on worker w
// that a Send of the open batch asked for (the policy withdrew it, or the
// worker left, before it went out): it leaves the counts, and a Cancel
// that withdrew it awaits no outcome.
func (l *Ledger) Unsent(w WorkerID, t TaskID) {
	wi, ok := l.idx[w]
	if !ok || len(l.gens) == 0 {
		// The send belongs to the last generation, even when the step
		// that withdrew it also ended that generation.
		return
	}
	gi := int32(len(l.gens) - 1)
	if r := l.findInst(t, wi); r != nil {
		replica, resend := r.replica, r.resend
		l.dropInst(t, wi)
		l.unsend(gi, wi, t, replica, resend)
		return
	}
	lw := &l.workers[wi]
	i := len(lw.cancels) - 1
	for ; i >= 0 && (lw.cancels[i].task != t || lw.cancels[i].gen != gi); i-- {
	}
	if i < 0 {
		return
	}
	replica, resend := lw.cancels[i].replica, lw.cancels[i].resend
	lw.cancels = slices.Delete(lw.cancels, i, i+1)
	l.unsend(gi, wi, t, replica, resend)
	l.answered(gi)
}

// unsend takes back the count of a send of task t to worker wi in
// generation gi. When it was the task's original and a further instance
// of the task did go out, that one is the original now: a task counts
// one original however its sends are withdrawn.
func (l *Ledger) unsend(gi, wi int32, t TaskID, replica, resend bool) {
	g := &l.gens[gi]
	if t >= 0 && int(t) < len(l.sends) && l.sends[t] > 0 {
		l.sends[t]--
	}
	l.add(g, &l.workers[wi], sends(replica, resend, -1))
	if replica {
		return
	}
	if t < 0 || int(t) >= len(l.sends) || l.sends[t] == 0 {
		return
	}
	promote := func(resend bool) Counts {
		c := sends(true, resend, -1)
		c.Originals++
		return c
	}
	if int(t) < len(l.inst) {
		for i := range l.inst[t] {
			if r := &l.inst[t][i]; r.replica {
				l.add(g, &l.workers[r.wi], promote(r.resend))
				r.replica, r.resend = false, false
				return
			}
		}
	}
	for vi := range l.workers {
		for i := range l.workers[vi].cancels {
			if p := &l.workers[vi].cancels[i]; p.task == t && p.gen == gi && p.replica {
				l.add(g, &l.workers[vi], promote(p.resend))
				p.replica, p.resend = false, false
				return
			}
		}
	}
	// Its worker is gone, or another driver sent it: the run's and the
	// generation's counts.
	if l.elsewhere[t] > 0 {
		l.elsewhere[t]--
		l.add(g, nil, promote(true))
		return
	}
	l.add(g, nil, promote(false))
}

// Elsewhere adds what another driver counted for this ledger's batches:
// a child master (docs/papers.md §2) runs part of a batch under a ledger of
// its own, and its counts join the run's here, so that a run's counts
// mean the same whether its masters split or not. ago names the batch:
// 0 the last one started, 1 the one before, and so on. first lists
// tasks of the last batch whose first instance the other driver sent,
// by its own books: each counts as an original unless an instance of
// it was sent already (here or by another driver), and then as a
// resend, so that a task counts one original however many drivers sent
// it; of an earlier batch, each counts as a resend; an id outside the
// tasks' range counts for nothing. c's other counts add as they are; its
// Originals is ignored. The counts go to the batch's
// generation, or once that is final to the first that is not (as a
// cancel's outcome does). It returns how many of first counted as
// originals.
func (l *Ledger) Elsewhere(ago int, first []TaskID, c Counts) int {
	c.Originals = 0
	for _, t := range first {
		if t < 0 || t > MaxTaskID {
			continue
		}
		if ago != 0 {
			c.Resends++
			continue
		}
		growTo(&l.sends, int32(t))
		if l.sends[t] == 0 {
			c.Originals++
		} else {
			c.Resends++
			if l.elsewhere == nil {
				l.elsewhere = map[TaskID]int32{}
			}
			l.elsewhere[t]++
		}
		l.sends[t]++
	}
	l.add(l.countGen(int32(len(l.gens)-1-max(ago, 0))), nil, c)
	return c.Originals
}

// Sent says an instance of task t of the last batch was sent (and not
// taken back), here or elsewhere (Elsewhere).
func (l *Ledger) Sent(t TaskID) bool {
	return t >= 0 && int(t) < len(l.sends) && l.sends[t] > 0
}

// RunCounts returns the run's counts so far (Report's Counts), at no
// cost.
func (l *Ledger) RunCounts() Counts { return l.run }

// sends is the count of n sends (-1: one taken back) of an original, a
// resend or a replica (see Counts).
func sends(replica, resend bool, n int) Counts {
	switch {
	case !replica:
		return Counts{Originals: n}
	case resend:
		return Counts{Resends: n}
	}
	return Counts{Replicas: n}
}

// Dropped records that a cancel removed task t from worker w's remote
// queue, before it ran, as the worker reports it. It counts only if it
// answers a Cancel of t on w that the ledger saw and that has no outcome
// yet.
func (l *Ledger) Dropped(at time.Duration, w WorkerID, t TaskID) {
	l.DroppedOf(at, w, t, OfAnyBatch)
}

// DroppedOf is Dropped of a cancel of the batch of.
func (l *Ledger) DroppedOf(at time.Duration, w WorkerID, t TaskID, of AckOf) {
	if p, ok := l.outcome(w, t, of, Counts{CancelsHeld: 1, Dropped: 1}); ok {
		if p.sent < 0 {
			p.sent = at // its send is not known: a mark, so that every count has its instance
		}
		l.instance(Instance{Worker: w, Task: t, Replica: p.replica, Known: true, Kind: InstanceCancelledHeld, Start: p.sent, End: at})
	}
}

// instance hands an ended instance to OnInstance.
func (l *Ledger) instance(in Instance) {
	if l.cfg.OnInstance == nil {
		return
	}
	in.Gen = -1
	if len(l.gens) > 0 {
		in.Gen = int(l.genIndexAt(in.Start))
	}
	l.cfg.OnInstance(in)
}

// Late records that a cancel of task t on worker w found the instance
// finished (its result had left), as the worker reports it; like Dropped,
// it counts only as the answer to a Cancel the ledger saw.
func (l *Ledger) Late(at time.Duration, w WorkerID, t TaskID) {
	l.LateOf(at, w, t, OfAnyBatch)
}

// LateOf is Late of a cancel of the batch of.
func (l *Ledger) LateOf(_ time.Duration, w WorkerID, t TaskID, of AckOf) {
	l.outcome(w, t, of, Counts{CancelsLate: 1})
}

func (l *Ledger) outcome(w WorkerID, t TaskID, of AckOf, d Counts) (pendingCancel, bool) {
	wi, ok := l.idx[w]
	if !ok {
		return pendingCancel{}, false
	}
	p, ok := l.takeCancel(wi, t, of)
	if !ok {
		return pendingCancel{}, false
	}
	l.add(l.countGen(p.gen), &l.workers[wi], d)
	l.answered(p.gen)
	return p, true
}

// countGen is the generation whose counts an event of generation gi
// goes to: gi's, or once gi is final the first that is not; nil if none.
func (l *Ledger) countGen(gi int32) *genRec {
	if gi >= 0 && int(gi) < len(l.gens) && !l.gens[gi].final {
		return &l.gens[gi]
	}
	if l.firstLive < len(l.gens) {
		return &l.gens[l.firstLive]
	}
	return nil
}

// add adds d to the run's counts, g's (if any) and w's (if any).
func (l *Ledger) add(g *genRec, w *ledgerWorker, d Counts) {
	l.run.add(d)
	if g != nil {
		g.counts.add(d)
	}
	if w != nil {
		w.counts.add(d)
	}
}

func (c *Counts) add(d Counts) {
	c.Originals += d.Originals
	c.Resends += d.Resends
	c.Replicas += d.Replicas
	c.CancelsHeld += d.CancelsHeld
	c.CancelsRunning += d.CancelsRunning
	c.CancelsLate += d.CancelsLate
	c.Aborted += d.Aborted
	c.Wasted += d.Wasted
	c.Duplicates += d.Duplicates
	c.Dropped += d.Dropped
}

// findInst returns the record of task t's live instance on worker wi, or
// nil.
func (l *Ledger) findInst(t TaskID, wi int32) *instRec {
	if t < 0 || int(t) >= len(l.inst) {
		return nil
	}
	rs := l.inst[t]
	for i := range rs {
		if rs[i].wi == wi {
			return &rs[i]
		}
	}
	return nil
}

// dropInst forgets task t's instance on worker wi, if any.
func (l *Ledger) dropInst(t TaskID, wi int32) {
	if t < 0 || int(t) >= len(l.inst) {
		return
	}
	rs := l.inst[t]
	for i := range rs {
		if rs[i].wi == wi {
			rs[i] = rs[len(rs)-1]
			l.inst[t] = rs[:len(rs)-1]
			return
		}
	}
}

// settle folds an instance's round trip into its worker's minimum once
// both its result and its execution are known.
func (l *Ledger) settle(t TaskID, r *instRec) {
	if r.has != hasArrived|hasRan {
		return
	}
	rt := r.arrived - r.sent - r.ran
	wi := r.wi
	l.dropInst(t, wi)
	if rt < 0 {
		return // inconsistent clocks; ignore rather than distort
	}
	if w := &l.workers[wi]; w.minRTT < 0 || rt < w.minRTT {
		w.minRTT = rt
	}
}

// closeGen ends the open generation at at.
func (l *Ledger) closeGen(at time.Duration, complete bool) {
	if !l.open {
		return
	}
	gi := len(l.gens) - 1
	g := &l.gens[gi]
	g.end, g.closed, g.complete = at, true, complete
	l.open = false
	if g.syncStart < 0 {
		l.flushIdle(at)
	}
	l.idleW = l.idleW[:0]
	for wi := range l.workers {
		l.workers[wi].idle = 0
	}
	l.advance()
}

// advance makes final, in order, every ended generation that the next
// one has followed and whose cancels are answered, or that the next one
// has followed to its end.
func (l *Ledger) advance() {
	for l.firstLive < len(l.gens) {
		g := &l.gens[l.firstLive]
		if !g.closed {
			break
		}
		i := l.firstLive + 1
		if !l.finished && (i == len(l.gens) || g.pending > 0 && !l.gens[i].closed) {
			break
		}
		l.finalize(l.firstLive)
		l.firstLive++
	}
	l.forgetDeparted()
}

// finalize fixes generation i's figures, folds its per-worker figures
// into the workers' run totals, frees its per-worker memory and hands the
// figures to OnGeneration.
func (l *Ledger) finalize(i int) {
	g := &l.gens[i]
	out := l.figures(i, g.end, func(wi int32, syncPresent, syncBusy, starved time.Duration) {
		w := &l.workers[wi]
		w.syncPresent += syncPresent
		w.syncBusy += syncBusy
		w.starved += starved
	})
	out.Final = true
	out.RoundTrip = l.roundTrip()
	g.out, g.final = out, true
	g.busy, g.syncBusy, g.starved, g.ran = nil, nil, nil, nil
	l.finSync += out.SyncWait
	if out.LB > 0 {
		l.finLB += out.LB
		l.finLBN++
	}
	if l.cfg.OnGeneration != nil {
		l.cfg.OnGeneration(out)
	}
}

// figures computes generation i's figures with it ending at e (its end,
// or the latest time seen while it is open), handing each worker's
// presence and slot-time inside its sync wait and its starved slot-time
// to each.
func (l *Ledger) figures(i int, e time.Duration, each func(wi int32, syncPresent, syncBusy, starved time.Duration)) Generation {
	g := &l.gens[i]
	s := g.start
	out := Generation{
		Index: i, Tasks: g.tasks, Start: s, End: e, Complete: g.complete,
		Total: e - s, Counts: g.counts, LB: l.lb(g, e-s), Accepted: g.accepted,
	}
	if i > 0 {
		out.Between = max(s-l.gens[i-1].end, 0)
	}
	ss := syncStartOf(g, e) // start of the sync wait, e when it has not begun
	out.SyncWait = e - ss
	var comm, commPaper, busySum time.Duration
	present, commPresent := 0, 0
	for wi := range l.workers {
		w := &l.workers[wi]
		if !w.used || !w.joined {
			continue
		}
		p := overlap(w.joinAt, w.leftAt, s, e)
		if p <= 0 {
			continue
		}
		present++
		busy, sb, st := at(g.busy, wi), at(g.syncBusy, wi), at(g.starved, wi)
		if !g.closed && w.idle > 0 && g.syncStart < 0 {
			st += time.Duration(w.idle) * max(e-max(w.idleAt, s), 0)
		}
		slots := time.Duration(w.slots)
		busySum += busy / slots
		commPaper += max(p-busy/slots, 0)
		each(int32(wi), overlap(w.joinAt, w.leftAt, ss, e), sb, st)
		if pre := overlap(w.joinAt, w.leftAt, s, ss); pre > 0 {
			commPresent++
			comm += max(pre-(busy-sb+st)/slots, 0)
		}
	}
	if commPresent > 0 {
		out.Comm = comm / time.Duration(commPresent)
	}
	if present > 0 {
		out.Busy = busySum / time.Duration(present)
		out.CommPaper = commPaper / time.Duration(present)
	}
	out.Workers = present
	out.Compute = out.Total - out.SyncWait - out.Comm
	return out
}

func at(s []time.Duration, i int) time.Duration {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// ranAcc sums one worker's finished executions within a generation.
type ranAcc struct {
	n        int
	sum, max time.Duration
}

// lb is generation g's LB with its Total being total (see Ledger for the
// definition and why it is at most total).
func (l *Ledger) lb(g *genRec, total time.Duration) time.Duration {
	if total <= 0 || g.accepted == 0 {
		return 0
	}
	T := float64(total)
	var rate, fastest, longest float64 // per nanosecond; longest in mean tasks
	n := 0
	for wi, a := range g.ran {
		if a.n == 0 {
			continue
		}
		slots := float64(l.workers[wi].slots)
		b := min(float64(a.sum)/slots, T) // its time per slot, at most T
		if b <= 0 {
			continue // instantaneous executions show no rate
		}
		r := float64(a.n) / b
		rate += r
		n += a.n
		fastest = max(fastest, r/slots)
		longest = max(longest, float64(a.max)*r/slots)
	}
	if rate == 0 {
		return 0
	}
	// Conversions truncate, so rounding cannot lift LB above total.
	work := time.Duration(float64(min(g.accepted, n)) / rate)
	return max(work, time.Duration(longest/fastest))
}

// ran adds the finished execution [s, e) of worker wi to the generation
// whose interval holds it, if that generation's figures are not final.
func (l *Ledger) ran(wi int32, s, e time.Duration) {
	i, _ := slices.BinarySearchFunc(l.gens, s, func(g genRec, t time.Duration) int {
		if g.start <= t {
			return -1
		}
		return 1
	})
	if i--; i < l.firstLive || i < 0 {
		return
	}
	g := &l.gens[i]
	if g.closed && e > g.end {
		return // it straddles the generation's end: not within one
	}
	growTo(&g.ran, wi)
	a := &g.ran[wi]
	a.n++
	a.sum += e - s
	a.max = max(a.max, e-s)
}

// forgetDeparted folds every departed worker whose generations are all
// final into the aggregates and frees its place.
func (l *Ledger) forgetDeparted() {
	for wi := range l.workers {
		w := &l.workers[wi]
		if !w.used || !w.joined || w.leftAt == forever {
			continue
		}
		if l.presentInLive(w) {
			continue // a generation it was present in is not final
		}
		l.forget(int32(wi))
	}
}

// presentInLive says w was present in a generation not final yet.
func (l *Ledger) presentInLive(w *ledgerWorker) bool {
	for i := l.firstLive; i < len(l.gens); i++ {
		if g := &l.gens[i]; g.start < w.leftAt && (!g.closed || g.end > w.joinAt) {
			return true
		}
	}
	return false
}

// forget folds worker wi's figures into the aggregates, as Report would
// count it, and frees its place.
func (l *Ledger) forget(wi int32) {
	w := &l.workers[wi]
	w.busy += w.tail
	wr := l.workerReport(w, w.syncPresent, w.syncBusy, w.starved, forever)
	l.gone.addWorker(wr)
	if w.minRTT >= 0 {
		l.gone.rtt += w.minRTT
		l.gone.rttN++
	}
	if len(l.departed) == DepartedKept {
		copy(l.departed, l.departed[1:])
		l.departed = l.departed[:DepartedKept-1]
	}
	l.departed = append(l.departed, wr)
	l.departedN++
	// Its pending cancels, if any, belong to final generations: nothing
	// waits for them.
	for t := range l.inst {
		l.dropInst(TaskID(t), wi)
	}
	delete(l.idx, w.id)
	*w = ledgerWorker{}
	l.vacant = append(l.vacant, wi)
}

// addWorker adds one worker's run figures to the averages' sums.
func (a *workerAgg) addWorker(wr WorkerReport) {
	slots := time.Duration(max(wr.Slots, 1))
	if wr.Present > 0 {
		a.present++
		a.busy += wr.Busy / slots
		a.commPaper += wr.CommPaper
	}
	if wr.Present > wr.SyncWait {
		a.commPresent++
		a.comm += wr.Comm
	}
}

// syncStartOf is when g's sync wait began, clamped to [start, e]; e when
// it has not begun.
func syncStartOf(g *genRec, e time.Duration) time.Duration {
	if g.syncStart < 0 {
		return e
	}
	return min(max(g.syncStart, g.start), e)
}

// workerReport is w's accounting over the run, given its presence and
// slot-time inside the sync waits and its starved slot-time, with the run
// ending at runEnd.
func (l *Ledger) workerReport(w *ledgerWorker, syncPresent, syncBusy, starved, runEnd time.Duration) WorkerReport {
	wr := WorkerReport{
		Worker: w.id, Slots: w.slots, Speed: w.speed, Busy: w.busy,
		Accepted: w.accepted, Executions: w.execs, Counts: w.counts,
		SyncWait: syncPresent, SyncBusy: syncBusy, Starved: starved,
	}
	if w.minRTT >= 0 {
		wr.RoundTrip = w.minRTT
	}
	if w.finished > 0 {
		wr.MeanExec = w.finSum / time.Duration(w.finished)
	}
	if w.finished > 1 {
		n, mean := float64(w.finished), w.finSum.Seconds()/float64(w.finished)
		if v := (w.finSq - n*mean*mean) / (n - 1); v > 0 && mean > 0 {
			wr.ExecSpread = math.Sqrt(v) / mean
		}
	}
	if w.joined {
		wr.Joined, wr.Left = w.joinAt, w.leftAt
		if wr.Left == forever {
			wr.Left = -1
		}
	}
	if w.joined && len(l.gens) > 0 {
		slots := time.Duration(w.slots)
		wr.Present = overlap(w.joinAt, w.leftAt, l.gens[0].start, runEnd)
		wr.Comm = max(wr.Present-wr.SyncWait-(wr.Busy-wr.SyncBusy+wr.Starved)/slots, 0)
		wr.CommPaper = max(wr.Present-wr.Busy/slots, 0)
	}
	return wr
}

// Ran records an execution. Executions may be reported in any order, also
// after their generation has ended, but only once they have ended: End must
// not be later than the time of any Step that follows the call. An
// execution stopped by a cancel (Cancelled) counts only as the outcome of
// a Cancel of that task on that worker (of the batch e.Of says) that the
// ledger saw and that has no outcome yet; any other is ignored.
func (l *Ledger) Ran(e Execution) {
	if e.End < e.Start {
		return
	}
	d := e.End - e.Start
	wi, known := l.idx[e.Worker]
	if !known {
		return // a forgotten worker: its figures are final
	}
	w := &l.workers[wi]
	var p pendingCancel
	in := Instance{Worker: e.Worker, Task: e.Task, Kind: InstanceFinished}
	if e.Cancelled {
		var ok bool
		if p, ok = l.takeCancel(wi, e.Task, e.Of); !ok {
			return // no cancel of it was sent: not an instance of ours
		}
		in.Kind, in.Replica, in.Known = InstanceCancelledRunning, p.replica, true
	} else if r := l.findInst(e.Task, wi); r != nil && r.has&hasRan == 0 && !e.Stale {
		in.Replica, in.Known = r.replica, true
		r.ran, r.has = d, r.has|hasRan
		if e.Arrival {
			r.arrived, r.has = e.End, r.has|hasArrived
		}
		l.settle(e.Task, r)
	}
	if e.Arrival && w.minRTT > 0 {
		// One one-way delay earlier: half the smallest round trip.
		off := min(w.minRTT/2, e.Start)
		e.Start, e.End = e.Start-off, e.End-off
	}
	if l.open && e.End > l.last {
		// The run has reached e.End: an open generation lasts at least
		// until then, so its execution time fits in its interval.
		l.last = e.End
	}
	w.execs++
	l.attribute(wi, e.Start, e.End)
	in.Start, in.End = e.Start, e.End
	l.instance(in)
	if e.Cancelled {
		l.add(l.countGen(p.gen), w, Counts{CancelsRunning: 1, Aborted: 1, Wasted: d})
		l.answered(p.gen)
		return
	}
	l.ran(wi, e.Start, e.End)
	w.finished++
	w.finSum += d
	w.finSq += d.Seconds() * d.Seconds()
}

// attribute adds the execution [s, e) on worker wi to the busy time of
// the run and of each generation it overlaps whose figures are not final.
// It relies on e not being later than the next step: a generation still
// open ends after e.
func (l *Ledger) attribute(wi int32, s, e time.Duration) {
	if !l.started {
		return
	}
	w := &l.workers[wi]
	if l.open {
		w.busy += overlap(s, e, l.gens[0].start, forever)
	} else {
		// After the last generation: inside the run only up to Finish, or
		// once another generation starts.
		cut := max(l.gens[len(l.gens)-1].end, l.finish)
		w.busy += overlap(s, e, l.gens[0].start, cut)
		w.tail += overlap(s, e, cut, forever)
	}
	i, _ := slices.BinarySearchFunc(l.gens, s, func(g genRec, t time.Duration) int {
		if g.start <= t {
			return -1
		}
		return 1
	})
	for i = max(i-1, l.firstLive); i < len(l.gens) && l.gens[i].start < e; i++ {
		g := &l.gens[i]
		end := forever
		if g.closed {
			end = g.end
		}
		if d := overlap(s, e, g.start, end); d > 0 {
			growTo(&g.busy, wi)
			g.busy[wi] += d
			// A sync wait not begun yet begins at a later step, so after
			// e: nothing of this execution is inside it.
			if g.syncStart >= 0 {
				if sd := overlap(s, e, g.syncStart, end); sd > 0 {
					growTo(&g.syncBusy, wi)
					g.syncBusy[wi] += sd
				}
			}
		}
	}
}

// genIndexAt returns the index of the last generation started at or
// before t, or -1.
func (l *Ledger) genIndexAt(t time.Duration) int32 {
	i, _ := slices.BinarySearchFunc(l.gens, t, func(g genRec, t time.Duration) int {
		if g.start <= t {
			return -1
		}
		return 1
	})
	return int32(i - 1)
}

// Finish marks the end of the run at at (optional: without it the run ends
// when its last generation ends). A generation still open is closed, not
// Complete, and every generation's figures become final.
func (l *Ledger) Finish(at time.Duration) {
	if at > l.last {
		l.last = at
	}
	l.finished = true
	l.closeGen(at, false)
	if at > l.finish {
		l.finish = at
	}
	// The run now extends to at: what ran after the last generation counts.
	for i := range l.workers {
		l.workers[i].busy += l.workers[i].tail
		l.workers[i].tail = 0
	}
	l.advance()
}

// Report computes the accounting of everything recorded so far. It does not
// change the ledger; it may be called at any time. It costs O(generations
// + workers × generations not final yet).
func (l *Ledger) Report() Report {
	var rep Report
	rep.Counts = l.run
	if !l.started {
		return rep
	}
	nw := len(l.workers)
	runStart := l.gens[0].start
	runEnd := l.finish
	for i := l.firstLive; i < len(l.gens); i++ {
		runEnd = max(runEnd, l.genEnd(i))
	}
	if l.firstLive > 0 {
		runEnd = max(runEnd, l.gens[l.firstLive-1].end)
	}

	rtt := l.roundTrip()
	rep.RoundTrip = rtt

	// The generations: final ones as they were fixed, the others now.
	syncPresent := make([]time.Duration, nw)
	syncBusy := make([]time.Duration, nw)
	starved := make([]time.Duration, nw)
	rep.Generations = make([]Generation, len(l.gens))
	rep.SyncWait, rep.LB = l.finSync, l.finLB
	lbGens := l.finLBN
	for i := range l.gens[:l.firstLive] {
		rep.Generations[i] = l.gens[i].out
	}
	for i := l.firstLive; i < len(l.gens); i++ {
		out := l.figures(i, l.genEnd(i), func(wi int32, sp, sb, st time.Duration) {
			syncPresent[wi] += sp
			syncBusy[wi] += sb
			starved[wi] += st
		})
		out.RoundTrip = rtt
		rep.Generations[i] = out
		rep.SyncWait += out.SyncWait
		if out.LB > 0 {
			rep.LB += out.LB
			lbGens++
		}
	}
	rep.BarrierBound = rep.LB + time.Duration(lbGens)*rtt

	rep.Total = runEnd - runStart
	rep.Departed = l.departedN
	rep.Workers = make([]WorkerReport, 0, len(l.departed)+nw)
	rep.Workers = append(rep.Workers, l.departed...)
	agg := l.gone
	for wi := range l.workers {
		w := &l.workers[wi]
		if !w.used {
			continue
		}
		wr := l.workerReport(w, w.syncPresent+syncPresent[wi], w.syncBusy+syncBusy[wi], w.starved+starved[wi], runEnd)
		if w.joined {
			agg.addWorker(wr)
		}
		rep.Workers = append(rep.Workers, wr)
	}
	if agg.commPresent > 0 {
		rep.Comm = agg.comm / time.Duration(agg.commPresent)
	}
	if agg.present > 0 {
		rep.Busy = agg.busy / time.Duration(agg.present)
		rep.CommPaper = agg.commPaper / time.Duration(agg.present)
	}
	rep.Compute = max(rep.Total-rep.SyncWait-rep.Comm, 0)
	if rep.Total > 0 {
		rep.EfficiencyLB = float64(rep.LB) / float64(rep.Total)
		rep.EfficiencyBarrier = float64(rep.BarrierBound) / float64(rep.Total)
	}
	return rep
}

// roundTrip is LedgerConfig.RoundTrip or, when zero, the mean over the
// workers of their smallest observed round trip.
func (l *Ledger) roundTrip() time.Duration {
	if l.cfg.RoundTrip != 0 {
		return l.cfg.RoundTrip
	}
	sum, n := l.gone.rtt, l.gone.rttN
	for i := range l.workers {
		if l.workers[i].used && l.workers[i].minRTT >= 0 {
			sum += l.workers[i].minRTT
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// genEnd is generation i's end, or the latest time seen while it is open.
func (l *Ledger) genEnd(i int) time.Duration {
	if g := &l.gens[i]; g.closed {
		return g.end
	}
	return l.last
}

// overlap is the length of [a0, a1) ∩ [b0, b1).
func overlap(a0, a1, b0, b1 time.Duration) time.Duration {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi <= lo {
		return 0
	}
	return hi - lo
}
