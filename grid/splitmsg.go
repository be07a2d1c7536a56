package grid

import (
	"fmt"
	"slices"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/sched"
)

// The messages between masters that split (docs/papers.md §2: "start
// master", task request, task assignment, refusal, results and workers
// returned) and of relays (docs/papers.md §1's R1, §3's relay tree). Their
// type numbers start at 64, clear of the core protocol's.

// The split and relay message types.
const (
	// MsgPromote: master → worker: become a child master over these
	// tasks (the paper's "start master").
	MsgPromote MsgType = 64 + iota
	// MsgMove: master → worker: give back the held tasks, finish the
	// running ones, and connect to another master.
	MsgMove
	// MsgChildHello: child master → parent, the first frame on the
	// child's control link.
	MsgChildHello
	// MsgTaskRequest: one master asks another for tasks.
	MsgTaskRequest
	// MsgTaskGrant: tasks handed from one master to another.
	MsgTaskGrant
	// MsgTaskRefusal: the asked master has no task to give.
	MsgTaskRefusal
	// MsgChildResults: child master → parent: results accepted.
	MsgChildResults
	// MsgRelay: relay ↔ master: one relayed stream's bytes.
	MsgRelay
)

// Promote makes a worker a child master (docs/papers.md §2, "start master"):
// it gives back the tasks it holds, finishes the running ones, and then
// runs the master over Tasks with the workers that the parent moves to
// it, under the parent's policy and split settings.
type Promote struct {
	Token uint64 `msgpack:"tok"` // names the child on its control link (ChildHello)
	Gen   int32  `msgpack:"g"`   // the batch, as Tasks.Gen
	ESGen int    `msgpack:"eg"`  // the ES generation, for logs
	N     int    `msgpack:"n"`   // the batch's size: task ids are below it
	Tasks []Task `msgpack:"t"`   // the child's share, with the parent's ids
	// Workers names the workers the parent moves to the child: the child
	// does not stop before they came (and, if it is done, went on to the
	// parent), so that none is left knocking at a closed door.
	Workers []string `msgpack:"nw,omitempty"`

	Policy      string  `msgpack:"p"`
	Depth       int     `msgpack:"d,omitempty"`
	Adaptive    bool    `msgpack:"ad,omitempty"`
	Rule        uint8   `msgpack:"r,omitempty"`
	Window      int     `msgpack:"w,omitempty"`
	MessageCost int64   `msgpack:"mc,omitempty"` // ns
	GainMargin  float64 `msgpack:"gm,omitempty"`
	// TaskTimeout and MaxRetries are the parent's (ns; -1: none,
	// 0: not said, the child's default): a child with its own defaults
	// dropped a task the run allows longer, and cut its deadlines at
	// another ceiling than the parent's (sched.Deadlines.Ceiling).
	TaskTimeout int64 `msgpack:"tt,omitempty"`
	MaxRetries  int   `msgpack:"mr,omitempty"`
}

// limits is the promote's TaskTimeout and MaxRetries for c, a parent's
// settings after their defaults (0 there: none).
func (pr *Promote) limits(c *MasterConfig) {
	pr.TaskTimeout, pr.MaxRetries = int64(c.TaskTimeout), c.MaxRetries
	if pr.TaskTimeout == 0 {
		pr.TaskTimeout = -1
	}
	if pr.MaxRetries == 0 {
		pr.MaxRetries = -1
	}
}

// applyLimits sets the child's mc to the parent's TaskTimeout and
// MaxRetries, where the promote says them.
func (pr *Promote) applyLimits(mc *MasterConfig) {
	if pr.TaskTimeout != 0 {
		mc.TaskTimeout = time.Duration(pr.TaskTimeout)
	}
	if pr.MaxRetries != 0 {
		mc.MaxRetries = pr.MaxRetries
	}
}

// Move tells a worker to leave its master for the master at Addr
// (Addr empty: the worker finds a master as it does after a lost
// connection). It gives back its held tasks first (Drain) and finishes
// the running ones.
type Move struct {
	Addr string `msgpack:"a"`
}

// ChildHello opens a child master's control link to its parent.
type ChildHello struct {
	Token uint64 `msgpack:"tok"`
	Addr  string `msgpack:"a"` // the child's data address, where moved workers go
}

// TaskRequest asks another master for tasks of batch Gen.
type TaskRequest struct {
	Gen int32 `msgpack:"g"`
}

// TaskGrant hands tasks of batch Gen to another master.
type TaskGrant struct {
	Gen   int32  `msgpack:"g"`
	Tasks []Task `msgpack:"t"`
}

// TaskRefusal says the asked master has no task of batch Gen to give.
type TaskRefusal struct {
	Gen int32 `msgpack:"g"`
}

// ChildResults carries results a child master accepted, with the parent's
// task ids; Done says the child has finished and returns (its workers
// are being moved back). Masters is the number of masters in the
// child's tree (itself included).
type ChildResults struct {
	Gen     int32     `msgpack:"g"`
	IDs     []int32   `msgpack:"ids"`
	F       []float64 `msgpack:"f"`
	Masters int       `msgpack:"m"`
	Done    bool      `msgpack:"done,omitempty"`
	// Moved names the workers the child sent back to the parent (itself
	// included): the parent waits for them at the end of the run.
	Moved []string `msgpack:"mv,omitempty"`
	// C is what the child's tree counted since its last ChildResults
	// (nil: nothing), for the run's totals.
	C *ChildCounts `msgpack:"c,omitempty"`
	// Failed is a task of Gen that failed in the child's tree more often
	// than MaxRetries allows: the parent's batch fails with it.
	Failed *ChildFailed `msgpack:"fl,omitempty"`
}

// ChildFailed is a task lent to a child master that failed there past
// its retries: its id and its failures in the order they came.
type ChildFailed struct {
	ID       int32         `msgpack:"id"`
	Failures []TaskFailure `msgpack:"fs"`
}

// ChildCounts is what a child master's tree (itself and its children)
// counted since its previous ChildResults: the parent adds it to its own
// counts, so that a run's counts mean the same whether its masters split
// or not (the root's are the run's). First lists the tasks whose first
// instance the tree sent (by its own books; the parent decides which
// are the run's originals: see Master.addChildCounts); the other fields
// are increments of sched.Counts and of MasterStats. Workers are not
// summed: the root counts each by name.
type ChildCounts struct {
	First []int32 `msgpack:"o,omitempty"`

	// sched.Counts (Wasted in ns).
	Resends        int64 `msgpack:"rs,omitempty"`
	Replicas       int64 `msgpack:"rp,omitempty"`
	CancelsHeld    int64 `msgpack:"ch,omitempty"`
	CancelsRunning int64 `msgpack:"cr,omitempty"`
	CancelsLate    int64 `msgpack:"cl,omitempty"`
	Aborted        int64 `msgpack:"ab,omitempty"`
	Wasted         int64 `msgpack:"wa,omitempty"`
	Dropped        int64 `msgpack:"dr,omitempty"`
	Duplicates     int64 `msgpack:"du,omitempty"`

	// MasterStats.
	Results     int64 `msgpack:"r,omitempty"`
	Stale       int64 `msgpack:"st,omitempty"`
	DupResults  int64 `msgpack:"dd,omitempty"`
	Failed      int64 `msgpack:"f,omitempty"`
	Unsolicited int64 `msgpack:"u,omitempty"`
	Overdue     int64 `msgpack:"od,omitempty"`
	Retried     int64 `msgpack:"rt,omitempty"`
	CancelAcks  int64 `msgpack:"ca,omitempty"`
}

// Bounds on one ChildCounts, beyond the frame's: a child's tree counts
// far less between two ChildResults (a few milliseconds apart), and a
// claim past them is cut to them, so that no claim makes a total wrap.
const (
	maxChildCount  = 1 << 30        // an int on every platform
	maxChildWasted = int64(1 << 50) // ns, about 13 days
)

// fields lists the counts, for arithmetic over all of them.
func (c *ChildCounts) fields() []*int64 {
	return []*int64{&c.Resends, &c.Replicas, &c.CancelsHeld, &c.CancelsRunning, &c.CancelsLate, &c.Aborted, &c.Wasted,
		&c.Dropped, &c.Duplicates, &c.Results, &c.Stale, &c.DupResults, &c.Failed, &c.Unsolicited, &c.Overdue, &c.Retried, &c.CancelAcks}
}

// since returns c − prev, field by field (First is c's).
func (c ChildCounts) since(prev ChildCounts) ChildCounts {
	d := c
	df := d.fields()
	for i, p := range prev.fields() {
		*df[i] -= *p
	}
	return d
}

// clamp cuts every count to [0, maxChildCount] (Wasted to [0,
// maxChildWasted]), and says whether it cut any.
func (c *ChildCounts) clamp() bool {
	cut := false
	for _, f := range c.fields() {
		hi := int64(maxChildCount)
		if f == &c.Wasted {
			hi = maxChildWasted
		}
		if v := min(max(*f, 0), hi); v != *f {
			*f, cut = v, true
		}
	}
	return cut
}

// zero says c counts nothing.
func (c *ChildCounts) zero() bool {
	if len(c.First) > 0 {
		return false
	}
	for _, f := range c.fields() {
		if *f != 0 {
			return false
		}
	}
	return true
}

// countsOf is a master's cumulative counts as a ChildCounts (First
// empty): its ledger's and its own.
func countsOf(c sched.Counts, st *MasterStats) ChildCounts {
	return ChildCounts{
		Resends: int64(c.Resends), Replicas: int64(c.Replicas), CancelsHeld: int64(c.CancelsHeld), CancelsRunning: int64(c.CancelsRunning),
		CancelsLate: int64(c.CancelsLate), Aborted: int64(c.Aborted), Wasted: int64(c.Wasted), Dropped: int64(c.Dropped), Duplicates: int64(c.Duplicates),
		Results: st.Results, Stale: st.Stale, DupResults: st.Duplicates, Failed: st.Failed, Unsolicited: st.Unsolicited,
		Overdue: st.Overdue, Retried: st.Retried, CancelAcks: st.CancelAcks,
	}
}

// ledgerCounts is c's share of sched.Counts (Originals aside).
func (c *ChildCounts) ledgerCounts() sched.Counts {
	return sched.Counts{
		Resends: int(c.Resends), Replicas: int(c.Replicas), CancelsHeld: int(c.CancelsHeld), CancelsRunning: int(c.CancelsRunning),
		CancelsLate: int(c.CancelsLate), Aborted: int(c.Aborted), Wasted: time.Duration(c.Wasted), Dropped: int(c.Dropped), Duplicates: int(c.Duplicates),
	}
}

// addStats adds c's share of MasterStats to st.
func (c *ChildCounts) addStats(st *MasterStats) {
	st.Results += c.Results
	st.Stale += c.Stale
	st.Duplicates += c.DupResults
	st.Failed += c.Failed
	st.Unsolicited += c.Unsolicited
	st.Overdue += c.Overdue
	st.Retried += c.Retried
	st.CancelAcks += c.CancelAcks
}

// RelayFrame carries one relayed stream's bytes between a relay and its
// upstream (docs/papers.md §1's R1): Op opens, carries or closes stream S.
type RelayFrame struct {
	S  uint32 `msgpack:"s"`
	Op uint8  `msgpack:"o"`
	D  []byte `msgpack:"d,omitempty"`
}

// The operations of a RelayFrame.
const (
	RelayData  uint8 = iota // D is the next bytes of stream S
	RelayOpen               // a new stream S (a downstream connection); D: the IP it came from, for the master's handshake gate
	RelayClose              // stream S is closed
)

// maxPromoteRetries bounds Promote.MaxRetries: a child keeps that many
// failures of a task, and sends them up.
const maxPromoteRetries = 1 << 16

// maxPromoteTimeout bounds Promote.TaskTimeout: esrun's own bound.
const maxPromoteTimeout = 7 * 24 * time.Hour

// MaxPromoteWorkers bounds Promote.Workers: the workers one split moves.
const MaxPromoteWorkers = 1 << 16

// Check says why a worker must not run the child master that pr asks
// for, or nil. The key proves a master's membership, not its sense: every
// size and setting of pr must be one a master of this package would
// send (a master's own SplitConfig and sched.Config bounds).
func (pr *Promote) Check() error {
	switch {
	case pr.N < 0 || pr.N > sched.MaxTaskID+1:
		return fmt.Errorf("grid: promote: batch of %d tasks outside [0, %d]", pr.N, sched.MaxTaskID+1)
	case len(pr.Tasks) > pr.N:
		return fmt.Errorf("grid: promote: %d tasks in a batch of %d", len(pr.Tasks), pr.N)
	case len(pr.Workers) > MaxPromoteWorkers:
		return fmt.Errorf("grid: promote: %d workers moved, more than %d", len(pr.Workers), MaxPromoteWorkers)
	case !slices.Contains(sched.Names, pr.Policy):
		return fmt.Errorf("grid: promote: unknown policy %q", logx.Cut(pr.Policy, maxNameLog))
	case pr.Depth < 0 || pr.Depth > sched.MaxDepth:
		return fmt.Errorf("grid: promote: depth %d outside [0, %d]", pr.Depth, sched.MaxDepth)
	case pr.MaxRetries < -1 || pr.MaxRetries > maxPromoteRetries:
		return fmt.Errorf("grid: promote: max retries %d outside [-1, %d]", pr.MaxRetries, maxPromoteRetries)
	case pr.TaskTimeout < -1 || pr.TaskTimeout > int64(maxPromoteTimeout):
		return fmt.Errorf("grid: promote: task timeout %v outside [-1ns, %v]", time.Duration(pr.TaskTimeout), maxPromoteTimeout)
	}
	if err := pr.split().check(); err != nil {
		return fmt.Errorf("grid: promote: %w", err)
	}
	return nil
}

// split is the child's SplitConfig.
func (pr *Promote) split() SplitConfig {
	return SplitConfig{Rule: SplitRule(pr.Rule), Window: pr.Window, MessageCost: time.Duration(pr.MessageCost), GainMargin: pr.GainMargin}
}

// Type implements Message.
func (Promote) Type() MsgType { return MsgPromote }

// Type implements Message.
func (Move) Type() MsgType { return MsgMove }

// Type implements Message.
func (ChildHello) Type() MsgType { return MsgChildHello }

// Type implements Message.
func (TaskRequest) Type() MsgType { return MsgTaskRequest }

// Type implements Message.
func (TaskGrant) Type() MsgType { return MsgTaskGrant }

// Type implements Message.
func (TaskRefusal) Type() MsgType { return MsgTaskRefusal }

// Type implements Message.
func (ChildResults) Type() MsgType { return MsgChildResults }

// Type implements Message.
func (RelayFrame) Type() MsgType { return MsgRelay }

// newExtMessage is newMessage for the split and relay types; nil for
// any other.
func newExtMessage(t MsgType) Message {
	switch t {
	case MsgPromote:
		return new(Promote)
	case MsgMove:
		return new(Move)
	case MsgChildHello:
		return new(ChildHello)
	case MsgTaskRequest:
		return new(TaskRequest)
	case MsgTaskGrant:
		return new(TaskGrant)
	case MsgTaskRefusal:
		return new(TaskRefusal)
	case MsgChildResults:
		return new(ChildResults)
	case MsgRelay:
		return new(RelayFrame)
	}
	return nil
}

// extName is MsgType.String for the split and relay types.
func extName(t MsgType) string {
	switch t {
	case MsgPromote:
		return "promote"
	case MsgMove:
		return "move"
	case MsgChildHello:
		return "child hello"
	case MsgTaskRequest:
		return "task request"
	case MsgTaskGrant:
		return "task grant"
	case MsgTaskRefusal:
		return "task refusal"
	case MsgChildResults:
		return "child results"
	case MsgRelay:
		return "relay"
	}
	return ""
}

// Roles in a Hello beyond a worker's: a Hello whose Problems is exactly
// one of these is a child master's control link or a relay's upstream,
// not a worker (the MAC covers Problems, so the role is authenticated).
const (
	helloSubMaster = "@submaster"
	helloRelay     = "@relay"
)

// helloRole is the role a Hello claims: "" for a worker.
func helloRole(h *Hello) string {
	if len(h.Problems) == 1 && (h.Problems[0] == helloSubMaster || h.Problems[0] == helloRelay) {
		return h.Problems[0]
	}
	return ""
}
