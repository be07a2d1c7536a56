package sched

import (
	"slices"
	"time"
)

// LedgerConfig parameterises a Ledger. The zero value is usable: speeds and
// the round trip are then estimated from observations.
type LedgerConfig struct {
	// TaskWork is the time one task takes on the reference machine (the
	// paper's M1), used with SetSpeed for LB. Zero: LB is estimated from
	// observed execution times.
	TaskWork time.Duration
	// RoundTrip is one master–worker round trip (request out, result back,
	// excluding execution), used for the barrier bound. Zero: estimated from
	// observations.
	RoundTrip time.Duration
}

// Execution reports one instance of a task that ran on a worker: it started
// at Start and ended at End (in the ledger's timeline), either by finishing
// (Cancelled false) or by being stopped by a cancel (Cancelled true). An
// instance cancelled while still held never ran and is not reported.
type Execution struct {
	Worker    WorkerID
	Task      TaskID
	Start     time.Duration
	End       time.Duration
	Cancelled bool
}

// Counts are the scheduling events of a generation or a run.
type Counts struct {
	Originals      int           // Send actions of first instances
	Replicas       int           // Send actions with Replica set
	CancelsHeld    int           // Cancel actions with Held set
	CancelsRunning int           // Cancel actions without Held
	Aborted        int           // executions reported Cancelled (stopped while running)
	Wasted         time.Duration // execution time of Aborted instances
	Dropped        int           // held instances reported removed by a cancel before they ran
	Duplicates     int           // results stepped that produced no Accept
}

// Generation is the accounting of one batch.
type Generation struct {
	Index    int           // 0 for the first BatchStarted the ledger saw
	Tasks    int           // the batch's N
	Start    time.Duration // BatchStarted step
	End      time.Duration // step that accepted the last result
	Complete bool          // every result was accepted; else End is when the next batch started, Finish, or (still open) the latest time seen
	Total    time.Duration
	SyncWait time.Duration
	Comm     time.Duration // outside the sync wait only; see Ledger
	Busy     time.Duration // mean time a slot executed, over the workers present
	Compute  time.Duration // Total − SyncWait − Comm, never below zero
	LB       time.Duration // 0 when no speed is known or estimable
	Counts
}

// WorkerReport is the accounting of one worker over the run.
type WorkerReport struct {
	Worker     WorkerID
	Slots      int
	Speed      float64       // as given to SetSpeed; 0 when unknown
	Present    time.Duration // time in the run's interval while joined
	Busy       time.Duration // Σ execution time over its slots (slot-time)
	SyncWait   time.Duration // of Present, the time inside generations' sync wait
	SyncBusy   time.Duration // of Busy, the slot-time inside generations' sync wait
	Comm       time.Duration // (Present − SyncWait) − (Busy − SyncBusy)/Slots
	Accepted   int           // results accepted from it
	Executions int           // executions reported, finished or aborted
	MeanExec   time.Duration // mean time of its finished executions
	RoundTrip  time.Duration // smallest observed result arrival − send − execution; 0 when none
	Counts                   // sends and cancels to it; its Aborted, Wasted, Dropped (Duplicates stay 0)
}

// Report is the accounting of the run so far.
type Report struct {
	Total    time.Duration
	SyncWait time.Duration
	Comm     time.Duration // outside the sync wait only; see Ledger
	Busy     time.Duration // mean time a slot executed, over the workers present
	Compute  time.Duration // Total − SyncWait − Comm, never below zero
	// LB and BarrierBound are lower bounds on Total; see Ledger for how
	// they are obtained.
	LB           time.Duration
	BarrierBound time.Duration
	RoundTrip    time.Duration // as configured or estimated
	// EfficiencyLB is LB/Total and EfficiencyBarrier BarrierBound/Total
	// (0 when Total is 0).
	EfficiencyLB      float64
	EfficiencyBarrier float64
	// SpeedsEstimated says LB came from observed execution times rather
	// than from SetSpeed and TaskWork.
	SpeedsEstimated bool
	Counts
	Generations []Generation
	Workers     []WorkerReport // in order of first appearance
}

// Ledger is the paper's time accounting (papers.md §1 "Time accounting")
// computed from what a driver already has in hand: every policy step with its
// timestamp, and a report of each task execution. A simulator passes virtual
// times, a real master passes time.Since(runStart); neither keeps books of
// its own.
//
// Feeding it:
//
//	acts = p.Step(ev, acts[:0])
//	ledger.Step(now, ev, acts)   // every event the policy sees (joins and leaves too), in order
//	ledger.Ran(Execution{...})   // each execution that ended, before any later Step
//	ledger.Dropped(now, w, t)    // optional: a cancel removed a held instance
//	ledger.Finish(now)           // optional: the run ends
//	rep := ledger.Report()       // at any time
//
// A driver that knows the speeds calls SetSpeed and sets
// LedgerConfig.TaskWork; one that does not (a real master) leaves them and
// LB is estimated.
//
// Definitions (per generation g = one batch, from its BatchStarted step to
// the step that accepts its last result):
//
//   - Total: End − Start of the generation; for the run, from the first
//     BatchStarted to the last generation's end (or Finish, if later).
//   - SyncWait: from the moment Q is empty and a master-side sender slot
//     waits for work, until every result of the generation is back. The
//     ledger sees that moment as the first step that either sends a replica
//     (RR, R3Q: "from the first replica sent") or accepts a result from a live
//     worker while sending that worker nothing new (WQ, RWQ, cyclic: the
//     worker's slot in the master found Q empty; under cyclic, Q is empty
//     from the start, so sync wait begins with the first result).
//   - Comm: for each worker, the time it was present outside the sync wait
//     minus the time its slots spent executing there divided by its slots
//     (time not executing a task, per CPU); averaged over the workers
//     present outside the sync wait. For a generation that is the part of
//     its interval before its sync wait began; for the run, the run's
//     interval less every generation's sync wait (so time between
//     generations counts as comm).
//   - Compute: Total − SyncWait − Comm, the paper's definition; it is never
//     negative, since comm lies outside the sync wait.
//   - Busy: the mean, over the workers present, of the time its slots
//     spent executing divided by its slots (within the generation or the
//     run): how much of Total a CPU worked, wasted replicas included.
//   - LB: each worker gets a rate in tasks per second: slots × speed /
//     TaskWork when SetSpeed gave it a speed and LedgerConfig.TaskWork is
//     set (the paper's "work on the reference machine / Σ speed ratios");
//     otherwise, as for a real run where speeds are unknown, estimated from
//     its own finished executions, slots / meanExec (workers with none
//     count for nothing). A generation's LB is its accepted tasks / Σ rates
//     of the workers present at any time during it (so LB stays a lower
//     bound when workers come and go). The run's LB is the sum over
//     generations.
//   - BarrierBound: Σ over generations with results of (LB_g + RoundTrip),
//     the floor of any synchronous generational run. RoundTrip is
//     LedgerConfig.RoundTrip or, when zero, estimated: for each worker the
//     smallest observed (result arrival − send − execution time), averaged
//     over the workers that have one.
//   - Efficiency: LB / Total and BarrierBound / Total (fractions, 1 = 100 %).
//
// Why comm stops at the sync wait: the paper defines comm as the time a
// worker is not executing, and notes that for RR and R3Q sync wait and comm
// overlap "somewhat" (replicas are transferred during the sync wait), so for
// WQ and RWQ it means them not to overlap. A worker idle while the barrier
// is pending is idle because of the barrier, which sync wait already
// charges; counting it again as comm charged the barrier twice (compute
// went negative under cyclic, and a fast worker's wait at the barrier
// passed for a network cost). Comm is thus the CPU time lost to transfers
// and to waiting on the network while there was work to hand out. As in
// the paper, a CPU running an instance that is later cancelled is
// executing, not idle.
//
// Counts: Originals and Replicas count Send actions; CancelsHeld and
// CancelsRunning count Cancel actions by their Held flag (what the master
// believed when it cancelled); Aborted and Wasted come from executions
// reported Cancelled (instances stopped while running, and the compute they
// had used) and Dropped from Dropped reports (held instances removed), what
// really happened at the workers; Duplicates counts results that arrived
// with no Accept. A cancel that reaches a worker after its instance
// finished is neither Aborted nor Dropped (its result is a Duplicate).
//
// The driver must drop results of earlier batches before stepping the
// policy (task ids repeat in every batch); the ledger relies on the same.
// A Ledger is not safe for concurrent use.
type Ledger struct {
	cfg LedgerConfig

	idx     map[WorkerID]int32
	workers []ledgerWorker

	gens    []genRec
	open    bool // the last generation has not ended
	last    time.Duration
	finish  time.Duration
	started bool

	inst [][]instRec // live instances per task of the open batch, for the round trip
	run  Counts
}

type ledgerWorker struct {
	id       WorkerID
	slots    int
	speed    float64
	joined   bool
	joinAt   time.Duration
	leftAt   time.Duration // forever while present
	accepted int
	execs    int
	busy     time.Duration // slot-time executing within the run so far
	tail     time.Duration // slot-time executing after the last generation ended
	finished int
	finSum   time.Duration
	minRTT   time.Duration // -1: none observed
	counts   Counts
}

type genRec struct {
	tasks     int
	start     time.Duration
	end       time.Duration // valid once closed
	closed    bool
	complete  bool
	accepted  int
	syncStart time.Duration // -1: sync wait has not begun
	counts    Counts
	busy      []time.Duration // slot-time executing within it, per worker index
	syncBusy  []time.Duration // of busy, the part inside its sync wait
}

type instRec struct {
	wi                 int32
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
	wi := int32(len(l.workers))
	l.idx[w] = wi
	l.workers = append(l.workers, ledgerWorker{id: w, leftAt: forever, minRTT: -1})
	return wi
}

// SetSpeed records worker w's speed ratio per slot against the reference
// machine (time of a task on the reference / time on w). It may be called
// before or after w joins.
func (l *Ledger) SetSpeed(w WorkerID, ratio float64) {
	l.workers[l.worker(w)].speed = ratio
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
	case WorkerJoined:
		wi := l.worker(ev.Worker)
		if w := &l.workers[wi]; !w.joined {
			w.joined, w.joinAt, w.slots = true, at, min(max(ev.Slots, 1), MaxSlots)
		}
	case WorkerLeft:
		if wi, ok := l.idx[ev.Worker]; ok {
			if w := &l.workers[wi]; w.joined && w.leftAt == forever {
				w.leftAt = at
			}
		}
	}
	var g *genRec
	if l.open {
		g = &l.gens[len(l.gens)-1]
	}
	accepted := false
	for _, a := range acts {
		wi := l.worker(a.Worker)
		w := &l.workers[wi]
		switch a.Kind {
		case Send:
			if a.Replica {
				l.add(g, w, Counts{Replicas: 1})
				if g != nil && g.syncStart < 0 {
					g.syncStart = at // RR, R3Q: from the first replica sent
				}
			} else {
				l.add(g, w, Counts{Originals: 1})
			}
			if a.Task >= 0 && int(a.Task) < len(l.inst) {
				l.dropInst(a.Task, wi)
				l.inst[a.Task] = append(l.inst[a.Task], instRec{wi: wi, sent: at})
			}
		case Cancel:
			if a.Held {
				l.add(g, w, Counts{CancelsHeld: 1})
			} else {
				l.add(g, w, Counts{CancelsRunning: 1})
			}
			l.dropInst(a.Task, wi)
		case Accept:
			w.accepted++
			accepted = true
			if g != nil {
				g.accepted++
				if ev.Kind == ResultArrived && g.syncStart < 0 && w.joined && w.leftAt == forever && !sendsTo(acts, a.Worker) {
					// The worker's slot in the master found Q empty.
					g.syncStart = at
				}
			}
		}
	}
	if ev.Kind == ResultArrived {
		if !accepted {
			// A late copy belongs to the last batch, even once it has ended.
			l.add(l.genAt(at), nil, Counts{Duplicates: 1})
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

func sendsTo(acts []Action, w WorkerID) bool {
	for _, a := range acts {
		if a.Kind == Send && a.Worker == w {
			return true
		}
	}
	return false
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
	c.Replicas += d.Replicas
	c.CancelsHeld += d.CancelsHeld
	c.CancelsRunning += d.CancelsRunning
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

func (l *Ledger) closeGen(at time.Duration, complete bool) {
	if !l.open {
		return
	}
	g := &l.gens[len(l.gens)-1]
	g.end, g.closed, g.complete = at, true, complete
	l.open = false
}

// Ran records an execution. Executions may be reported in any order, also
// after their generation has ended, but only once they have ended: End must
// not be later than the time of any Step that follows the call.
func (l *Ledger) Ran(e Execution) {
	if e.End < e.Start {
		return
	}
	if l.open && e.End > l.last {
		// The run has reached e.End: an open generation lasts at least
		// until then, so its execution time fits in its interval.
		l.last = e.End
	}
	wi := l.worker(e.Worker)
	w := &l.workers[wi]
	w.execs++
	l.attribute(wi, e.Start, e.End)
	d := e.End - e.Start
	if e.Cancelled {
		g := l.genAt(e.End)
		l.add(g, w, Counts{Aborted: 1, Wasted: d})
		return
	}
	w.finished++
	w.finSum += d
	if r := l.findInst(e.Task, wi); r != nil && r.has&hasRan == 0 {
		r.ran, r.has = d, r.has|hasRan
		l.settle(e.Task, r)
	}
}

// attribute adds the execution [s, e) on worker wi to the busy time of
// the run and of each generation it overlaps. It relies on e not being
// later than the next step: a generation still open ends after e.
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
	for i = max(i-1, 0); i < len(l.gens) && l.gens[i].start < e; i++ {
		g := &l.gens[i]
		end := forever
		if g.closed {
			end = g.end
		}
		if d := overlap(s, e, g.start, end); d > 0 {
			if len(g.busy) <= int(wi) {
				g.busy = append(g.busy, make([]time.Duration, int(wi)+1-len(g.busy))...)
			}
			g.busy[wi] += d
			// A sync wait not begun yet begins at a later step, so after
			// e: nothing of this execution is inside it.
			if g.syncStart >= 0 {
				if sd := overlap(s, e, g.syncStart, end); sd > 0 {
					if len(g.syncBusy) <= int(wi) {
						g.syncBusy = append(g.syncBusy, make([]time.Duration, int(wi)+1-len(g.syncBusy))...)
					}
					g.syncBusy[wi] += sd
				}
			}
		}
	}
}

// Dropped records that a cancel removed task t from worker w's remote queue
// at at, before it ran: what really happened to a cancel, where CancelsHeld
// is what the master believed. Optional: a driver that cannot observe it
// leaves Counts.Dropped at zero.
func (l *Ledger) Dropped(at time.Duration, w WorkerID, t TaskID) {
	l.add(l.genAt(at), &l.workers[l.worker(w)], Counts{Dropped: 1})
}

// genAt returns the last generation started at or before t, or nil.
func (l *Ledger) genAt(t time.Duration) *genRec {
	i, _ := slices.BinarySearchFunc(l.gens, t, func(g genRec, t time.Duration) int {
		if g.start <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return nil
	}
	return &l.gens[i-1]
}

// Finish marks the end of the run at at (optional: without it the run ends
// when its last generation ends). A generation still open is closed, not
// Complete.
func (l *Ledger) Finish(at time.Duration) {
	if at > l.last {
		l.last = at
	}
	l.closeGen(at, false)
	if at > l.finish {
		l.finish = at
	}
	// The run now extends to at: what ran after the last generation counts.
	for i := range l.workers {
		l.workers[i].busy += l.workers[i].tail
		l.workers[i].tail = 0
	}
}

// Report computes the accounting of everything recorded so far. It does not
// change the ledger; it may be called at any time.
func (l *Ledger) Report() Report {
	var rep Report
	rep.Counts = l.run
	if !l.started {
		return rep
	}
	nw := len(l.workers)
	runStart := l.gens[0].start
	runEnd := l.finish
	ends := make([]time.Duration, len(l.gens))
	for i := range l.gens {
		g := &l.gens[i]
		ends[i] = g.end
		if !g.closed {
			ends[i] = l.last
		}
		runEnd = max(runEnd, ends[i])
	}

	// Rates (tasks per second) for LB: from speeds where known, else
	// observed.
	rates := make([]float64, nw)
	for i := range l.workers {
		w := &l.workers[i]
		switch {
		case !w.joined:
		case l.cfg.TaskWork > 0 && w.speed > 0:
			rates[i] = float64(w.slots) * w.speed / l.cfg.TaskWork.Seconds()
		case w.finished > 0 && w.finSum > 0:
			rates[i] = float64(w.slots) * float64(w.finished) / w.finSum.Seconds()
			rep.SpeedsEstimated = true
		}
	}

	// The round trip.
	rtt := l.cfg.RoundTrip
	if rtt == 0 {
		var sum time.Duration
		n := 0
		for i := range l.workers {
			if l.workers[i].minRTT >= 0 {
				sum += l.workers[i].minRTT
				n++
			}
		}
		if n > 0 {
			rtt = sum / time.Duration(n)
		}
	}
	rep.RoundTrip = rtt

	// Per worker, over the run: presence and slot-time inside the sync
	// waits, to take out of its comm.
	syncPresent := make([]time.Duration, nw)
	syncBusy := make([]time.Duration, nw)

	rep.Generations = make([]Generation, len(l.gens))
	for i := range l.gens {
		g := &l.gens[i]
		s, e := g.start, ends[i]
		out := Generation{
			Index: i, Tasks: g.tasks, Start: s, End: e, Complete: g.complete,
			Total: e - s, Counts: g.counts,
		}
		ss := e // start of the sync wait, e when it has not begun
		if g.syncStart >= 0 {
			ss = min(max(g.syncStart, s), e)
			out.SyncWait = e - ss
		}
		var comm, busySum time.Duration
		present, commPresent := 0, 0
		rate := 0.0
		for wi := range l.workers {
			w := &l.workers[wi]
			if !w.joined {
				continue
			}
			if overlap(w.joinAt, w.leftAt, s, e) <= 0 {
				continue
			}
			present++
			rate += rates[wi]
			var busy, sb time.Duration
			if wi < len(g.busy) {
				busy = g.busy[wi]
			}
			if wi < len(g.syncBusy) {
				sb = g.syncBusy[wi]
			}
			slots := time.Duration(w.slots)
			busySum += busy / slots
			syncPresent[wi] += overlap(w.joinAt, w.leftAt, ss, e)
			syncBusy[wi] += sb
			if p := overlap(w.joinAt, w.leftAt, s, ss); p > 0 {
				commPresent++
				comm += max(p-(busy-sb)/slots, 0)
			}
		}
		if commPresent > 0 {
			out.Comm = comm / time.Duration(commPresent)
		}
		if present > 0 {
			out.Busy = busySum / time.Duration(present)
		}
		out.Compute = out.Total - out.SyncWait - out.Comm
		if rate > 0 && g.accepted > 0 {
			out.LB = time.Duration(float64(g.accepted) / rate * float64(time.Second))
			rep.LB += out.LB
			rep.BarrierBound += out.LB + rtt
		}
		rep.SyncWait += out.SyncWait
		rep.Generations[i] = out
	}

	rep.Total = runEnd - runStart
	rep.Workers = make([]WorkerReport, 0, nw)
	var comm, busySum time.Duration
	present, commPresent := 0, 0
	for wi := range l.workers {
		w := &l.workers[wi]
		wr := WorkerReport{
			Worker: w.id, Slots: w.slots, Speed: w.speed, Busy: w.busy,
			Accepted: w.accepted, Executions: w.execs, Counts: w.counts,
			SyncWait: syncPresent[wi], SyncBusy: syncBusy[wi],
		}
		if w.minRTT >= 0 {
			wr.RoundTrip = w.minRTT
		}
		if w.finished > 0 {
			wr.MeanExec = w.finSum / time.Duration(w.finished)
		}
		if w.joined {
			slots := time.Duration(w.slots)
			wr.Present = overlap(w.joinAt, w.leftAt, runStart, runEnd)
			wr.Comm = max(wr.Present-wr.SyncWait-(wr.Busy-wr.SyncBusy)/slots, 0)
			if wr.Present > 0 {
				present++
				busySum += wr.Busy / slots
			}
			if wr.Present > wr.SyncWait {
				commPresent++
				comm += wr.Comm
			}
		}
		rep.Workers = append(rep.Workers, wr)
	}
	if commPresent > 0 {
		rep.Comm = comm / time.Duration(commPresent)
	}
	if present > 0 {
		rep.Busy = busySum / time.Duration(present)
	}
	rep.Compute = rep.Total - rep.SyncWait - rep.Comm
	if rep.Total > 0 {
		rep.EfficiencyLB = float64(rep.LB) / float64(rep.Total)
		rep.EfficiencyBarrier = float64(rep.BarrierBound) / float64(rep.Total)
	}
	return rep
}

// overlap is the length of [a0, a1) ∩ [b0, b1).
func overlap(a0, a1, b0, b1 time.Duration) time.Duration {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi <= lo {
		return 0
	}
	return hi - lo
}
