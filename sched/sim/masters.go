package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Masters that split (docs/papers.md §2) on a virtual clock.
//
// The model is the paper's: P processors, one of them the first master
// M, the others its workers, each with one slot; a bag of tasks (or
// generations of tasks behind a barrier). A master is a single server:
// the messages that reach it wait in its inbox, and each costs it
// MasterCost to handle (a result and the assignment it causes, a task
// request, a grant...). Every message takes Latency to arrive. A worker
// runs the tasks it is sent in the order they arrive and sends each
// result to the master that sent the task.
//
// Each master drives its own sched.Policy over its workers (wq, as in
// the paper; rwq works too), with the seam's events for its share:
// BatchStarted{N: 0} and TasksAdded for a child, TasksTaken for the
// tasks it hands out. The algorithm is Fig. 3 and 4 of the paper:
//
//   - after each assignment the master notes how many messages wait in
//     its inbox (sched.Overload, window n = 2 × its processors);
//   - when a result from worker p arrives, Q is not empty, the master is
//     overloaded and has at least 4 running workers, p becomes a child
//     master (it gets no new task); the other running workers are split
//     in two halves (the child gets the second), and half of Q goes to
//     the child with a "start master" message (one message for the
//     parent to handle); the child assigns a task to each of its
//     workers at once (a worker still running its parent's task queues
//     it); the parent forgets a moved worker once its last result is in;
//   - a master that assigns its last task asks one master of its
//     candidate set R (parent, then children) for tasks; the asked
//     master grants half of its Q or refuses; a refused master drops the
//     candidate; a master with a request outstanding does not finish;
//   - a child that has no running worker, no child and no request out
//     returns its results, its workers and itself to its parent (one
//     message), and the parent puts them to work.
//
// Rule SplitGain adds docs/papers.md §2's caveat: split only when
// sched.SplitWorthIt says the two masters, one worker fewer, beat one,
// from what the master measured (its tasks per second of busy time, the
// mean task time and round trip).

// Split rules of the simulator, as grid.SplitRule.
const (
	SplitOff   = "off"
	SplitPaper = "paper"
	SplitGain  = "gain"
)

// MastersConfig is one simulated run of masters that split.
type MastersConfig struct {
	// Workers is the number of worker processors at the start; the first
	// master is one more (the paper's P = Workers + 1).
	Workers int
	// Tasks is the number of tasks (of each batch, with Batches > 1).
	Tasks int
	// Batches, when > 1, runs that many batches of Tasks behind a
	// barrier (an ES's generations): every child returns at the end of a
	// batch, and the next starts with one master again.
	Batches int
	// Grain is a task's time; Noise the sigma of a mean-preserving
	// log-normal factor per task (0: none).
	Grain time.Duration
	Noise float64
	// Latency is a message's one-way delay; MasterCost a master's time to
	// handle one message.
	Latency, MasterCost time.Duration
	// PolicyCost is a master's time for one step of its policy, besides
	// the messages' cost: it delays the next message the master takes.
	// 0: the policy's measured cost at the master's number of workers
	// (MeasuredPolicyCost) when MasterCost > 0, none when it is 0.
	// Negative: none.
	PolicyCost time.Duration
	// Rule is SplitOff, SplitPaper or SplitGain.
	Rule string
	// Window is the overload test's n; 0: sched.DefaultOverloadWindow of
	// the master's processors (2 × them, at most 512), as the real
	// master's.
	Window int
	// Policy is the masters' policy, one of sched.Names: "wq" (the
	// paper's, default), "rwq", "eft"... Each master steps it as the
	// single-master simulator does: events carry At, and results their
	// Exec and (for an instance sent to an idle worker) RTT.
	Policy string
	// GainMargin is SplitGain's margin (default 0.1).
	GainMargin float64
	// ModelExec, when > 0, is a fitted model's predicted task time
	// (docs/papers.md §4, sched/plan): SplitGain's estimate takes it as Exec
	// instead of the master's smoothed measure (an experiment; see
	// masters_model_test.go).
	ModelExec time.Duration
	// Seed seeds the noise.
	Seed uint64
}

// MastersResult is the outcome of a run.
type MastersResult struct {
	Makespan time.Duration
	// Throughput is tasks per second over the run; Linear what Workers
	// workers would do with no overhead at all (Workers / Grain);
	// Fraction = Throughput / Linear.
	Throughput, Linear, Fraction float64
	// Steady is the fraction of linear over the middle half of the tasks
	// (from the 25th to the 75th percentile of completion times), the
	// rate once the masters are in place.
	Steady float64
	// MastersMax is the most masters at once; Timeline the number of
	// masters over time, one point per change.
	MastersMax int
	Timeline   []MastersPoint
	// Idle is every worker's total idle time (from sending a result to
	// receiving its next task, and waiting for its first), sorted, for
	// the workers that never became a master (the paper's Fig. 7);
	// MeanIdle its mean.
	Idle     []time.Duration
	MeanIdle time.Duration
	// Counters.
	Splits, Suppressed, Requests, Grants, Refusals, Returns int
	Messages                                                int
	Events                                                  int
}

// MastersPoint is one point of MastersResult.Timeline.
type MastersPoint struct {
	At      time.Duration
	Masters int
}

// Limits that keep one run bounded.
const (
	maxMastersWorkers = 1 << 16
	maxMastersTasks   = 1 << 24
)

func (c *MastersConfig) check() error {
	switch {
	case c.Workers < 1 || c.Workers > maxMastersWorkers:
		return fmt.Errorf("sim: masters: workers %d outside [1, %d]", c.Workers, maxMastersWorkers)
	case c.Tasks < 1 || c.Tasks*max(c.Batches, 1) > maxMastersTasks:
		return fmt.Errorf("sim: masters: %d tasks × %d batches outside [1, %d]", c.Tasks, max(c.Batches, 1), maxMastersTasks)
	case c.Grain <= 0 || c.Latency < 0 || c.MasterCost < 0:
		return errors.New("sim: masters: grain must be > 0, latency and master cost ≥ 0")
	case c.Noise < 0 || c.Noise > 3:
		return fmt.Errorf("sim: masters: noise %v outside [0, 3]", c.Noise)
	case c.Rule != SplitOff && c.Rule != SplitPaper && c.Rule != SplitGain:
		return fmt.Errorf("sim: masters: rule %q (off, paper, gain)", c.Rule)
	}
	if _, err := sched.New(c.Policy, sched.Config{}); err != nil {
		return fmt.Errorf("sim: masters: %w", err)
	}
	return nil
}

// The simulator's events and messages.
type mEvKind uint8

const (
	mevArrive mEvKind = iota + 1 // message m reaches its destination
	mevServed                    // master m.to finished handling the head of its inbox
	mevDone                      // worker proc finished its running task
)

type mMsgKind uint8

const (
	mmTask     mMsgKind = iota + 1 // master → worker: run task
	mmResult                       // worker → master: result of task
	mmStart                        // master → worker: become a child master
	mmRequest                      // master → master: task request
	mmGrant                        // master → master: tasks
	mmRefusal                      // master → master: no task
	mmReturn                       // child → parent: results, workers, itself
	mmCancel                       // master → worker: drop task
	mmReturned                     // worker → master: task given back unrun (a promoted worker's)
	mmAck                          // worker → master: a cancel that found no waiting task (it killed the running one, or came late)
)

type mMsg struct {
	kind    mMsgKind
	from    int32 // master id (worker → master: the worker's proc)
	to      int32 // master id, or worker proc
	task    int32
	batch   int32
	exec    time.Duration // mmResult: the task's time
	sent    time.Duration
	tasks   []int32 // mmStart, mmGrant; mmReturn: the results
	workers []int32 // mmStart, mmReturn: worker procs
	master  int32   // mmStart: the new master's id
	ver     uint32  // mevDone: the run it ends (a cancel kills a run)
}

type mEvent struct {
	at   time.Duration
	seq  uint64
	kind mEvKind
	proc int32
	m    *mMsg
}

type mHeap struct {
	h   []mEvent
	seq uint64
}

func (q *mHeap) less(i, j int) bool {
	if q.h[i].at != q.h[j].at {
		return q.h[i].at < q.h[j].at
	}
	return q.h[i].seq < q.h[j].seq
}

func (q *mHeap) push(e mEvent) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	for i := len(q.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *mHeap) pop() mEvent {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}

// wTask is a task waiting at (or running on) a worker.
type wTask struct {
	task, master, batch int32
}

// mProc is one processor.
type mProc struct {
	queue    []wTask // waiting tasks, FIFO
	qHead    int
	running  bool
	cur      wTask
	runVer   uint32
	idleFrom time.Duration // when it last ran dry
	idle     time.Duration
	busy     time.Duration
	master   int32 // the master it runs as, or -1
	promoted bool  // it was a master at some point
}

// sMaster is one master.
type sMaster struct {
	id, proc, parent int32
	batch            int32
	pol              sched.Policy
	test             sched.Overload
	inbox            []*mMsg
	inHead           int
	serving          bool
	owed             time.Duration // policy steps not yet charged (they delay the next message)
	freeAt           time.Duration // when its last policy steps end

	wid     map[int32]sched.WorkerID // worker proc → its policy id
	procOf  map[sched.WorkerID]int32
	order   []sched.WorkerID // joined, in order
	out     map[sched.WorkerID]int
	leaving map[sched.WorkerID]bool // moved away: forgotten once its last result is in
	rejoin  map[int32]bool          // procs that came back while leaving: join afresh when forgotten
	nextWID sched.WorkerID

	children []int32 // live children, in creation order
	inR      map[int32]bool
	rflag    bool
	reqTo    int32
	lentTo   map[int32]int32 // task → child
	lent     int
	results  []int32 // accepted here (or returned by children), not yet returned
	done     bool

	// For SplitGain: busy time, tasks decided, measured exec and round trip.
	busy    time.Duration
	handled int64 // messages
	decided int64
	// Smoothed as the real master smooths them (gain 1/8), in seconds.
	exec, rtt float64
	execN     int
	sentAt    map[instance]sentRec // instances out, for their measures
	prior     measures             // the parent's, until this master has its own
}

// instance is one task sent to one worker (a replica is another).
type instance struct{ proc, task int32 }

// sentRec is when an instance was sent, and whether its worker had
// nothing out then (so the instance did not wait: its round trip is a
// measure).
type sentRec struct {
	at   time.Duration
	idle bool
}

// measures are what SplitGain's estimate needs, as a master measured
// them (seconds; rate in tasks per second of busy time).
type measures struct{ rate, service, exec, rtt float64 }

// minMeasured is how many results a master must have handled before its
// own measures replace its parent's.
const minMeasured = 32

func (m *sMaster) measured() measures {
	if m.decided < minMeasured || m.execN < minMeasured || m.busy <= 0 {
		return m.prior
	}
	return measures{
		rate:    float64(m.decided) / m.busy.Seconds(),
		service: m.busy.Seconds() / float64(max(m.handled, 1)),
		exec:    m.exec,
		rtt:     m.rtt,
	}
}

type mastersSim struct {
	cfg     MastersConfig
	q       mHeap
	now     time.Duration
	procs   []mProc
	masters []*sMaster
	grains  []time.Duration
	batch   int32
	nBatch  int
	atRoot  int // results of the current batch at the root
	active  int // masters alive
	acts    []sched.Action
	res     MastersResult
	doneAt  []time.Duration // completion time of each task at whatever master decided it
}

// RunMasters simulates cfg.
func RunMasters(cfg MastersConfig) (MastersResult, error) {
	if cfg.Policy == "" {
		cfg.Policy = "wq"
	}
	if cfg.Rule == "" {
		cfg.Rule = SplitPaper
	}
	if cfg.GainMargin == 0 {
		cfg.GainMargin = 0.1
	}
	if err := cfg.check(); err != nil {
		return MastersResult{}, err
	}
	s := &mastersSim{cfg: cfg, nBatch: max(cfg.Batches, 1)}
	s.procs = make([]mProc, cfg.Workers+1)
	for i := range s.procs {
		s.procs[i].master = -1
	}
	for b := 0; b < s.nBatch; b++ {
		if err := s.startBatch(int32(b)); err != nil {
			return MastersResult{}, err
		}
		for s.atRoot < cfg.Tasks {
			if len(s.q.h) == 0 {
				return MastersResult{}, fmt.Errorf("sim: masters: stalled at %v with %d of %d results (a bug)", s.now, s.atRoot, cfg.Tasks)
			}
			s.step(s.q.pop())
		}
	}
	if n := len(s.doneAt); n != cfg.Tasks*s.nBatch {
		return MastersResult{}, fmt.Errorf("sim: masters: %d results accepted for %d tasks (a bug)", n, cfg.Tasks*s.nBatch)
	}
	return s.finish(), nil
}

// taskGrain is task t's time (noise is per task, from the seed).
func (s *mastersSim) taskGrain(b, t int32) time.Duration {
	if s.cfg.Noise == 0 {
		return s.cfg.Grain
	}
	r := rand.New(rand.NewPCG(s.cfg.Seed, uint64(b)<<32|uint64(uint32(t))))
	sig := s.cfg.Noise
	return time.Duration(float64(s.cfg.Grain) * math.Exp(sig*r.NormFloat64()-sig*sig/2))
}

func (s *mastersSim) newMaster(proc, parent int32) (*sMaster, error) {
	p, err := sched.New(s.cfg.Policy, sched.Config{})
	if err != nil {
		return nil, err
	}
	m := &sMaster{
		id: int32(len(s.masters)), proc: proc, parent: parent, batch: s.batch, pol: p,
		wid: map[int32]sched.WorkerID{}, procOf: map[sched.WorkerID]int32{}, out: map[sched.WorkerID]int{},
		leaving: map[sched.WorkerID]bool{}, rejoin: map[int32]bool{}, inR: map[int32]bool{}, lentTo: map[int32]int32{},
		sentAt: map[instance]sentRec{}, reqTo: -1,
	}
	s.masters = append(s.masters, m)
	s.procs[proc].master = m.id
	s.active++
	s.noteMasters()
	return m, nil
}

func (s *mastersSim) noteMasters() {
	s.res.MastersMax = max(s.res.MastersMax, s.active)
	if k := len(s.res.Timeline); k == 0 || s.res.Timeline[k-1].Masters != s.active {
		if k > 0 && s.res.Timeline[k-1].At == s.now {
			s.res.Timeline[k-1].Masters = s.active
		} else {
			s.res.Timeline = append(s.res.Timeline, MastersPoint{At: s.now, Masters: s.active})
		}
	}
}

func (s *mastersSim) startBatch(b int32) error {
	s.batch, s.atRoot = b, 0
	for i := range s.procs {
		s.procs[i].master = -1
	}
	// Masters of earlier batches stay (their ids are in events still
	// queued) but do nothing more.
	for _, m := range s.masters {
		m.done = true
	}
	s.active = 0
	root, err := s.newMaster(0, -1)
	if err != nil {
		return err
	}
	s.grains = s.grains[:0]
	for t := 0; t < s.cfg.Tasks; t++ {
		s.grains = append(s.grains, s.taskGrain(b, int32(t)))
	}
	if b == 0 {
		s.doneAt = make([]time.Duration, 0, s.cfg.Tasks*s.nBatch)
	}
	s.stepPolicy(root, sched.Event{Kind: sched.BatchStarted, N: s.cfg.Tasks})
	for w := 1; w <= s.cfg.Workers; w++ {
		s.join(root, int32(w))
	}
	return nil
}

// join makes worker proc a worker of m.
func (s *mastersSim) join(m *sMaster, proc int32) {
	m.nextWID++
	id := m.nextWID
	m.wid[proc], m.procOf[id] = id, proc
	m.order = append(m.order, id)
	s.stepPolicy(m, sched.Event{Kind: sched.WorkerJoined, Worker: id, Slots: 1})
}

// forget drops worker id from m's books (it left for another master).
func (s *mastersSim) forget(m *sMaster, id sched.WorkerID) {
	s.stepPolicy(m, sched.Event{Kind: sched.WorkerLeft, Worker: id})
	proc := m.procOf[id]
	delete(m.wid, proc)
	delete(m.procOf, id)
	delete(m.out, id)
	delete(m.leaving, id)
	m.order = slices.DeleteFunc(m.order, func(x sched.WorkerID) bool { return x == id })
	if m.rejoin[proc] {
		delete(m.rejoin, proc)
		s.join(m, proc)
	}
}

// stepPolicy applies ev to m's policy and carries out the actions;
// it returns the number of tasks sent.
func (s *mastersSim) stepPolicy(m *sMaster, ev sched.Event) (sent int, taken []int32) {
	ev.At = s.now
	s.acts = m.pol.Step(ev, s.acts[:0])
	var gone []sched.WorkerID
	switch c := s.cfg.PolicyCost; {
	case c > 0:
		m.owed += c
	case c == 0 && s.cfg.MasterCost > 0:
		m.owed += MeasuredPolicyCost(s.cfg.Policy, len(m.order))
	}
	for _, a := range s.acts {
		switch a.Kind {
		case sched.Send:
			proc := m.procOf[a.Worker]
			m.sentAt[instance{proc, int32(a.Task)}] = sentRec{at: s.now, idle: m.out[a.Worker] == 0}
			m.out[a.Worker]++
			s.send(&mMsg{kind: mmTask, from: m.id, to: proc, task: int32(a.Task), batch: s.batch})
			sent++
		case sched.Cancel:
			proc := m.procOf[a.Worker]
			if s.settle(m, a.Worker, proc, int32(a.Task)) {
				s.send(&mMsg{kind: mmCancel, from: m.id, to: proc, task: int32(a.Task), batch: s.batch})
				if m.leaving[a.Worker] && m.out[a.Worker] <= 0 {
					gone = append(gone, a.Worker)
				}
			}
		case sched.Accept:
			m.results = append(m.results, int32(a.Task))
			m.decided++
			s.doneAt = append(s.doneAt, s.now)
			if m.parent < 0 {
				s.atRoot++
			}
		case sched.Taken:
			taken = append(taken, int32(a.Task))
		}
	}
	// A moved worker whose last instance here was cancelled is done here.
	for _, id := range gone {
		if m.leaving[id] && m.out[id] <= 0 {
			s.forget(m, id)
		}
	}
	return sent, taken
}

// settle takes instance (proc, task) off worker id's books at m: it
// reports whether it was out (a cancelled one's late result is not).
func (s *mastersSim) settle(m *sMaster, id sched.WorkerID, proc, task int32) bool {
	k := instance{proc, task}
	if _, ok := m.sentAt[k]; !ok {
		return false
	}
	delete(m.sentAt, k)
	m.out[id]--
	return true
}

func (s *mastersSim) send(msg *mMsg) {
	msg.sent = s.now
	s.res.Messages++
	s.q.push(mEvent{at: s.now + s.cfg.Latency, kind: mevArrive, m: msg})
}

func (s *mastersSim) step(e mEvent) {
	s.res.Events++
	s.now = e.at
	switch e.kind {
	case mevArrive:
		s.arrive(e.m)
	case mevServed:
		s.served(s.masters[e.proc])
	case mevDone:
		s.taskDone(e.proc, e.m)
	}
}

// arrive delivers a message: to a worker's queue, or a master's inbox.
func (s *mastersSim) arrive(msg *mMsg) {
	switch msg.kind {
	case mmTask:
		p := &s.procs[msg.to]
		p.queue = append(p.queue, wTask{task: msg.task, master: msg.from, batch: msg.batch})
		s.startNext(msg.to)
	case mmCancel:
		p := &s.procs[msg.to]
		for i := p.qHead; i < len(p.queue); i++ {
			if q := p.queue[i]; q.task == msg.task && q.master == msg.from && q.batch == msg.batch {
				p.queue = slices.Delete(p.queue, i, i+1)
				return
			}
		}
		// Not waiting: running (the worker kills it) or done already;
		// either way it answers, as the real one does.
		if c := p.cur; p.running && c.task == msg.task && c.master == msg.from && c.batch == msg.batch {
			p.running = false
			p.runVer++
			p.idleFrom = s.now
			s.startNext(msg.to)
		}
		if msg.batch == s.batch {
			s.send(&mMsg{kind: mmAck, from: msg.to, to: msg.from, batch: msg.batch})
		}
	case mmStart:
		// The worker becomes a master: it handles the message as one.
		m := s.masters[msg.master]
		s.enqueue(m, msg)
	default:
		if msg.batch != s.batch {
			return // an earlier batch's
		}
		s.enqueue(s.masters[msg.to], msg)
	}
}

func (s *mastersSim) enqueue(m *sMaster, msg *mMsg) {
	m.inbox = append(m.inbox, msg)
	if !m.serving {
		m.serving = true
		s.q.push(mEvent{at: max(s.now, m.freeAt) + s.cfg.MasterCost, kind: mevServed, proc: m.id})
	}
}

// startNext starts the worker's next queued task if it is idle.
func (s *mastersSim) startNext(proc int32) {
	p := &s.procs[proc]
	if p.running || p.master >= 0 || p.qHead == len(p.queue) {
		return
	}
	t := p.queue[p.qHead]
	p.qHead++
	if p.qHead == len(p.queue) {
		p.queue, p.qHead = p.queue[:0], 0
	}
	p.running, p.cur = true, t
	p.runVer++
	if !p.promoted {
		p.idle += s.now - p.idleFrom
	}
	d := s.grains[t.task]
	if t.batch != s.batch {
		d = 0 // a leftover of an earlier batch: dropped at once
	}
	p.busy += d
	s.q.push(mEvent{at: s.now + d, kind: mevDone, proc: proc, m: &mMsg{exec: d, ver: p.runVer}})
}

func (s *mastersSim) taskDone(proc int32, info *mMsg) {
	p := &s.procs[proc]
	if !p.running || p.runVer != info.ver {
		return // killed by a cancel
	}
	t := p.cur
	p.running = false
	p.idleFrom = s.now
	if t.batch == s.batch {
		s.send(&mMsg{kind: mmResult, from: proc, to: t.master, task: t.task, batch: t.batch, exec: info.exec})
	}
	s.startNext(proc)
}

// served handles the head of m's inbox, then serves the next.
func (s *mastersSim) served(m *sMaster) {
	msg := m.inbox[m.inHead]
	m.inbox[m.inHead] = nil
	m.inHead++
	if m.inHead == len(m.inbox) {
		m.inbox, m.inHead = m.inbox[:0], 0
	}
	m.busy += s.cfg.MasterCost
	m.handled++
	if !m.done {
		s.handle(m, msg)
	}
	// The policy's steps since the last message delay the next one.
	owed := m.owed
	m.busy, m.freeAt, m.owed = m.busy+owed, s.now+owed, 0
	if m.inHead < len(m.inbox) {
		s.q.push(mEvent{at: s.now + owed + s.cfg.MasterCost, kind: mevServed, proc: m.id})
	} else {
		m.serving = false
	}
}

// waiting is the number of messages waiting for m (the overload test's
// count).
func (m *sMaster) waiting() int { return len(m.inbox) - m.inHead }

func (s *mastersSim) handle(m *sMaster, msg *mMsg) {
	sent := 0
	switch msg.kind {
	case mmResult:
		id, ok := m.wid[msg.from]
		ev := sched.Event{Kind: sched.ResultArrived, Worker: id, Task: sched.TaskID(msg.task), Exec: msg.exec}
		if ok {
			if rec, out := m.sentAt[instance{msg.from, msg.task}]; out {
				s.settle(m, id, msg.from, msg.task)
				smoothSec(&m.exec, msg.exec.Seconds())
				smoothSec(&m.rtt, max(s.now-rec.at-msg.exec, 0).Seconds())
				m.execN++
				if rec.idle {
					ev.RTT = max(s.now-rec.at-msg.exec, 0)
				}
			}
		}
		if ok && !m.leaving[id] && s.wantSplit(m, id) {
			s.split(m, id, ev)
			break
		}
		n, _ := s.stepPolicy(m, ev)
		sent += n
		if ok && m.leaving[id] && m.out[id] <= 0 {
			s.forget(m, id)
		}
	case mmStart:
		s.startChild(m, msg)
	case mmReturned:
		if id, ok := m.wid[msg.from]; ok {
			s.settle(m, id, msg.from, msg.task)
			n, _ := s.stepPolicy(m, sched.Event{Kind: sched.Returned, Worker: id, Task: sched.TaskID(msg.task)})
			sent += n
			if m.leaving[id] && m.out[id] <= 0 {
				s.forget(m, id)
			}
		}
	case mmAck:
		// Nothing to do: it costs the master its time.
	case mmRequest:
		s.onRequest(m, msg)
	case mmGrant:
		sent += s.onGrant(m, msg)
	case mmRefusal:
		s.onRefusal(m, msg)
	case mmReturn:
		sent += s.onReturn(m, msg)
	}
	if sent > 0 {
		// docs/papers.md §2: right after assigning, count what waits.
		m.test.SetWindow(s.window(m))
		m.test.Note(sent, m.waiting())
	}
	s.maybeRequest(m)
	s.maybeReturn(m)
}

func (s *mastersSim) window(m *sMaster) int {
	if s.cfg.Window > 0 {
		return s.cfg.Window
	}
	return sched.DefaultOverloadWindow(1 + len(m.order))
}

// running is W_r: m's workers with a task out, not leaving, in join order.
func (s *mastersSim) running(m *sMaster) []sched.WorkerID {
	var r []sched.WorkerID
	for _, id := range m.order {
		if m.out[id] > 0 && !m.leaving[id] {
			r = append(r, id)
		}
	}
	return r
}

// wantSplit is Fig. 3 line 14 for a result from p: Q not empty, the
// master overloaded, at least 4 running workers (p among them), and,
// under SplitGain, an expected gain.
func (s *mastersSim) wantSplit(m *sMaster, p sched.WorkerID) bool {
	if s.cfg.Rule == SplitOff {
		return false
	}
	q := sched.Queued(m.pol)
	m.test.SetWindow(s.window(m))
	if q < 2 || !m.test.Overloaded() {
		return false
	}
	run := s.running(m)
	// p has just returned its result; it counts as running (it is in W_r
	// until this message is handled).
	if !slices.Contains(run, p) {
		run = append(run, p)
	}
	if len(run) < 4 {
		s.res.Suppressed++
		m.test.Reset()
		return false
	}
	if s.cfg.Rule == SplitGain {
		k := len(run) - 1
		est := sched.SplitEstimate{
			Kept: k / 2, Given: k - k/2, Lost: 1, Queued: q, Margin: s.cfg.GainMargin,
		}
		est.Kept += len(m.order) - len(run) // idle workers stay
		ms := m.measured()
		est.MasterRate, est.Service, est.Exec, est.RTT = ms.rate, ms.service, ms.exec, ms.rtt
		if s.cfg.ModelExec > 0 {
			est.Exec = s.cfg.ModelExec.Seconds()
		}
		est.Waiting = m.test.Mean()
		if !sched.SplitWorthIt(est) {
			s.res.Suppressed++
			m.test.Reset()
			return false
		}
	}
	return true
}

// split is Fig. 3 lines 15–18: p becomes a child master.
func (s *mastersSim) split(m *sMaster, p sched.WorkerID, result sched.Event) {
	// p's result first, without a new task for it.
	s.stepPolicy(m, sched.Event{Kind: sched.WorkerDraining, Worker: p})
	s.stepPolicy(m, result)
	pproc := m.procOf[p]
	// The others (p may still hold a task, under rwq).
	run := slices.DeleteFunc(s.running(m), func(x sched.WorkerID) bool { return x == p })
	give := run[len(run)/2:]
	q := sched.Queued(m.pol)
	_, taken := s.stepPolicy(m, sched.Event{Kind: sched.TasksTaken, N: q / 2})
	child, _ := s.newMaster(pproc, m.id)
	child.prior = m.measured()
	s.procs[pproc].promoted = true
	var procs []int32
	for _, id := range give {
		procs = append(procs, m.procOf[id])
		m.leaving[id] = true
		s.stepPolicy(m, sched.Event{Kind: sched.WorkerDraining, Worker: id})
	}
	if m.out[p] <= 0 {
		s.forget(m, p)
	} else {
		m.leaving[p] = true
	}
	for _, t := range taken {
		m.lentTo[t] = child.id
	}
	m.lent += len(taken)
	m.children = append(m.children, child.id)
	m.inR[child.id] = true
	m.test.Reset()
	s.res.Splits++
	s.send(&mMsg{kind: mmStart, from: m.id, to: pproc, master: child.id, batch: s.batch, tasks: taken, workers: procs})
}

// startChild is Fig. 4 line 6–8 and Fig. 3 lines 1–3 for a child.
func (s *mastersSim) startChild(c *sMaster, msg *mMsg) {
	// Fig. 4: the worker leaves its remote queue (a held task, under rwq)
	// to the masters that sent it.
	p := &s.procs[c.proc]
	for _, t := range p.queue[p.qHead:] {
		if t.batch == s.batch {
			s.send(&mMsg{kind: mmReturned, from: c.proc, to: t.master, task: t.task, batch: t.batch})
		}
	}
	p.queue, p.qHead = p.queue[:0], 0
	c.inR[c.parent] = true
	s.stepPolicy(c, sched.Event{Kind: sched.BatchStarted, N: 0})
	ids := make([]sched.TaskID, len(msg.tasks))
	for i, t := range msg.tasks {
		ids[i] = sched.TaskID(t)
	}
	s.stepPolicy(c, sched.Event{Kind: sched.TasksAdded, IDs: ids})
	sent := 0
	for _, proc := range msg.workers {
		c.nextWID++
		id := c.nextWID
		c.wid[proc], c.procOf[id] = id, proc
		c.order = append(c.order, id)
		n, _ := s.stepPolicy(c, sched.Event{Kind: sched.WorkerJoined, Worker: id, Slots: 1})
		sent += n
	}
	if sent > 0 {
		c.test.SetWindow(s.window(c))
		c.test.Note(sent, c.waiting())
	}
}

// candidates is R: the parent first, then the children in order.
func (s *mastersSim) candidate(m *sMaster) int32 {
	if m.parent >= 0 && m.inR[m.parent] {
		return m.parent
	}
	for _, c := range m.children {
		if m.inR[c] {
			return c
		}
	}
	return -1
}

// maybeRequest is Fig. 3 lines 21–23: Q empty, ask a candidate.
func (s *mastersSim) maybeRequest(m *sMaster) {
	if m.rflag || m.done || sched.Queued(m.pol) != 0 {
		return
	}
	c := s.candidate(m)
	if c < 0 {
		return
	}
	m.rflag, m.reqTo = true, c
	s.res.Requests++
	s.send(&mMsg{kind: mmRequest, from: m.id, to: c, batch: s.batch})
}

// onRequest is Fig. 3 lines 35–39.
func (s *mastersSim) onRequest(m *sMaster, msg *mMsg) {
	q := sched.Queued(m.pol)
	if q == 0 || m.done {
		s.send(&mMsg{kind: mmRefusal, from: m.id, to: msg.from, batch: s.batch})
		return
	}
	_, taken := s.stepPolicy(m, sched.Event{Kind: sched.TasksTaken, N: max(q/2, 1)})
	if slices.Contains(m.children, msg.from) {
		for _, t := range taken {
			m.lentTo[t] = msg.from
		}
		m.lent += len(taken)
	}
	s.send(&mMsg{kind: mmGrant, from: m.id, to: msg.from, batch: s.batch, tasks: taken})
}

// onGrant is Fig. 3 lines 30–34.
func (s *mastersSim) onGrant(m *sMaster, msg *mMsg) int {
	s.res.Grants++
	if m.reqTo == msg.from {
		m.rflag, m.reqTo = false, -1
	}
	ids := make([]sched.TaskID, len(msg.tasks))
	for i, t := range msg.tasks {
		ids[i] = sched.TaskID(t)
		if c, ok := m.lentTo[t]; ok && c == msg.from {
			delete(m.lentTo, t)
			m.lent--
		}
	}
	n, _ := s.stepPolicy(m, sched.Event{Kind: sched.TasksAdded, IDs: ids})
	return n
}

// onRefusal is Fig. 3 lines 40–45.
func (s *mastersSim) onRefusal(m *sMaster, msg *mMsg) {
	s.res.Refusals++
	delete(m.inR, msg.from)
	if m.reqTo == msg.from {
		m.rflag, m.reqTo = false, -1
	}
}

// onReturn is Fig. 3 lines 24–29: a child's results and workers.
func (s *mastersSim) onReturn(m *sMaster, msg *mMsg) int {
	s.res.Returns++
	c := msg.from
	for _, t := range msg.tasks {
		if x, ok := m.lentTo[t]; ok && x == c {
			delete(m.lentTo, t)
			m.lent--
			m.results = append(m.results, t)
			if m.parent < 0 {
				s.atRoot++
			}
		}
	}
	m.children = slices.DeleteFunc(m.children, func(x int32) bool { return x == c })
	delete(m.inR, c)
	if m.reqTo == c {
		m.rflag, m.reqTo = false, -1
	}
	sent := 0
	for _, proc := range msg.workers {
		if _, ok := m.wid[proc]; ok {
			// Still finishing a task of ours since it moved: it joins
			// afresh once its last result is in.
			m.rejoin[proc] = true
			continue
		}
		m.nextWID++
		id := m.nextWID
		m.wid[proc], m.procOf[id] = id, proc
		m.order = append(m.order, id)
		n, _ := s.stepPolicy(m, sched.Event{Kind: sched.WorkerJoined, Worker: id, Slots: 1})
		sent += n
	}
	return sent
}

// maybeReturn is Fig. 3 lines 46–49 for a child: no running worker, no
// child, no request out, its share done: results, workers and itself go
// back to the parent.
func (s *mastersSim) maybeReturn(m *sMaster) {
	if m.parent < 0 || m.done || m.rflag || len(m.children) > 0 || m.lent > 0 || !m.pol.Done() {
		return
	}
	for _, id := range m.order {
		if m.out[id] > 0 {
			return
		}
	}
	m.done = true
	workers := make([]int32, 0, len(m.order)+1)
	for _, id := range m.order {
		workers = append(workers, m.procOf[id])
	}
	workers = append(workers, m.proc)
	p := &s.procs[m.proc]
	p.master = -1
	p.idleFrom = s.now
	s.active--
	s.noteMasters()
	s.send(&mMsg{kind: mmReturn, from: m.id, to: m.parent, batch: s.batch, tasks: m.results, workers: workers})
	m.results = nil
}

func (s *mastersSim) finish() MastersResult {
	r := s.res
	r.Makespan = s.now
	total := s.cfg.Tasks * s.nBatch
	if r.Makespan > 0 {
		r.Throughput = float64(total) / r.Makespan.Seconds()
	}
	r.Linear = float64(s.cfg.Workers) / s.cfg.Grain.Seconds()
	r.Fraction = r.Throughput / r.Linear
	slices.Sort(s.doneAt)
	if n := len(s.doneAt); n >= 4 {
		a, b := s.doneAt[n/4], s.doneAt[3*n/4]
		if b > a {
			r.Steady = float64(3*n/4-n/4) / (b - a).Seconds() / r.Linear
		}
	}
	for i := 1; i < len(s.procs); i++ {
		p := &s.procs[i]
		if p.promoted {
			continue
		}
		idle := p.idle
		if !p.running {
			idle += s.now - p.idleFrom
		}
		r.Idle = append(r.Idle, idle)
	}
	slices.Sort(r.Idle)
	var sum time.Duration
	for _, d := range r.Idle {
		sum += d
	}
	if len(r.Idle) > 0 {
		r.MeanIdle = sum / time.Duration(len(r.Idle))
	}
	return r
}

// smoothSec folds x into an exponentially weighted mean of gain 1/8, as
// the real master smooths its measurements.
func smoothSec(mean *float64, x float64) {
	if *mean == 0 {
		*mean = x
		return
	}
	*mean += (x - *mean) / 8
}
