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
	// result). Only adaptive policies use it (Config.Adaptive).
	Measured
)

// Event is one input to a policy.
type Event struct {
	Kind   EventKind
	Worker WorkerID // WorkerJoined, WorkerLeft, ResultArrived, Measured
	Slots  int      // WorkerJoined
	Task   TaskID   // ResultArrived
	N      int      // BatchStarted
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
)

// Action is one output of a policy.
type Action struct {
	Kind    ActionKind
	Worker  WorkerID
	Task    TaskID
	Replica bool // Send: this instance is a replica
	Held    bool // Cancel: the instance is held, not running
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
	// rr, 2 for rwq and r3q (one running and one held task per CPU);
	// cyclic sends its whole static share at once and ignores Depth.
	// With Adaptive, Depth is the smallest depth a worker gets.
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
	// DefaultAdaptiveMax; a cap below Depth counts as Depth.
	AdaptiveMax int
}

// DefaultAdaptiveMax is the cap on an adaptive depth when
// Config.AdaptiveMax is 0: deep enough for a round trip of 15 task times,
// shallow enough that a worker never hoards a batch.
const DefaultAdaptiveMax = 16

// Names lists the policies New knows, in the order the paper presents them.
var Names = []string{"wq", "rr", "rwq", "r3q", "cyclic"}
