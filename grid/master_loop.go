package grid

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/sched"
)

// loopMsgKind says what a loopMsg carries.
type loopMsgKind uint8

const (
	msgJoined     loopMsgKind = iota + 1 // w finished its handshake
	msgFrame                             // w sent msg
	msgClosed                            // w's connection is closed
	msgMemberGone                        // gossip says the member named name failed (or left)
	msgEvaluate                          // start batch eval
	msgCall                              // run call on the loop
)

// loopMsg is everything that reaches the event loop, by value (no
// allocation per message beyond what it points to).
type loopMsg struct {
	kind loopMsgKind
	w    *mworker
	msg  Message
	name string
	left bool // msgMemberGone: a leave, not a failure
	// worker: msgMemberGone: the member may be a worker (its gossip
	// role says so, or cannot be read); any may be a relay.
	worker bool
	eval   *evalReq
	call   func()
}

type evalReq struct {
	gen   int
	xs    [][]float64
	reply chan evalReply // capacity 1: the loop never blocks on it
}

type evalReply struct {
	f   []float64
	err error
}

// mworker is the loop's view of one connected worker.
type mworker struct {
	id    sched.WorkerID
	name  string
	host  string // what verification counts as one voter (hostOf)
	slots int
	conn  *Conn

	left     bool // WorkerLeft has been stepped (lost, dropped or replaced)
	closed   bool // the connection is closed
	draining bool // WorkerDraining has been stepped
	leaving  bool // it sent a Drain of its own: it stops once done (esworker stopping)
	unnamed  bool // it joined under a name past the maxNamesKept kept: its joining and leaving are logged at a rate limit (joinLog)
	moved    bool // told to go to another master (a split's planned move)
	// finished: its last frame said its connection ends as planned
	// (Drain.Last): a promoted worker's closing is then no crash
	// (promotedGone).
	finished bool
	late     bool // Overdue has been stepped and the worker has not answered since
	// lateSince is when it last became late.
	lateSince time.Duration
	// overran is the longest run of its instances found overdue since it
	// last finished one (sched.Deadlines.OfWorker).
	overran time.Duration
	// fails counts its evaluations that failed in a row; aside is set
	// once they reached MaxFailures (workers.go).
	fails int
	aside bool
	// taken: the loop has taken its join (joined), so its shutdown tells
	// it the run is over (shutdownWorkers). Read by others only once
	// the loop has ended (m.done).
	taken bool
	// refused: its join was refused (its host excluded, its name taken):
	// its close is not news, and a key holder retrying at once would
	// fill the log with it.
	refused bool
	// ended: told the run is over before the loop's end (split.go's
	// endWorkers), so shutdownWorkers does not tell it again: a second
	// last frame would cut the first off.
	ended bool
	// probe: gossip says it is gone, and its link is asked to answer
	// (probe.go).
	probe linkProbe

	// Status from the worker's last Results (Clop's status table), and
	// when its session last sent any (results or a status report).
	queued, running int32
	lastHeard       time.Duration
	// heard: its session has sent a Results frame. Until then it may be
	// building the run's problem (a plugin's first process starting), and
	// the tasks sent meanwhile wait for it: their round trips are not
	// measured, and the policy knows it as starting (sched.Event.Starting).
	heard bool
	// startBy: its session said it builds the run's problem, which may
	// take up to startFor (Heartbeat.Starting, bounded by MaxStartBound),
	// and it must be heard by startBy (0: it said nothing of the
	// kind). Until it is heard, the tasks sent to it wait for its start:
	// they are neither timed nor found overdue, and its silence is its
	// start's (checkDeadlines); heard, their clocks start then (results).
	// Past startBy unheard, it is dropped and its running tries count as
	// failed (startFailed).
	startBy, startFor time.Duration

	// Smoothed measurements (ns): execution time and round trip.
	exec, rtt float64
	// hostExec is its host's smoothed execution time (hostTimes), set
	// at its first result.
	hostExec *float64

	// out lists the instances of the current batch outstanding on this
	// worker in the master's books (sent, not yet answered or
	// cancelled), in send order: the first slots of them are running,
	// for the deadlines, and their send times give the round trip.
	out []outInstance
	// outN counts the instances of each task in out, so that a task not
	// there is not searched for (takeOut): the ids of results and drains
	// are the worker's to choose, and a frame of 65,536 copies of an
	// answered result, each searched for in 8,192 instances held, held
	// the loop 2.3 s. Nil while out was only ever built by hand (tests).
	outN map[int32]int32

	// sent has bit t set for every task t of batch sentBatch that was
	// sent to this worker: only those results are believed. told has bit
	// t set once the ledger has been told of that instance's execution
	// (once per instance, however often the worker repeats it). prev* are
	// the same for the batch before, whose late results and cancel
	// acknowledgements still arrive.
	sent, told         []uint64
	sentBatch          int32
	prevSent, prevTold []uint64
	prevBatch          int32
	warned             bool // an unsolicited result was logged
	// tokens[t] is the token sent with task t of batch sentBatch (absent:
	// not drawn), prevTokens the batch before's (verify.go); tokN and
	// prevTokN are those batches' sizes (0: none). A map, not a slice of
	// λ: a worker gets a few of a batch's tasks, and 4,096 workers' slices
	// of λ = 16,384 would hold 1 GiB, cleared every batch.
	tokens, prevTokens map[int32]uint64
	tokN, prevTokN     int32
	// checkTasks are instances of verification checks to send this turn
	// (verify.go); flush sends them with the policy's tasks.
	checkTasks []Task

	// stopping holds the running instances (batch id, task) that the
	// master cancelled and the worker has not yet acknowledged, each
	// with when it was noted (stopSeq): each may hold its slot a while
	// yet (a plugin that cannot be cancelled finishes its evaluation, or
	// is killed and started again), so an instance sent meanwhile may
	// wait for that slot, and its round trip is not measured. At most
	// slots entries, sched.MaxSlots, and w's share of the notes of all
	// workers (stopNotesShare): the oldest give way (to gone). A map, as
	// every acknowledgement looks its instance up, and a frame may carry
	// a million (scanning a list of 65,536 for each of 100,000 held the
	// loop for 10 s). An instance cancelled, sent again and cancelled
	// again has one entry for all its cancels: it stays until every one
	// is answered (stopNote.n).
	stopping map[[2]int32]stopNote
	stopSeq  uint64
	// stopOrder lists the instances noted, oldest first, each with its
	// stopSeq: the oldest still in stopping gives way without a scan of
	// the map (entries acknowledged since are skipped, and pruned once
	// they are as many as the live ones).
	stopOrder []stopNote
	// withdrawn holds the tasks of the open batch whose instance held on
	// w the master cancelled (a late worker's queue taken back) and
	// whose cancel w has not acknowledged yet: that instance may have
	// finished before the cancel came, its result on the way, as
	// cancelSentAgain handles (at most one entry per task of the batch,
	// counting its cancels not yet answered, as stopping does: the first
	// answer must not end the note while a later cancel's is on the way;
	// cleared as a batch starts).
	withdrawn map[int32]int32
	// gone has bit t set when the note in stopping of task t of batch
	// sentBatch gave way (noteStopping) before its cancel was answered:
	// cancelSentAgain then takes a result of t for the cancelled
	// instance's, at worst cancelling an instance whose own result it is
	// (it is being taken out; the worker answers AckLate). Cleared by
	// a result of t, or an answer to a cancel of t that no note awaits.
	// A bit a task of the batch, as sent: notes past the share cost no
	// more memory, and no result that crossed its cancel is taken for an
	// instance sent again, which the worker would then run out of the
	// books, for ever if it hangs.
	gone []uint64

	// Frames being built during one turn of the loop.
	dirty      bool
	tasks      []Task
	cancels    []int32
	cancelsGen int32
	// Reused message values: Send encodes before it returns.
	tasksMsg  Tasks
	cancelMsg Cancel
}

// outInstance is one instance outstanding on a worker: when the master
// sent it, and whether the worker had an idle slot then (fewer instances
// outstanding than slots, none still stopping after a cancel, and its
// session heard from), so that the instance ran on arrival and its round
// trip is send → result less its execution; when it started running in
// the books (the worker runs in send order, slots at a time; -1 while
// held), and whether it went overdue.
type outInstance struct {
	task    int32
	at      time.Duration
	idle    bool
	started time.Duration
	overdue bool
}

// stopNote is an entry of mworker.stopOrder, and (key aside) of
// mworker.stopping, whose n counts the cancels of its instance not yet
// answered: an answer to the first of two must not end the note while
// the second's is on the way (seed 51001522 of the simulation).
type stopNote struct {
	key [2]int32
	seq uint64
	n   int
}

// stopNotesBudget bounds the instances noted as stopping on all the
// workers together, as stopNotesShare shares it out: about 135 bytes a
// note, so a worker that claims 65,536 slots and never answers a cancel
// held 540 KiB of the master's memory, not a connection's 80 KiB, and
// MaxWorkers of them several GiB.
const stopNotesBudget = 1 << 16

// minStopNotes is the least share of stopNotesBudget a worker has,
// however many are connected: a machine's cores' worth.
const minStopNotes = 16

// stopNotesShare is the most instances w may have noted as stopping: its
// slots (an honest worker runs no more than that), sched.MaxSlots, and
// its share of stopNotesBudget among the workers connected (of
// MasterConfig.stopNotes in tests). Over a run whose workers join one by
// one, each filling the share of its time, the notes stay under about
// stopNotesBudget × (1 + ln(workers/minStopNotes)): 70 MiB at 16,384
// workers, against the 8.6 GiB a share of sched.MaxSlots each would hold.
func (m *Master) stopNotesShare(w *mworker) int {
	budget := stopNotesBudget
	if m.cfg.stopNotes > 0 {
		budget = m.cfg.stopNotes
	}
	return max(min(w.slots, sched.MaxSlots, max(budget/max(m.nLive, 1), minStopNotes)), 1)
}

// noteStopping notes that w was told to cancel its running instance of
// task t of batch b (see stopping), keeping at most most of them (the
// oldest give way, leaving their bit in gone).
func (w *mworker) noteStopping(b, t int32, most int) {
	if w.stopping == nil {
		w.stopping = make(map[[2]int32]stopNote)
	}
	k := [2]int32{b, t}
	n := w.stopping[k].n + 1
	for len(w.stopping) >= max(most, 1) {
		old := w.stopOrder[0]
		w.stopOrder = w.stopOrder[1:]
		if w.stopping[old.key].seq == old.seq {
			delete(w.stopping, old.key)
			if old.key[0] == w.sentBatch && old.key != k {
				setBit(w.gone, old.key[1])
			}
		}
	}
	if len(w.stopOrder) >= 2*max(len(w.stopping), 16) {
		// Mostly acknowledged already: keep the live ones, in order.
		w.stopOrder = slices.DeleteFunc(w.stopOrder, func(n stopNote) bool { return w.stopping[n.key].seq != n.seq })
	}
	w.stopSeq++
	w.stopping[k] = stopNote{seq: w.stopSeq, n: n}
	w.stopOrder = append(w.stopOrder, stopNote{key: k, seq: w.stopSeq})
}

// stopped notes w's acknowledgement of a cancel of task t of batch b,
// cur being the open batch's id. An answer does not say which of the
// task's cancels it answers (a held instance's is answered at once, a
// running one's once it stops), so it ends one cancel's count, the
// running one's first: the notes of the task stand while any cancel of
// it is unanswered.
func (w *mworker) stopped(b, t, cur int32) {
	k := [2]int32{b, t}
	if e, ok := w.stopping[k]; ok {
		if e.n > 1 {
			e.n-- // another cancel of it is yet to be answered
			w.stopping[k] = e
		} else {
			delete(w.stopping, k)
		}
		return
	}
	if b != cur {
		return
	}
	if n := w.withdrawn[t]; n > 1 {
		w.withdrawn[t] = n - 1
	} else if n == 1 {
		delete(w.withdrawn, t)
	} else if b == w.sentBatch {
		clearBit(w.gone, t) // the answer to a cancel whose note gave way
	}
}

// noteWithdrawn notes that w was told to drop its held instance of task t
// of the open batch (see withdrawn).
func (w *mworker) noteWithdrawn(t int32) {
	if w.withdrawn == nil {
		w.withdrawn = make(map[int32]int32)
	}
	w.withdrawn[t]++
}

// takeOut removes w's earliest sent instance of task t from its
// outstanding instances, the one a result answers, and returns it; the
// next held instance starts running (in the books) at now.
func (w *mworker) takeOut(t int32, now time.Duration) (outInstance, bool) {
	if w.outN != nil && w.outN[t] == 0 {
		return outInstance{}, false
	}
	for i := range w.out {
		if w.out[i].task == t {
			return w.takeOutAt(i, now), true
		}
	}
	return outInstance{}, false
}

// takeOutHeld removes w's latest sent instance of task t, the one a
// cancel or a drain takes back (a worker drops a held instance of a task
// before it stops a running one), and returns it. A late worker's held
// instances are withdrawn last sent first, so the search starts at the
// back: from the front it was quadratic in the worker's share of a large
// generation under cyclic. Where t is on w twice (an overdue instance
// sent again to it), the front one is the instance still running.
func (w *mworker) takeOutHeld(t int32, now time.Duration) (outInstance, bool) {
	if w.outN != nil && w.outN[t] == 0 {
		return outInstance{}, false
	}
	for i := len(w.out) - 1; i >= 0; i-- {
		if w.out[i].task == t {
			return w.takeOutAt(i, now), true
		}
	}
	return outInstance{}, false
}

// takeOutAt removes w.out[i] and returns it; the next held instance
// starts running (in the books) at now.
func (w *mworker) takeOutAt(i int, now time.Duration) outInstance {
	o := w.out[i]
	if w.outN != nil {
		if n := w.outN[o.task]; n > 1 {
			w.outN[o.task] = n - 1
		} else {
			delete(w.outN, o.task)
		}
	}
	switch i {
	case 0:
		// The usual case, results in the order sent: moving the rest down
		// cost a copy of all a worker holds per result, quadratic for
		// cyclic's share of a large generation.
		w.out = w.out[1:]
	case len(w.out) - 1:
		w.out = w.out[:i]
	default:
		w.out = append(w.out[:i], w.out[i+1:]...)
	}
	if i < w.slots && len(w.out) >= w.slots && w.out[w.slots-1].started < 0 {
		w.out[w.slots-1].started = now
	}
	return o
}

// markSent records that task t of batch b (of n tasks) went to w.
func (w *mworker) markSent(b int32, n int, t int32) {
	if w.sentBatch != b || len(w.sent) == 0 {
		if len(w.sent) > 0 {
			w.prevSent, w.sent = w.sent, w.prevSent
			w.prevTold, w.told = w.told, w.prevTold
			w.prevTokens, w.tokens = w.tokens, w.prevTokens
			w.prevTokN = w.tokN
			w.prevBatch = w.sentBatch
		}
		words := (n + 63) / 64
		w.sent, w.told = bitsFor(w.sent, words), bitsFor(w.told, words)
		w.gone = bitsFor(w.gone, words)
		w.tokens, w.tokN = tokensFor(w.tokens), int32(n)
		w.sentBatch = b
	}
	w.sent[t/64] |= 1 << (t % 64)
}

// bitsFor returns b resized to words words, all clear.
func bitsFor(b []uint64, words int) []uint64 {
	if cap(b) < words {
		return make([]uint64, words)
	}
	b = b[:words]
	clear(b)
	return b
}

func hasBit(b []uint64, t int32) bool {
	return t >= 0 && int(t/64) < len(b) && b[t/64]&(1<<(t%64)) != 0
}

// setBit sets bit t of b, if b has it.
func setBit(b []uint64, t int32) {
	if t >= 0 && int(t/64) < len(b) {
		b[t/64] |= 1 << (t % 64)
	}
}

// clearBit clears bit t of b, if b has it.
func clearBit(b []uint64, t int32) {
	if t >= 0 && int(t/64) < len(b) {
		b[t/64] &^= 1 << (t % 64)
	}
}

// wasSent reports whether task t of batch b was ever sent to w.
func (w *mworker) wasSent(b int32, t int32) bool {
	return w.sentBatch == b && hasBit(w.sent, t)
}

// unmarkSent forgets that task t of batch b went to w: it never did (the
// policy withdrew it before the frame went out).
func (w *mworker) unmarkSent(b int32, t int32) {
	if w.wasSent(b, t) {
		w.sent[t/64] &^= 1 << (t % 64)
	}
}

// sentIn reports whether task t of batch b (this worker's latest or the
// one before) was sent to w.
func (w *mworker) sentIn(b int32, t int32) bool {
	switch {
	case b == w.sentBatch:
		return hasBit(w.sent, t)
	case b == w.prevBatch:
		return hasBit(w.prevSent, t)
	}
	return false
}

// tell reports whether task t of batch b (this worker's latest or the one
// before) was sent to w and the ledger has not been told of it yet, and
// marks it told: a worker's report of an instance counts once, and only
// for an instance it was really sent.
func (w *mworker) tell(b int32, t int32) bool {
	sent, told := w.sent, w.told
	switch {
	case b == w.sentBatch && len(w.sent) > 0:
	case b == w.prevBatch && len(w.prevSent) > 0:
		sent, told = w.prevSent, w.prevTold
	default:
		return false
	}
	if !hasBit(sent, t) || hasBit(told, t) {
		return false
	}
	told[t/64] |= 1 << (t % 64)
	return true
}

// batch is the generation being evaluated (or the last one).
type batch struct {
	id      int32 // Tasks.Gen on the wire
	gen     int   // the ES generation
	xs      [][]float64
	f       []float64
	done    []bool // an accepted result is in f
	replied bool
	reply   chan evalReply
	// failures lists, per task that failed, each failure with its worker.
	failures map[int32][]TaskFailure
	// timedOut lists, per task, the names of the workers dropped for
	// running it past TaskTimeout (see Master.timedOut).
	timedOut map[int32][]string
	// overran counts, per task, its instances that went overdue: the
	// next one's deadline is doubled as often (sched.Deadlines.Again).
	overran []uint8
	// atCeiling marks the tasks an instance of which was cut short at
	// the deadlines' ceiling: the next ones have no deadline, only the
	// task timeout (sched.Deadlines.AtCeiling). Nil until one is.
	atCeiling []bool
	// passedOver lists, per task, the workers on which it went overdue
	// or failed: the policy gives it them no more while another worker
	// open has not (its exclusion, by id), so they are no workers that
	// may run it (Master.openNotTimedOut).
	passedOver map[int32][]sched.WorkerID
}

// ceilinged says an instance of task t was cut short at the ceiling.
func (b *batch) ceilinged(t int32) bool {
	return t >= 0 && int(t) < len(b.atCeiling) && b.atCeiling[t]
}

// passOver notes that task t went overdue or failed on worker id.
func (b *batch) passOver(t int32, id sched.WorkerID) {
	if b.passedOver == nil {
		b.passedOver = map[int32][]sched.WorkerID{}
	}
	if !slices.Contains(b.passedOver[t], id) {
		b.passedOver[t] = append(b.passedOver[t], id)
	}
}

// overruns is how many instances of task t went overdue in the batch.
func (b *batch) overruns(t int32) int {
	if t < 0 || int(t) >= len(b.overran) {
		return 0
	}
	return int(b.overran[t])
}

// overrun counts one overdue instance of task t.
func (b *batch) overrun(t int32) {
	if t >= 0 && int(t) < len(b.overran) && b.overran[t] < math.MaxUint8 {
		b.overran[t]++
	}
}

// fail ends the batch with err, once.
func (b *batch) fail(err error) {
	if !b.replied {
		b.replied = true
		b.reply <- evalReply{err: err}
	}
}

// joinLog is the logger for w's joining and leaving: the master's, but
// rate-limited for a name past the maxNamesKept it remembers, so that a
// key holder joining under ever new names, two lines a connection, does
// not grow the log without bound either.
func (m *Master) joinLog(w *mworker) *slog.Logger {
	if w.unnamed && m.nlog != nil {
		return m.nlog
	}
	return m.log
}

// maxNamesKept bounds the names a master remembers that are not
// connected (joined, refused the problem): a lab's workers many times
// over, while a key holder joining under ever new names would grow the
// books, and the log, without bound.
const maxNamesKept = 4096

// loopState is everything the event loop owns.
type loopState struct {
	byID map[sched.WorkerID]*mworker
	// order holds byID's workers in the order they joined: the loop
	// visits workers in it, never in a map's order, so that what it does
	// depends only on the order of the events it was given (one seed
	// replays one simulated run).
	order   []*mworker
	byName  map[string]*mworker // workers not left, by Hello name
	named   map[string]bool     // the names that joined (MasterStats.Named), the first maxNamesKept
	nLive   int
	acts    []sched.Action
	dirty   []*mworker
	cur     *batch
	lastID  int32
	batches int
	counts  MasterStats // Workers and ConnStats are filled in by stats()
	gone    ConnStats   // traffic of closed connections
	exec    float64     // the smoothed execution time of every result (ns), for split.go's estimates
	hosts   hostTimes   // the hosts' times, which fresh workers' deadlines fall back on
	overdue []int32     // scratch for checkDeadlines
	split   splitState  // overload test, children, parent (submaster.go)
	v       verifyState // tokens, checks, excluded workers (verify.go)
	// noneOpen is since when no worker has been open to tasks while
	// some were set aside for failing (-1: one is; workers.go).
	noneOpen time.Duration
	// relayProbes are the relays whose links gossip says are gone and
	// are asked for an echo (probe.go).
	relayProbes []relayProbe
}

func (s *loopState) init() {
	s.byID = make(map[sched.WorkerID]*mworker)
	s.byName = make(map[string]*mworker)
	s.named = make(map[string]bool)
	s.lastID = -1
	s.noneOpen = -1
	s.v.init()
}

// now is the master's clock: the time since it started, less its own
// pauses (heartbeat). While the heartbeat is later than pauseLimit, the
// clock stands at its last beat plus pauseLimit: the master may run again
// before its heartbeat does, and must not see the pause meanwhile.
func (m *Master) now() time.Duration {
	c := m.clock.Load() // before the time: a beat stored later is no sooner than it
	raw := time.Since(m.start)
	if c == nil {
		return raw
	}
	if c.beat > 0 {
		raw = min(raw, c.beat+m.pauseLimit())
	}
	return raw - c.paused
}

// loop is the master's single event loop.
func (m *Master) loop() {
	defer m.wg.Done()
	defer close(m.done)
	deadlines := time.NewTicker(m.checkEvery)
	defer deadlines.Stop()
	for {
		select {
		case <-m.loopCtx.Done():
			m.shutdownWorkers()
			return
		case lm := <-m.in:
			m.handle(lm)
		case <-deadlines.C:
			m.tick()
		}
		// Take what else is waiting before writing, so that several
		// results from one worker become one frame back.
	more:
		for range 256 {
			select {
			case lm := <-m.in:
				m.handle(lm)
			default:
				break more
			}
		}
		m.flush()
		m.afterTurn() // split.go: splits, task requests, a child's return
	}
}

// tick is the loop's turn of its clock, every checkEvery: the checks
// of what is overdue.
func (m *Master) tick() {
	m.checkDeadlines()
	m.checkRefusals() // refusals.go
	m.checkProbes()   // probe.go
}

// The master's own pauses. A master that does not run for a while (its
// process stopped, its machine starved) cannot blame its workers or
// children for that time: counted, the first tick after a pause past the
// task timeout dropped every worker with an instance out and counted a
// failure against each task, before the results that came meanwhile were
// read, and one such pause failed a run under -max-retries 0. A
// goroutine of its own, the heartbeat, beats every checkEvery; a beat
// later than pauseLimit says the process did not run, whether the loop
// was waiting or in a turn (a busy master is mostly in one), and the
// time past pauseLimit does not count (now). A loop merely busy does not
// stop the heartbeat, so its time counts: no input can stop the clock.

// pauseGap is how much later than checkEvery the heartbeat may beat
// before the wait counts as the master's own pause.
const pauseGap = 2 * time.Second

// pauseLimit is the longest wait between two beats that counts in full.
func (m *Master) pauseLimit() time.Duration { return m.checkEvery + pauseGap }

// pauseClock is the heartbeat's account: beat is when it last beat
// (since start; 0: it beats no more), paused the time now leaves out.
type pauseClock struct{ beat, paused time.Duration }

// heartbeat beats every checkEvery until the loop is told to stop (Close).
func (m *Master) heartbeat() {
	defer m.wg.Done()
	t := time.NewTicker(m.checkEvery)
	defer t.Stop()
	m.beat()
	for {
		select {
		case <-m.loopCtx.Done():
			m.beat()                                                  // a pause up to now is left out
			m.clock.Store(&pauseClock{paused: m.clock.Load().paused}) // and the clock runs on, unheld
			return
		case <-t.C:
			m.beat()
		}
	}
}

// beat notes that the heartbeat runs, and takes out of now the time
// since the last beat past pauseLimit. The heartbeat alone calls it.
func (m *Master) beat() {
	raw := time.Since(m.start)
	c := pauseClock{beat: raw}
	if old := m.clock.Load(); old != nil {
		c.paused = old.paused
		if gap := raw - old.beat; old.beat > 0 && gap > m.pauseLimit() {
			c.paused += gap - m.pauseLimit()
			m.log.Warn("the master did not run for a while (stopped, or starved of CPU); that time does not count against its workers", "paused_for", gap.Round(time.Millisecond))
		}
	}
	m.clock.Store(&c)
}

func (m *Master) handle(lm loopMsg) {
	m.turnBegin() // split.go
	if lm.kind == msgFrame {
		m.messageTaken(len(m.in)) // submaster.go: the overload test, an emulated slow master
	}
	switch lm.kind {
	case msgJoined:
		m.joined(lm.w)
	case msgFrame:
		switch v := lm.msg.(type) {
		case *Results:
			m.canEvaluate(lm.w) // refusals.go
			m.results(lm.w, v)
		case *Heartbeat:
			// Its word that it starts (the Conn hands no other
			// heartbeat on): not yet a word that it can evaluate
			// (refusals.go), as its build may fail.
			m.starting(lm.w, v.Starting)
		case *Drain:
			m.drain(lm.w, v)
		default:
			m.log.Warn("unexpected message from worker; closing its connection",
				"worker", lm.w.name, "type", lm.msg.Type())
			lm.w.conn.SendAndClose(&Reject{Reason: fmt.Sprintf("unexpected %v from a worker", lm.msg.Type())})
		}
	case msgClosed:
		w := lm.w
		w.closed = true
		st := w.conn.Stats()
		m.gone.FramesIn += st.FramesIn
		m.gone.FramesOut += st.FramesOut
		m.gone.BytesIn += st.BytesIn
		m.gone.BytesOut += st.BytesOut
		m.gone.Writes += st.Writes
		delete(m.byID, w.id)
		m.order = slices.DeleteFunc(m.order, func(o *mworker) bool { return o == w })
		m.workers.left(w.id)
		switch {
		case !w.left && w.moved && m.promotedGone(w): // split.go
			m.workerLeft(w)
		case !w.left && w.moved:
			m.log.Info("worker moved to another master", "worker", w.name, "worker_id", w.id)
			m.workerLeft(w)
		case !w.left && w.leaving && len(w.out) == 0:
			// It said it stops (esworker told to exit), and closed with
			// nothing out: it left as it said it would, no loss.
			m.log.Info("worker left after its drain", "worker", w.name, "worker_id", w.id)
			m.workerLeft(w)
		case !w.left:
			if !m.noteRefusal(w) { // refusals.go: it refused the problem
				m.counts.Lost.Closed++
				m.joinLog(w).Warn("worker lost; its tasks go back to the queue", "worker", w.name, "worker_id", w.id, "cause", w.conn.Err())
			}
			m.workerLeft(w)
		case !w.refused:
			m.joinLog(w).Info("worker disconnected", "worker", w.name, "worker_id", w.id)
		}
	case msgMemberGone:
		m.memberGone(lm.name, lm.left, lm.worker) // probe.go
	case msgEvaluate:
		m.startBatch(lm.eval)
	case msgCall:
		lm.call()
	}
}

func (m *Master) joined(w *mworker) {
	w.taken = true
	if why := m.excludedWhy(w.host); why != "" {
		// Its handshake passed as its host was being excluded.
		w.left, w.refused = true, true
		m.v.exIDs[w.id] = true
		w.conn.SendAndClose(&Reject{Reason: why})
		return
	}
	if old := m.byName[w.name]; old != nil && !old.left && old.host != w.host {
		// A name proves nothing (any key holder may give it): a live
		// connection keeps it against another host, or a key holder
		// could drop every worker in turn by taking their names.
		w.left, w.refused = true, true
		reason := fmt.Sprintf("worker name %q is in use by a connection from another host; try again once it ends", logx.Cut(w.name, logx.MaxErrText))
		m.refusals.Add(RefusedOther, w.conn.RemoteAddr().String()+": "+reason)
		w.conn.SendAndClose(&Reject{Reason: reason})
		return
	}
	if old := m.byName[w.name]; old != nil && !old.left {
		// One node, one data connection: a worker that reconnects under
		// the same name has lost the old one, whether or not we noticed.
		m.counts.Lost.Reconnected++
		m.log.Warn("worker reconnected; dropping its old connection", "worker", w.name, "old_worker_id", old.id, "worker_id", w.id)
		m.workerLeft(old)
		old.conn.Close()
	}
	m.byID[w.id] = w
	m.order = append(m.order, w)
	m.cameHere(w.name) // split.go
	m.counts.Joined++
	if !m.named[w.name] {
		m.counts.Named++
		if len(m.named) < maxNamesKept {
			m.named[w.name] = true
		} else {
			w.unnamed = true
		}
	}
	if m.endHeard() { // split.go: a child master that heard the run is over
		w.left = true // it never joins the run
		m.endWorker(w)
		return
	}
	m.byName[w.name] = w
	m.nLive++
	m.split.slots += w.slots
	m.setLive(m.nLive, true)
	m.joinLog(w).Info("worker joined", "worker", w.name, "worker_id", w.id, "slots", w.slots, "addr", w.conn.RemoteAddr().String())
	// Starting: it builds the run's problem (a plugin's first process)
	// before it serves; its first Results frame says it does (results).
	m.step(sched.Event{Kind: sched.WorkerJoined, Worker: w.id, Slots: w.slots, Starting: true}, 0)
	m.applyPlan(w)         // its slots, or set aside, as the plan says (plan.go)
	m.checkChecks(m.now()) // checks waiting for a worker (verify.go)
}

// workerLeft steps WorkerLeft once for w: the policy puts back in the
// queue every task that no other worker holds.
func (m *Master) workerLeft(w *mworker) {
	if w.left {
		return
	}
	w.left = true
	for _, t := range w.tasks {
		m.ledger.Unsent(w.id, sched.TaskID(t.ID)) // never sent: the policy takes them back
		m.counts.TasksSent--
	}
	w.tasks = w.tasks[:0]
	if m.byName[w.name] == w {
		delete(m.byName, w.name)
	}
	w.out = w.out[:0]
	clear(w.outN)
	w.checkTasks = w.checkTasks[:0]
	m.checksLost(w) // verify.go
	m.nLive--
	m.split.slots -= w.slots
	m.setLive(m.nLive, false)
	m.step(sched.Event{Kind: sched.WorkerLeft, Worker: w.id}, 0)
	if m.nLive == 0 && !w.ended && m.cur != nil && !m.cur.replied && m.unable.byName[w.name] == nil { // a refusal is logged as such (refusals.go)
		m.log.Warn("every worker has left; the generation waits for workers to join",
			"gen", m.cur.gen, "done", m.progress.Load(), "tasks", len(m.cur.xs))
	}
}

// drain handles a worker's Drain: it takes no new work, and the held
// tasks it gave back go back to the queue; what it still runs stays its
// own until its results come or its connection closes.
func (m *Master) drain(w *mworker, d *Drain) {
	if w.left {
		return
	}
	w.finished = w.finished || d.Last
	if !w.moved {
		w.leaving = true // not told to move: it is stopping
	}
	if !w.draining {
		w.draining = true
		m.log.Info("worker draining; its held tasks go back to the queue", "worker", w.name, "worker_id", w.id, "returned", len(d.Returned))
		m.step(sched.Event{Kind: sched.WorkerDraining, Worker: w.id}, 0)
	}
	b := m.cur
	if b == nil || d.Gen != b.id {
		return
	}
	// An id w does not hold is not searched for in its books (outN): a
	// scan for every id, which a key holder chooses, held the loop 10 s
	// for a frame of 4 million ids against 4,096 instances held.
	now := m.now()
	for _, t := range d.Returned {
		if t >= checkBase {
			// A check's instance: not in w's books, but the check's
			// (verify.go).
			m.checkReturned(w, b, t-checkBase)
			continue
		}
		if _, ok := w.takeOutHeld(t, now); ok {
			m.counts.Returned++
			m.step(sched.Event{Kind: sched.Returned, Worker: w.id, Task: sched.TaskID(t)}, 0)
		}
	}
	m.maybeReply() // a check given back may have stood unverified
}

// checkDeadlines steps Overdue for every running instance past its
// deadline, and drops the connection of a worker with an instance past
// TaskTimeout or whose session has been silent for IdleTimeout while it
// had work.
func (m *Master) checkDeadlines() {
	now := m.now()
	d := m.cfg.deadlines()
	for _, w := range m.order {
		if w.left || len(w.out) == 0 {
			continue
		}
		if !w.heard && w.startBy > 0 {
			// It builds the run's problem: its tasks wait for it, and
			// their clocks start once it is heard (results), unless its
			// start outlasts the bound it gave.
			if now > w.startBy {
				m.startFailed(w)
			}
			continue
		}
		if silent := now - w.lastHeard; silent > m.cfg.IdleTimeout {
			m.dropWorker(w, "its session sent nothing while it had tasks", "silent_for", silent.Round(time.Millisecond))
			continue
		}
		deadline := m.deadline(w)
		m.overdue = m.overdue[:0]
		for i := range w.out[:min(w.slots, len(w.out))] {
			o := &w.out[i]
			if o.started < 0 {
				continue
			}
			run := now - o.started
			if m.cfg.TaskTimeout > 0 && run > m.cfg.TaskTimeout {
				t := o.task
				m.dropWorker(w, "a task ran past the task timeout", "task", t, "running_for", run.Round(time.Millisecond))
				m.timedOut(w, t)
				break
			}
			// No deadline (0) for an instance of a task cut short at
			// the ceiling already: it runs to the task timeout.
			n := m.cur.overruns(o.task)
			if again := d.Again(deadline, n, m.cur.ceilinged(o.task)); !o.overdue && again > 0 && run > again {
				o.overdue = true
				if b := m.cur; d.AtCeiling(deadline, n) && o.task >= 0 && int(o.task) < len(b.xs) {
					if b.atCeiling == nil {
						b.atCeiling = make([]bool, len(b.xs))
					}
					b.atCeiling[o.task] = true
				}
				m.cur.passOver(o.task, w.id)
				w.overran = max(w.overran, run)
				m.overdue = append(m.overdue, o.task)
			}
		}
		if w.left || len(m.overdue) == 0 {
			continue
		}
		if !w.late {
			m.log.Warn("worker is late: its overdue tasks are cancelled and run again, on another worker if one is open, and it gets no new work until it answers",
				"worker", w.name, "worker_id", w.id, "gen", m.cur.gen, "tasks", len(m.overdue), "deadline", deadline.Round(time.Millisecond))
		}
		if !w.late {
			w.lateSince = now
		}
		w.late = true
		for _, t := range m.overdue {
			m.counts.Overdue++
			m.cur.overrun(t)
			m.step(sched.Event{Kind: sched.Overdue, Worker: w.id, Task: sched.TaskID(t)}, 0)
		}
	}
	if m.cur != nil && !m.policy.Done() {
		// Time passed: a policy that plans by time (eft) reconsiders.
		m.step(sched.Event{Kind: sched.Tick}, 0)
	}
	m.checkChecks(now) // verify.go
	m.takeBack(now)    // workers.go
}

// measured feeds an evaluation w finished in exec into its mean, its
// host's and the grid's.
func (m *Master) measured(w *mworker, exec time.Duration) {
	sched.Smooth(&w.exec, exec)
	sched.Smooth(&m.exec, exec)
	m.hosts.measured(w, exec)
	w.overran = 0 // measured: its mean says how long it takes
}

// deadline is how long an instance may run on w before it is overdue.
// Its overruns count only once it has answered since (it is not late):
// see sched.Overran. A worker with no time of its own is given the
// hosts' (hostTimes), which no one host can shorten.
func (m *Master) deadline(w *mworker) time.Duration {
	var grid float64
	if w.exec == 0 {
		grid = m.hosts.grid()
	}
	return m.cfg.deadlines().OfWorker(w.exec, grid, w.rtt, sched.Overran(w.overran, w.late))
}

// moveWorker tells w to go to the master at addr: a planned move, which
// its connection's end does not count as a loss.
func (m *Master) moveWorker(w *mworker, addr string) {
	w.moved = true
	w.conn.Send(&Move{Addr: addr})
}

// dropWorker drops w's connection as lost: its tasks go back to the
// queue. It may connect again.
func (m *Master) dropWorker(w *mworker, why string, args ...any) {
	m.counts.Dropped++
	m.log.Warn("dropping worker: "+why+"; its tasks go back to the queue", append([]any{"worker", w.name, "worker_id", w.id}, args...)...)
	m.workerLeft(w)
	w.conn.SendAndClose(&Reject{Reason: "dropped by the master: " + why})
}

func (m *Master) startBatch(req *evalReq) {
	// What this turn built for the old batch goes out under its id.
	m.flush()
	prev := m.cur
	if prev != nil && !prev.replied {
		prev.replied = true
		prev.reply <- evalReply{err: fmt.Errorf("grid: generation %d superseded by generation %d", prev.gen, req.gen)}
	}
	// Batch ids on the wire only grow, so a result is of the current batch
	// or stale, never ambiguous; they equal the generation unless one was
	// asked twice.
	id := m.lastID + 1
	if req.gen > int(id) && req.gen <= math.MaxInt32 {
		id = int32(req.gen)
	}
	m.lastID = id
	m.cur = &batch{id: id, gen: req.gen, xs: req.xs, f: make([]float64, len(req.xs)), done: make([]bool, len(req.xs)),
		overran: make([]uint8, len(req.xs)), reply: req.reply, failures: map[int32][]TaskFailure{}}
	m.batches++
	m.progress.Store(0)
	m.verifyStart(len(req.xs))
	for _, w := range m.order {
		// Whatever is still out belongs to the old batch: its results
		// will be stale, and the worker counts as free in the books.
		w.out = w.out[:0]
		clear(w.outN)
		clear(w.withdrawn)
	}
	prevID := int32(-1)
	if prev != nil {
		prevID = prev.id
	}
	m.newBatchSplit() // split.go
	m.stepWith(sched.Event{Kind: sched.BatchStarted, N: len(req.xs)}, 0, prevID)
}

// starting notes w's word that its session builds the run's problem,
// which may take up to d ns (Heartbeat.Starting): until its session is
// heard, the tasks it holds wait for it untimed (checkDeadlines). Once per
// session, and not once heard: the bound runs from its first word, which
// a worker cannot push back by saying it again.
func (m *Master) starting(w *mworker, d int64) {
	if d <= 0 || w.left || w.heard || w.startBy > 0 {
		return
	}
	now := m.now()
	w.lastHeard = now
	w.startFor = min(time.Duration(d), MaxStartBound)
	w.startBy = now + w.startFor
	m.log.Debug("worker is starting the run's problem; its tasks wait for it", "worker", w.name, "worker_id", w.id, "bound", w.startFor)
}

// startFailed drops w, not heard within the start it said it needed
// (starting), and counts each of its running tries as failed, as the task
// timeout would have: a worker whose plugin starts and hangs, or that
// says it starts and then nothing, still ends the run (MaxRetries).
func (m *Master) startFailed(w *mworker) {
	var ts []int32
	for _, o := range w.out[:min(w.slots, len(w.out))] {
		if o.started >= 0 {
			ts = append(ts, o.task)
		}
	}
	m.dropWorker(w, "its problem did not start within the bound it gave", "bound", w.startFor)
	for _, t := range ts {
		m.timedOutFor(w, t, fmt.Sprintf("its worker's problem did not start within %v", w.startFor))
	}
}

// results handles one Results frame from w.
func (m *Master) results(w *mworker, rs *Results) {
	w.queued, w.running = rs.Queued, rs.Running
	w.lastHeard = m.now()
	if !w.heard && !w.left && w.startBy > 0 {
		// Its problem built: the tasks that waited for it start their
		// clocks now, as it starts running them.
		now := m.now()
		for i := range w.out[:min(w.slots, len(w.out))] {
			if w.out[i].started >= 0 {
				w.out[i].started = now
			}
		}
	}
	if !w.heard && !w.left {
		// Its session serves: the policy learns that it started
		// (WorkerJoined said Starting). Not for a late worker: what ends
		// lateness is an answer about a slot (result and cancelAck).
		w.heard = true
		if !w.late {
			m.step(sched.Event{Kind: sched.Measured, Worker: w.id}, 0)
		}
	}
	b := m.cur
	for i := range rs.Items {
		r := &rs.Items[i]
		if !r.Cancelled || r.Ack != AckDropped {
			// An answer about a slot (not a held instance dropped, which
			// a silent worker gives too) shows it serves checks again.
			delete(m.v.slow, w.id)
		}
		m.result(w, b, r)
	}
	if b != nil && !b.replied && m.batchDone() && m.checksDone() { // split.go: nothing out with a child either
		b.replied = true
		b.reply <- evalReply{f: b.f}
		m.log.Debug("generation evaluated", "gen", b.gen, "tasks", len(b.f))
	}
}

// result handles one result from w while batch b is current. Only a result
// for a task of b that was sent to w can decide (or fail) a task; the rest
// feed the accounting at most, once per instance really sent to w.
func (m *Master) result(w *mworker, b *batch, r *Result) {
	now := m.now()
	exec := time.Duration(r.Exec)
	if exec < 0 || exec > now {
		exec = 0 // not to be trusted; only the accounting uses it
	}
	if m.v.exIDs[w.id] {
		return // excluded (verify.go): nothing more from it counts
	}
	if r.ID >= checkBase {
		// An instance of a verification check (verify.go). One it
		// evaluated, or stopped, is an answer too: its slot was busy
		// with the check (the tasks held behind it may have gone
		// overdue meanwhile).
		if m.checkResult(w, b, r, exec) && w.late && !w.left {
			w.late = false
			m.step(sched.Event{Kind: sched.Measured, Worker: w.id}, 0)
		}
		return
	}
	// Only an instance the master gave w, with its token, is believed
	// (verify.go); an acknowledgement that the instance finished long
	// ago has none, and feeds the ledger only against a cancel sent.
	if !w.validToken(r.Gen, r.ID, r.Token) && !(r.Cancelled && r.Ack == AckLate) {
		if w.tokensForgotten(r.Gen) {
			// A batch older than the two whose tokens are kept: stale
			// whoever sent it, and it feeds nothing else; but a slot it
			// freed (an evaluation stopped, or abandoned deaf to its
			// cancel, long after) ends a late worker's lateness, which
			// nothing else it has may ever answer.
			m.counts.Stale++
			if r.Cancelled && r.Ack == AckStopped && w.late && !w.left {
				w.late = false
				m.step(sched.Event{Kind: sched.Measured, Worker: w.id}, 0)
			}
			return
		}
		m.unsolicited(w, r)
		return
	}
	if r.Cancelled {
		m.cancelAck(w, b, r, now, exec)
		return
	}
	m.counts.Results++
	if r.Err == "" && !m.cfg.Problem.NonFinite && !finite(r.F) {
		r.Err = nonFiniteError(r.F) // an error, retried elsewhere (verify.go)
	}
	// Dated at its arrival: the ledger moves it back by the worker's
	// one-way delay (half its smallest round trip).
	ran := sched.Execution{Worker: w.id, Task: sched.TaskID(r.ID), Start: now - exec, End: now, Arrival: true}
	// An instance is measured once: as its result takes it out of the
	// books, or tells the ledger of it (one cancelled already); copies
	// of a result sent again, each claiming up to the master's age,
	// would move the grid's mean where they liked.
	finished := r.Err == "" && exec > 0
	switch {
	case b == nil || r.Gen != b.id:
		// An earlier batch: its compute was wasted, its value unused,
		// but how long it ran still says how fast the worker is, and
		// that it is alive.
		m.counts.Stale++
		first := finished && w.tell(r.Gen, r.ID)
		if first {
			// Stale: the open batch may have sent w the same task
			// again, an instance this execution must not end.
			ran.Stale = true
			m.ledger.Ran(ran)
			m.measured(w, exec)
		}
		if !w.left && (w.late || m.adaptive && first) {
			ev := sched.Event{Kind: sched.Measured, Worker: w.id}
			if m.adaptive && first {
				ev.Exec = exec
			}
			w.late = false
			m.step(ev, 0)
		}
	case !w.wasSent(b.id, r.ID):
		// Never given to this worker (withdrawn before it went):
		// believing it would let a broken or hostile worker decide (or
		// fail) a batch with made-up values.
		m.counts.Results--
		m.unsolicited(w, r)
	case r.Err != "":
		m.cancelSentAgain(w, b.id, r.ID)
		_, out := w.takeOut(r.ID, now)
		w.late = false
		m.counts.Failed++
		m.failing(w, r.Err) // workers.go: set aside first if it keeps failing, so that the retry goes elsewhere
		m.failed(w, b, r, out)
	default:
		// NaN and ±Inf are results like any other when the problem says
		// so (ProblemSpec.NonFinite): the ES ranks them. An instance sent
		// again that this result withdraws leaves the ledger before Ran:
		// else Ran settles it with this execution, and the ledger, not
		// finding it, takes back the cancelled instance's send instead.
		m.cancelSentAgain(w, b.id, r.ID)
		told := exec > 0 && w.tell(b.id, r.ID)
		if told {
			m.ledger.Ran(ran)
		}
		w.late = false
		w.fails = 0
		ev := sched.Event{Kind: sched.ResultArrived, Worker: w.id, Task: sched.TaskID(r.ID)}
		if out := m.measure(&ev, w, r.ID, now, exec); finished && (out || told) {
			m.measured(w, exec)
		}
		if !m.step(ev, r.F) {
			m.counts.Duplicates++
		} else {
			m.verifyAccepted(w, b, r.ID, r.F) // verify.go
			if m.cfg.OnAccept != nil {
				m.cfg.OnAccept(b.gen, int(r.ID), w.name, exec)
			}
		}
	}
}

// cancelAck handles a worker's answer to a cancel (a Cancelled result):
// what it did with the instance goes to the ledger, which counts it only
// as the answer to a cancel it saw sent. A worker that predates
// acknowledgements answers only for running instances it stopped
// (Cancelled, no Ack).
func (m *Master) cancelAck(w *mworker, b *batch, r *Result, now, exec time.Duration) {
	m.counts.CancelAcks++
	cur := int32(-1)
	if b != nil {
		cur = b.id
	}
	w.stopped(r.Gen, r.ID, cur)
	t := sched.TaskID(r.ID)
	// The batch says which cancel it answers: an earlier batch's running
	// instance is answered once it stops, maybe after the open batch's
	// cancel of the same task on w, dropped at once.
	of := sched.OfEarlierBatch
	if b != nil && r.Gen == b.id {
		of = sched.OfLastBatch
	}
	switch r.Ack {
	case AckDropped, AckLate:
		// No execution to report (a late one's result came on its own);
		// the ledger counts one outcome per cancel it saw sent.
		if w.sentIn(r.Gen, r.ID) {
			if r.Ack == AckDropped {
				m.ledger.DroppedOf(now, w.id, t, of)
			} else {
				m.ledger.LateOf(now, w.id, t, of)
			}
		}
	default: // AckStopped, or a worker that predates acknowledgements
		if exec > 0 && w.tell(r.Gen, r.ID) {
			m.ledger.Ran(sched.Execution{Worker: w.id, Task: t, Start: now - exec, End: now, Cancelled: true, Arrival: true, Of: of})
		}
	}
	// An answer about a slot (an instance stopped, or found finished)
	// shows a late worker alive; a held instance dropped does not: a
	// worker whose slots are wedged (a silent one) still drops what it
	// holds, and given new work again would only hold it past another
	// deadline, in every generation.
	if w.late && !w.left && r.Ack != AckDropped {
		w.late = false
		m.step(sched.Event{Kind: sched.Measured, Worker: w.id}, 0)
	}
}

// measure takes the instance of task t out of w's books and measures,
// as the simulator does, the round trip RTT = now − sent − Exec, but only
// for an instance sent while w had an idle slot in the master's books:
// one sent to be held waited in the remote queue for a time the master
// cannot know. The deadlines use the smoothed round trip; with the
// adaptive depth (sched.Config.Adaptive) ev carries the measurements:
// Exec as the worker reported it (the time its slot was busy, an emulated
// slowdown included) and the RTT. It reports whether the instance was
// in the books.
func (m *Master) measure(ev *sched.Event, w *mworker, t int32, now, exec time.Duration) (out bool) {
	o, ok := w.takeOut(t, now)
	var rtt time.Duration
	if ok && o.idle && exec > 0 {
		rtt = max(now-o.at-exec, 0)
		sched.Smooth(&w.rtt, rtt)
	}
	if m.adaptive {
		ev.Exec, ev.RTT = exec, rtt
	}
	return ok
}

// failed handles an evaluation error from w for task r.ID of batch b:
// the task is retried on another worker (sched.Failed), up to
// MaxRetries failures, after which the batch fails with every failure.
// Only the failure of an instance outstanding in w's books (out) counts
// towards them: one answered or cancelled already cannot fail its task
// again, or a key holder that repeated one error with its token would
// fail the run.
func (m *Master) failed(w *mworker, b *batch, r *Result, out bool) {
	if r.ID < 0 || int(r.ID) >= len(b.done) || b.replied {
		return
	}
	ev := sched.Event{Kind: sched.Failed, Worker: w.id, Task: sched.TaskID(r.ID)}
	if b.done[r.ID] || !out {
		m.step(ev, 0) // a copy that lost anyway, or answered already: only its slot matters
		return
	}
	errText := logx.Cut(r.Err, logx.MaxErrText)
	b.passOver(r.ID, w.id)
	fs := append(b.failures[r.ID], TaskFailure{Worker: w.name, Err: errText})
	b.failures[r.ID] = fs
	if len(fs) > m.cfg.MaxRetries {
		m.failTask(b, &RetriesExhaustedError{Gen: b.gen, Task: int(r.ID), MaxRetries: m.cfg.MaxRetries, Failures: slices.Clone(fs)})
		return
	}
	m.counts.Retried++
	m.vlog.Warn("evaluation failed; retrying the task on another worker",
		"gen", b.gen, "task", r.ID, "worker", w.name, "failures", len(fs), "max_retries", m.cfg.MaxRetries, "err", errText)
	m.step(ev, 0)
}

// failTask fails batch b with err, one of its tasks failed past
// MaxRetries. A child master's batch is its parent's: the child tells
// it, whose batch then fails (childFailed), for the reply of its own
// goes to no one. Before, the child sat on the task until its parent
// cut it off as stalled and took the task back, its failures forgotten.
func (m *Master) failTask(b *batch, err *RetriesExhaustedError) {
	if b.replied {
		return
	}
	if p := m.split.splitProto; p != nil && p.parent != nil && !p.parent.answered && !p.parent.finishing {
		p.parent.conn.Send(&ChildResults{Gen: b.id, Masters: m.mastersNow(),
			Failed: &ChildFailed{ID: int32(err.Task), Failures: err.Failures}})
	}
	b.fail(err)
}

// timedOut counts the instance of task t that ran past TaskTimeout on w,
// now dropped, as a failure of t, towards MaxRetries: a task longer than
// the timeout on every worker dropped one worker after another, each
// coming back for it, and the run never ended.
//
// A machine counts once per task while another worker open for work has
// not run the task past the timeout: a slow one comes back under its
// name, and while the others are busy it is the one the task goes to
// again (the policy's exclusion of a worker that failed a task is by
// its id, which a new connection does not have). Each drop counted, and
// one slow machine failed a generation a faster one would have ended.
func (m *Master) timedOut(w *mworker, t int32) {
	m.timedOutFor(w, t, fmt.Sprintf("ran past the task timeout of %v", m.cfg.TaskTimeout))
}

// timedOutFor is timedOut with the failure's text: why the try of t on
// w, now dropped, failed.
func (m *Master) timedOutFor(w *mworker, t int32, why string) {
	b := m.cur
	if b == nil || b.replied || t < 0 || int(t) >= len(b.done) || b.done[t] {
		return
	}
	if slices.Contains(b.timedOut[t], w.name) && m.openNotTimedOut(b, t) {
		m.log.Warn("a worker ran a task past the task timeout again; not counted while another worker may run it",
			"worker", w.name, "task", t, "gen", b.gen)
		return
	}
	if b.timedOut == nil {
		b.timedOut = map[int32][]string{}
	}
	if !slices.Contains(b.timedOut[t], w.name) {
		b.timedOut[t] = append(b.timedOut[t], w.name)
	}
	fs := append(b.failures[t], TaskFailure{Worker: w.name, Err: why})
	b.failures[t] = fs
	if len(fs) > m.cfg.MaxRetries {
		m.failTask(b, &RetriesExhaustedError{Gen: b.gen, Task: int(t), MaxRetries: m.cfg.MaxRetries, Failures: slices.Clone(fs)})
		return
	}
	m.counts.Retried++
}

// openNotTimedOut says some worker open for work (or late, which may
// answer) has not run task t of b past the task timeout (b.timedOut).
// One late for longer than the task timeout does not count: it has not
// answered in that long, and a silent worker (connected, late for ever,
// nothing out) made every further timeout of the task on the one machine
// that ran it go uncounted, so that a task hung there ran to the timeout
// again and again and the run never ended. Nor does one on which the
// task went overdue or failed (passedOver): the policy gives it the task
// no more while a worker it has not failed on is open, which a machine
// back from its drop under a new id always is, and two such machines
// took a hung task in turns, each timeout uncounted, for ever.
func (m *Master) openNotTimedOut(b *batch, t int32) bool {
	now := m.now()
	for _, o := range m.order {
		if o.late && m.cfg.TaskTimeout > 0 && now-o.lateSince > m.cfg.TaskTimeout || slices.Contains(b.passedOver[t], o.id) {
			continue
		}
		if !o.left && !o.closed && !o.draining && !o.aside && o.slots > 0 && !m.v.exIDs[o.id] && !slices.Contains(b.timedOut[t], o.name) {
			return true
		}
	}
	return false
}

// RetriesExhaustedError is the error of a generation one of whose tasks
// failed more often than MaxRetries allows: the master cannot tell a
// worker that fails now and then from a task that fails every worker,
// so it stops there. Its fields say so to a program (esrun's report),
// which its text says to a person.
type RetriesExhaustedError struct {
	Gen, Task  int
	MaxRetries int
	// Failures are the task's failures, in the order they came:
	// MaxRetries+1 of them.
	Failures []TaskFailure
}

// TaskFailure is one failed evaluation: the worker's name and its
// error's text (cut to 300 bytes).
type TaskFailure struct {
	Worker string `msgpack:"w"`
	Err    string `msgpack:"e"`
}

// Error names the generation, the task and its failures: each distinct
// one once, in the order it first came, with how often it came when more
// than once, and at most maxFailuresShown of them. With -max-retries 1000
// the text was 1,001 copies of one worker's error, 29 KB on one line.
func (e *RetriesExhaustedError) Error() string {
	var kinds []string
	count := map[string]int{}
	for _, f := range e.Failures {
		k := f.Worker + ": " + f.Err
		if count[k] == 0 {
			kinds = append(kinds, k)
		}
		count[k]++
	}
	fs := make([]string, 0, min(len(kinds), maxFailuresShown)+1)
	for _, k := range kinds[:min(len(kinds), maxFailuresShown)] {
		if n := count[k]; n > 1 {
			k += fmt.Sprintf(" (%d times)", n)
		}
		fs = append(fs, k)
	}
	if more := len(kinds) - maxFailuresShown; more > 0 {
		fs = append(fs, fmt.Sprintf("and %d other distinct failures (the report's failed_task lists them all)", more))
	}
	return fmt.Sprintf("grid: generation %d, task %d failed %d times (max retries %d): %s",
		e.Gen, e.Task, len(e.Failures), e.MaxRetries, strings.Join(fs, "; "))
}

// maxFailuresShown bounds the distinct failures a RetriesExhaustedError's
// text names.
const maxFailuresShown = 8

// step applies ev to the policy and the ledger and carries out the
// actions; f is the value of a ResultArrived. It reports whether a result
// was accepted.
func (m *Master) step(ev sched.Event, f float64) bool {
	cancelGen := int32(-1)
	if m.cur != nil {
		cancelGen = m.cur.id
	}
	return m.stepWith(ev, f, cancelGen)
}

// stepWith is step with the batch id that Cancel actions refer to (the
// previous batch's, for BatchStarted).
func (m *Master) stepWith(ev sched.Event, f float64, cancelGen int32) bool {
	at := m.now()
	ev.At = at // time as data: eft reads it, a policy never reads a clock
	m.acts = m.policy.Step(ev, m.acts[:0])
	m.ledger.Step(at, ev, m.acts)
	accepted := false
	for _, a := range m.acts {
		switch a.Kind {
		case sched.Send:
			w := m.byID[a.Worker]
			if w == nil || w.left || m.cur == nil || int(a.Task) >= len(m.cur.xs) {
				m.log.Error("policy sent a task to an unknown worker", "worker", a.Worker, "task", a.Task)
				continue
			}
			w.markSent(m.cur.id, len(m.cur.xs), int32(a.Task))
			w.tasks = append(w.tasks, Task{ID: int32(a.Task), X: m.cur.xs[a.Task], Token: w.tokenFor(int32(a.Task), m.newToken)})
			if len(w.out) == 0 {
				w.lastHeard = at // silence counts while it has work
			}
			o := outInstance{task: int32(a.Task), at: at, started: -1}
			if len(w.out) < w.slots {
				o.started = at
				o.idle = w.heard && len(w.stopping) == 0 // else it may wait for the session, or for a slot being freed
			}
			w.out = append(w.out, o)
			if w.outN == nil {
				w.outN = make(map[int32]int32)
			}
			w.outN[o.task]++
			m.counts.TasksSent++
			m.noteSent(int32(a.Task)) // split.go: a child's first sends go up
			m.markDirty(w)
		case sched.Cancel:
			w := m.byID[a.Worker]
			if w == nil {
				continue
			}
			if ev.Kind != sched.BatchStarted {
				// An old batch's instances left the books when it ended.
				w.takeOutHeld(int32(a.Task), at)
				if dropTask(&w.tasks, int32(a.Task)) {
					// Not sent yet: never send it, nor count it.
					m.ledger.Unsent(w.id, a.Task)
					m.counts.TasksSent--
					if m.cur != nil {
						w.unmarkSent(m.cur.id, int32(a.Task))
					}
					continue
				}
			}
			if !a.Held {
				w.noteStopping(cancelGen, int32(a.Task), m.stopNotesShare(w))
			} else if m.cur != nil && cancelGen == m.cur.id {
				w.noteWithdrawn(int32(a.Task))
			}
			m.queueCancel(w, cancelGen, int32(a.Task))
		case sched.Accept:
			if b := m.cur; b != nil && int(a.Task) < len(b.f) {
				b.f[a.Task] = f
				b.done[a.Task] = true
				accepted = true
				m.progress.Add(1)
				m.onAccept(a.Task, f) // split.go: a child forwards it up
			}
		case sched.Taken:
			m.onTaken(a.Task) // split.go
		}
	}
	return accepted
}

// dropTask removes task id from a frame not yet sent.
func dropTask(tasks *[]Task, id int32) bool {
	ts := *tasks
	for i := range ts {
		if ts[i].ID == id {
			copy(ts[i:], ts[i+1:])
			ts[len(ts)-1] = Task{}
			*tasks = ts[:len(ts)-1]
			return true
		}
	}
	return false
}

func (m *Master) markDirty(w *mworker) {
	if !w.dirty {
		w.dirty = true
		m.dirty = append(m.dirty, w)
	}
}

// flush turns this turn's actions into frames: per worker, one Cancel
// frame, then the tasks (one frame, or several if they would not fit).
func (m *Master) flush() {
	for _, w := range m.dirty {
		w.dirty = false
		if w.closed {
			w.tasks, w.cancels, w.checkTasks = w.tasks[:0], w.cancels[:0], w.checkTasks[:0]
			continue
		}
		if len(w.cancels) > 0 {
			m.sendCancels(w)
		}
		if len(w.checkTasks) > 0 { // verify.go
			w.tasks = append(w.tasks, w.checkTasks...)
			clear(w.checkTasks)
			w.checkTasks = w.checkTasks[:0]
		}
		if len(w.tasks) > 0 {
			// docs/papers.md §2's overload signal: the messages already waiting
			// for the master right after it assigned each task.
			n := int64(len(w.tasks))
			m.counts.Assignments += n
			m.counts.InboxWaiting += n * int64(len(m.in))
			m.noteAssigned(int(n), len(m.in)) // submaster.go
			m.sendTasks(w)
		}
	}
	clear(m.dirty)
	m.dirty = m.dirty[:0]
}

// queueCancel adds task t of batch gen to the cancels w gets this turn.
func (m *Master) queueCancel(w *mworker, gen, t int32) {
	if len(w.cancels) > 0 && w.cancelsGen != gen {
		m.sendCancels(w)
	}
	w.cancelsGen = gen
	w.cancels = append(w.cancels, t)
	m.markDirty(w)
}

// cancelSentAgain is called on a result of task t of batch b from w, before
// it is taken: if w was told to cancel its instance of t and has not
// answered yet, while t is outstanding on w again (an overdue instance is
// sent again to its worker when no other is open), the result is the
// cancelled instance's, which left before the cancel came (the answer
// follows it on the wire). It ends t in the books with the instance sent
// again, which would then run on w for nothing, holding a slot; for ever
// if it hangs, while the master sends w other tasks to hold behind it
// (seed 510859 of the simulation). So that instance is cancelled too, or
// never sent if it has not gone yet. The same holds for an instance held
// on w that the master withdrew (withdrawn) and sent w again once it
// answered: seed 2570043 of the simulation, where such instances,
// finished before their cancels came, stayed in w's queue out of the
// books, and one of them hung w's one slot while the master waited for
// another task for hours.
func (m *Master) cancelSentAgain(w *mworker, b, t int32) {
	_, stopping := w.stopping[[2]int32{b, t}]
	_, withdrawn := w.withdrawn[t] // b is the open batch
	gone := w.sentBatch == b && hasBit(w.gone, t)
	if gone {
		// This result is the one of the instance whose note gave way, or
		// that instance's cancel was answered already: no later result
		// of it is on the way either way.
		clearBit(w.gone, t)
	}
	if !stopping && !withdrawn && !gone {
		return // the common case: no scan of w.out for it
	}
	if w.outN != nil && w.outN[t] == 0 {
		// Not out on w again: no scan either (copies of the result of a
		// cancelled instance, each a scan of 8,192 held, held the loop
		// half a second a frame).
		return
	}
	i := slices.IndexFunc(w.out, func(o outInstance) bool { return o.task == t })
	if i < 0 {
		return
	}
	if dropTask(&w.tasks, t) {
		// Not sent yet: never send it, nor count it, in either book
		// (seed 610713: the ledger kept it, one instance more than sent).
		m.ledger.Unsent(w.id, sched.TaskID(t))
		m.counts.TasksSent--
		return
	}
	if i < w.slots {
		w.noteStopping(b, t, m.stopNotesShare(w))
	} else {
		w.noteWithdrawn(t)
	}
	m.queueCancel(w, b, t)
}

func (m *Master) sendCancels(w *mworker) {
	// A frame holds at most maxItemsPerFrame ids, which a worker's decoder
	// enforces: a late worker's share of a large generation under cyclic
	// is withdrawn at once, and in one frame it broke the connection.
	// An id takes at most 5 bytes.
	chunk := max(1, min(maxItemsPerFrame, m.cfg.MaxFrame/2/5))
	for lo := 0; lo < len(w.cancels); lo += chunk {
		w.cancelMsg = Cancel{Gen: w.cancelsGen, IDs: w.cancels[lo:min(lo+chunk, len(w.cancels))]}
		if err := w.conn.Send(&w.cancelMsg); err != nil {
			m.log.Debug("cancel not sent", "worker", w.name, "err", err)
			break
		}
	}
	w.cancelMsg = Cancel{}
	w.cancels = w.cancels[:0]
}

func (m *Master) sendTasks(w *mworker) {
	// Keep each frame well under the cap: a task is at most 9 bytes per
	// coordinate plus a few of framing.
	per := 16
	if len(w.tasks) > 0 {
		per += 9 * len(w.tasks[0].X)
	}
	chunk := max(1, min(maxItemsPerFrame, m.cfg.MaxFrame/2/per))
	for lo := 0; lo < len(w.tasks); lo += chunk {
		hi := min(lo+chunk, len(w.tasks))
		w.tasksMsg = Tasks{Gen: m.cur.id, Items: w.tasks[lo:hi]}
		if err := w.conn.Send(&w.tasksMsg); err != nil {
			if errors.Is(err, ErrFrameTooLarge) {
				// Evaluate checked the size, so this is a bug, but a
				// lost task must never pass in silence.
				m.cur.fail(fmt.Errorf("grid: generation %d: tasks not sent to worker %s: %w", m.cur.gen, w.name, err))
			} else {
				m.log.Debug("tasks not sent", "worker", w.name, "err", err)
			}
			break
		}
	}
	clear(w.tasks) // drop references to the batch's vectors
	w.tasks = w.tasks[:0]
	w.tasksMsg = Tasks{}
}

// stats is Stats on the loop goroutine.
func (m *Master) stats() MasterStats {
	st := m.counts
	st.Workers = m.nLive
	st.Batches = m.batches
	st.ConnStats = m.gone
	st.Inbox, st.InboxCap = len(m.in), cap(m.in)
	st.SplitStats = m.splitStats() // submaster.go
	// Connections refused or whose handshake failed (admit.go).
	st.Refused = m.refusals.Total()
	for _, w := range m.order {
		if !w.closed {
			s := w.conn.Stats()
			st.FramesIn += s.FramesIn
			st.FramesOut += s.FramesOut
			st.BytesIn += s.BytesIn
			st.BytesOut += s.BytesOut
			st.Writes += s.Writes
		}
	}
	return st
}

// shutdownWorkers runs as the loop exits: every worker is told the run is
// over, given a moment to read it, and its connection closed.
func (m *Master) shutdownWorkers() {
	m.ledger.Finish(m.now())
	if b := m.cur; b != nil && !b.replied {
		b.replied = true
		b.reply <- evalReply{err: fmt.Errorf("grid: generation %d: %w", b.gen, ErrMasterClosed)}
	}
	bye := m.bye()
	// Child masters pass it on to their workers (split.go); their links
	// too are given a moment to carry it.
	conns := m.shutdownChildren(bye)
	for _, w := range m.order {
		if !w.closed {
			if !w.ended {
				w.conn.SendAndClose(bye)
			}
			conns = append(conns, w.conn)
		}
	}
	t := time.NewTimer(m.cfg.ShutdownGrace)
	defer t.Stop()
	defer m.endPassedOn() // split.go: a child's parent hears that they heard it
	for _, c := range conns {
		select {
		case <-c.Done():
		case <-t.C:
			return
		}
	}
}
