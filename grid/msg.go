// Package grid is esgrid's distributed runtime: the wire protocol, the
// connections, gossip membership and the master that drives a sched.Policy
// over real workers.
package grid

import "time"

// ProtocolVersion is checked in the handshake; peers of different versions
// refuse each other with a clear error. Version 2: frames after the
// handshake are sealed, and tasks and results carry a token.
const ProtocolVersion = 2

// MsgType is the one byte that follows a frame's length and says which
// concrete message the msgpack body holds. Bodies are always decoded into
// that concrete type, never into interface{}.
type MsgType uint8

// The messages of the protocol.
const (
	MsgChallenge MsgType = iota + 1 // master → worker, first frame on a connection
	MsgHello                        // worker → master, answers the challenge
	MsgWelcome                      // master → worker, handshake done
	MsgReject                       // either way, then the sender closes
	MsgTasks                        // master → worker
	MsgCancel                       // master → worker
	MsgResults                      // worker → master
	MsgHeartbeat                    // either way, keeps an idle link alive
	MsgDrain                        // worker → master: draining, held tasks given back
	MsgShutdown                     // master → worker: the run is over; child master → parent: its workers heard it
)

// Challenge opens the handshake: the master's nonce for the worker to sign.
type Challenge struct {
	Version int    `msgpack:"v"`
	Nonce   []byte `msgpack:"n"`
}

// Hello is the worker's answer: who it is and a MAC over both nonces that
// proves it holds the cluster key.
type Hello struct {
	Version  int      `msgpack:"v"`
	Name     string   `msgpack:"name"`
	Slots    int      `msgpack:"slots"`
	Problems []string `msgpack:"problems,omitempty"`
	Nonce    []byte   `msgpack:"n"`
	MAC      []byte   `msgpack:"mac"`
}

// ProblemSpec names the problem a run evaluates. It is data only: a master
// names a problem, never a command.
type ProblemSpec struct {
	Name string `msgpack:"name"`
	Dim  int    `msgpack:"dim"`
	// LoadN, when > 0, adds an LoadN×LoadN LU decomposition to every
	// evaluation (the paper's extra load).
	LoadN int `msgpack:"load_n,omitempty"`
	// NonFinite says the problem may return NaN or ±Inf as a fitness
	// value. Without it the master takes such a value for a failed
	// evaluation (retried on another worker), not for the problem's
	// answer: the built-in problems never return one for a point in
	// their box.
	NonFinite bool `msgpack:"nf,omitempty"`
}

// Welcome ends the handshake: the master's MAC (so the worker knows the
// master holds the key too), the worker's id and the run's problem.
type Welcome struct {
	Version int         `msgpack:"v"`
	Worker  int32       `msgpack:"w"`
	Problem ProblemSpec `msgpack:"p"`
	// MaxFrame is the master's frame cap. A worker whose own cap is
	// smaller raises it to this (up to MaxFrameLimit) for the connection,
	// so that a run with large vectors needs no setting on every worker.
	MaxFrame int    `msgpack:"mf,omitempty"`
	MAC      []byte `msgpack:"mac"`
}

// Reject refuses a peer (wrong key, wrong version, bad frame); the sender
// closes the connection after it.
type Reject struct {
	Reason string `msgpack:"r"`
}

// Task is one fitness evaluation: task ID of generation Gen.
type Task struct {
	ID int32     `msgpack:"id"`
	X  []float64 `msgpack:"x"`
	// Token is the master's unguessable number for this task instance
	// on this worker; the worker returns it in the Result, and the master
	// believes only results that carry the token it sent.
	Token uint64 `msgpack:"tok,omitempty"`
}

// Tasks carries one or more tasks of one generation into the worker's
// remote queue; the worker runs them in the order sent.
type Tasks struct {
	Gen   int32  `msgpack:"g"`
	Items []Task `msgpack:"t"`
}

// Cancel removes tasks of generation Gen from a worker: a held task is
// dropped from the remote queue, a running one has its context cancelled.
type Cancel struct {
	Gen int32   `msgpack:"g"`
	IDs []int32 `msgpack:"ids"`
}

// Result is the outcome of one task on a worker.
type Result struct {
	Gen int32   `msgpack:"g"`
	ID  int32   `msgpack:"id"`
	F   float64 `msgpack:"f"`
	// Err is set when the evaluation failed; F is then meaningless.
	Err string `msgpack:"err,omitempty"`
	// Cancelled is set when a running instance was cancelled; Exec is then
	// compute spent for nothing. Every acknowledgement of a cancel (Ack)
	// has it set, so that a master that predates acknowledgements takes
	// one for a cancelled result and ignores it.
	Cancelled bool `msgpack:"c,omitempty"`
	// Exec is the time the task spent executing, in nanoseconds.
	Exec int64 `msgpack:"e"`
	// Ack, when set, makes this result the worker's answer to a Cancel of
	// task ID of generation Gen: what it did with it. On the wire it is an
	// optional trailing field, absent when zero (a worker that predates it
	// sends none: the master then learns only of running instances
	// stopped, from Cancelled results).
	Ack CancelAck `msgpack:"ack,omitempty"`
	// Token is the Task's, returned as received: the proof that this
	// worker was given this task instance. A cancel acknowledgement for
	// an instance the worker no longer has (AckLate) carries none.
	Token uint64 `msgpack:"tok,omitempty"`
}

// CancelAck is what a worker did with a cancel, as it tells the master.
type CancelAck uint8

// The outcomes of a cancel.
const (
	// AckDropped: the instance was held in the remote queue and was
	// removed before it ran (R3Q's cheap cancel).
	AckDropped CancelAck = iota + 1
	// AckStopped: the instance was running and was stopped; Exec is the
	// compute it had used.
	AckStopped
	// AckLate: the instance had finished; its result had left already.
	// A worker answers so once per instance of the newest generation it
	// evaluated, and does not answer a cancel of an instance it never
	// had: a Cancel's acknowledgements never outnumber the work it names.
	AckLate
)

// Results carries one or more results, and the worker's status right after
// them (Clop's server-status table, kept fresh for free).
type Results struct {
	Items   []Result `msgpack:"r"`
	Queued  int32    `msgpack:"q"` // tasks held in the remote queue
	Running int32    `msgpack:"run"`
}

// MaxStartBound bounds what a worker may claim as its problem's start
// (Heartbeat.Starting): what esworker claims with its longest
// -plugin-start-timeout, twice it and a second (a plugin's first process
// starts, then the others, each within it), so that a worker that claims
// more, or starts and hangs, holds its tasks no longer.
const MaxStartBound = 20*time.Minute + time.Second

// Heartbeat keeps an otherwise idle connection alive within the peer's read
// deadline.
type Heartbeat struct {
	// Echo asks the peer's Conn to answer at once with a plain Heartbeat:
	// the master's probe of a link that gossip declared dead. A peer that
	// predates it ignores the field and does not answer.
	Echo bool `msgpack:"e,omitempty"`
	// Starting, when > 0 (ns), says the worker's session is not serving
	// yet: it builds the run's problem (a plugin's processes start), which
	// may take this long. The worker sends it before it builds, and a
	// status report (Results) once it serves (worker/agent.go serve): the
	// master does not time the tasks it sent meanwhile until then, and
	// drops it as failing to start past this bound (bounded by
	// MaxStartBound). The Conn hands such a Heartbeat to its handler. A
	// Heartbeat, not a Results: a master that predates the field ignores
	// it with the rest of the heartbeat, and times the tasks from their
	// send as it always did, where it took any Results for a word that
	// the worker can evaluate (refusals.go), and a plugin that never
	// started cleared the worker's refusals at every session.
	Starting int64 `msgpack:"st,omitempty"`
}

// Drain says the worker is going away gracefully: it gives back the tasks it
// held, finishes the ones running and sends their results, then leaves.
type Drain struct {
	Gen      int32   `msgpack:"g"`
	Returned []int32 `msgpack:"ids"`
	// Last marks the drain's end: the connection closes behind it, as
	// planned. A connection that closes without it broke (the worker was
	// killed, or its network failed), which is how a master tells a
	// worker it promoted that died from one leaving to become a child
	// master (promotedGone).
	Last bool `msgpack:"last,omitempty"`
}

// Shutdown tells a worker that the master is going away: the run is over
// (Restart false), or the master was interrupted and will be back (Restart
// true), so the worker waits for it rather than leave. Between masters
// that split it also carries the end down a parent's link (Within) and
// the word back up it (Hold: not yet).
type Shutdown struct {
	Reason  string `msgpack:"r"`
	Restart bool   `msgpack:"restart,omitempty"`
	// Within (parent → child, ns) is how long the parent waits for the
	// child's word that its workers heard the end (0 or less: 20 s, the
	// root's wait; more than the root's longest wait counts as that).
	Within int64 `msgpack:"within,omitempty"`
	// Hold (child → parent, ns), when > 0, says that the child still
	// awaits, for up to Hold from now, workers on their way to it (a
	// silent child's, or those a returning one named): its word comes
	// after that. The parent bounds how far holds push its wait.
	Hold int64 `msgpack:"hold,omitempty"`
}
