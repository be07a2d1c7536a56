package grid

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/sched"
)

// Masters that split, as docs/papers.md §2 specifies them (Fig. 3
// and 4), over the grid's connections:
//
//   - Split. After a turn of its loop, an overloaded master (the test in
//     submaster.go) with at least 4 running workers takes the running
//     worker with the least work on it as p, splits the other running
//     workers into two halves by id (it keeps the first, p gets the
//     second, the larger), takes half of Q out of its batch
//     (sched.TasksTaken) and sends p a Promote with those tasks. p and
//     the second half take no new work (sched.WorkerDraining).
//   - p's agent gives back its held tasks and finishes its running ones
//     (as a draining worker does), listens for workers, and runs this
//     very Master over its share (RunChild): sched.BatchStarted{N: 0},
//     then sched.TasksAdded with the share, whose tasks keep the
//     parent's ids. It dials the parent with a control link
//     (ChildHello); the parent then tells the second half to Move to the
//     child's address: each gives back its held tasks, finishes its
//     running ones, and connects to the child.
//   - Task requests. A master whose Q is empty sends a TaskRequest to one
//     master of its candidate set R (its parent first, then its
//     children), and no other while that one is outstanding; the asked
//     master grants half of its Q (TaskGrant, taken out of its batch) or
//     refuses (TaskRefusal), and a refused master drops that candidate.
//     A child with a request outstanding does not finish.
//   - Return. A child forwards the results it accepts to its parent
//     (ChildResults, coalesced, with its tree's counts: ChildCounts);
//     when its share is done and no request is outstanding it sends the
//     last ones with Done, moves its workers back to the parent, and
//     its agent connects to the parent as a worker again; its last frame
//     names whom its end leaves to go home (lastNamed).
//   - Faults. A child whose control link breaks before Done (killed, cut
//     off) gives back, in the parent, every task lent to it and not
//     returned (sched.TasksAdded); its workers lose their master and
//     find one as after any lost connection. So does one whose promoted
//     worker's connection breaks before its hello without the last
//     Drain a planned end has (promotedGone), at once. A child that loses its
//     parent stops, telling its workers the master will be back. A
//     child told the end of the run that does not say its workers heard
//     it (endHeardWait: its machine froze) is lost too: the root waits
//     for its workers to come home, and tells them; so does a child for
//     its own children, within its parent's wait, which it asks to be
//     longer while it awaits such a child's workers (Shutdown.Hold).
//   - Stalls. A child that holds lent tasks yet returns none for two of
//     the parent's task deadlines, doubled up to half the task timeout,
//     then, once one was cut off there, MaxRetries+3 task timeouts
//     (stallDeadline), is cut off as lost: one left with workers that never answer (silent, their
//     connections alive) cannot run its tasks, nor give them back (they
//     are live on those workers, so not in its Q for a grant), nor
//     finish. Cutting it off is always safe (the first result wins; its
//     workers come back here), so a run ends whatever a child's workers
//     do, as long as this master's own would end it.
//
// The ES invariant holds: tasks keep their ids from master to master,
// the first result for a task wins wherever it was computed, and a task
// is lent to one child at a time.

// childHelloTimeout bounds how long a promoted worker may take to open
// its control link before its child counts as lost.
const childHelloTimeout = 15 * time.Second

// resultsEvery is how often a child forwards the results it accepted
// (sooner when resultsBatch are waiting, or when it finishes).
const (
	resultsEvery = 5 * time.Millisecond
	resultsBatch = 256
)

// splitProto is the protocol's state, on the loop.
type splitProto struct {
	children  map[uint64]*childMaster // this master's children, by token
	order     []*childMaster          // R's children, in creation order
	returning []*childMaster          // done after the batch ended: waiting for the next batch or the end
	// Children told the end early (endChildren), until their
	// link closes; and until when this master waits at its end for what
	// a lost child held (awaitLost): Close, and a returning child's
	// finish (maybeFinish), past their own bounds.
	ended   []*childMaster
	endHold time.Duration
	// Children told to return whose link is still open: they may name
	// more workers coming back (Moved), and their own agent comes last,
	// once the link has closed.
	recalled []*childMaster
	// Workers on their way here (from a child, or from the parent to
	// this child), by name, with how long they are waited for.
	expect    map[string]expected
	nextToken uint64
	lent      map[int32]*childMaster // tasks of the current batch lent to a child
	moving    map[*mworker]*childMaster
	taken     []sched.TaskID // scratch: the Taken actions of a step
	rflag     bool           // a task request is outstanding
	reqChild  *childMaster   // ... to this child (nil: to the parent)
	stalled   int            // children cut off for a stall (stallDeadline doubles each)
	// stallCeilinged: a child was cut off at the stall deadline's
	// ceiling; later ones are bound by the task timeout (stallDeadline).
	stallCeilinged bool
	first          []sched.TaskID // scratch: a child's first sends that may be originals (addChildCounts)

	parent *parentLink // this master is a child: its link up

	// The busy time of the loop and the tasks its own workers decided,
	// for SplitGain's estimate of the master's rate.
	turnStart time.Time
	busy      time.Duration
	handled   int64 // messages from workers
	ownTasks  int64
}

// childMaster is the parent's view of one child.
type childMaster struct {
	token    uint64
	name     string // the promoted worker's
	batch    int32
	created  time.Duration
	progress time.Duration // when it last showed progress on what it was lent (stallDeadline)
	link     *Conn         // once ChildHello came
	addr     string
	lent     int // tasks lent and not returned
	masters  int // masters in its tree
	inR      bool
	done     bool
	lost     bool
	recalled bool          // in splitProto.recalled
	answered bool          // it named the workers it sends back (ChildResults.Moved)
	named    []string      // ... those of them expected and not come yet
	told     time.Duration // when endChildren told it the end (recalled: when a child's end began to wait for it)
	toldEnd  bool          // ... it did (in splitProto.ended until its link closes)
	heard    bool          // ... and it said its workers heard it (endPassedOn)
	within   time.Duration // ... how long it was given for that (Shutdown.Within)
	wordBy   time.Duration // ... and until when it is waited for (later if it holds); recalled, at a child's end, for its link to close
	// moved names the workers moved to it: if it is lost they come
	// back here, and Close waits for them (expectWorkers) so that they
	// too hear that the run is over.
	moved []string
	// sent are the connections told to go to it: one still open here
	// when it is gone never reached it (awaitDraining).
	sent []*mworker
	// from is the connection of the worker promoted to it (promotedGone).
	from *mworker
}

// parentLink is a child's view of its parent.
type parentLink struct {
	conn  *Conn
	addr  string
	self  string // the promoted worker's name, as it comes back
	token uint64
	inR   bool

	ids       []int32 // accepted results not forwarded yet
	f         []float64
	last      time.Duration
	finishing bool          // Done sent: waiting for the parent's word
	moving    bool          // ... which was "return": workers moved back
	finishBy  time.Duration // stop waiting for the workers to leave
	done      chan error    // RunChild's answer; capacity 1
	answered  bool
	runOver   bool          // the parent said the run is over: Close waits for the workers on their way here
	wordBy    time.Duration // ... and until when it waits for this child's word (endPassedOn)
	// coming names the workers the parent moves here (its Promote's)
	// that have not joined yet: at the end of the run this child waits
	// movedWait for them (endWait), however long they took to leave the
	// parent (they drain their tasks there first).
	coming []string

	// What goes up as ChildCounts: the tasks sent in this tree since the
	// last ChildResults (each once: mark is 1 while it is listed here, 2
	// once its first send was reported), and the counts reported so far.
	sent     []int32
	mark     []uint8
	reported ChildCounts
}

// proto returns the protocol's state, creating it.
func (m *Master) proto() *splitProto {
	if m.split.splitProto == nil {
		m.split.splitProto = &splitProto{
			children: map[uint64]*childMaster{},
			lent:     map[int32]*childMaster{},
			moving:   map[*mworker]*childMaster{},
		}
	}
	return m.split.splitProto
}

// turnBegin marks the start of a turn of the loop (its busy time).
func (m *Master) turnBegin() {
	if p := m.split.splitProto; p != nil && p.turnStart.IsZero() {
		p.turnStart = time.Now()
	}
}

// afterTurn runs after each turn of the loop: the split, task requests,
// forwarding results, and a child's return.
func (m *Master) afterTurn() {
	msgs := m.split.turnMsgs
	m.split.endTurn()
	p := m.split.splitProto
	if p == nil {
		if m.cfg.Split.Rule == SplitOff {
			return
		}
		p = m.proto()
	}
	p.handled += int64(msgs)
	if !p.turnStart.IsZero() {
		p.busy += time.Since(p.turnStart)
		p.turnStart = time.Time{}
	}
	m.maybeSplit()
	m.maybeRequest()
	m.noteJoins()
	m.forwardResults(false)
	m.checkChildren()
	m.maybeFinish()
}

// lentCount is the number of tasks of the current batch out with children.
func (m *Master) lentCount() int {
	if p := m.split.splitProto; p != nil {
		return len(p.lent)
	}
	return 0
}

// batchDone says the current batch is decided here: the policy is done,
// nothing is out with a child, and (for a child) no task request is
// outstanding.
func (m *Master) batchDone() bool {
	if !m.policy.Done() {
		return false
	}
	p := m.split.splitProto
	if p == nil {
		return true
	}
	return len(p.lent) == 0 && !(p.parent != nil && p.rflag)
}

// maybeReply ends the current batch if it is decided.
func (m *Master) maybeReply() {
	if b := m.cur; b != nil && !b.replied && m.batchDone() && m.checksDone() {
		b.replied = true
		b.reply <- evalReply{f: b.f}
	}
}

// onTaken collects a Taken action of the step in progress.
func (m *Master) onTaken(t sched.TaskID) {
	p := m.proto()
	p.taken = append(p.taken, t)
}

// onAccept notes an accepted result; a child forwards it to its parent.
func (m *Master) onAccept(t sched.TaskID, f float64) {
	p := m.split.splitProto
	if p == nil {
		return
	}
	p.ownTasks++
	if pl := p.parent; pl != nil && !pl.finishing {
		pl.ids = append(pl.ids, int32(t))
		pl.f = append(pl.f, f)
	}
}

// noteSent notes that task t was sent in this child's tree: its first
// send goes up in the next ChildCounts.
func (m *Master) noteSent(t int32) {
	p := m.split.splitProto
	if p == nil || p.parent == nil {
		return
	}
	pl := p.parent
	if t >= 0 && int(t) < len(pl.mark) && pl.mark[t] == 0 {
		pl.mark[t] = 1
		pl.sent = append(pl.sent, t)
	}
}

// childCounts is what this child's tree counted since its last
// ChildResults, nil if nothing: every ChildResults carries it, so that
// a task's first send goes up no later than its result.
func (m *Master) childCounts() *ChildCounts {
	pl := m.split.splitProto.parent
	now := countsOf(m.ledger.RunCounts(), &m.counts)
	d := now.since(pl.reported)
	pl.reported = now
	for _, t := range pl.sent {
		if m.ledger.Sent(sched.TaskID(t)) {
			pl.mark[t] = 2
			d.First = append(d.First, t)
		} else {
			pl.mark[t] = 0 // taken back before it went out
		}
	}
	pl.sent = pl.sent[:0]
	if d.zero() {
		return nil
	}
	return &d
}

// addChildCounts adds what child c's tree counted (r.C) to this master's
// counts, which are the run's at the root. A child's claims count within
// bounds that keep the totals consistent: a first send counts as an
// original only for a task lent to c now of which no instance went out
// before (here, or through another child), so the originals never exceed
// the batch's tasks, and each task counts one wherever it went (the
// first send of a task that c no longer holds, given back or never lent,
// is a resend); First is cut to the batch's size, every other count to
// [0, maxChildCount]. The
// instances it counts are sent here too (TasksSent), so that TasksSent
// stays originals + resends + replicas. A child that is lost takes with
// it what it had not reported: the tasks it sent and did not report
// count as originals where they are sent next.
func (m *Master) addChildCounts(c *childMaster, r *ChildResults) {
	b, cc := m.cur, r.C
	if cc == nil || b == nil {
		return
	}
	// The batch before this one, for a late count of a child that is
	// done (batch ids may skip, so no further back: the ledger puts a
	// count of a generation already final in the next anyway).
	ago := min(int(b.id)-int(r.Gen), 1)
	if ago < 0 {
		return // a batch this master never started: made up
	}
	cut := cc.clamp()
	if len(cc.First) > len(b.xs) {
		cc.First, cut = cc.First[:len(b.xs)], true // each task at most once
	}
	if cut {
		m.vlog.Warn("a child master's counts were out of bounds; cut to them", "child", c.name)
	}
	p := m.split.splitProto
	first := p.first[:0]
	lc := cc.ledgerCounts()
	for _, id := range cc.First {
		switch {
		case id < 0 || int(id) >= len(b.xs):
		case ago == 0 && p.lent[id] == c:
			first = append(first, sched.TaskID(id))
		default:
			lc.Resends++
		}
	}
	m.ledger.Elsewhere(ago, first, lc)
	m.counts.TasksSent += int64(len(first) + lc.Resends + lc.Replicas)
	cc.addStats(&m.counts)
	for _, t := range first {
		m.noteSent(int32(t)) // this master is a child: its first sends go up in turn
	}
	p.first = first[:0]
}

// takeTasks takes up to n tasks out of the batch (the tail of Q).
func (m *Master) takeTasks(n int) []Task {
	p := m.proto()
	p.taken = p.taken[:0]
	m.step(sched.Event{Kind: sched.TasksTaken, N: n}, 0)
	b := m.cur
	out := make([]Task, 0, len(p.taken))
	for _, t := range p.taken {
		out = append(out, Task{ID: int32(t), X: b.xs[t]})
	}
	p.taken = p.taken[:0]
	return out
}

// addTasks brings tasks (back) into the batch.
func (m *Master) addTasks(ts []Task) {
	b := m.cur
	ids := make([]sched.TaskID, 0, len(ts))
	for _, t := range ts {
		if t.ID < 0 || int(t.ID) >= len(b.xs) {
			continue
		}
		if b.xs[t.ID] == nil {
			b.xs[t.ID] = t.X
		}
		if !b.done[t.ID] {
			ids = append(ids, sched.TaskID(t.ID))
		}
	}
	if len(ids) > 0 {
		m.step(sched.Event{Kind: sched.TasksAdded, IDs: ids}, 0)
	}
}

// relayed says w reached this master through a relay: it is never
// promoted (the workers moved to it could not reach it).
func relayed(w *mworker) bool {
	_, ok := w.conn.RemoteAddr().(relayAddr)
	return ok
}

// maybeSplit splits this master if the overload test and the rule say so
// (docs/papers.md §2, Fig. 3 lines 14–18).
func (m *Master) maybeSplit() {
	rule := m.cfg.Split.Rule
	b := m.cur
	// Under -verify every result is the grid's own, checked by hosts
	// this master sees: a child master's would come unverified.
	if rule == SplitOff || m.cfg.Verify > 0 || b == nil || b.replied || len(b.xs) == 0 || !m.overloaded() {
		return
	}
	q := sched.Queued(m.policy)
	if q < 2 {
		return
	}
	p := m.split.splitProto
	// W_r: the running workers.
	var run []*mworker
	for _, w := range m.order {
		if !w.left && !w.closed && !w.draining && !w.late && len(w.out) > 0 && !relayed(w) {
			run = append(run, w)
		}
	}
	suppress := func(why string) {
		m.split.stats.Suppressed++
		m.split.test.Reset() // the next decision rests on n fresh assignments
		m.log.Debug("overloaded, but not splitting", "why", why, "running", len(run), "queued", q)
	}
	if len(run) < 4 {
		suppress("fewer than 4 running workers: a master would be left with one child")
		return
	}
	slices.SortFunc(run, func(a, b *mworker) int { return int(a.id) - int(b.id) })
	// p: the running worker with the least work on it (the paper's p has
	// just returned its result).
	pi := 0
	for i, w := range run {
		if len(w.out) < len(run[pi].out) {
			pi = i
		}
	}
	pw := run[pi]
	others := slices.Delete(slices.Clone(run), pi, pi+1)
	keep, give := others[:len(others)/2], others[len(others)/2:]
	if rule == SplitGain {
		est := m.splitEstimate(keep, give, pw, q)
		if !sched.SplitWorthIt(est) {
			suppress(fmt.Sprintf("no expected gain (master %.0f tasks/s, exec %.3gs, rtt %.3gs)", est.MasterRate, est.Exec, est.RTT))
			return
		}
	}
	tasks := m.takeTasks(q / 2)
	if len(tasks) == 0 {
		return
	}
	p.nextToken++
	c := &childMaster{token: p.nextToken, name: pw.name, batch: b.id, created: m.now(), progress: m.now(), lent: len(tasks), masters: 1, inR: true, from: pw}
	p.children[c.token] = c
	p.order = append(p.order, c)
	for _, t := range tasks {
		p.lent[t.ID] = c
	}
	m.setDraining(pw)
	delete(p.expect, pw.name)
	for _, w := range give {
		delete(p.expect, w.name)
		m.setDraining(w)
		p.moving[w] = c
	}
	pr := m.promote(c, b, tasks, names(give))
	if err := pw.conn.Send(pr); err != nil {
		m.log.Warn("promote not sent; the child counts as lost", "worker", pw.name, "err", err)
		m.childLost(c)
		return
	}
	st := &m.split.stats
	st.Splits++
	st.Lent += int64(len(tasks))
	pw.moved = true             // promoted: its connection's end is planned
	mean := m.split.test.Mean() // what decided, before the test starts afresh
	m.split.test.Reset()
	m.noteMasters()
	m.log.Info("overloaded: promoting a worker to a child master (docs/papers.md §2)",
		"gen", b.gen, "worker", pw.name, "moved_workers", len(give), "kept_workers", len(keep),
		"tasks", len(tasks), "queued_left", sched.Queued(m.policy), "overload_mean", mean, "masters", m.mastersNow())
}

// promote is the order that makes c a child master over tasks of b,
// with the workers named moved to it: this master's policy, split
// settings and retries.
func (m *Master) promote(c *childMaster, b *batch, tasks []Task, moved []string) *Promote {
	pr := &Promote{
		Token: c.token, Gen: b.id, ESGen: b.gen, N: len(b.xs), Tasks: tasks, Workers: moved,
		Policy: m.policy.Name(), Depth: m.cfg.Sched.Depth, Adaptive: m.cfg.Sched.Adaptive,
		Rule: uint8(m.cfg.Split.Rule), Window: m.cfg.Split.Window,
		MessageCost: int64(m.cfg.Split.MessageCost), GainMargin: m.cfg.Split.GainMargin,
	}
	pr.limits(&m.cfg)
	return pr
}

// splitEstimate gathers what SplitGain weighs, from measured costs: the
// master's rate is the tasks its own workers decided per second of its
// loop's busy time (what it could do busy all the time), the task time
// the grid's smoothed execution time, the round trip the mean of the
// running workers' smoothed round trips.
func (m *Master) splitEstimate(keep, give []*mworker, p *mworker, q int) sched.SplitEstimate {
	pp := m.split.splitProto
	est := sched.SplitEstimate{Exec: m.exec / 1e9, Queued: q, Lost: p.slots, Margin: m.cfg.Split.GainMargin}
	if est.Margin == 0 {
		est.Margin = 0.1
	}
	if pp.busy > 0 {
		est.MasterRate = float64(pp.ownTasks) / pp.busy.Seconds()
		est.Service = pp.busy.Seconds() / float64(max(pp.handled, 1))
		est.Waiting = m.split.test.Mean()
	}
	var rtt float64
	n := 0
	for _, set := range [][]*mworker{keep, give, {p}} {
		for _, w := range set {
			if w.rtt > 0 {
				rtt += w.rtt
				n++
			}
		}
	}
	if n > 0 {
		est.RTT = rtt / float64(n) / 1e9
	}
	for _, w := range keep {
		est.Kept += w.slots
	}
	for _, w := range m.order {
		if !w.left && !w.draining && len(w.out) == 0 {
			est.Kept += w.slots // idle workers stay too
		}
	}
	for _, w := range give {
		est.Given += w.slots
	}
	return est
}

// setDraining stops new work to w.
func (m *Master) setDraining(w *mworker) {
	if !w.draining {
		w.draining = true
		m.step(sched.Event{Kind: sched.WorkerDraining, Worker: w.id}, 0)
	}
}

// candidate is the next master to ask for tasks: the parent first, then
// the children in order (docs/papers.md §2: R starts as {parent}, each new
// child joins it).
func (m *Master) candidate() (*childMaster, bool) {
	p := m.split.splitProto
	if p.parent != nil && p.parent.inR {
		return nil, true
	}
	for _, c := range p.order {
		if c.inR && c.link != nil && !c.done && !c.lost {
			return c, true
		}
	}
	return nil, false
}

// maybeRequest sends a task request once Q is empty (Fig. 3 line 22).
func (m *Master) maybeRequest() {
	p := m.split.splitProto
	b := m.cur
	if p.rflag || b == nil || b.replied || sched.Queued(m.policy) != 0 {
		return
	}
	c, ok := m.candidate()
	if !ok {
		return
	}
	req := &TaskRequest{Gen: b.id}
	var err error
	if c == nil {
		m.forwardResults(true) // what is done goes up with the request
		err = p.parent.conn.Send(req)
	} else {
		err = c.link.Send(req)
	}
	if err != nil {
		if c == nil {
			p.parent.inR = false
		} else {
			c.inR = false
		}
		return
	}
	p.rflag, p.reqChild = true, c
	m.split.stats.Requests++
}

// onTaskRequest answers a request for tasks from another master: half of
// Q, or a refusal (Fig. 3 lines 35–39). to is the child that asked, nil
// for the parent.
func (m *Master) onTaskRequest(r *TaskRequest, to *childMaster, reply *Conn) {
	b := m.cur
	if b == nil || b.replied || r.Gen != b.id {
		reply.Send(&TaskRefusal{Gen: r.Gen})
		return
	}
	q := sched.Queued(m.policy)
	var tasks []Task
	if q > 0 {
		tasks = m.takeTasks(max(q/2, 1))
	}
	if len(tasks) == 0 {
		reply.Send(&TaskRefusal{Gen: r.Gen})
		return
	}
	p := m.split.splitProto
	if to == nil {
		m.reportFirstSends(tasks)
	} else {
		for _, t := range tasks {
			p.lent[t.ID] = to
		}
		if to.lent == 0 {
			to.progress = m.now() // it asked: it had nothing left to stall on
		}
		to.lent += len(tasks)
		m.split.stats.Lent += int64(len(tasks))
	}
	reply.Send(&TaskGrant{Gen: r.Gen, Tasks: tasks})
}

// onGrant takes tasks granted by another master (Fig. 3 lines 30–34):
// from the parent, more of the share; from a child, tasks it gives back.
func (m *Master) onGrant(g *TaskGrant, from *childMaster) {
	p := m.split.splitProto
	if p.rflag && p.reqChild == from {
		p.rflag, p.reqChild = false, nil
	}
	m.split.stats.Grants++
	b := m.cur
	if b == nil || g.Gen != b.id {
		return
	}
	if from != nil {
		n := 0
		for _, t := range g.Tasks {
			if p.lent[t.ID] == from {
				delete(p.lent, t.ID)
				from.lent--
				n++
			}
		}
		if n > 0 {
			from.progress = m.now()
		}
		m.split.stats.GivenBack += int64(n)
	}
	m.addTasks(g.Tasks)
	m.maybeReply()
}

// onRefusal drops the refusing master from R (Fig. 3 lines 40–45).
func (m *Master) onRefusal(r *TaskRefusal, from *childMaster) {
	p := m.split.splitProto
	m.split.stats.Refusals++
	if from == nil {
		if p.parent != nil {
			p.parent.inR = false
		}
	} else {
		from.inR = false
	}
	if p.rflag && p.reqChild == from {
		p.rflag, p.reqChild = false, nil
	}
	m.maybeReply()
}

// forwardResults sends a child's accepted results up, coalesced: now, or
// once resultsBatch wait or resultsEvery has passed.
func (m *Master) forwardResults(now bool) {
	p := m.split.splitProto
	pl := p.parent
	if pl == nil || len(pl.ids) == 0 || pl.finishing {
		return
	}
	t := m.now()
	if !now && len(pl.ids) < resultsBatch && t-pl.last < resultsEvery {
		return
	}
	m.sendUp()
}

// sendUp sends the parent the results waiting and the tree's counts.
func (m *Master) sendUp() {
	pl := m.split.splitProto.parent
	pl.conn.Send(&ChildResults{Gen: m.cur.id, IDs: pl.ids, F: pl.f, Masters: m.mastersNow(), C: m.childCounts()})
	pl.ids, pl.f, pl.last = pl.ids[:0], pl.f[:0], m.now()
}

// reportFirstSends sends up, before tasks granted to the parent go back,
// the first sends among them not reported yet: the parent counts a first
// send as an original only while the task is lent here (addChildCounts),
// so one reported after the grant would count as a resend, and the task
// as nobody's original if it came back here (this tree reports a task's
// first send once).
func (m *Master) reportFirstSends(tasks []Task) {
	pl := m.split.splitProto.parent
	if pl == nil || pl.finishing {
		return
	}
	for _, t := range tasks {
		if int(t.ID) < len(pl.mark) && pl.mark[t.ID] == 1 {
			m.sendUp()
			return
		}
	}
}

// mastersNow is the number of masters in this master's tree.
func (m *Master) mastersNow() int {
	n := 1
	if p := m.split.splitProto; p != nil {
		for _, c := range p.children {
			if !c.done && !c.lost {
				n += max(c.masters, 1)
			}
		}
	}
	return n
}

// noteMasters adds a point to the masters' timeline when the count
// changed.
func (m *Master) noteMasters() {
	st := &m.split.stats
	n := m.mastersNow()
	st.MastersMax = max(st.MastersMax, n)
	if len(st.Timeline) == 0 && n != 1 {
		st.Timeline = append(st.Timeline, MastersAt{Masters: 1}) // since the master started
	}
	if k := len(st.Timeline); (k == 0 || st.Timeline[k-1].Masters != n) && k < maxTimeline {
		st.Timeline = append(st.Timeline, MastersAt{At: m.now(), Masters: n})
	}
}

// checkChildren counts as lost a child that never opened its link, and
// one that stalled: it holds lent tasks and returned none of them for
// stallDeadline. It visits them in their order, not a map's (a replay
// cuts them off in the same order).
func (m *Master) checkChildren() {
	p := m.split.splitProto
	now := m.now()
	for _, c := range slices.Clone(p.order) {
		if c.lost || c.done {
			continue
		}
		if c.link == nil && now-c.created > childHelloTimeout {
			m.log.Warn("promoted worker never came back as a master; its tasks go back to the queue", "worker", c.name)
			m.childLost(c)
			continue
		}
		if c.link == nil || c.lent == 0 {
			continue
		}
		if stall, atCeiling := m.stallDeadline(); now-c.progress > stall {
			m.log.Warn("child master returned none of its tasks for a deadline; cut off as lost", "child", c.name, "tasks", c.lent, "silent_for", (now - c.progress).Round(time.Millisecond))
			p.stalled++
			p.stallCeilinged = p.stallCeilinged || atCeiling
			m.childLost(c)
		}
	}
}

// stallDeadline is how long a child holding lent tasks may return none:
// twice the deadline of a task on a worker of the grid's speed (one for
// the child to find its own worker late, one for the task sent again),
// doubled for each child cut off so before (sched.Deadlines.Doubled, up
// to half the task timeout), so that a child merely slow is cut off only
// so often; atCeiling says it is where the doubling stops
// (sched.Deadlines.AtCeiling). Past the ceiling, once a child was cut off
// there (stallCeilinged), the rule is a task's (sched.Deadlines.Again):
// the master cannot tell a child running a long task from a stalled one,
// and the task timeout decides, on the child. A child starts its own
// deadlines afresh, so a task it runs ends or fails there within its
// cuts (under 1.5 timeouts) and MaxRetries+1 timeouts; the stall deadline
// is then MaxRetries+3 timeouts, half of one to spare. Cut at the
// ceiling, every child holding a task between half the timeout and the
// timeout was cut off, and the task run here. A child that goes silent
// is still cut off within IdleTimeout: its link closes.
func (m *Master) stallDeadline() (stall time.Duration, atCeiling bool) {
	d := m.cfg.deadlines()
	p := m.split.splitProto
	if t := m.cfg.TaskTimeout; p.stallCeilinged && t > 0 {
		// Saturated: a child's parent may give it 65536 retries of a
		// week, whose product a Duration does not hold.
		if n := time.Duration(m.cfg.MaxRetries); n > math.MaxInt64/t-3 {
			return math.MaxInt64, true
		}
		return time.Duration(m.cfg.MaxRetries+3) * t, true
	}
	base, n := d.Of(0, m.exec, 0), 1+p.stalled
	return d.Doubled(base, n), d.AtCeiling(base, n)
}

// promotedGone: w, a worker this master promoted, closed its connection
// before its child master said hello, and without saying it ends as
// planned (Drain.Last, which a promoted worker sends even when its end
// comes before its child master's hello, as it does with nothing left to
// run): it died, killed or cut off, and its child master with it, or
// that child will find itself unknown here. Its child counts as lost at
// once, not childHelloTimeout (15 s) later, on top of the wait for what
// it held (awaitLost): the soak measured 55 s lost so. Counting it lost
// wrongly would cost time only: nothing was moved to it yet, its tasks
// come back to the queue, and its hello is refused. It reports whether
// it counted w's child lost (w is then a worker lost). On the loop.
func (m *Master) promotedGone(w *mworker) bool {
	p := m.split.splitProto
	if p == nil || w.finished {
		return false
	}
	for _, c := range p.order {
		if c.from == w && c.link == nil && !c.lost && !c.done {
			m.counts.Lost.Closed++
			m.log.Warn("promoted worker lost before its child master said hello; the child counts as lost", "worker", w.name, "worker_id", w.id, "cause", w.conn.Err())
			m.childLost(c)
			return true
		}
	}
	return false
}

// childLost gives back everything lent to c (docs/papers.md §2 assumes no
// failure; the grid must survive one).
func (m *Master) childLost(c *childMaster) {
	if c.lost || c.done || c.toldEnd { // told the end: endGone's
		return
	}
	c.lost, c.inR = true, false
	if w := m.byName[c.name]; w != nil {
		w.moved = false // it refused, or never went: its end is no move
	}
	p := m.split.splitProto
	delete(p.children, c.token)
	p.order = slices.DeleteFunc(p.order, func(x *childMaster) bool { return x == c })
	if p.rflag && p.reqChild == c {
		p.rflag, p.reqChild = false, nil
	}
	var back []Task
	if b := m.cur; b != nil {
		for id, x := range p.lent {
			if x == c {
				delete(p.lent, id)
				back = append(back, Task{ID: id, X: b.xs[id]})
			}
		}
		slices.SortFunc(back, func(a, b Task) int { return int(a.ID) - int(b.ID) })
	}
	c.lent = 0
	// Workers waiting to be moved to it come back to this master on a
	// new connection: the root's by going home (an empty Move), a child's
	// by its address (home is the root, which would not know to expect
	// them). It waits for them, Close and a child's return alike, but not
	// for one that was stopping already (it drained of its own accord).
	for w, x := range p.moving {
		if x == c {
			delete(p.moving, w)
			if !w.left {
				mv := &Move{}
				if p.parent != nil {
					mv.Addr = m.Addr()
				}
				w.conn.Send(mv)
				w.moved = true
				if !w.leaving {
					m.expectAgain(w, returnGrace)
				}
			}
		}
	}
	// Its workers find this master again; until they have, Close waits
	// for them (awaitReturns), or a run that ends meanwhile would leave
	// them waiting for a master.
	m.awaitLost(c)
	m.split.stats.ChildrenLost++
	m.split.stats.GivenBack += int64(len(back))
	m.noteMasters()
	if c.link != nil {
		c.link.Close()
	}
	if len(back) > 0 && m.cur != nil && !m.cur.replied {
		m.log.Warn("child master lost; the tasks lent to it go back to the queue", "child", c.name, "tasks", len(back))
		m.addTasks(back)
	}
}

// newBatchSplit resets the protocol for a new batch: children still
// working on an earlier one are cut off (their tasks are of no use now).
func (m *Master) newBatchSplit() {
	p := m.split.splitProto
	if p == nil {
		return
	}
	for _, c := range p.children {
		if c.lent > 0 && c.link != nil {
			c.link.Close()
		}
	}
	for _, c := range p.returning {
		m.returnChild(c)
	}
	p.returning = nil
	clear(p.lent)
	p.rflag, p.reqChild = false, nil
	for _, c := range p.order {
		c.inR = false
	}
	m.split.test.Reset()
}

// acceptRole serves a connection whose Hello claims a role other than
// worker's.
func (m *Master) acceptRole(role string, conn *Conn, h *Hello) {
	switch role {
	case helloSubMaster:
		m.acceptChildLink(conn, h)
	case helloRelay:
		m.acceptRelay(conn, h) // relay.go
	default:
		conn.SendAndClose(&Reject{Reason: "unknown role"})
	}
}

// acceptChildLink serves a child master's control link.
func (m *Master) acceptChildLink(conn *Conn, h *Hello) {
	var c *childMaster // set by ChildHello, on the loop
	post := func(f func()) {
		select {
		case m.in <- loopMsg{kind: msgCall, call: f}:
		case <-m.done:
		}
	}
	conn.Start(func(msg Message) {
		post(func() {
			m.turnBegin()
			m.childFrame(&c, conn, msg)
		})
	})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-conn.Done()
		post(func() {
			if c != nil && !c.done {
				m.log.Warn("child master's link lost", "child", c.name, "err", conn.Err())
				m.childLost(c)
			}
			if c != nil {
				m.lostReturning(c)
				m.heardBack(c) // it says nothing more
				m.endGone(c)
			}
		})
	}()
	_ = h
}

// childFrame handles one frame on a child's control link.
func (m *Master) childFrame(cp **childMaster, conn *Conn, msg Message) {
	p := m.proto()
	c := *cp
	if hello, ok := msg.(*ChildHello); ok {
		c = p.children[hello.Token]
		if c == nil || c.link != nil {
			conn.SendAndClose(&Reject{Reason: "no child master expected with that token"})
			return
		}
		*cp = c
		c.link, c.addr, c.progress = conn, hello.Addr, m.now()
		moved := 0
		for w, x := range p.moving {
			if x == c {
				delete(p.moving, w)
				delete(p.expect, w.name) // it goes on to the child: not expected here
				if !w.left {
					m.moveWorker(w, hello.Addr)
					c.moved = append(c.moved, w.name)
					c.sent = append(c.sent, w)
					moved++
				}
			}
		}
		m.log.Info("child master ready; moving its workers to it", "child", c.name, "addr", hello.Addr, "workers", moved)
		return
	}
	if c == nil {
		conn.SendAndClose(&Reject{Reason: "child hello expected"})
		return
	}
	switch v := msg.(type) {
	case *TaskRequest:
		m.onTaskRequest(v, c, conn)
	case *TaskGrant:
		m.onGrant(v, c)
	case *TaskRefusal:
		m.onRefusal(v, c)
	case *ChildResults:
		m.onChildResults(c, v)
	case *Shutdown:
		if v.Hold > 0 {
			m.childHolds(c, time.Duration(v.Hold))
		} else {
			c.heard = true // told the end, it passed it on (endPassedOn)
		}
	default:
		m.log.Warn("unexpected message on a child master's link", "child", c.name, "type", msg.Type())
	}
}

// onChildResults accepts the results a child returns (Fig. 3 lines
// 24–27).
func (m *Master) onChildResults(c *childMaster, r *ChildResults) {
	p := m.split.splitProto
	if r.Masters > 0 {
		c.masters = r.Masters
	}
	m.addChildCounts(c, r) // before the results: a task's first send before its result
	b := m.cur
	if r.Failed != nil && b != nil && r.Gen == b.id {
		m.childFailed(c, b, r.Failed)
	}
	if b != nil && r.Gen == b.id && len(r.IDs) == len(r.F) {
		at := m.now()
		dups := 0 // results of tasks decided here already: the tree's duplicates
		for i, id := range r.IDs {
			if p.lent[id] != c {
				continue
			}
			delete(p.lent, id)
			c.lent--
			c.progress = at
			if b.done[id] {
				dups++
				continue
			}
			b.f[id], b.done[id] = r.F[i], true
			m.progress.Add(1)
			m.split.stats.FromChildren++
			// The ledger counts the generation's results: one decided
			// elsewhere is an Accept by no worker of this master's.
			m.ledger.Step(at, sched.Event{}, []sched.Action{{Kind: sched.Accept, Worker: -1, Task: sched.TaskID(id)}})
			if pl := p.parent; pl != nil && !pl.finishing {
				pl.ids = append(pl.ids, id)
				pl.f = append(pl.f, r.F[i])
			}
		}
		if dups > 0 {
			m.ledger.Elsewhere(0, nil, sched.Counts{Duplicates: dups})
			m.counts.Duplicates += int64(dups)
		}
	}
	// Workers on their way back from c (and c itself, as a worker):
	// Close waits for them, so that none misses the end of the run (a
	// child that heard it, past its parent's wait: holdUp).
	m.expectWorkers(r.Moved, returnGrace)
	if len(r.Moved) > 0 {
		m.holdUp()
	}
	c.answered = c.answered || len(r.Moved) > 0
	for _, name := range r.Moved {
		if _, ok := p.expect[name]; ok {
			c.named = append(c.named, name)
		}
	}
	if r.Done && !c.done && !c.toldEnd { // one sent as the end went down ends nothing more
		c.done, c.inR = true, false
		delete(p.children, c.token)
		p.order = slices.DeleteFunc(p.order, func(x *childMaster) bool { return x == c })
		if p.rflag && p.reqChild == c {
			p.rflag, p.reqChild = false, nil
		}
		if c.lent > 0 && b != nil {
			// Done, yet something lent is missing: take it back.
			var back []Task
			for id, x := range p.lent {
				if x == c {
					delete(p.lent, id)
					back = append(back, Task{ID: id, X: b.xs[id]})
				}
			}
			c.lent = 0
			m.addTasks(back)
		}
		m.log.Info("child master returned", "child", c.name, "masters", m.mastersNow())
		m.noteMasters()
		m.maybeReply()
		if b != nil && !b.replied || p.parent != nil && p.parent.moving {
			// Its workers are welcome now (or, this child returning
			// itself, go on through it to the parent).
			m.returnChild(c)
		} else {
			// The batch is over (maybe with these very results): whether
			// a next one comes or the run ends, the child learns at the
			// next batch or as Close begins (endChildren), so that its
			// workers are never on their way when the run ends.
			p.returning = append(p.returning, c)
		}
		return
	}
	m.noteMasters()
	m.maybeReply()
}

// childFailed takes the failures of task f.ID, lent to c, that failed
// in c's tree past its retries: they count as this master's own (each
// cut as a worker's error is), and fail the batch once they pass
// MaxRetries (failTask), as failures here would. A child cannot fail a
// task it was not lent, nor with fewer failures than that: the task then
// stays lent, and comes back with them counted if c is cut off.
func (m *Master) childFailed(c *childMaster, b *batch, f *ChildFailed) {
	p := m.split.splitProto
	if f.ID < 0 || int(f.ID) >= len(b.done) || b.done[f.ID] || b.replied || p.lent[f.ID] != c {
		return
	}
	fs := b.failures[f.ID]
	for _, x := range f.Failures {
		if len(fs) > m.cfg.MaxRetries {
			break
		}
		fs = append(fs, TaskFailure{Worker: logx.Cut(x.Worker, maxNameLog), Err: logx.Cut(x.Err, logx.MaxErrText)})
	}
	b.failures[f.ID] = fs
	if len(fs) > m.cfg.MaxRetries {
		m.log.Warn("a task failed at a child master more often than the retries allow", "child", c.name, "gen", b.gen, "task", f.ID, "failures", len(fs))
		m.failTask(b, &RetriesExhaustedError{Gen: b.gen, Task: int(f.ID), MaxRetries: m.cfg.MaxRetries, Failures: slices.Clone(fs)})
	}
}

// returnGrace bounds how long Close waits for workers on their way back
// from a child master. A moved worker first finishes its running tasks,
// so this is a task's time and a reconnection on a loaded machine, not a
// round trip (3 s was too short there: -once workers that came back after
// the master had closed waited for ever).
const returnGrace = 30 * time.Second

// lostGrace bounds how long a master waits for what a lost child held
// (awaitLost, expectAgent): its workers, those of the masters under it,
// and, at the root, its own agent. Its machine frozen (its network cut,
// its goroutines on), such a worker hears that its master is gone only
// once its link to it times out, the idle timeout after the last frame
// that master sent, which left before this master found it lost (or as
// it thaws, sooner; a master under it stops as its own link up does,
// and tells its workers at once). The agent then gives evaluations deaf
// to their cancel its grace, and dials after a back-off step at most.
// returnGrace covered the first alone (seed 2814825 of the simulation: a
// grandchild's agent came home 470 ms after the root had closed, its
// grace over).
const lostGrace = defaultIdleTimeout + DefaultAbandonGrace + DefaultMaxBackoff

// An agent's timing that a master's waits for it count on: the defaults
// of worker.Config's AbandonGrace (how long a cancelled evaluation may
// take to return before the agent gives up on it) and MaxBackoff (its
// longest wait between connection attempts).
const (
	DefaultAbandonGrace = 5 * time.Second
	DefaultMaxBackoff   = 5 * time.Second
)

// childReturnWait is how long a child master that heard the end of the
// run waits for what is on its way to it (a grandchild master going back
// to work is a round trip away), or longer as endBy says; the workers it
// has heard the end already (endWorkers).
const childReturnWait = time.Second

// expected is a worker on its way here: until when it is waited for,
// and the connection it leaves (nil: none), which does not count as its
// coming.
type expected struct {
	by  time.Duration
	old *mworker
	// sent: the parent moved it to this child, whose address it dials
	// (endWait), perhaps after a redirect back-off.
	sent bool
}

// expectWorkers notes workers on their way here, waited for at most
// grace each; those connected already are not, unless that connection
// is one they are leaving (moved): a promoted worker still draining its
// old connection comes back on a new one once its child master returns
// (seed 512830 of the simulation: the old connection closed after the
// child's word, and the run ended before it came again). It returns how
// many it waits for.
func (m *Master) expectWorkers(names []string, grace time.Duration) (n int) {
	for _, name := range names {
		switch w := m.byName[name]; {
		case w == nil:
			m.expect(name, expected{by: m.now() + grace})
		case w.moved:
			m.expectAgain(w, grace)
		default:
			continue
		}
		n++
	}
	return n
}

// expectAgain notes that w, told to come back (to the root by going
// home, to a child by its address: see childLost), comes here on a new
// connection, waited for at most grace: seed 1282 of the simulation saw
// a run end while such a worker was between its two connections, and it
// looked for a master for ever.
func (m *Master) expectAgain(w *mworker, grace time.Duration) {
	m.expect(w.name, expected{by: m.now() + grace, old: w})
}

func (m *Master) expect(name string, x expected) {
	p := m.proto()
	if p.expect == nil {
		p.expect = map[string]expected{}
	}
	p.expect[name] = x
}

// lostReturning: c, done and waiting for this master's word to return,
// is gone with its workers still on it. They come back the way they
// came, here, so this master waits for them as for a lost child's (seed
// 510973 of the simulation: a child killed after its last results left
// its two workers looking for a root that had closed).
func (m *Master) lostReturning(c *childMaster) {
	p := m.split.splitProto
	if !slices.Contains(p.returning, c) {
		return
	}
	p.returning = slices.DeleteFunc(p.returning, func(x *childMaster) bool { return x == c })
	m.awaitLost(c)
}

// awaitLost notes that what lost child c held comes here: the workers
// moved to it (they go back the way they came), and, at the root, the
// worker it was promoted from (see expectAgent). This master's end waits
// for them up to lostGrace from now (endHold), however late c was
// found lost: Close, and a returning child's wait for its workers to
// leave, which may be nearly over (seed 981636 of the simulation: a
// grandchild froze as it returned, its link timed out 30 s later, 150 ms
// before the child's wait ended, and its workers, timing out on it a
// moment later, came back to the child once that wait had ended).
// A child that never said hello held nothing of that: no worker was
// moved to it (the workers waiting to go to it were told to come back,
// and are awaited as such: childLost), and its agent, alive, has no link
// to a child master of its own to time out on, so it comes back as a
// moved worker does, within returnGrace (its session's end, its child
// master's dial refused or failed, a back-off): waiting lostGrace, 10 s
// more, cost a run whose promoted worker was killed at once that much.
func (m *Master) awaitLost(c *childMaster) {
	p := m.split.splitProto
	grace := lostGrace
	if c.link == nil && len(c.moved) == 0 { // never said hello: nothing under it
		grace = returnGrace
	}
	m.expectWorkers(c.moved, grace)
	if p.parent == nil {
		m.expectAgent(c, grace)
	}
	p.endHold = max(p.endHold, m.now()+grace)
	m.holdUp() // a child told the end: its parent waits for its word that much longer
}

// expectAgent notes that the worker lost child c was promoted from comes
// home to the root once its child master stops for want of its link
// (seed 607541: cut off, it went home as the run ended and looked for a
// master for ever). Its old connection, should it still drain here, does
// not count. It is waited for grace, as the workers it held.
func (m *Master) expectAgent(c *childMaster, grace time.Duration) {
	if w := m.byName[c.name]; w != nil {
		m.expectAgain(w, grace)
	} else {
		m.expect(c.name, expected{by: m.now() + grace})
	}
}

// heardBack notes that c, told to return, can say nothing more: its
// link closed (after its last word, which names its own agent, or lost).
// Lost before it named the workers it sends back, it left them on it:
// they come back the way they came once they miss it, so this master,
// the root or a child, waits for them as for a lost child's (seed 808522
// of the simulation: the child's machine froze as its answer left, the
// root closed as its link timed out, and its six workers, whose own
// links to it timed out a moment later, looked for a master for ever;
// seed 981636, the same one level down). Gone after it answered, it
// may still leave a worker moved to it that never reached it
// (awaitDraining).
func (m *Master) heardBack(c *childMaster) {
	if !c.recalled {
		return
	}
	c.recalled = false
	p := m.split.splitProto
	p.recalled = slices.DeleteFunc(p.recalled, func(x *childMaster) bool { return x == c })
	if !c.answered {
		m.log.Warn("child master told to return was lost before it named the workers it sends back; awaiting them here",
			"child", c.name, "workers", len(c.moved))
		m.awaitLost(c)
		return
	}
	m.awaitDraining(c)
	// At the root, those it named and that have not come yet are waited
	// for again, lostGrace from now: on their way, they come soon;
	// still on it, its machine frozen as they were to leave, they come
	// once their links to it time out, which may be up to their idle
	// timeout after they were named, past the wait that began then, and
	// their agents' grace for evaluations deaf to their cancel later (seed
	// 2079761 of the simulation: the root closed 16 ms before two of them
	// came). Not at a child: its parent does not know of such a hold,
	// and may close first (seed 2513961: a child held for its grandchild's
	// agent, which went home to the root, until the root had closed).
	if p.parent != nil {
		return
	}
	if n := m.expectWorkers(c.named, lostGrace); n > 0 {
		p.endHold = max(p.endHold, m.now()+lostGrace)
	}
}

// awaitDraining: c, which answered, is gone, and a worker moved to it
// that is still here, finishing tasks deaf to their cancel, has not
// reached it, so c did not name it: it will find c gone and come back
// the way it came, here, on a new connection (see expectAgain). This
// master, the root or a child, waits for it returnGrace from now, Close
// and a returning child's finish alike (endHold), as for a lost child's
// workers; once Close has begun, it hears the end here instead, where it
// is (seed 2041889 of the simulation: child w1 waited for w2, was killed
// as the root's Close waited for it, and the root closed once w1's agent
// came; w2, its drain over meanwhile, went to w1 5 s later, its agent's
// grace for the evaluation deaf to its cancel, then home to no master).
// It goes by the connection told to go to c, not by name: one of the
// same name here may be on its way elsewhere (sent on by a returning
// child, say), and not come back.
func (m *Master) awaitDraining(c *childMaster) {
	p := m.split.splitProto
	held := false
	for _, w := range c.sent {
		switch {
		case w.left:
		case m.closing.Load():
			m.endWorker(w)
		default:
			m.expectAgain(w, returnGrace)
			p.endHold = max(p.endHold, m.now()+returnGrace)
			held = true
		}
	}
	if held {
		m.holdUp() // a child told the end: its parent waits for its word that much longer
	}
}

// awaiting counts what is still on its way to this master at the end:
// the workers expected (not come, not late) and the children told to
// return whose link is open. A returning child counts its children
// still working too: they return through it.
//
// The guarantee, by induction down the tree of masters: a master closes
// (the root at the run's end, a child once it has sent its workers back)
// only when awaiting is 0 or its grace is over, so every worker that was
// under a returning child, grandchild… reaches a master that is still
// open and has named it to its own parent, and so ends at the root, which
// tells it the run is over; a child still at work hears the end from its
// parent as its Close begins (endChildren), waits for the workers on
// their way to it as the root does, and tells them and its own children.
func (m *Master) awaiting() int {
	p := m.split.splitProto
	if p == nil {
		return 0
	}
	m.noteJoins()
	m.checkEnded()
	n := len(p.expect) + len(p.recalled)
	for _, c := range p.ended {
		if !c.heard {
			n++ // its word that its workers heard the end
		}
	}
	if pl := p.parent; pl != nil && pl.moving {
		n += len(p.children)
	}
	return n
}

// noteJoins forgets the expected workers that came (or are late).
func (m *Master) noteJoins() {
	p := m.split.splitProto
	if len(p.expect) == 0 {
		return
	}
	now := m.now()
	for name, x := range p.expect {
		if w := m.byName[name]; w != nil && w != x.old || now > x.by {
			delete(p.expect, name)
		}
	}
}

// awaitReturns waits for the workers on their way back from child
// masters, each at most returnGrace from when it was moved (lostGrace
// from when its child was found lost), and Close at most ShutdownGrace
// more, or as long as endBy says, so that Close tells them the run is
// over too.
// A child that returns does not wait: what reaches it now it sends on
// (bounce), and its own agent must get back to its parent; a returning
// child waits for its children's workers before it stops (maybeFinish).
// A child that heard from its parent that the run is over waits as the
// root does: a worker on its way back to it (a grandchild master going
// back to work, say) would otherwise find no master, and never hear
// the end.
func (m *Master) awaitReturns() {
	deadline := time.Now().Add(m.cfg.ShutdownGrace + returnGrace)
	for first := true; ; first = false {
		n := 0
		child := false
		var wait, hold time.Duration
		if !m.ask(func() {
			if p := m.split.splitProto; p != nil && (p.parent == nil || p.parent.runOver) {
				n, child = m.awaiting(), p.parent != nil
				hold = m.endBy() - m.now()
				if child {
					wait = m.endWait()
				}
			}
		}) || n == 0 {
			return
		}
		if first && child {
			deadline = time.Now().Add(wait)
		}
		if until := time.Now().Add(hold); until.After(deadline) {
			deadline = until // children's words, and a silent one's workers (endGone)
		}
		if time.Now().After(deadline) {
			m.log.Warn("workers expected back from child masters did not come", "missing", n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cameHere notes that a worker joined: it is expected no more, nor, if
// the parent moved it here, waited for at the end of the run. As it
// joins, not at the turn's end (noteJoins): a slow master's turn may
// take its join and its leaving both (moved on at once, by a returning
// child), and noteJoins would then never see it here, and wait for it
// returnGrace.
func (m *Master) cameHere(name string) {
	p := m.split.splitProto
	if p == nil {
		return
	}
	delete(p.expect, name)
	for _, c := range p.recalled {
		c.named = slices.DeleteFunc(c.named, func(n string) bool { return n == name })
	}
	if p.parent != nil {
		p.parent.coming = slices.DeleteFunc(p.parent.coming, func(n string) bool { return n == name })
	}
}

// endWait is how long a child that heard the end of the run waits for
// what awaiting counts (its workers have the end meanwhile: endWorkers),
// or longer as endBy says: childReturnWait, but movedWait for a worker
// the parent moved here that has not come yet, even one the parent told
// the end itself (it may have closed its connection, its drain over, as
// the end went out). That one dials this child and no other, maybe after
// its agent's redirect back-off: were this child closed, it would go
// home to a root that has ended, and look for a master for ever (seed
// 669601 of the simulation: it waited 1.6 s to dial, the child, done
// meanwhile, waited 1 s). On the loop, after awaiting.
func (m *Master) endWait() time.Duration {
	for _, x := range m.split.splitProto.expect {
		if x.sent {
			return movedWait
		}
	}
	return childReturnWait
}

// movedWait bounds how long a worker the parent moved to a child takes to
// come once the child hears the end of the run. It has left the parent by
// then (the parent tells a child the end only once none of the workers it
// moved there is still connected to it, or tells them too), so it is an
// agent's longest back-off by default (5 s, up to 6 s jittered) and a
// dial; a worker killed on its way is not waited for longer. A variable
// only so that a test can make the wait it checks far longer than its
// own.
var movedWait = 7 * time.Second

// ChildConfig configures RunChild.
type ChildConfig struct {
	// Promote is the parent's order.
	Promote *Promote
	// Parent is the parent's data address (the one this worker dialled).
	Parent string
	// Listen is where the child accepts its workers, e.g. "10.0.0.5:0".
	Listen string
	// Key, Name and Problem are the worker's: the cluster key, its name
	// (the control link is Name + "/master"), and the run's problem.
	Key     *Key
	Name    string
	Problem ProblemSpec
	// MaxFrame is the frame cap of the parent's connection.
	MaxFrame int
	// Network opens the child's listener and its link to the parent.
	// Default TCP.
	Network Network
}

// childStarted, when set (by a test), is told of each child master
// RunChild creates, before it greets its parent.
var childStarted func(*Master)

// errParentLost ends a child whose parent is gone.
var errParentLost = errors.New("grid: child master: the link to the parent master is lost")

// RunChild runs a child master (docs/papers.md §2's "start master"): this
// very Master over the tasks of Promote and the workers the parent moves
// to it, until its share is done and returned (nil), its parent is lost,
// or ctx ends. It is what a promoted worker runs. mc gives the master's
// other settings (Logger, timeouts); the policy, split settings, key,
// problem and listener come from cfg.
func RunChild(ctx context.Context, cfg ChildConfig, mc MasterConfig) (err error) {
	pr := cfg.Promote
	if pr == nil {
		return errors.New("grid: child master: no promote")
	}
	if err := pr.Check(); err != nil {
		return err
	}
	if cfg.Network == nil {
		cfg.Network = TCP
	}
	ln, err := cfg.Network.Listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("grid: child master: %w", err)
	}
	mc.Listener = ln
	mc.Key = cfg.Key
	mc.Problem = cfg.Problem
	mc.Policy = pr.Policy
	mc.Sched.Depth, mc.Sched.Adaptive = pr.Depth, pr.Adaptive
	mc.Split = pr.split()
	pr.applyLimits(&mc)
	mc.MaxFrame = max(mc.MaxFrame, cfg.MaxFrame)
	m, err := NewMaster(ctx, mc)
	if err != nil {
		ln.Close()
		return err
	}
	if childStarted != nil {
		childStarted(m)
	}
	// The workers that are still here when it stops are told the run is
	// over if the parent said so, else that the master will be back, so
	// that they find another (Shutdown.Restart).
	defer func() {
		if errors.Is(err, ErrRunOver) {
			m.Close()
		} else {
			m.Interrupt()
		}
	}()
	link, _, err := Dial(ctx, cfg.Parent, DialConfig{
		Key: cfg.Key, Name: cfg.Name + "/master", Slots: 1, Problems: []string{helloSubMaster},
		Conn: ConnConfig{MaxFrame: m.cfg.MaxFrame, Logger: m.cfg.Logger},
		Dial: cfg.Network.Dial,
	})
	if err != nil {
		return fmt.Errorf("grid: child master: control link: %w", err)
	}
	defer func() {
		switch {
		case errors.Is(err, ErrRunOver):
			// Its workers hear the end first, then the parent hears
			// that they did (endPassedOn: the link's last frame).
			m.Close()
			link.SendAndClose(nil)
			<-link.Done()
		case err == nil:
			<-link.Done() // the last frame, which names this worker, is written (maybeFinish)
		}
		link.Close()
	}()
	if err := link.Send(&ChildHello{Token: pr.Token, Addr: m.Addr()}); err != nil {
		return fmt.Errorf("grid: child master: %w", err)
	}
	done := make(chan error, 1)
	if !m.ask(func() { m.startShare(link, pr, cfg.Parent, cfg.Name, done) }) {
		return ErrMasterClosed
	}
	post := func(f func()) {
		select {
		case m.in <- loopMsg{kind: msgCall, call: f}:
		case <-m.done:
		}
	}
	link.Start(func(msg Message) {
		post(func() {
			m.turnBegin()
			m.parentFrame(msg)
		})
	})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-link.Done():
			post(m.parentLost)
		case <-m.done: // the link outlives the master: see above
		}
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-m.done:
		err = ErrMasterClosed
	}
	return err
}

// startShare starts the child's batch: BatchStarted{N: 0} and its share
// added, with the parent's ids and batch id.
func (m *Master) startShare(link *Conn, pr *Promote, parent, self string, done chan error) {
	p := m.proto()
	p.parent = &parentLink{conn: link, addr: parent, self: self, token: pr.Token, inR: true, done: done}
	// The workers the parent moves here (and the promoted worker's own
	// agent does not come): noteJoins counts them in.
	for _, name := range pr.Workers {
		m.expect(name, expected{by: m.now() + childHelloTimeout})
	}
	p.parent.coming = slices.Clone(pr.Workers)
	n := min(max(pr.N, 0), sched.MaxTaskID+1)
	xs := make([][]float64, n)
	var ids []sched.TaskID
	for _, t := range pr.Tasks {
		if t.ID >= 0 && int(t.ID) < n && xs[t.ID] == nil {
			xs[t.ID] = t.X
			ids = append(ids, sched.TaskID(t.ID))
		}
	}
	p.parent.mark = make([]uint8, n)
	// overran as the root's (startBatch): without it a task's deadline
	// never doubled on a child, and a task longer than its worker's
	// deadline was cut there for ever.
	m.cur = &batch{id: pr.Gen, gen: pr.ESGen, xs: xs, f: make([]float64, n), done: make([]bool, n),
		overran: make([]uint8, n), reply: make(chan evalReply, 1), failures: map[int32][]TaskFailure{}}
	m.lastID = pr.Gen
	m.batches++
	m.progress.Store(0)
	m.stepWith(sched.Event{Kind: sched.BatchStarted, N: 0}, 0, -1)
	m.step(sched.Event{Kind: sched.TasksAdded, IDs: ids}, 0)
	m.log.Info("child master started", "gen", pr.ESGen, "tasks", len(ids), "addr", m.Addr(), "parent", parent)
	m.noteMasters()
}

// parentFrame handles one frame from the parent.
func (m *Master) parentFrame(msg Message) {
	p := m.proto()
	if p.parent == nil {
		return
	}
	switch v := msg.(type) {
	case *TaskRequest:
		m.onTaskRequest(v, nil, p.parent.conn)
	case *TaskGrant:
		m.onGrant(v, nil)
	case *TaskRefusal:
		m.onRefusal(v, nil)
	case *Move:
		m.moveBack() // the parent's word after Done: return now
	case *Shutdown:
		// The run is over (or the parent was interrupted): tell the
		// workers so, not "come back".
		pl := p.parent
		if !pl.answered {
			pl.answered = true
			err := ErrRunOver
			if v.Restart {
				err = ErrParentInterrupted
			}
			m.log.Info("the parent master ended the run", "reason", v.Reason, "restart", v.Restart)
			pl.runOver = !v.Restart
			within := time.Duration(v.Within)
			if within <= 0 {
				within = endHeardWait
			}
			// No parent waits longer: its own, if a child, is less.
			pl.wordBy = m.now() + min(within, endHeardWait+maxEndHold)
			if pl.runOver {
				// Those moved here and still to come have left the
				// parent by now (it tells a child the end only then, or
				// tells them too): one back-off and a dial away.
				for _, name := range pl.coming {
					m.expect(name, expected{by: m.now() + movedWait, sent: true})
				}
				m.endWorkers()
			}
			pl.done <- err
		}
	default:
		m.log.Warn("unexpected message from the parent master", "type", msg.Type())
	}
}

// endHeard says this master is a child whose parent said the run is
// over: the workers here hear it at once, and those that join from now
// on at their join (endWorkers).
func (m *Master) endHeard() bool {
	p := m.split.splitProto
	return p != nil && p.parent != nil && p.parent.runOver
}

// endWorkers tells the workers here that the run is over as soon as
// this child hears it from its parent, and endHeard has those that join
// later told at their join. Its own end waits for what is still on its
// way here (endWait: up to movedWait for a worker the parent moved here
// and told the end itself, which never comes), and theirs need not (seed
// 1175458 of the simulation: the child's machine froze as it held its
// workers until the run's end, it thawed 9 s after the end, then held
// them movedWait more, idle in a session). A worker moved elsewhere hears
// it at this master's end, as before, if still here: a promoted one's
// connection is what its agent, running a child master, drains, and
// the end told there would end the agent's wait for that child. On the
// loop.
func (m *Master) endWorkers() {
	for _, w := range slices.Clone(m.order) {
		if !w.closed && !w.left && !w.moved {
			m.endWorker(w)
		}
	}
}

// endWorker tells w the run is over: it leaves the run (nothing more
// goes to it), and its connection closes once the end is written.
func (m *Master) endWorker(w *mworker) {
	w.ended = true
	m.workerLeft(w)
	m.log.Info("the run is over; telling the worker", "worker", w.name, "worker_id", w.id)
	w.conn.SendAndClose(m.bye())
}

// parentLost ends a child whose parent is gone (or cut it off).
func (m *Master) parentLost() {
	p := m.proto()
	if pl := p.parent; pl != nil && !pl.answered {
		pl.answered = true
		if !pl.moving {
			m.log.Warn("lost the parent master; stopping this child master")
			pl.done <- errParentLost
			return
		}
		pl.done <- nil
	}
}

// maybeFinish returns a child whose share is done (Fig. 3 lines 46–49):
// its last results go up with Done. Its workers go back once the parent
// says so (moveBack): at once while the parent's batch runs, or when the
// parent's next batch starts; if instead the run ends, the parent says
// Shutdown, and the workers are told the run is over (so that a worker
// in transit never misses the end of the run). It answers RunChild once
// the workers have left (or after a grace).
func (m *Master) maybeFinish() {
	p := m.split.splitProto
	pl := p.parent
	if pl == nil || pl.answered {
		return
	}
	b := m.cur
	if !pl.finishing {
		if b == nil || !b.replied || !m.batchDone() {
			return
		}
		pl.finishing = true
		pl.conn.Send(&ChildResults{Gen: b.id, IDs: pl.ids, F: pl.f, Masters: m.mastersNow(), Done: true, C: m.childCounts()})
		pl.ids, pl.f = nil, nil
		m.log.Info("child master done; its results went to the parent", "gen", b.gen, "workers", m.nLive)
	}
	if pl.moving {
		m.bounce()
	}
	if pl.moving && (m.nLive == 0 && m.awaiting() == 0 || m.now() > max(pl.finishBy, p.endHold)) {
		// This worker comes now: the parent waits for it from now on
		// (it may have waited here for its own children's workers). The
		// link's last frame: RunChild waits for it to be written.
		pl.conn.SendAndClose(&ChildResults{Gen: b.id, Masters: m.mastersNow(), Done: true, Moved: m.lastNamed(), C: m.childCounts()})
		pl.answered = true
		pl.done <- nil
	}
}

// lastNamed is what a returning child's last frame names: its own
// agent, and the workers still on their way here or under a child of its
// own still at work, which this master's end leaves to go home, to the
// root: the parent waits for them too. On their way: a returning child
// of its own named its agent, say (seeds 4649628 and 4670250 of the
// simulation: a grandchild held by a frozen worker until its connection
// timed out, 30 s, past this child's own wait, named its agent as this
// child ended, and the agent came home to a root that had closed,
// expecting nothing more). Under a child at work: its agent and the
// workers moved to it, told as this master closes that their master
// will be back (seed 4869473: a grandchild left with no worker, waiting
// for one, when its returning parent's wait ended). Sorted, so that a
// run replays.
func (m *Master) lastNamed() []string {
	p := m.split.splitProto
	now := m.now()
	var more []string
	for name, x := range p.expect {
		if x.by >= now {
			more = append(more, name)
		}
	}
	for _, c := range p.children { // at work (done and lost ones are not here)
		more = append(more, c.name)
		more = append(more, c.moved...)
	}
	more = slices.DeleteFunc(more, func(n string) bool { return n == p.parent.self })
	slices.Sort(more)
	return append([]string{p.parent.self}, slices.Compact(more)...)
}

// moveBack moves a finished child's workers back to its parent.
func (m *Master) moveBack() {
	pl := m.split.splitProto.parent
	if pl == nil || !pl.finishing || pl.moving {
		return
	}
	pl.moving = true
	// Its own children that finished after its batch did come back too
	// (through it: bounce sends them on, and it waits for them).
	p := m.split.splitProto
	for _, c := range p.returning {
		m.returnChild(c)
	}
	p.returning = nil
	moved := []string{pl.self}
	var ws []*mworker
	for _, w := range m.order {
		if !w.left && !w.closed {
			moved = append(moved, w.name)
			ws = append(ws, w)
		}
	}
	// The parent waits for them (and this worker) at the end of the run:
	// it hears of them before they leave.
	pl.conn.Send(&ChildResults{Gen: m.cur.id, Masters: m.mastersNow(), Done: true, Moved: moved, C: m.childCounts()})
	for _, w := range ws {
		m.setDraining(w)
		m.moveWorker(w, pl.addr)
	}
	pl.finishBy = m.now() + returnGrace
	m.log.Info("child master returning its workers to the parent", "workers", len(moved)-1, "parent", pl.addr)
}

// names lists the workers' names.
func names(ws []*mworker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.name
	}
	return out
}

// bounce sends on to the parent the workers that reach a child that is
// returning (back from a child of its own, late).
func (m *Master) bounce() {
	pl := m.split.splitProto.parent
	var moved []string
	var ws []*mworker
	for _, w := range m.order {
		if !w.left && !w.closed && !w.draining {
			moved = append(moved, w.name)
			ws = append(ws, w)
		}
	}
	if len(moved) == 0 {
		return
	}
	pl.conn.Send(&ChildResults{Gen: m.cur.id, Masters: m.mastersNow(), Done: true, Moved: moved, C: m.childCounts()})
	for _, w := range ws {
		m.setDraining(w)
		m.moveWorker(w, pl.addr)
	}
}

// ErrRunOver is what RunChild returns when its parent ended the run: the
// promoted worker's agent then ends as it does when its master ends the
// run. ErrParentInterrupted: the parent was interrupted and will be back.
var (
	ErrRunOver           = errors.New("grid: child master: the parent ended the run")
	ErrParentInterrupted = errors.New("grid: child master: the parent master was interrupted")
)

// returnChild gives a child that is done the parent's word: return now
// (the batch runs, or the next one started).
func (m *Master) returnChild(c *childMaster) {
	if c.link != nil && c.link.Send(&Move{}) == nil && !c.recalled {
		c.recalled = true
		p := m.split.splitProto
		p.recalled = append(p.recalled, c)
	}
}

// endChildren tells every child whose link is open, save those told to
// return (the root awaits those already: recalled), that the master is
// stopping, as Close begins, and awaits each one's word that its workers
// heard it (endPassedOn), or its workers once it is found gone
// (checkEnded, endGone). Told only as the loop exits, a child whose
// machine froze meanwhile would leave its workers to time out on it and
// go home to a root that had closed (seed 307184 of the simulation: the
// child froze 20 ms after the root knew the run was over, and 365 ms
// before the root, done waiting, said so). A worker moved to a child and
// still connected here (finishing its tasks, deaf to their cancel) hears
// it here too: the child waits movedWait for it (endWait), which bounds a
// back-off and a dial, not its tasks (seed 6760: told alone, the child
// closed before the worker left here). On the loop.
func (m *Master) endChildren() {
	p := m.split.splitProto
	if p == nil {
		return
	}
	bye := m.bye()
	tell := func(c *childMaster) bool {
		if c.link == nil || c.toldEnd {
			return false
		}
		for _, name := range c.moved {
			if w := m.byName[name]; w != nil && w.moved && !w.ended && !w.closed {
				m.endWorker(w)
			}
		}
		c.told, c.toldEnd = m.now(), true
		c.within = m.endWithin()
		c.wordBy = c.told + c.within
		if bye.Restart {
			// Its workers wait for a master to come back anyway.
			c.link.SendAndClose(bye)
			c.heard = true
		} else {
			// It closes the link once its workers heard it.
			c.link.Send(&Shutdown{Reason: bye.Reason, Within: int64(c.within)})
		}
		p.ended = append(p.ended, c)
		return true
	}
	p.returning = slices.DeleteFunc(p.returning, tell)
	for _, c := range p.order { // at work: the run may end before its batch does
		tell(c)
	}
}

// endHeardWait bounds how long the root waits for a child told the end
// early to say that its workers heard it (endPassedOn): its own wait for
// workers on their way to it (endWait, at most movedWait) and for its own
// children's words (endWithin: less), its ShutdownGrace (5 s by default)
// for its workers to read the end, and a round trip. A child that finds
// one of its own gone silent says so (holdUp), and is waited for that
// much more. A variable only so that a test need not wait for it.
var endHeardWait = defaultEndHeardWait

// defaultEndHeardWait is endHeardWait's value outside tests.
const defaultEndHeardWait = 20 * time.Second

// checkEnded counts as gone a child told the end early that has not said
// its workers heard it within endHeardWait (its machine froze: its link
// stays open, and says nothing). On the loop.
func (m *Master) checkEnded() {
	p := m.split.splitProto
	for _, c := range slices.Clone(p.ended) {
		if !c.heard && m.now() > c.wordBy {
			c.link.SendAndClose(nil) // the end still goes out, should it thaw
			m.endGone(c)
		}
	}
	if !m.endHeard() {
		return
	}
	for _, c := range slices.Clone(p.recalled) {
		switch {
		case c.wordBy == 0:
			c.told = m.now()
			c.wordBy = c.told + m.endWithin()
		case m.now() > c.wordBy:
			m.recalledGone(c)
		}
	}
}

// recalledGone: c, told to return, has not closed its link (its last
// word, which names its own agent) within what this child, told the end,
// gives it (endWithin): its machine froze as it returned, perhaps before
// its workers heard its word to come back, and they would time out on it
// and come back here only after a child's short wait at the end (seed 4
// of TestGrandchildFrozenAsItHearsTheEnd under wq: this child waited 1 s
// and closed). So this child tells it the end, should it thaw, awaits
// its workers and agent as a lost child's, and asks its parent to wait
// that much longer (holdUp). On the loop.
func (m *Master) recalledGone(c *childMaster) {
	p := m.split.splitProto
	c.recalled = false
	p.recalled = slices.DeleteFunc(p.recalled, func(x *childMaster) bool { return x == c })
	c.link.SendAndClose(m.bye())
	m.log.Warn("child master told to return did not end its link in time at the run's end; awaiting its workers here",
		"child", c.name, "workers", len(c.moved))
	m.awaitSilent(c)
}

// awaitSilent awaits what c, silent at the end of the run, held, as
// awaitLost does, and at a child its agent too (the root's awaitLost
// does): frozen as the end went down, c stops once its link up closes,
// and its agent comes back the way it came, here first. A child lost at
// work is not so awaited: its agent may be at work elsewhere by then.
func (m *Master) awaitSilent(c *childMaster) {
	m.awaitLost(c)
	if m.split.splitProto.parent != nil {
		m.expectAgent(c, lostGrace)
	}
}

// endGone: the link of c, told the end early, closed (or c is silent
// past endHeardWait). If c did not say first that its workers heard the
// end, they may not have: frozen before it passed the end on, c leaves
// them to time out on it and go home, to a root that had closed (seed
// 307184 of the simulation, in a rare order), and they would look for a
// master for ever. So this master awaits them, and c's own agent
// (awaitSilent), as it does a child lost at work, for lostGrace from
// now, which Close waits out too (awaitLost's endHold). On the loop.
func (m *Master) endGone(c *childMaster) {
	p := m.split.splitProto
	if !slices.Contains(p.ended, c) {
		return
	}
	p.ended = slices.DeleteFunc(p.ended, func(x *childMaster) bool { return x == c })
	if c.heard {
		return
	}
	m.log.Warn("child master told the run is over did not say its workers heard it; awaiting them here",
		"child", c.name, "workers", len(c.moved), "err", c.link.Err())
	m.awaitSilent(c)
}

// endWithin is how long a child told the end now is given to say that
// its workers heard it: endHeardWait at the root; at a child, what is
// left of its own parent's wait, less endMargin, so that it finds a
// silent child of its own gone, and says so up (holdUp), before its
// parent finds it gone (at least childReturnWait: a tree deeper than
// endHeardWait allows is waited for less). On the loop.
func (m *Master) endWithin() time.Duration {
	pl := m.split.splitProto.parent
	if pl == nil || !pl.runOver {
		return endHeardWait
	}
	return max(pl.wordBy-m.now()-m.endMargin(), childReturnWait)
}

// endMargin is what a child needs between its last child's word and its
// own (endPassedOn): its ShutdownGrace for its workers' connections, and
// a round trip.
func (m *Master) endMargin() time.Duration { return m.cfg.ShutdownGrace + time.Second }

// maxEndHold bounds how far a child's holds (Shutdown.Hold) may push its
// parent's wait for its word past the wait it was given (within): a tree of
// masters three levels deep, each level losing a child in turn.
const maxEndHold = 3 * (lostGrace + defaultEndHeardWait)

// childHolds: c, told the end, says that it awaits workers on their way
// to it for up to hold: this master waits for c's word that long more
// (and its wait given anew after it, within, or endMargin at least) and,
// a child itself, says so up in turn (holdUp). A child's holds push the
// wait maxEndHold at most. On the loop.
func (m *Master) childHolds(c *childMaster, hold time.Duration) {
	p := m.split.splitProto
	if !slices.Contains(p.ended, c) || c.heard {
		return
	}
	by := min(m.now()+min(hold, maxEndHold)+max(c.within, m.endMargin()), c.told+c.within+maxEndHold)
	if by <= c.wordBy {
		return
	}
	c.wordBy = by
	m.log.Info("child master told the run is over awaits workers on their way to it; waiting for its word", "child", c.name, "until", by)
	m.holdUp()
}

// holdUp tells the parent of this child, told the end, that its word
// may come later than its parent's wait (endWithin): it awaits what a
// silent child of its own held (endGone's endHold), the workers a
// returning one named, or a child's word (childHolds), until endBy. On
// the loop.
func (m *Master) holdUp() {
	p := m.split.splitProto
	if pl := p.parent; pl != nil && pl.runOver && !pl.moving {
		if hold := m.endBy() - m.now(); hold > 0 {
			pl.conn.Send(&Shutdown{Reason: "awaiting workers on their way here", Hold: int64(hold)})
		}
	}
}

// endBy is until when this master's end waits at most for its
// children's words and what a lost child held (endHold); at a child that
// heard the end, also for those told to return (recalledGone) and the
// workers on their way here, each until it is expected no more: one
// named by a returning child's last frame may come after its agent's
// longest back-off (seed 4 of TestGrandchildFrozenAsItHearsTheEnd under
// wq, its child frozen 12 s: named as the child thawed, the agent came
// 4 s later, to no master). On the loop.
func (m *Master) endBy() time.Duration {
	p := m.split.splitProto
	by := p.endHold
	for _, c := range p.ended {
		if !c.heard {
			by = max(by, c.wordBy)
		}
	}
	if m.endHeard() {
		for _, c := range p.recalled {
			by = max(by, c.wordBy)
		}
		for _, x := range p.expect {
			by = max(by, x.by)
		}
		// Its parent waits for its word maxEndHold past the wait it gave
		// (childHolds), then lostGrace for what it held (endGone), and
		// no longer: a child of its own naming workers over and over,
		// each awaited returnGrace anew, holds it no longer either.
		by = min(by, p.parent.wordBy+maxEndHold+lostGrace)
	}
	return by
}

// endPassedOn is a child's last word up, once its parent said the run
// is over and its workers and children heard it in turn (or had its
// ShutdownGrace to): the parent waits for it (endGone). On the loop, as
// it exits.
func (m *Master) endPassedOn() {
	if p := m.split.splitProto; p != nil && p.parent != nil && p.parent.runOver {
		p.parent.conn.SendAndClose(&Shutdown{Reason: "passed on"})
	}
}

// shutdownChildren passes the run's end (bye) down to every child whose
// link is open, so that their workers hear it too, and returns those
// links (the caller gives them a moment to carry it). On the loop, as it
// exits.
func (m *Master) shutdownChildren(bye *Shutdown) []*Conn {
	p := m.split.splitProto
	if p == nil {
		return nil
	}
	var links []*Conn
	for _, c := range p.ended { // told already (endChildren): given their moment too
		c.link.SendAndClose(nil)
		links = append(links, c.link)
	}
	// Children that came since (a child's Close tells them first too),
	// and those on their way back with their workers still with them
	// (one that has let them go has closed its link).
	for _, set := range [][]*childMaster{p.order, p.returning, p.recalled} {
		for _, c := range set {
			if c.link != nil && !c.toldEnd {
				c.link.SendAndClose(bye)
				links = append(links, c.link)
			}
		}
	}
	p.returning, p.recalled, p.ended = nil, nil, nil
	return links
}
