package sched

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// eft: earliest expected finish. The paper's policies decide where a task
// goes by who asks first, and how deep a remote queue is by a constant;
// eft decides both from what the master measures of each worker (Exec and
// RTT, as the adaptive depth uses them, and Event.At, when the driver
// says when an event happens), so that no task is held on a worker that
// would finish it after another could, and near the barrier the tail goes
// to the workers that finish first.
//
// The model. Worker k has c slots, a smoothed execution time e and round
// trip r (means of its measurements, gain 1/8; two measurements in a row
// far from the mean replace it, so a change of pace shows within two
// tasks, while a lone one counts as twice or half, so a stall does not;
// a worker not measured yet counts as the mean of those that are). Far
// is beyond twice or under half the mean, and beyond what the spread of
// the worker's measurements explains (3 spreads of their log): with task
// times that spread widely, as on a loaded machine, two long ones in a
// row are no news, and a change of pace shows in the mean.
//
// Noise. Each mean has a standard error, √(v/15) for measurements of
// spread v (their variance about the mean as they count, gain 1/8): a
// worker's e or r within 3 standard errors of the lowest of the grid
// counts as the lowest (withinNoise). Machines alike are thus not told
// apart by their measurements' noise, which with tasks far shorter than
// a round trip would decide where whole runs of tasks go (a place on a
// worker is r + a few e: two noisy round trips differ by many tasks),
// and places alike go round the workers as wq's do; a machine faster
// beyond noise still counts as faster. Nor are workers shut out for good
// by figures measured in a bad moment: a worker that a batch sent
// nothing, though it took work, is sent one task at the next batch's
// start whatever the plan says (a probe), and is measured again.
//
// A message takes r/2 each way; the master hands its
// sends over one at a time, m apart, m the driver's cost per message,
// learnt from the round trips of sends to idle slots (which grow with
// their place in the master's queue of sends; r is kept without that
// wait): a send leaves after this step's earlier sends and what earlier
// steps left queued. A step's sends of originals leave longest chain
// first (eft_order.go). Of its outstanding instances, in send order, the
// first c run and the rest are held. The model knows when each running
// instance started: an instance sent while a slot was idle starts r/2
// after it left; a held one starts when a slot frees, r/2 before the
// result that freed it arrives, or when it arrives, if later. A running
// instance ends e after it started; once that is past and its result
// late, it is expected e/10 from now while the lateness is within what
// the spread of task times explains (3 spreads, at least a fifth of e,
// plus r/2), and as much later again as it is late beyond that (runEnd);
// Tick moves the model's now on when nothing else happens. A running
// instance cancelled
// after it ran longer than that is a censored measurement: its worker's
// e becomes at least what it ran (a worker whose every instance loses a
// race is measured that way, or never), until a real measurement comes
// (which goes on from the real mean before).
// Until some worker is measured, lateness means nothing. Each held
// instance, and then each new one, takes the slot that frees first (a
// new one not before it arrives), and is back r/2 after it ends. That
// is the expected finish, EF, of an instance or of a worker's next
// place. Without Event.At the model's "now" stays 0 and every running
// instance counts as just started.
//
// Depth. A worker is due while a further instance would start before a
// refill could reach it: the next chance to send it one is when its first
// running instance ends (its result comes up, the refill goes down, a
// round trip r), so it is due while the model's start of a further
// instance is earlier than that end plus r, or while it holds fewer than
// Config.Depth × c (default 1 × c: one running task per slot; the
// paper's 2 × c binds a whole batch of two tasks per slot at its start,
// and with noisy task times the barrier then waits for the slowest slot's
// sum, where a task kept back goes to whichever slot frees first); it
// never holds more than AdaptiveMax × c (its capacity) once measured,
// Depth × c before. That is the adaptive depth's 1 + ⌈r/e⌉
// per slot when its slots run in step (as at a batch's start) and about
// c + ⌈c·r/e⌉ when they end at spread-out times: one round trip of work
// per worker, not per slot.
//
// Where a task goes. The tasks in Q are planned by earliest expected
// finish, plus one spread of the place's own run time (a slow worker's
// last task risks the barrier more than a fast one's), over every worker
// that takes work: the plan's horizon H is the
// earliest time by which the workers' next places, in order of their EF,
// can take every task in Q. Due workers are served in order of their next
// place's EF, and one takes the head of Q only if that EF is at most H
// (give or take a hundredth, and the wait the step's later sends add, so
// that machines alike are not told apart by a rounding or by their place
// in the burst; a task that waits pays a whole round trip later). A
// slow worker with room is thus passed over when faster ones can finish
// all of Q before it could finish one more task; the task stays in Q until
// a faster worker is due, at most a round trip before that worker would
// run dry. No task leaves Q for a worker that would finish it after a
// faster worker could, and as Q shrinks H does: the last tasks go to the
// workers that finish them first.
//
// Replication that targets. Once Q is empty, each due worker in order of
// its next place's EF (those that finish first first) is sent a replica
// of the task whose earliest live instance is expected back last, if its
// own next place is expected back earlier than that instance (both
// judged should the task run two spreads long: a task is as long on
// every worker, so a faster one gains the more, the longer it is), the task
// has fewer than Config.Copies live instances, and the worker does not
// hold it (it then takes the next such task). Nor is a replica sent of
// an instance that ends before the master could have taken a result of
// every task not done and a cancel of every replica live, one at a time
// after its queued sends (its drain), each at the master's pace (its
// time per message over the last batch's drain, its own steps included;
// from m to 2m): where the master is the bottleneck, such
// a replica gains nothing and its messages delay the rest. The instance
// is judged by when it ends, not by when its result is expected back:
// a worker's measured round trip then holds the wait of its results in
// the master's queue, which the drain counts already. A worker that cannot beat the latest instance cannot beat any
// other, and a slower one neither: the round stops. The rest is the
// engine the paper's policies share: the first result wins and cancels
// the other instances (held ones as held), and Overdue, Failed, Returned,
// WorkerDraining and WorkerLeft behave as New describes.
//
// Cost. A send is O(log W + c) for the worker it goes to, a step's
// replicas O(log W) per worker freed or served. The horizon is needed only
// for a worker beyond a cheap lower bound of it ((|Q| − slots) / Σ rates),
// and recomputed (a bisection over the workers, O(slots) a pass, about a
// dozen passes) when Q or the grid has changed by a third since, or after
// W/4 steps (every step for a small grid). Once per batch, when Q
// empties, O(instances × log) builds the replication candidates, and
// O(W) at its start marks the workers due a probe; a Tick
// costs O(W), and the candidates are built again only when some instance
// is late beyond the band.
type eftState struct {
	copies int
	ew     []eftWorker // per worker place
	now    time.Duration

	// The driver's cost per message, m: a send at place k of the
	// master's queue of sends leaves k·m after the queue's head (a master
	// hands messages over one at a time). Learnt from the round trips of
	// sends to idle slots, which grow with their place: a least-squares
	// slope through the origin of (RTT − the worker's base) on the place,
	// over exponentially weighted sums. Each worker's RTT mean is kept
	// without it (its base, r).
	stepSends int       // sends so far in this step
	probing   []int32   // scratch for eftBegin: the workers due a probe
	sumKK     float64   // Σ k² (weighted)
	sumKR     float64   // Σ k·(RTT − base)
	msgCost   float64   // m, ns
	sent      []eftSent // per task: its latest send

	// busy is when the master will have handed over every send so far,
	// in the model: a burst longer than the time to the next step still
	// holds that step's sends back. stepBase is that wait at the step's
	// start (busy − now, at least 0). m is capped by what the batch so
	// far allows (capCost), from when it started and the results taken
	// since.
	busy     time.Duration
	stepBase float64
	batched  bool // a batch has started
	batchAt  time.Duration
	results  int

	// The master's pace: its time per message, its own steps included,
	// which the slope m does not see (it learns the messages' cost
	// only). Measured over a batch's drain, from the first result taken
	// once Q was empty and its sends handed over (drainAt) to the last
	// (drainEnd): where the master is the bottleneck it is busy
	// throughout, and that time over the messages it took and sent
	// meanwhile (drainMsgs) is its pace. paceLast is the last batch's;
	// the drain counts it (drainCost).
	paceLast  float64
	drainAt   time.Duration // 0: not started in this batch
	drainEnd  time.Duration
	drainMsgs int
	cancelled int // cancels the current step sends

	// The current step's event's worker (evSet: looked up, for a
	// result or a measurement): its place, and whether it is known.
	evWi  int32
	evOK  bool
	evSet bool

	// cv2 is the squared relative spread of execution times about their
	// worker's mean (exponentially weighted; measurements beyond twice
	// or under half the mean, a change of pace, left out): the spread of
	// task times that the late band, the plan's tail and replication
	// allow for.
	cv2 float64
	cv  float64 // √cv2, kept with it

	// The horizon of the plan of Q, as last computed.
	h       float64
	hValid  bool
	hQ      int // qLive then
	hSteps  int // steps since
	hLive   int // live workers then
	version int // bumped when a worker's figures jump (a new worker, a change of pace)
	hVer    int
	lastQ   int // qLive at the end of the last step

	// Defaults for workers not measured yet: the means of those measured;
	// rate is Σ slots/e over the workers that take work (tasks per ns) and
	// slots Σ slots: by h they can take at most h·rate + slots further
	// instances, so (q − slots)/rate is a lower bound of the horizon of q
	// tasks. Recomputed with the horizon.
	eDef, rDef, rate, slots float64
	// eMin and rMin are the lowest means of the workers measured for real
	// (0: none), recomputed with the defaults: a worker's means within
	// noise of them count as them (withinNoise).
	eMin, rMin float64
	// known: some worker is measured, so eDef is not a mere placeholder
	// (lateness and censored runs mean nothing against a placeholder).
	known bool

	// Replication candidates: a max-heap of tasks by the expected finish
	// of their earliest live instance, built when Q empties.
	cand      []eftCand
	candBuilt bool

	due []int32 // scratch: a min-heap of due workers by expected finish
	key []float64
	// Workers the plan passed over, a min-heap by the absolute expected
	// finish their next place had then, which it can only have grown
	// since (an idle worker's next place is later the later it is sent);
	// the best are looked at again whenever Q is handed out.
	passed    []int32
	passedKey []float64
	// Once Q is empty, the due workers that may take replicas: a min-heap
	// by the absolute expected finish of their next place when keyed
	// (re-keyed when it has grown), kept from step to step.
	recv    []int32
	recvKey []float64
	skip    []eftCand // scratch: candidates a receiver holds already
	free    []float64 // scratch: slot free times
	free2   []float64 // scratch: a copy of free (eftDuePlan)

	places    []eftPlaces // per worker place: the horizon's figures of it
	open      []int32     // scratch of horizon: the open workers
	unsettled []int32     // scratch of horizon: workers whose places vary between lo and hi

	// gen changes with every step (from 1 on) and send, and whenever the
	// model's figures may: a key figured at the current gen is what
	// figuring it again would give, and the due and replicas' heaps skip
	// doing so.
	gen uint64

	repTasks []TaskID // tasks of the batch sent a replica, some of them no longer replicated (eftReplicasLive)

	orderKeys  []eftSendKey // scratch of eftOrder
	orderLeft  []int32      // scratch of eftOrder: per worker place, sends left in the run
	orderActs  []Action     // scratch of eftOrder: the run's sends before the sort
	orderRadix []eftRadix   // scratch of sortChains
	orderTmp   []eftSendKey // scratch of sortChains
}

type eftWorker struct {
	id       WorkerID // the worker these figures are of
	inDue    bool     // in the scratch heap
	inPassed bool     // in the passed heap
	inRecv   bool     // in the receivers' heap
	recvGen  uint64   // eftState.gen when its key in the receivers' heap was figured
	planGen  uint64   // eftState.gen when planDue and planEF were figured (eftDuePlan)
	planDue  bool
	planHas  bool // planEF was figured
	planEF   float64
	censored bool    // its exec is a censored measurement, not yet a real one
	real     float64 // while censored: the mean of its real measurements (0: none)
	starting bool    // joined Starting, and nothing came from it since (Event.Starting)
	sent     int     // instances sent to it in this batch
	probe    bool    // due a probe (eftBegin) until it is sent something
	unsent   int     // batches in a row that sent it nothing (eftBegin)
	ef, rf   eftFigure
	// run holds the start times of its running instances, ascending.
	run []time.Duration
}

// eftFigure is what the model keeps of a worker's execution times (or of
// its round trips) besides their mean, to tell news from noise.
type eftFigure struct {
	slow, fast int     // consecutive measurements far above the mean (a change of pace), far below it
	v          float64 // their spread about the mean, as they count (within twice and half of it): ns², exponentially weighted (MeasureGain)
	noise      float64 // noiseZ standard errors of the mean, kept with v (withinNoise)
	lv         float64 // the mean square of the log of a measurement over the mean (within far²), alike
}

// fold folds measurement v (ns, > 0) into mean m (0: none yet) and
// reports whether it was a change of pace. Two in a row far from the mean
// (far) replace it; a lone one counts as twice or half the mean (one task
// that waited for a plugin's process to start, or a stall, must not make
// its worker look slow for the next dozen); the rest move it by
// MeasureGain.
func (f *eftFigure) fold(m *float64, v float64) bool {
	if *m <= 0 {
		*m = v
		return false
	}
	far := f.far()
	// The spread takes a lone outlier in, as the mean does, as if it
	// were no more than far² from the mean: one stall does not hide the
	// next from the rule.
	lf := ln2
	if far != 2 {
		lf = math.Log(far)
	}
	l := min(math.Abs(math.Log(v / *m)), 2*lf)
	f.lv += (l*l - f.lv) * MeasureGain
	switch {
	case v > far**m:
		f.slow, f.fast = f.slow+1, 0
	case v < *m/far:
		f.slow, f.fast = 0, f.fast+1
	default:
		f.slow, f.fast = 0, 0
	}
	if f.slow >= 2 || f.fast >= 2 {
		// A change of pace: the spread, relative to the mean, stays.
		f.v *= (v / *m) * (v / *m)
		f.noise = noiseZ * noiseSE(f.v)
		*m, f.slow, f.fast = v, 0, 0
		return true
	}
	d := min(max(v, *m/2), 2**m) - *m
	f.v += (d*d - f.v) * MeasureGain
	f.noise = noiseZ * noiseSE(f.v)
	*m += d * MeasureGain
	return false
}

// far is how many times its mean, or under, a measurement must be to be
// far from it: twice, or paceZ spreads of the log of the measurements if
// that is more (with a figure that spreads that far, a change of pace
// shows in the mean).
func (f *eftFigure) far() float64 {
	z := paceZ * math.Sqrt(f.lv)
	if z < farExact {
		return 2 // e^z < 2: spare the Exp (the common case)
	}
	return max(2, math.Exp(z))
}

// farExact is an exponent safely below ln 2, under which e^z < 2 whatever
// Exp's rounding, so far is 2 without computing it; ln2 is math.Log(2),
// computed as fold would.
const farExact = 0.69

var ln2 = math.Log(2)

// eftSent is what the model notes of a task's latest send.
type eftSent struct {
	arrive time.Duration // when it reaches its worker: a held instance starts no earlier
	to     int32         // the worker's place + 1 (0: not sent)
	place  int32         // its place in the master's queue of sends (for m)
	idle   bool          // it went to an idle slot: its round trip measures m
}

type eftCand struct {
	key  float64
	task TaskID
	gen  uint64 // eftState.gen when key was figured
}

// DefaultCopies is Config.Copies when 0: an original and one replica.
const DefaultCopies = 2

// MaxCopies is the largest Config.Copies New accepts.
const MaxCopies = 64

// Measures says whether a policy of this name and configuration uses the
// measurements that ResultArrived and Measured events carry (RTT, Exec),
// so a driver knows to send them: eft always, rwq and r3q with
// Config.Adaptive.
func Measures(name string, cfg Config) bool {
	return name == "eft" || cfg.Adaptive && (name == "rwq" || name == "r3q")
}

// setEFT makes p the eft policy.
func (p *policy) setEFT(cfg Config) error {
	if cfg.Copies < 0 || cfg.Copies > MaxCopies {
		return fmt.Errorf("sched: policy eft: copies %d out of range 0..%d", cfg.Copies, MaxCopies)
	}
	p.setDepth(1)
	p.maxDepth = cfg.AdaptiveMax
	if p.maxDepth == 0 {
		p.maxDepth = DefaultAdaptiveMax
	}
	p.maxDepth = max(p.maxDepth, p.depth)
	e := &eftState{copies: cfg.Copies}
	if e.copies == 0 {
		e.copies = DefaultCopies
	}
	p.eft = e
	return nil
}

// eftW returns the eft figures of worker place wi, fresh if the place
// now holds another worker.
func (p *policy) eftW(wi int32) *eftWorker {
	// grow keeps a place for every worker (join).
	if x := &p.eft.ew[wi]; x.id == p.workers[wi].id {
		return x
	}
	return p.eftFresh(wi)
}

// grow gives every worker place its eft figures' place, that of a
// worker not seen yet (made fresh when eftW first looks at it).
func (e *eftState) grow(n int) {
	for len(e.ew) < n {
		e.ew = append(e.ew, eftWorker{id: -1})
	}
}

// eftFresh makes the figures of worker place wi fresh: the place holds
// another worker now.
func (p *policy) eftFresh(wi int32) *eftWorker {
	e := p.eft
	x := &e.ew[wi]
	x.id, x.inDue, x.inPassed, x.inRecv, x.censored, x.starting, x.run = p.workers[wi].id, false, false, false, false, false, x.run[:0]
	x.ef, x.rf, x.real, x.sent, x.probe, x.unsent = eftFigure{}, eftFigure{}, 0, 0, false, 0
	x.recvGen, x.planGen = 0, 0 // the last worker's keys are not its (gen 0 is never current)
	e.version++
	return x
}

// eftBegin starts a step (begin); at a batch's start, a worker that the
// last probeAfter batches sent nothing, though it took work, is due a
// probe: one task whatever the plan says (eftFromQ), so that figures
// measured in a bad moment (a plugin's process starting, a stall of the
// machine, copies that all lost their races), or none at all (a worker
// that joined once the batch was handed out), are measured again and do
// not shut it out for good. Not after one batch, and at most
// max(probeMin, workers/probeShare) in a batch, those sent nothing
// longest first: where the master is the bottleneck the plan leaves many
// workers out by turns, and each probe adds messages (its copy is often
// replicated). Of s workers due a probe, each runs a task within
// probeAfter + ⌈s / that cap⌉ batches.
func (p *policy) eftBegin(ev Event) {
	e := p.eft
	e.notePace(ev, p.qLive == 0)
	e.cancelled, e.evSet = 0, false
	if ev.Kind == ResultArrived || ev.Kind == Measured {
		// The event's worker, looked up once for the step.
		e.evWi, e.evOK = p.idx[ev.Worker]
		e.evSet = true
	}
	if ev.Kind == ResultArrived {
		e.cancelled = p.cancels(ev.Task, e.evWi, e.evOK)
	}
	e.begin(ev)
	if ev.Kind != BatchStarted {
		return
	}
	first := !e.batched
	e.batched = true
	e.probing = e.probing[:0]
	e.repTasks = e.repTasks[:0]
	for i := range e.ew {
		x := &e.ew[i]
		if i >= len(p.workers) || x.id != p.workers[i].id {
			continue
		}
		if x.sent > 0 {
			x.unsent = 0
		} else {
			x.unsent++
		}
		x.probe = !first && x.unsent >= probeAfter && p.workers[i].open()
		x.sent = 0
		if x.probe {
			e.probing = append(e.probing, int32(i))
		}
	}
	if n := max(probeMin, len(p.workers)/probeShare); len(e.probing) > n {
		slices.SortStableFunc(e.probing, func(a, b int32) int { return e.ew[b].unsent - e.ew[a].unsent })
		for _, wi := range e.probing[n:] {
			e.ew[wi].probe = false
		}
	}
}

// begin starts a step: the model's now, and a fresh burst of sends.
func (e *eftState) begin(ev Event) {
	e.now = max(e.now, ev.At)
	switch ev.Kind {
	case BatchStarted:
		e.busy = e.now // the last batch ended with its last result: nothing queued
		e.batchAt, e.results = e.now, 0
	case ResultArrived:
		e.results++
		e.capCost()
	}
	e.stepSends = 0
	e.gen++
	e.stepBase = max(float64(e.busy-e.now), 0)
}

// notePace counts the master's drain (see pace) at the start of the step
// of ev: the messages of the last step, and this result. qEmpty says Q
// is empty.
func (e *eftState) notePace(ev Event, qEmpty bool) {
	at := max(e.now, ev.At)
	switch {
	case ev.Kind == BatchStarted:
		if e.drainAt > 0 && e.drainEnd > e.drainAt {
			e.paceLast = float64(e.drainEnd-e.drainAt) / float64(e.drainMsgs)
		}
		e.drainAt = 0
	case e.drainAt > 0:
		e.drainMsgs += e.stepSends + e.cancelled // the last step's
		if ev.Kind == ResultArrived {
			e.drainMsgs++
			e.drainEnd = at
		}
	case ev.Kind == ResultArrived && qEmpty && e.batched && at >= e.busy:
		e.drainAt, e.drainEnd, e.drainMsgs = at, at, 0
	}
}

// cancels is how many cancels a result of task ti from worker place wi
// (ok: the worker is known) makes the master send: its live instances
// elsewhere, unless it is done.
func (p *policy) cancels(ti TaskID, wi int32, ok bool) int {
	if ti < 0 || int(ti) >= p.n || p.tasks[ti].done {
		return 0
	}
	n := 0
	for _, vi := range p.tasks[ti].on {
		if !ok || vi != wi {
			n++
		}
	}
	return n
}

// drainCost is the master's time per message for its drain: its pace
// (see pace), at least m (its receive), and at most 2m: its own step
// costs it less than a message, and a drain that took longer held time
// it waited for results, as where it is not the bottleneck.
func (e *eftState) drainCost() float64 {
	return min(max(e.paceLast, e.msgCost), 2*e.msgCost)
}

// capCost keeps m below what the batch so far allows: each result the
// master has taken cost it a send and a receive, m each, one at a time,
// since the batch started. Round trips grow with a send's place also when
// results arrive faster than the master takes them (its queue of results
// grows through a burst), which the slope would count as m.
func (e *eftState) capCost() {
	if e.results == 0 || e.now <= e.batchAt {
		return
	}
	if c := float64(e.now-e.batchAt) / float64(2*e.results); e.msgCost > c {
		e.msgCost = c
		e.sumKR = c * e.sumKK
	}
}

// eftMeasure notes a result's slot (see the model) and folds ev's
// measurements into its worker's means and depth; it reports whether the
// depth changed.
func (p *policy) eftMeasure(ev Event) bool {
	wi, ok := p.eft.evWi, p.eft.evOK // eftBegin's lookup
	if !p.eft.evSet {
		wi, ok = p.idx[ev.Worker]
	}
	if !ok || !p.workers[wi].alive {
		return false
	}
	w := &p.workers[wi]
	x := p.eftW(wi)
	x.starting = false // it serves
	if ev.Kind == ResultArrived && ev.Task >= 0 && int(ev.Task) < p.n {
		if !p.eftSynced(wi) {
			p.eftSync(wi)
		}
		if k := p.posOf(wi, ev.Task); k >= 0 && k < w.slots && len(x.run) > 0 {
			// The instance that ran longest is the one that ended; the
			// first held one took its slot when its result left.
			x.run = slices.Delete(x.run, 0, 1)
			if w.count() > w.slots {
				// Or when it arrived, if that was later (sent late in
				// its step's burst).
				_, r, _ := p.model(wi)
				x.insertRun(p.eft.now + time.Duration(max(-r/2, p.heldArrival(wi, w.slots))))
			}
		}
	}
	if ev.RTT <= 0 && ev.Exec <= 0 {
		return false
	}
	if rtt := ev.RTT; rtt > 0 {
		// Take out the wait behind the other sends of its step.
		e := p.eft
		if ev.Kind == ResultArrived && int(ev.Task) < len(e.sent) && e.sent[ev.Task].idle {
			k := float64(e.sent[ev.Task].place)
			if w.rtt > 0 && k > 0 {
				const gain = 1.0 / 64
				e.sumKK += (k*k - e.sumKK) * gain
				e.sumKR += (k*(float64(rtt)-w.rtt) - e.sumKR) * gain
				e.msgCost = max(e.sumKR/e.sumKK, 0)
				e.capCost()
			}
			rtt = max(rtt-time.Duration(k*e.msgCost), 1)
		}
		if x.rf.fold(&w.rtt, float64(rtt)) {
			e.version++
		}
	}
	if ev.Exec > 0 && x.censored {
		// A real measurement replaces a censored one, and goes on from
		// the mean of the real ones before: a mean made of the one
		// measurement after each lost race would be a new draw of
		// the spread of task times every time.
		w.exec, x.censored = x.real, false
	}
	if ev.Exec > 0 {
		v := float64(ev.Exec)
		if w.exec > 0 && v <= 2*w.exec && v >= w.exec/2 {
			d := v/w.exec - 1
			p.eft.cv2 += (d*d - p.eft.cv2) / 64
			p.eft.cv = math.Sqrt(p.eft.cv2)
		}
		if x.ef.fold(&w.exec, v) {
			p.eft.version++
		}
	}
	return p.eftSetCap(wi)
}

// eftSetCap sets worker wi's capacity (see eft's Depth): AdaptiveMax × c
// once it is measured, Depth × c before (a worker not measured yet gets
// what rwq would give it). It reports whether the
// capacity changed.
func (p *policy) eftSetCap(wi int32) bool {
	w := &p.workers[wi]
	c := p.depth * w.slots
	if w.exec > 0 {
		c = p.maxDepth * w.slots
	}
	if c == w.cap {
		return false
	}
	w.cap = c
	p.markFree(wi)
	return true
}

// dueBy is the last case of eftDuePlan's due, given f, the slots' free
// times (slotFreeM), which it uses up: a further instance would start
// before a refill sent when the first running one ends could arrive.
func (p *policy) dueBy(wi int32, f []float64, e, r float64, c int) bool {
	w := &p.workers[wi]
	first := f[0]
	var start float64
	for range w.count() - c + 1 {
		start = f[0]
		f[0] += e
		siftDownF(f)
	}
	// The refill leaves once the master has also handed over the sends
	// it has queued.
	return start < max(first, float64(p.eft.busy-p.eft.now))+r
}

// eftDuePlan says whether worker wi should be sent a further instance
// now (due; see eft's Depth), and returns efPlan of it if it is due or
// anyway (plan), else 0: figured once for both, which need the same
// slots' free times (slotFreeM), and kept while the gen stays (nothing
// they read has changed), so that a worker keyed in the due heap is not
// figured again when it comes to the top. It figures no more than eftDue
// and efPlan would, each when asked: figuring may sync the worker's
// running starts (eftSync), which is part of eft's decisions.
func (p *policy) eftDuePlan(wi int32, plan bool) (due bool, ef float64) {
	e := p.eft
	if x := p.eftW(wi); x.planGen == e.gen && (x.planHas || !plan) {
		return x.planDue, x.planEF
	}
	ex, r, c := p.model(wi)
	w := &p.workers[wi]
	switch {
	case w.count() >= w.cap:
		if plan {
			ef = p.efPlanM(wi, ex, r, c)
		}
	case w.count() < max(p.depth, 1)*w.slots || w.exec <= 0:
		due, ef = true, p.efPlanM(wi, ex, r, c)
	default:
		// count ≥ slots = c: efPlan's further place needs f too.
		f := p.slotFreeM(wi, ex, r, c)
		g := append(e.free2[:0], f...)
		e.free2 = g
		if due = p.dueBy(wi, f, ex, r, c); due || plan {
			ef = p.efPosFrom(wi, w.count(), g, ex, r, c) + tailZ*e.cv*ex // efPlanM
		}
	}
	x := &e.ew[wi]
	x.planGen, x.planDue, x.planEF, x.planHas = e.gen, due, ef, due || plan
	return due, ef
}

func (x *eftWorker) insertRun(t time.Duration) {
	i, _ := slices.BinarySearch(x.run, t)
	x.run = slices.Insert(x.run, i, t)
}

// eftSync makes worker wi's running start times agree with the engine's
// books: as many as it runs instances (min(count, slots)); instances that
// left other than by a result (a cancel, a failure) take the newest
// starts with them, and ones the model missed count as just started.
func (p *policy) eftSync(wi int32) {
	w := &p.workers[wi]
	x := p.eftW(wi)
	want := min(w.count(), w.slots)
	if len(x.run) > want {
		x.run = x.run[:want]
	}
	for len(x.run) < want {
		x.insertRun(p.eft.now)
	}
}

// eftSynced says that worker wi's running start times agree with the
// engine's books, and its figures are its own: eftSync would do nothing.
// Inlined, it spares the call where it is asked often.
func (p *policy) eftSynced(wi int32) bool {
	x, w := &p.eft.ew[wi], &p.workers[wi]
	return x.id == w.id && len(x.run) == min(len(w.inst)-w.lo, w.slots)
}

// model returns worker wi's e and r for the model, in nanoseconds: its
// means, each taken as low as the grid's lowest if that is within noiseZ
// standard errors of it (see eft's Noise).
func (p *policy) model(wi int32) (e, r float64, c int) {
	w := &p.workers[wi]
	e, r = w.exec, w.rtt
	if e <= 0 {
		e, r = p.eft.eDef, p.eft.rDef
	} else if x := &p.eft.ew[wi]; x.id == w.id && !x.censored {
		e = withinNoise(e, &x.ef, p.eft.eMin)
		r = withinNoise(r, &x.rf, p.eft.rMin)
	}
	if r <= 0 && int(wi) < len(p.eft.ew) && p.eft.ew[wi].censored && p.eft.ew[wi].id == w.id {
		r = p.eft.rDef // known only by a censored run: its round trip is not
	}
	return e, r, w.slots
}

// withinNoise is a worker's mean m of figure f as the model takes it:
// lo, the grid's lowest mean, if m is within noiseZ standard errors of lo,
// else m.
func withinNoise(m float64, f *eftFigure, lo float64) float64 {
	if lo > 0 && m > lo && m-lo <= f.noise {
		return lo
	}
	return m
}

// noiseSE is the standard error of a smoothed mean (gain g = MeasureGain)
// of measurements with variance v: √(v·g/(2−g)), a quarter of their spread.
func noiseSE(v float64) float64 {
	return math.Sqrt(v * MeasureGain / (2 - MeasureGain))
}

// runEnd is when, relative to now, a slot running an instance since s
// (absolute) is free again: s + e, also when that is past but the result
// may still be on its way up (r/2). Once the result is late, but within
// the spread of task times (lateBand), it is expected e/10 from now: most
// such lateness is noise or the model's error. Beyond the band the worker
// has likely slowed down or stalled, and the result is expected as much
// later again as it is late already (a task that has run for t has, at a
// guess, t to go), so that its task draws a replica as the lateness grows
// — Tick brings the model's now forward when no other event would.
func (p *policy) runEnd(s time.Duration, e, r float64) float64 {
	end := float64(s-p.eft.now) + e
	if end+r/2 < 0 {
		late := -(end + r/2)
		if p.eft.known && late > p.lateBand(e, r) {
			return late - r/2
		}
		return e/10 - r/2
	}
	return end
}

// The model's margins, in spreads of task times (√cv2) or fractions of
// a worker's execution time, tuned in essim over random machine sets
// (speed spreads to 40×, 1–8 CPUs, delays to 100 ms, slowdowns and
// leaves; noise 0 and 0.1).
const (
	// tailZ: the plan judges a further place by its expected finish plus
	// tailZ spreads of its run time.
	tailZ = 1.0
	// lateZ, lateMin: a running instance is late beyond noise once past
	// its expected end by max(lateZ spreads, lateMin) of its run time,
	// plus half a round trip.
	lateZ, lateMin = 3.0, 0.2
	// repZ: replication compares finishes should the task run repZ
	// spreads long (repTail).
	repZ = 2.0
	// probeAfter: a worker sent nothing in this many batches in a row is
	// due a probe (eftBegin).
	probeAfter = 2
	// probeMin, probeShare: at most max(probeMin, workers/probeShare)
	// probes in a batch (eftBegin).
	probeMin, probeShare = 4, 32
	// censorGrow: a worker known only by censored runs is taken to need
	// censorGrow times what its stopped instance ran (eftCensor).
	censorGrow = 1.5
	// paceZ: a measurement is far from its worker's mean (a change of
	// pace if the next is too) only beyond paceZ spreads of the log of
	// its times.
	paceZ = 3.0
	// noiseZ: a worker's mean within noiseZ standard errors of the grid's
	// lowest counts as the lowest (withinNoise).
	noiseZ = 3.0
)

// lateBand is how far past its expected end a running instance on a
// worker of execution time e and round trip r may be before the model
// stops blaming the spread of task times (and the way up) for it.
func (p *policy) lateBand(e, r float64) float64 {
	return max(p.eft.cv*lateZ, lateMin)*e + r/2
}

// eftJoined notes whether a worker that joined is still starting
// (Event.Starting).
func (p *policy) eftJoined(ev Event) {
	if wi, ok := p.idx[ev.Worker]; ok && p.workers[wi].alive {
		p.eftW(wi).starting = ev.Starting
	}
}

// eftCensor notes that worker wi's running instance at place k is being
// cancelled, after running for ran: a censored measurement, since the
// task had not finished (its time on that worker is more than ran).
//   - A worker measured for real may be slower now than its mean says if
//     ran is beyond its expected time and the late band (the spread of
//     task times): its e becomes ran, a lower bound, but at most twice
//     its mean, as a lone measurement that far out counts (eftMeasure):
//     one instance that lost its race while its worker stalled (a
//     plugin's process starting) is no change of pace. A second bound in
//     a row is one (next case) if it is also far from the real mean (see
//     far: with tasks whose times spread widely, a lost race is no news).
//   - A worker known only by such bounds, or not measured yet (judged by
//     the model's default), gets censorGrow × ran if ran is beyond what
//     the model says of it: more than the bound, since the task was not
//     done, but not so much that a worker the plan needs is set aside
//     for good. Its instances may always lose their race, so it may
//     never be measured otherwise and would count as fast for ever.
//
// A real measurement replaces the bound (eftMeasure). A worker still
// starting (Event.Starting) is not judged: its instances waited for it.
func (p *policy) eftCensor(wi int32, k int) {
	w := &p.workers[wi]
	if !p.eftSynced(wi) {
		p.eftSync(wi)
	}
	x := &p.eft.ew[wi]
	if k >= len(x.run) {
		return
	}
	ran := float64(p.eft.now - x.run[k])
	x.run = slices.Delete(x.run, k, k+1)
	if !p.eft.known || x.starting {
		return // nothing known to judge by, or it may not have started
	}
	e, r, _ := p.model(wi)
	switch {
	case w.exec > 0 && !x.censored:
		if ran <= e+r/2+p.lateBand(e, r) {
			return
		}
		x.real, w.exec = w.exec, min(ran, 2*w.exec)
	case x.censored && x.real > 0 && ran <= x.ef.far()*x.real+r/2:
		return // far from its real mean only as its times spread: the bound stands
	case ran > e+r/2:
		if !x.censored {
			x.real = 0 // not measured yet
		}
		w.exec = censorGrow * ran
	default:
		return
	}
	x.ef.slow, x.ef.fast, x.censored = 0, 0, true
	p.eft.version++
}

// slotFree fills the scratch with the times, relative to now, at which
// worker wi's slots become free for a further instance: a running one's
// end (runEnd), or, for an idle slot, when a new instance would arrive.
// It returns them as a min-heap.
func (p *policy) slotFree(wi int32) []float64 {
	e, r, c := p.model(wi)
	return p.slotFreeM(wi, e, r, c)
}

// slotFreeM is slotFree given worker wi's model (model), which callers
// that need it too figure once.
func (p *policy) slotFreeM(wi int32, e, r float64, c int) []float64 {
	if !p.eftSynced(wi) {
		p.eftSync(wi)
	}
	x := &p.eft.ew[wi]
	f := p.eft.free[:0]
	for _, s := range x.run {
		f = append(f, p.runEnd(s, e, r))
	}
	for len(f) < c {
		f = append(f, r/2+p.sendWait())
	}
	p.eft.free = f
	heapify(f)
	return f
}

// efPos is the expected finish, relative to now, of the instance at
// place k (0-based, send order) among worker wi's live instances, or of a
// further one when k is its count.
func (p *policy) efPos(wi int32, k int) float64 {
	e, r, c := p.model(wi)
	return p.efPosM(wi, k, e, r, c)
}

// efPosM is efPos given worker wi's model (model).
func (p *policy) efPosM(wi int32, k int, e, r float64, c int) float64 {
	w := &p.workers[wi]
	if k < c && k < w.count() {
		if !p.eftSynced(wi) {
			p.eftSync(wi)
		}
		s := p.eft.ew[wi].run[k] // the k-th oldest running: the k-th sent
		return p.runEnd(s, e, r) + r/2
	}
	if k < c {
		return r + e + p.sendWait() // an idle slot: down, run, up
	}
	return p.efPosFrom(wi, k, p.slotFreeM(wi, e, r, c), e, r, c)
}

// efPosFrom is the last case of efPosM (k ≥ c), given f, the slots' free
// times (slotFreeM), which it uses up.
func (p *policy) efPosFrom(wi int32, k int, f []float64, e, r float64, c int) float64 {
	w := &p.workers[wi]
	var start float64
	for j := c; j <= k; j++ {
		start = f[0]
		if j < w.count() {
			start = max(start, p.heldArrival(wi, j)) // a held one that is still on its way
		}
		f[0] = start + e
		siftDownF(f)
	}
	if k >= w.count() {
		start = max(start, r/2+p.sendWait()) // a new one must arrive first
	}
	return start + e + r/2
}

// heldArrival is when, relative to now, the instance at place k of worker
// wi's live instances reached or reaches it in the model (−∞ if the model
// did not note it).
func (p *policy) heldArrival(wi int32, k int) float64 {
	e := p.eft
	w := &p.workers[wi]
	t := w.inst[w.lo+k]
	if int(t) >= len(e.sent) || e.sent[t].to != wi+1 {
		return math.Inf(-1)
	}
	return float64(e.sent[t].arrive - e.now)
}

// efNext is the expected finish, relative to now, of a further instance
// on worker wi.
func (p *policy) efNext(wi int32) float64 { return p.efPos(wi, p.workers[wi].count()) }

// tail is the margin the plan adds to a further instance's expected
// finish on worker wi: tailZ spreads of its run time (a slow worker's
// last task risks the barrier more than a fast one's).
func (p *policy) tail(wi int32) float64 {
	e, _, _ := p.model(wi)
	return tailZ * p.eft.cv * e
}

// efPlan is what the plan judges worker wi's next place by: its expected
// finish plus its tail.
func (p *policy) efPlan(wi int32) float64 {
	e, r, c := p.model(wi)
	return p.efPlanM(wi, e, r, c)
}

// efPlanM is efPlan given worker wi's model (model).
func (p *policy) efPlanM(wi int32, e, r float64, c int) float64 {
	return p.efPosM(wi, p.workers[wi].count(), e, r, c) + tailZ*p.eft.cv*e // efNext + tail
}

// eftPlaces is what the horizon's count needs of a worker, fixed while
// one horizon is computed (the model's figures, now and the master's queue
// do not change meanwhile): figured once per worker and horizon, not once
// per pass of its bisection.
type eftPlaces struct {
	e, r, tail float64 // the model's e and r, the plan's tail
	arrive     float64 // when a new instance would arrive
	idle, held int     // idle slots, held instances
	ends       []float64
	lo, hi, at int // placesBy at the bisection's lo, hi and mid
}

// placeFigures figures worker wi's places for the horizon. It reads the
// running starts as eftSync would make them now, without making them so:
// the horizon syncs only the workers its passes would have come to
// (horizonSync), since a start the model missed counts from when it is
// synced.
func (p *policy) placeFigures(wi int32, x *eftPlaces) {
	ex, r, c := p.model(wi)
	w := &p.workers[wi]
	x.e, x.r, x.tail = ex, r, tailZ*p.eft.cv*ex // tail
	x.arrive = r/2 + p.sendWait()
	x.idle = max(c-w.count(), 0)
	x.held = w.count() - min(w.count(), c)
	var run []time.Duration // as eftW would have it: none if the place holds a new worker
	if int(wi) < len(p.eft.ew) && p.eft.ew[wi].id == w.id {
		run = p.eft.ew[wi].run
	}
	want := min(w.count(), w.slots)
	x.ends = x.ends[:0]
	for _, st := range run[:min(len(run), want)] {
		x.ends = append(x.ends, max(p.runEnd(st, ex, r), 0))
	}
	for range want - len(run) {
		x.ends = append(x.ends, max(p.runEnd(p.eft.now, ex, r), 0))
	}
}

// placesBy is how many further instances the worker of these figures
// could have back by h (relative to now). It never falls as h grows.
func (x *eftPlaces) placesBy(h float64) int {
	last := h - x.e - x.tail - x.r/2 // the latest start that is back by h
	if last < x.arrive {
		return 0
	}
	// Idle slots: from when a new instance arrives.
	n := 0
	if x.idle > 0 {
		n = x.idle * runs(last-x.arrive, x.e)
	}
	// Running slots: from the end of what they run.
	for _, s := range x.ends {
		if s <= last {
			n += runs(last-s, x.e)
		}
	}
	return max(n-x.held, 0)
}

// runs is how many instances of run time e a slot free for d (≥ 0) can
// start: ⌊d/e⌋ + 1, the quotient capped at MaxInt32 (as min would, NaN
// included, without min's care for signed zeros).
func runs(d, e float64) int {
	k := d / e
	if k > math.MaxInt32 {
		k = math.MaxInt32
	}
	return int(k) + 1
}

// eftDefaults sets the model's figures for workers not measured yet.
func (p *policy) eftDefaults() {
	p.eftMeans()
	e := p.eft
	e.rate, e.slots = 0, 0
	for i := range p.workers {
		if w := &p.workers[i]; w.open() {
			ew, _, c := p.model(int32(i))
			e.rate += float64(c) / ew
			e.slots += float64(c)
		}
	}
}

// eftMeans is eftDefaults but for rate and slots.
func (p *policy) eftMeans() {
	e := p.eft
	was := [...]float64{e.eDef, e.rDef, e.eMin, e.rMin}
	known := e.known
	var se, sr float64
	n := 0
	e.eMin, e.rMin = 0, 0
	for i := range p.workers {
		w := &p.workers[i]
		if !w.alive || w.exec <= 0 {
			continue
		}
		se += w.exec
		sr += w.rtt
		n++
		if i >= len(e.ew) || e.ew[i].id != w.id || e.ew[i].censored {
			continue
		}
		if e.eMin == 0 || w.exec < e.eMin {
			e.eMin = w.exec
		}
		if w.rtt > 0 && (e.rMin == 0 || w.rtt < e.rMin) {
			e.rMin = w.rtt
		}
	}
	e.known = n > 0
	if n == 0 {
		e.eDef, e.rDef = float64(time.Millisecond), 0
	} else {
		e.eDef, e.rDef = se/float64(n), sr/float64(n)
	}
	if [...]float64{e.eDef, e.rDef, e.eMin, e.rMin} != was || e.known != known {
		e.gen++ // the model's figures may have changed
	}
}

// horizon returns the plan's horizon for the tasks in Q (see eft) as an
// absolute time in ns, recomputing it when Q or the grid has changed
// enough since.
//
// The horizon is the least h (to a thousandth, by bisection) at which the
// open workers' places by h (placesBy) number |Q|. placesBy never falls
// as h grows, so a worker with as many places at the bisection's lo as at
// its hi has as many at every h between: each pass counts only the
// workers not settled so, about half fewer every pass.
func (p *policy) horizon() float64 {
	e := p.eft
	if e.hValid && e.hVer == e.version && e.hLive == p.live && p.qLive <= e.hQ &&
		p.qLive > e.hQ-max(1, e.hQ/3) && e.hSteps < max(1, p.live/4) {
		return e.h
	}
	p.eftMeans() // and rate and slots with the figures below (eftDefaults)
	q := p.qLive
	// Bracket it, from the last horizon when there is one (Q has only
	// shrunk since, so the horizon has not grown much), then bisect to a
	// thousandth.
	lo, hi := 0.0, 0.0
	if e.hValid && e.h > float64(e.now) {
		hi = e.h - float64(e.now)
	} else {
		hi = math.Inf(1)
		for i := range p.workers {
			if p.workers[i].open() {
				hi = min(hi, p.efPlan(int32(i)))
			}
		}
	}
	if math.IsInf(hi, 1) || hi <= 0 {
		hi = 1
	}
	e.places = grown(e.places, len(p.workers))
	open := e.open[:0]
	e.rate, e.slots = 0, 0
	for i := range p.workers {
		if p.workers[i].open() {
			open = append(open, int32(i))
			x := &e.places[i]
			p.placeFigures(int32(i), x)
			c := p.workers[i].slots
			e.rate += float64(c) / x.e
			e.slots += float64(c)
		}
	}
	e.open = open
	// placesBy at hi, every worker's; lo is 0 (no places) until the
	// bracket doubles.
	n := 0
	for _, i := range open {
		x := &e.places[i]
		x.lo, x.hi = 0, x.placesBy(hi)
		n += x.hi
	}
	short := n < q // some pass counted fewer than |Q|
	for n < q && hi < 1e18 {
		lo, hi, n = hi, 2*hi, 0
		for _, i := range open {
			x := &e.places[i]
			x.lo, x.hi = x.hi, x.placesBy(hi)
			n += x.hi
		}
	}
	// The unsettled workers, and what the settled ones count.
	left, settled := e.unsettled[:0], 0
	for _, i := range open {
		if x := &e.places[i]; x.lo != x.hi {
			left = append(left, i)
		} else {
			settled += x.lo
		}
	}
	for range 48 {
		if hi-lo <= max(hi*1e-3, float64(10*time.Microsecond)) {
			break
		}
		mid := lo + (hi-lo)/2
		n := settled
		for _, i := range left {
			x := &e.places[i]
			x.at = x.placesBy(mid)
			n += x.at
		}
		up := n >= q
		if up {
			hi = mid
		} else {
			lo, short = mid, true
		}
		k := 0
		for _, i := range left {
			x := &e.places[i]
			if up {
				x.hi = x.at
			} else {
				x.lo = x.at
			}
			if x.lo == x.hi {
				settled += x.lo
				continue
			}
			left[k] = i
			k++
		}
		left = left[:k]
	}
	e.unsettled = left
	p.horizonSync(q, short)
	e.h, e.hValid, e.hQ, e.hSteps, e.hVer, e.hLive = float64(e.now)+hi, true, q, 0, e.version, p.live
	return e.h
}

// horizonSync syncs the running starts (eftSync) of the workers that a
// count stopping at the first |Q| places, worker by worker in order,
// would have come to in one of the bisection's passes: every open worker
// if a pass counted fewer than q (short), else those up to the one that
// made q at the last hi (the least h counted). A start the model missed
// counts from when it is synced, so which workers are synced when is part
// of eft's decisions.
func (p *policy) horizonSync(q int, short bool) {
	e := p.eft
	n := 0
	for _, i := range e.open {
		if !p.eftSynced(i) {
			p.eftSync(i)
		}
		if n += e.places[i].hi; !short && n >= q {
			return
		}
	}
}

// eftTick handles Tick: once Q is empty, the replication candidates are
// keyed afresh (an instance past its expected end draws a replica as its
// lateness grows, though no result comes to say so). It reports whether
// there is anything to reconsider.
func (p *policy) eftTick() bool {
	if p.qLive > 0 || p.nDone >= p.n || !p.eftAnyLate() {
		return false
	}
	p.eft.candBuilt = false
	return true
}

// eftAnyLate says some worker that is not late in the driver's books runs
// an instance past its expected end by more than the late band: only then
// has the passing of time changed the plan's figures enough to look again.
// O(workers).
func (p *policy) eftAnyLate() bool {
	p.eftDefaults() // results since Q emptied may have measured workers
	if !p.eft.known {
		return false
	}
	now := p.eft.now
	for i := range p.workers {
		w := &p.workers[i]
		if !w.alive || w.late || w.count() == 0 || i >= len(p.eft.ew) {
			continue
		}
		x := &p.eft.ew[i]
		if x.id != w.id || len(x.run) == 0 {
			continue
		}
		e, r, _ := p.model(int32(i))
		if late := float64(now-x.run[0]) - e - r/2; late > p.lateBand(e, r) {
			return true
		}
	}
	return false
}

// fillEFT hands out work under eft: Q by the plan, then targeted
// replicas.
func (p *policy) fillEFT(out []Action) []Action {
	e := p.eft
	e.hSteps++
	e.gen++ // the event's changes are in
	start := len(out)
	if p.qLive > e.lastQ {
		// Tasks came back to Q: the horizon grew, so workers passed
		// over may now be in the plan.
		e.candBuilt = false
		p.eftReopen()
	}
	if p.qLive > 0 {
		var sent bool
		out, sent = p.eftFromQ(out, false)
		if !sent && p.qLive > 0 && !p.eftWaiting() {
			// Nothing is on its way back from a worker that takes work,
			// so no event will bring the plan's workers: the plan is
			// wrong (its workers drained, say); hand Q out regardless.
			p.eftReopen()
			out, _ = p.eftFromQ(out, true)
		}
	}
	// The sends leave longest chain first (eft_order.go), and the model
	// knows it before it judges replicas.
	p.eftOrder(out[start:])
	if p.qLive == 0 && p.nDone < p.n {
		if !e.candBuilt {
			p.eftReopen()
			p.eftBuildCand()
		}
		out = p.eftReplicas(out)
	}
	e.lastQ = p.qLive
	p.compactFree()
	return out
}

// eftReopen puts every open worker with room back in the free queue.
func (p *policy) eftReopen() {
	e := p.eft
	for _, wi := range e.passed {
		e.ew[wi].inPassed = false
	}
	e.passed, e.passedKey = e.passed[:0], e.passedKey[:0]
	for _, wi := range e.recv {
		e.ew[wi].inRecv = false
	}
	e.recv, e.recvKey = e.recv[:0], e.recvKey[:0]
	for i := range p.workers {
		if p.workers[i].alive {
			p.markFree(int32(i))
		}
	}
	e.hValid = false
}

// eftWaiting says some worker that takes work has an instance out (so a
// later event will come from it). It stops at the first, which is near
// the front unless most of the grid is idle.
func (p *policy) eftWaiting() bool {
	for i := range p.workers {
		if w := &p.workers[i]; w.open() && w.count() > 0 {
			return true
		}
	}
	return false
}

// eftSend sends task ti to worker wi (a replica when replica or when an
// instance is live elsewhere), noting in the model when it will start.
func (p *policy) eftSend(wi int32, ti TaskID, replica bool, out []Action) []Action {
	e := p.eft
	e.gen++
	w := &p.workers[wi]
	_, r, _ := p.model(wi)
	arrive := e.now + time.Duration(r/2+p.sendWait())
	e.sent = grown(e.sent, p.n)
	e.sent[ti] = eftSent{arrive: arrive, to: wi + 1, place: p.sendPlace(), idle: w.count() < w.slots}
	if w.count() < w.slots {
		if !p.eftSynced(wi) {
			p.eftSync(wi)
		}
		e.ew[wi].insertRun(arrive)
	}
	e.stepSends++
	e.ew[wi].sent++
	e.ew[wi].probe = false
	e.busy = e.now + time.Duration(p.sendWait())
	e.hSteps++
	return p.send(wi, ti, replica || len(p.tasks[ti].on) > 0, out)
}

// grown returns s with length at least n, growing it as needed.
func grown[T any](s []T, n int) []T {
	if len(s) >= n {
		return s
	}
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}

// sendWait is how long a send made now waits behind the master's queued
// sends: what earlier steps left (stepBase) and this step's earlier ones.
func (p *policy) sendWait() float64 {
	return p.eft.stepBase + float64(p.eft.stepSends)*p.eft.msgCost
}

// sendPlace is the place of a send made now in the master's queue of
// sends, in messages: this step's earlier sends and what earlier steps
// left queued.
func (p *policy) sendPlace() int32 {
	e := p.eft
	k := float64(e.stepSends)
	if e.msgCost > 0 {
		k += e.stepBase / e.msgCost
	}
	return int32(min(k, math.MaxInt32))
}

// eftFromQ sends tasks of Q to due workers that the plan keeps (all due
// workers when force), in order of their next place's expected finish,
// and reports whether it sent any. A worker the plan passes over leaves
// the free queue until it changes (a result, a measurement) or Q grows.
func (p *policy) eftFromQ(out []Action, force bool) ([]Action, bool) {
	e := p.eft
	e.due, e.key = e.due[:0], e.key[:0]
	// Probes owed (eftBegin) keep their tasks in Q: in the plan's order a
	// faster worker could take the whole batch before a probe's turn.
	owed := 0
	for {
		wi, ok := p.popFree()
		if !ok {
			break
		}
		if p.eftW(wi).probe {
			owed++
		}
		p.eftPushDue(wi)
	}
	if len(e.due) == 0 {
		return out, false
	}
	// The horizon, computed only when a worker's next place is beyond a
	// lower bound of it: q tasks at the grid's full rate (from the last
	// computation's figures), which holds for every worker but slow ones
	// and those near the barrier.
	h, hKnown := math.Inf(1), force
	if !force && e.rate == 0 {
		p.eftDefaults()
	}
	hSends := 0
	horizon := func() float64 {
		if !hKnown {
			h, hKnown, hSends = p.horizon()-float64(e.now), true, e.stepSends
		}
		// A worker's next place is in the plan if it is back by the
		// horizon, give or take a hundredth and the wait that this
		// step's sends since the horizon was found add to a send: machines
		// alike are not told apart by a rounding, nor by their place in
		// the step's sends, and a task that waits instead pays a whole
		// round trip later.
		return h*1.01 + float64(e.stepSends-hSends)*e.msgCost
	}
	floor := (float64(p.qLive) - e.slots) / e.rate
	// Passed-over workers whose next place may now be in the plan.
	for len(e.passed) > 0 && (e.passedKey[0]-float64(e.now) <= floor || e.passedKey[0]-float64(e.now) <= horizon()) {
		wi := e.passed[0]
		p.popPassed()
		w := &p.workers[wi]
		if !w.alive {
			continue
		}
		due, ef := p.eftDuePlan(wi, false)
		if !due {
			continue
		}
		if ef > floor && ef > horizon() {
			p.pushPassed(wi, float64(e.now)+ef)
			if ef-(e.passedKey[0]-float64(e.now)) <= 0 {
				break // it is the best again: no other qualifies
			}
			continue
		}
		p.eftPushDue(wi)
	}
	sent := false
	for pass := 0; pass < 2; pass++ {
		for len(e.due) > 0 && p.qLive > owed {
			wi := p.eftPopDue()
			w := &p.workers[wi]
			if e.ew[wi].probe {
				owed-- // served now, or not at all this step
			}
			if !w.open() {
				continue
			}
			due, ef := p.eftDuePlan(wi, false)
			if !due {
				continue
			}
			if ef > floor && ef > horizon() && !e.ew[wi].probe {
				p.pushPassed(wi, float64(e.now)+ef)
				continue
			}
			ti, ok := p.popQFor(wi)
			if !ok {
				continue
			}
			out = p.eftSend(wi, ti, false, out)
			sent = true
			if due, ef := p.eftDuePlan(wi, false); due {
				p.eftPushDueKey(wi, ef)
			}
		}
		if pass > 0 || owed == 0 {
			break
		}
		// Q is down to the probes owed: they take it, whatever the plan
		// says; the other due workers then take what they leave.
		for _, wi := range e.due {
			if e.ew[wi].probe && p.qLive > 0 && p.workers[wi].open() {
				if ti, ok := p.popQFor(wi); ok {
					out, sent = p.eftSend(wi, ti, false, out), true
				}
			}
		}
		owed = 0
	}
	// Those still due when Q ran out wait in the free queue (for
	// replicas).
	for _, wi := range e.due {
		p.eft.ew[wi].inDue = false
		p.markFree(wi)
	}
	e.due, e.key = e.due[:0], e.key[:0]
	return out, sent
}

// pushPassed adds worker wi to the passed heap with key k.
func (p *policy) pushPassed(wi int32, k float64) {
	e := p.eft
	if x := p.eftW(wi); !x.inPassed {
		x.inPassed = true
		e.passed, e.passedKey = heapPush(e.passed, e.passedKey, wi, k)
	}
}

// popPassed drops the top of the passed heap.
func (p *policy) popPassed() {
	e := p.eft
	e.ew[e.passed[0]].inPassed = false
	e.passed, e.passedKey = heapPop(e.passed, e.passedKey)
}

// heapPush adds (id, k) to the min-heap ids, keys (ties by id).
func heapPush(ids []int32, keys []float64, id int32, k float64) ([]int32, []float64) {
	ids, keys = append(ids, id), append(keys, k)
	for i := len(ids) - 1; i > 0; {
		par := (i - 1) / 2
		if !heapLess(ids, keys, i, par) {
			break
		}
		ids[i], ids[par], keys[i], keys[par] = ids[par], ids[i], keys[par], keys[i]
		i = par
	}
	return ids, keys
}

func heapLess(ids []int32, keys []float64, a, b int) bool {
	return keys[a] < keys[b] || keys[a] == keys[b] && ids[a] < ids[b]
}

// heapPop drops the top of the min-heap ids, keys.
func heapPop(ids []int32, keys []float64) ([]int32, []float64) {
	n := len(ids) - 1
	ids[0], keys[0] = ids[n], keys[n]
	ids, keys = ids[:n], keys[:n]
	heapDown(ids, keys)
	return ids, keys
}

// heapRekeyTop gives the top of the min-heap ids, keys the key k (not
// less than its key) and restores the heap: as a pop and a push of it, at
// about half the cost. The heap's order is total (ties by id), so which
// entry is on top never depends on how the heap is laid out.
func heapRekeyTop(ids []int32, keys []float64, k float64) {
	keys[0] = k
	heapDown(ids, keys)
}

// heapDown sifts the top of the min-heap ids, keys down to its place.
func heapDown(ids []int32, keys []float64) {
	n := len(ids)
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && heapLess(ids, keys, r, l) {
			m = r
		}
		if !heapLess(ids, keys, m, i) {
			break
		}
		ids[i], ids[m], keys[i], keys[m] = ids[m], ids[i], keys[m], keys[i]
		i = m
	}
}

// eftPushDue adds worker wi to the due heap, keyed by its next place's
// expected finish (ties by place, so the order is deterministic).
func (p *policy) eftPushDue(wi int32) {
	if !p.eftW(wi).inDue {
		_, ef := p.eftDuePlan(wi, true)
		p.eftPushDueKey(wi, ef)
	}
}

// eftPushDueKey adds worker wi to the due heap with key k, its efPlan.
func (p *policy) eftPushDueKey(wi int32, k float64) {
	e := p.eft
	x := p.eftW(wi)
	if x.inDue {
		return
	}
	x.inDue = true
	e.due = append(e.due, wi)
	e.key = append(e.key, k)
	for i := len(e.due) - 1; i > 0; {
		par := (i - 1) / 2
		if !e.dueLess(i, par) {
			break
		}
		e.dueSwap(i, par)
		i = par
	}
}

func (e *eftState) dueLess(a, b int) bool {
	return e.key[a] < e.key[b] || e.key[a] == e.key[b] && e.due[a] < e.due[b]
}

func (e *eftState) dueSwap(a, b int) {
	e.due[a], e.due[b] = e.due[b], e.due[a]
	e.key[a], e.key[b] = e.key[b], e.key[a]
}

// eftPopDue takes the due worker with the earliest next place.
func (p *policy) eftPopDue() int32 {
	e := p.eft
	wi := e.due[0]
	n := len(e.due) - 1
	e.dueSwap(0, n)
	e.due, e.key = e.due[:n], e.key[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && e.dueLess(r, l) {
			m = r
		}
		if !e.dueLess(m, i) {
			break
		}
		e.dueSwap(i, m)
		i = m
	}
	e.ew[wi].inDue = false
	return wi
}

// instanceEF is the expected finish (relative to now) of task ti's
// earliest live instance, should the task run long (repTail), +Inf when
// every holder is late.
func (p *policy) instanceEF(ti TaskID) float64 { return p.instanceBy(ti, true) }

// instanceBase is instanceEF without the way up (half its worker's round
// trip): when the instance ends, against which the master's drain is
// judged. Where the master is the bottleneck its results wait for it, so
// a worker's measured round trip holds that wait, which the drain counts
// already (at 1,024 workers and 25 µs a message, 30 ms for a link of 0.4).
func (p *policy) instanceBase(ti TaskID) float64 { return p.instanceBy(ti, false) }

// instanceBy is the earliest, over task ti's live instances on workers
// not late, of efPos + repTail, less half the worker's round trip unless
// up (the result's way back) counts.
func (p *policy) instanceBy(ti TaskID, up bool) float64 {
	best := math.Inf(1)
	for _, vi := range p.tasks[ti].on {
		if v := &p.workers[vi]; !v.late {
			if k := v.pos(ti); k >= 0 {
				e, r, c := p.model(vi)
				ef := p.efPosM(vi, k, e, r, c) + repZ*p.eft.cv*e // efPos + repTail
				if !up {
					ef -= r / 2
				}
				best = min(best, ef)
			}
		}
	}
	return best
}

// repTail is what replication adds to an instance's or a further place's
// expected finish on worker wi: repZ spreads of its run time, the finish
// should the task be a long one. A task is as long on every worker, so a
// replica on a faster worker gains more the longer the task: it is sent
// where it would beat the copy it races if the task runs long, which it
// may (the copy it races is no later for it).
func (p *policy) repTail(wi int32) float64 {
	e, _, _ := p.model(wi)
	return repZ * p.eft.cv * e
}

// efRep is a further place's expected finish on worker wi for
// replication (see repTail).
func (p *policy) efRep(wi int32) float64 {
	e, r, c := p.model(wi)
	return p.efPosM(wi, p.workers[wi].count(), e, r, c) + repZ*p.eft.cv*e // efNext + repTail
}

// eftBuildCand takes every task with a live instance and room for another
// as a replication candidate, keyed by its expected finish (absolute).
func (p *policy) eftBuildCand() {
	e := p.eft
	p.eftDefaults()
	e.cand = e.cand[:0]
	for i := range p.tasks {
		t := &p.tasks[i]
		if !t.done && len(t.on) > 0 && len(t.on) < e.copies {
			e.cand = append(e.cand, eftCand{key: float64(e.now) + p.instanceEF(TaskID(i)), task: TaskID(i), gen: e.gen})
		}
	}
	for i := len(e.cand)/2 - 1; i >= 0; i-- {
		e.candDown(i)
	}
	e.candBuilt = true
}

func (e *eftState) candLess(a, b int) bool { // a max-heap: the latest first
	x, y := e.cand[a], e.cand[b]
	return x.key > y.key || x.key == y.key && x.task < y.task
}

func (e *eftState) candDown(i int) {
	n := len(e.cand)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && e.candLess(r, l) {
			m = r
		}
		if !e.candLess(m, i) {
			return
		}
		e.cand[i], e.cand[m] = e.cand[m], e.cand[i]
		i = m
	}
}

func (e *eftState) candPush(c eftCand) {
	e.cand = append(e.cand, c)
	for i := len(e.cand) - 1; i > 0; {
		par := (i - 1) / 2
		if !e.candLess(i, par) {
			break
		}
		e.cand[i], e.cand[par] = e.cand[par], e.cand[i]
		i = par
	}
}

func (e *eftState) candPop() eftCand {
	c := e.cand[0]
	n := len(e.cand) - 1
	e.cand[0] = e.cand[n]
	e.cand = e.cand[:n]
	e.candDown(0)
	return c
}

// eftReplicas sends targeted replicas (see eft) to the due workers, those
// that finish first first. The receivers wait in a heap from step to
// step, so a step costs O(log W) per worker freed or served, not O(W).
func (p *policy) eftReplicas(out []Action) []Action {
	e := p.eft
	now := float64(e.now)
	for {
		wi, ok := p.popFree()
		if !ok {
			break
		}
		if x := p.eftW(wi); !x.inRecv {
			x.inRecv, x.recvGen = true, e.gen
			e.recv, e.recvKey = heapPush(e.recv, e.recvKey, wi, now+p.efRep(wi))
		}
	}
	extra := p.eftReplicasLive()
	for tries := 0; len(e.recv) > 0 && len(e.cand) > 0 && tries < 4*(len(e.recv)+len(e.cand))+16; tries++ {
		wi := e.recv[0]
		w := &p.workers[wi]
		if !w.open() || w.count() >= w.cap {
			e.ew[wi].inRecv = false
			e.recv, e.recvKey = heapPop(e.recv, e.recvKey)
			continue
		}
		mine := e.recvKey[0] // as figured again, if keyed at this gen
		if e.ew[wi].recvGen != e.gen {
			if mine = now + p.efRep(wi); mine > e.recvKey[0]*(1+1e-12)+1 {
				// Its next place is later than when it was keyed: key afresh.
				e.ew[wi].recvGen = e.gen
				heapRekeyTop(e.recv, e.recvKey, mine)
				continue
			}
		}
		c := e.cand[0]
		t := &p.tasks[c.task]
		if t.done || len(t.on) == 0 || len(t.on) >= e.copies {
			e.candPop()
			continue
		}
		if c.gen != e.gen {
			if cur := now + p.instanceEF(c.task); math.Abs(cur-c.key) > 1e-9*max(1, math.Abs(c.key)) {
				// Its expected finish has moved since it was keyed: as a
				// pop and a push of it (the heap's order is total, ties by
				// task, so its layout is never seen).
				e.cand[0].key, e.cand[0].gen = cur, e.gen
				e.candDown(0)
				continue
			}
		}
		if mine >= c.key {
			break // the best receiver cannot beat the latest instance: nothing can
		}
		// Nor can a replica end the batch before the master has handed
		// over its sends and taken a result of every task not done, one
		// message at a time: on a grid whose master is the bottleneck, a
		// replica that beats its copy before then gains nothing, and its
		// messages (send, result, cancel) delay all the rest.
		drain := now + p.sendWait() + float64(p.n-p.nDone+extra)*e.drainCost()
		if drain >= now+p.instanceBase(c.task) {
			break
		}
		// The latest instance this receiver may take (the first is c,
		// judged above).
		for first := true; len(e.cand) > 0; first = false {
			c = e.cand[0]
			t = &p.tasks[c.task]
			if !first && (mine >= c.key || drain >= now+p.instanceBase(c.task)) {
				break
			}
			if t.done || len(t.on) == 0 || len(t.on) >= e.copies || w.pos(c.task) >= 0 || p.excluded(t, w.id) {
				e.skip = append(e.skip, e.candPop())
				continue
			}
			e.candPop()
			if len(t.on) == 1 {
				e.repTasks = append(e.repTasks, c.task)
			}
			extra++
			out = p.eftSend(wi, c.task, true, out)
			if len(t.on) < e.copies {
				e.candPush(eftCand{key: now + p.instanceEF(c.task), task: c.task, gen: e.gen})
			}
			c.task = -1
			break
		}
		for _, s := range e.skip {
			if t := &p.tasks[s.task]; !t.done && len(t.on) > 0 && len(t.on) < e.copies {
				e.candPush(s)
			}
		}
		e.skip = e.skip[:0]
		e.recv, e.recvKey = heapPop(e.recv, e.recvKey)
		if c.task >= 0 {
			e.ew[wi].inRecv = false // nothing it can take: back when it changes
			continue
		}
		if w.count() < w.cap {
			e.ew[wi].recvGen = e.gen
			e.recv, e.recvKey = heapPush(e.recv, e.recvKey, wi, now+p.efRep(wi))
		} else {
			e.ew[wi].inRecv = false
		}
	}
	return out
}

// eftReplicasLive counts the live instances beyond one of the tasks not
// done: each will cost the master a message (its cancel, or a result that
// loses), as each task's one instance costs it a result.
func (p *policy) eftReplicasLive() int {
	e := p.eft
	n, k := 0, 0
	for _, ti := range e.repTasks {
		if t := &p.tasks[ti]; !t.done && len(t.on) > 1 {
			n += len(t.on) - 1
			e.repTasks[k] = ti
			k++
		}
	}
	e.repTasks = e.repTasks[:k]
	return n
}

// heapify makes f a min-heap.
func heapify(f []float64) {
	for i := len(f)/2 - 1; i >= 0; i-- {
		siftDownAt(f, i)
	}
}

// siftDownF restores the min-heap f after f[0] grew.
func siftDownF(f []float64) { siftDownAt(f, 0) }

func siftDownAt(f []float64, i int) {
	n := len(f)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && f[r] < f[l] {
			m = r
		}
		if f[m] >= f[i] {
			return
		}
		f[i], f[m] = f[m], f[i]
		i = m
	}
}
