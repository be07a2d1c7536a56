// Package sched holds esgrid's scheduling policies (WQ, RR, RWQ, R3Q and the
// cyclic baseline) as pure state machines, and the time ledger that turns a
// run's timestamped events into the paper's time accounting.
//
// A Policy never reads a clock, starts a goroutine or does I/O: events go in
// through Step and actions come out. The real master (package grid) and the
// simulator (package sched/sim) drive the very same code.
package sched

import "time"

// TaskID names one task (one fitness evaluation) within a batch; a batch of
// n tasks uses the ids 0..n-1.
type TaskID int32

// WorkerID names one worker as its driver knows it. Ids are never reused
// within a run.
type WorkerID int32

// EventKind says what happened.
type EventKind uint8

// The events a policy reacts to.
const (
	// BatchStarted: a new batch of Event.N tasks (ids 0..N-1) is ready;
	// every earlier batch is finished.
	BatchStarted EventKind = iota + 1
	// WorkerJoined: worker Event.Worker has Event.Slots execution slots.
	WorkerJoined
	// WorkerLeft: worker Event.Worker is gone; its instances are lost.
	WorkerLeft
	// ResultArrived: worker Event.Worker returned the result of Event.Task.
	// It may carry measurements (Event.RTT, Event.Exec), as Measured does.
	ResultArrived
	// Measured: a measurement of worker Event.Worker that came without a
	// result (a ping's Event.RTT, the Event.Exec of a duplicate or stale
	// result). Adaptive policies use its values (Config.Adaptive); every
	// policy takes it as a sign of life from a late worker (see Overdue).
	Measured
	// Overdue: the instance of Event.Task on Event.Worker has run past the
	// deadline its driver set for it. The worker's held instances are
	// withdrawn (Cancel with Held) and go back to the head of Q, the
	// instance is cancelled (its result, should it come first, is still
	// welcome) and its task goes back too unless another worker that is
	// not late holds it, and the worker is late: it gets no new work until
	// it answers (ResultArrived, Failed or Measured from it), and not that
	// task while another worker open for work could take it; with no
	// other worker open, the task is sent to it again at once (the
	// worker takes it as a fresh instance, its cancelled one abandoned).
	Overdue
	// Failed: the instance of Event.Task on Event.Worker failed (the
	// evaluation returned an error). The instance is gone; the task goes
	// back to the head of Q unless another instance is live, and is not
	// given to that worker again while a live worker that has not failed
	// it exists. How often a task may fail is the driver's business.
	Failed
	// Returned: worker Event.Worker gave back its instance of Event.Task
	// without running it (a draining worker's held task). The task goes
	// back to the head of Q unless another instance is live.
	Returned
	// WorkerDraining: worker Event.Worker takes no new work; the instances
	// it runs stay live until their results arrive or it leaves.
	WorkerDraining
	// TasksAdded: the tasks Event.IDs join the running batch, at the back
	// of Q, in that order (a sub-master's share, a grant from another
	// master, or tasks lent away and given back). An id at or past the
	// batch's size grows it (the ids between stay out of the batch); an
	// id already in the batch, or out of [0, MaxTaskID], is ignored. A
	// sub-master starts with BatchStarted{N: 0} and adds its share.
	// See split.go.
	TasksAdded
	// TasksTaken: up to Event.N tasks leave the running batch, taken from
	// the tail of Q (the ones it would send last), each named by a Taken
	// action; a task with a live instance is never taken. They count as
	// done for Done until TasksAdded brings them back. See split.go.
	TasksTaken
	// SlotsChanged: worker Event.Worker now has Event.Slots execution
	// slots (a plan, or a calibration that varies a worker's concurrency).
	// Slots 0 sets the worker aside: it gets no new work, its held
	// instances are withdrawn (Cancel with Held) and go back to Q, and the
	// ones it runs stay live until their results arrive; a later
	// SlotsChanged with Slots ≥ 1 takes it back. See slots.go.
	SlotsChanged
	// Tick: time has passed (Event.At) and nothing else happened. A
	// driver that gives Event.At sends one now and then while a batch
	// runs (the master at every deadline check, the simulator every
	// Config.Tick of virtual time), so that a policy that plans by time
	// can act on an instance later than its model allows when no other
	// event would wake it: eft then reconsiders its replicas. The paper's
	// policies ignore it.
	Tick
)

// Event is one input to a policy.
type Event struct {
	Kind   EventKind
	Worker WorkerID // every kind but BatchStarted
	Slots  int      // WorkerJoined, SlotsChanged
	Task   TaskID   // ResultArrived, Overdue, Failed, Returned
	N      int      // BatchStarted, TasksTaken
	IDs    []TaskID // TasksAdded
	// Starting (WorkerJoined) says the worker may not serve yet: it is
	// still making ready (building the run's problem, starting a
	// plugin's first process), so the tasks sent meanwhile wait. Until an
	// event comes from it (ResultArrived, Failed, Measured) eft does not
	// take how long its instances run for its pace. The paper's policies
	// ignore it.
	Starting bool
	// RTT (ResultArrived, Measured) is one round trip between the master
	// and Worker without the time the worker spent on the task: from the
	// master handing a task over to its result reaching the master, less
	// the time the task executed and waited in the worker's remote queue.
	// A driver measures it as it can, e.g. send → result − Exec for a task
	// sent while the worker had an idle slot (so it did not wait), or a
	// ping. 0 (or below): not measured.
	RTT time.Duration
	// Exec (ResultArrived, Measured) is how long one task executed on
	// Worker, as the worker reports it. 0 (or below): not measured.
	Exec time.Duration
	// At (any kind) is when the driver applies the event, on its own
	// clock since the run started (the ledger's timeline): time as data,
	// so a policy still never reads a clock and replays the same. Only
	// eft uses it, to tell how long a running instance has run; 0 when a
	// driver does not say (eft then takes every running instance as just
	// started).
	At time.Duration
}

// ActionKind says what the driver must do.
type ActionKind uint8

// The actions a policy asks for.
const (
	// Send task Action.Task to worker Action.Worker (Replica: a further
	// instance of a task already sent elsewhere).
	Send ActionKind = iota + 1
	// Cancel the instance of Action.Task on Action.Worker. Held says the
	// policy believes the instance is still held in the worker's remote
	// queue (not yet running).
	Cancel
	// Accept the result of Action.Task from Action.Worker: it is the first
	// for that task in this batch. A result with no Accept is a duplicate.
	Accept
	// SyncWait says the batch's sync wait begins at this step (docs/papers.md
	// §1, "Time accounting"): Q is empty and a place that this step freed
	// on worker Action.Worker (a result, a failure, a returned task or a
	// cancel took an instance off it) found no task in Q, so a
	// master-side sender slot now waits for work, or got a replica (RR,
	// R3Q: "from the first replica sent"). Places that were never filled
	// because a batch has fewer tasks than the workers have room for do
	// not start it: their idleness is reported by Idle. At most one per
	// batch, never at the step that accepts its last result, after the
	// step's other actions. It is bookkeeping only: a driver carries out
	// nothing for it.
	SyncWait
	// Idle says that, from this step on, Action.Slots of worker
	// Action.Worker's slots have nothing to run and nothing on the way:
	// Q is empty and the worker holds fewer instances than slots (or it
	// takes no work: 0). It is emitted, after the step's other actions,
	// whenever that number changes between a batch's start and its
	// SyncWait (or its end); a reader takes the last value as lasting
	// until then. A slot starved of work is not waiting on the network.
	// Bookkeeping only, like SyncWait.
	Idle
	// Taken says task Action.Task left the batch for a TasksTaken (the
	// driver hands it to another master); Worker is unused.
	Taken
)

// Action is one output of a policy.
type Action struct {
	Kind    ActionKind
	Worker  WorkerID
	Task    TaskID
	Replica bool // Send: this instance is a replica
	Held    bool // Cancel: the instance is held, not running
	Slots   int  // Idle: the worker's slots left without work
}

// Policy is a scheduling policy as a deterministic state machine.
type Policy interface {
	// Name is the policy's short name ("wq", "rr", "rwq", "r3q", "cyclic").
	Name() string
	// Step applies ev and appends the actions it causes to out.
	Step(ev Event, out []Action) []Action
	// Done reports whether every task of the current batch has an accepted
	// result.
	Done() bool
}

// Config parameterises a policy.
type Config struct {
	// Depth is how many instances a worker may hold per slot, running plus
	// held in its remote queue. 0 means the policy's default: 1 for wq and
	// rr, 2 for rwq and r3q (one running and one held task per CPU), 1
	// for eft (the least it keeps; it holds more where its model says a
	// refill would come too late); cyclic sends its whole static share at
	// once and ignores Depth. With Adaptive, Depth is the smallest depth a
	// worker gets.
	Depth int
	// Adaptive sizes each worker's remote queue (rwq and r3q only; wq, rr
	// and cyclic ignore it) from the measurements that ResultArrived and
	// Measured events carry: depth per slot = 1 + ceil(RTT / Exec), with
	// RTT and Exec that worker's smoothed measurements, so its held tasks
	// last at least one round trip and a slot never waits for the refill
	// of the task it just finished. Clamped to [Depth, AdaptiveMax]; a
	// worker with no Exec measured yet has Depth. Default false: every
	// worker has Depth.
	Adaptive bool
	// AdaptiveMax caps the adaptive depth per slot. 0 means
	// DefaultAdaptiveMax; a cap below Depth counts as Depth. It caps
	// eft's depth too.
	AdaptiveMax int
	// Copies bounds eft's live instances of a task, the original and its
	// replicas (the other policies ignore it). 0 means DefaultCopies; 1
	// replicates nothing.
	Copies int
}

// DefaultAdaptiveMax is the cap on an adaptive depth when
// Config.AdaptiveMax is 0: deep enough for a round trip of 15 task times,
// shallow enough that a worker never hoards a batch.
const DefaultAdaptiveMax = 16

// Names lists the policies New knows: the paper's, in the order it
// presents them, then eft (earliest expected finish, eft.go).
var Names = []string{"wq", "rr", "rwq", "r3q", "cyclic", "eft"}
