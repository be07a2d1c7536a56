package grid

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/sched"
)

// Results you can verify.
//
// Tokens. Every task instance the master sends carries a token, a random
// 64-bit number drawn for that task on that worker in that batch
// (ChaCha8 seeded from crypto/rand: unguessable); the worker returns it
// with the result. The master believes a result, counts it, and lets it
// decide or fail a task only if it carries the token it sent that worker
// for that task: a worker cannot answer for a task before it has it, nor
// for a task given to another worker. (A cancel acknowledgement for an
// instance the worker no longer has, AckLate, carries none: it only
// feeds the ledger, which counts it against a cancel it saw sent.)
//
// Verification (MasterConfig.Verify = P, esrun -verify P). Fitness is
// deterministic, so a value can be checked exactly, bit for bit, where
// volunteer grids (BOINC) compare replicas within a tolerance. When the
// policy accepts a result, the master draws (unpredictably, from the same
// generator) whether to check it: with probability P the task is sent
// again, to a worker on another host, outside the policy's books (its
// instances carry the task id plus checkBase, and the worker treats them
// as any task). Both values equal: verified. They differ: the task goes
// to a third host, and so on until one value has two votes; every host
// whose value differs from it is reported and excluded from the run, and
// the tasks whose accepted value came from it in this generation are
// evaluated again on other hosts. The generation is answered only once
// every check is decided, so the values the ES sees are the agreed ones.
//
// Hosts, not workers, vote. A host is the IP address of the connection
// the master accepted (hostOf): one machine with several connections, or
// several names, is one voter, and an exclusion refuses every connection
// from that address for the rest of the run, whatever name it gives.
// The run outlives a master: Master.Excluded lists the exclusions, and
// a master given them (MasterConfig.Excluded: esrun -resume, from its
// checkpoint) starts with them in force.
// Behind a relay the master sees only the relay: its workers are one
// host (the relay's address), since whatever the relay said about them
// would be a key holder's word. So -verify holds against a liar that
// controls fewer hosts than the honest workers agreeing against it; a
// liar on as many hosts wins, and a lone host is never checked.
//
// What it cannot decide it says. A check with one vote and no second
// host connected waits for one until no second host has been there for
// a first deadline (the liar may reconnect first after a restart), then
// stands unverified (counted, and said once while alone). A check whose votes disagree and that has
// asked every host connected (a liar and one honest worker) waits
// VerifyWait for a worker on another host, said once, and then fails
// the generation with ErrUndecided: it never waits for ever. A check
// instance stopped as overdue while it ran (a hang) counts as a failed
// evaluation: after MaxRetries of them, errors included, the check is
// given up (givenUp), so a host whose evaluations hang is not asked the
// same check for ever. Like a task's overrun, it grows the deadline of a
// worker that has finished nothing yet, so that one merely slow ends a
// check within MaxRetries.
//
// Deadlines are not the liar's to set. A check instance is stopped after
// four deadlines of its worker, and a worker that has finished nothing
// yet gets its deadline from the hosts' times (hostTimes: their upper
// median), not from the mean of every result: a liar that answers at
// once and claims 1 ns would drive that mean to the floor, the checks
// asked of fresh honest workers would be stopped until given up, and its
// lies would stand unverified. On fewer hosts than the honest ones
// measured it cannot shorten that deadline; before any honest host is
// measured, a check stopped grows it.
//
// Failing workers. A worker whose evaluations fail MaxFailures times in
// a row (an error, or a non-finite value from a problem that declares
// none) is set aside while its connection lasts, its tasks going to the
// others (workers.go); the last worker is never set aside (MaxRetries
// then decides whether the task is at fault), and workers set aside are
// taken back once no other has been open for FirstDeadline.
//
// Non-finite values. A NaN or ±Inf from a worker is the problem's answer
// only if the problem says it may return one (ProblemSpec.NonFinite);
// otherwise it is an evaluation error, retried on another worker like
// any failed evaluation (sched.Failed).

// checkBase is added to a task's id in the instances that check it, so
// that the worker holds them apart from the policy's instances of the
// same task and the master tells their results apart.
const checkBase = 1 << 30

// ErrUndecided fails a generation whose check could not be decided:
// hosts disagree on a value and no further host joined to break the tie
// within MasterConfig.VerifyWait.
var ErrUndecided = errors.New("verification cannot decide a value")

// verifyState is the loop's verification state.
type verifyState struct {
	rng *rand.ChaCha8 // tokens and draws; loop goroutine only

	from   []string         // per task of the batch: the host whose value was accepted ("": none yet)
	checks map[int32]*check // open checks of the batch, by task
	load   map[sched.WorkerID]int

	exMu     sync.Mutex        // guards excluded: the handshakes read it
	excluded map[string]string // host → why, for the whole run
	exIDs    map[sched.WorkerID]bool
	// slow marks workers with a check instance overdue: they are asked
	// no further check until they answer about a slot (a silent worker
	// would otherwise cost every check of every batch four deadlines).
	slow map[sched.WorkerID]bool
	// given holds every check instance sent in the batch, by token: an
	// answer is believed when its token was given to that worker for
	// that check, even if the check was since replaced (a value
	// evaluated again after its worker was excluded) or its instance
	// struck from it.
	given map[uint64]checkGiven
	// alone is when checks last found no second host to ask, since
	// they found one (-1: they do). Checks wait for one up to
	// FirstDeadline from then, once: workers may be on their way (a
	// master that restarted; the liar may reconnect first), and past
	// that the master knows it is alone and does not wait again.
	alone time.Duration
	// Said once: values stand unverified for want of a second host (per
	// time alone), and a check waits for a third host (per batch).
	saidAlone, saidTie bool
}

// check is one task's open question: which value is right.
type check struct {
	task   int32
	need   int // agreeing votes, of distinct hosts, that decide
	votes  []vote
	asked  map[string]bool // hosts asked and not yet answered or voted: one host, one voice
	out    []checkOut
	fails  []string // evaluation errors from the workers asked
	reeval bool     // the accepted value came from an excluded host: b.f[task] waits for this check
	warned bool     // logged that it waits for a worker
	// tied is since when the votes disagree and no host is left to ask
	// (-1: not so).
	tied time.Duration
}

type vote struct {
	w    sched.WorkerID
	host string
	bits uint64
}

// checkGiven is one check instance sent: its task and worker.
type checkGiven struct {
	task int32
	w    *mworker
}

// checkOut is one instance of a check outstanding on a worker.
type checkOut struct {
	w       *mworker
	token   uint64
	at      time.Duration
	overdue bool
	// stopAt is when it went overdue and its stop was asked for.
	stopAt time.Duration
}

// hostOf is the host a worker's connection counts as for verification:
// the IP address the master accepted it from, or, behind a relay, the
// relay's (relayAddr.host): the master cannot see past a relay.
func hostOf(a net.Addr) string {
	if ra, ok := a.(relayAddr); ok {
		return ra.host
	}
	return sourceIP(a)
}

func (v *verifyState) init() {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (Go 1.24+: it crashes the program rather than return an error)
	v.rng = rand.NewChaCha8(seed)
	v.checks = map[int32]*check{}
	v.load = map[sched.WorkerID]int{}
	v.excluded = map[string]string{}
	v.exIDs = map[sched.WorkerID]bool{}
	v.slow = map[sched.WorkerID]bool{}
	v.alone = -1
	v.given = map[uint64]checkGiven{}
}

// newToken is a fresh, nonzero, unguessable token.
func (m *Master) newToken() uint64 {
	for {
		if t := m.v.rng.Uint64(); t != 0 {
			return t
		}
	}
}

// tokenFor returns the token of task t of w's current batch (see
// markSent), drawing it the first time: an instance sent twice to the
// same worker keeps its token, so that whichever copy the worker answers
// with is believed.
func (w *mworker) tokenFor(t int32, draw func() uint64) uint64 {
	if t < 0 || t >= w.tokN {
		return 0
	}
	tok, ok := w.tokens[t]
	if !ok {
		tok = draw()
		w.tokens[t] = tok
	}
	return tok
}

// validToken reports whether tok is the token w was sent for task t of
// batch b (its latest or the one before).
func (w *mworker) validToken(b, t int32, tok uint64) bool {
	switch {
	case tok == 0 || t < 0:
		return false
	case b == w.sentBatch && t < w.tokN:
		return w.tokens[t] == tok
	case b == w.prevBatch && t < w.prevTokN:
		return w.prevTokens[t] == tok
	}
	return false
}

// tokensForgotten reports whether batch b is older than the two batches
// whose tokens w keeps (batch ids only grow).
func (w *mworker) tokensForgotten(b int32) bool {
	switch {
	case w.prevTokN > 0:
		return b < w.prevBatch
	case w.tokN > 0:
		return b < w.sentBatch
	}
	return false
}

// tokensFor returns m emptied for a new batch: cleared when it is small
// (clearing costs its capacity), a fresh map when it grew (a worker
// dealt a large share once, by cyclic say).
func tokensFor(m map[int32]uint64) map[int32]uint64 {
	if m == nil || len(m) > 64 {
		return make(map[int32]uint64)
	}
	clear(m)
	return m
}

// unsolicited counts a result that carries no token the master gave w
// for it, and warns once per worker.
func (m *Master) unsolicited(w *mworker, r *Result) {
	m.counts.Unsolicited++
	if !w.warned {
		w.warned = true
		m.log.Warn("worker sent a result for a task instance it was never given (no matching token); discarded",
			"worker", w.name, "worker_id", w.id, "batch", r.Gen, "task", r.ID)
	}
}

// finite reports whether f is an acceptable value for a problem that
// does not declare non-finite values.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// nonFiniteError is the evaluation error a non-finite value becomes.
func nonFiniteError(f float64) string {
	return fmt.Sprintf("non-finite fitness %v, and the problem does not say it may return one (esrun -nonfinite)", f)
}

// verifyStart resets the verification state for a batch of n tasks.
func (m *Master) verifyStart(n int) {
	v := &m.v
	v.from = slices.Grow(v.from[:0], n)[:n]
	clear(v.from)
	clear(v.checks)
	clear(v.load)
	clear(v.given)
	v.saidTie = false
}

// verifyAccepted records that the policy accepted w's value f for task t
// of batch b, and draws whether to check it.
func (m *Master) verifyAccepted(w *mworker, b *batch, t int32, f float64) {
	v := &m.v
	if t < 0 || int(t) >= len(v.from) {
		return
	}
	v.from[t] = w.host
	if m.cfg.Verify <= 0 || (m.cfg.Verify < 1 && v.rng.Uint64()>>11 >= uint64(m.cfg.Verify*(1<<53))) {
		return
	}
	c := &check{task: t, need: 2, asked: map[string]bool{}, tied: -1,
		votes: []vote{{w: w.id, host: w.host, bits: math.Float64bits(f)}}}
	v.checks[t] = c
	m.dispatch(b, c)
}

// eligible reports whether w may be asked to evaluate a check: not a
// late worker, which gets nothing new until it answers, nor one set
// aside for failing.
func (m *Master) eligible(w *mworker) bool {
	return !w.left && !w.closed && !w.draining && !w.late && !w.aside && !m.v.slow[w.id] && !m.v.exIDs[w.id]
}

// voted reports whether host has a vote in c.
func (c *check) voted(host string) bool {
	return slices.ContainsFunc(c.votes, func(x vote) bool { return x.host == host })
}

// dispatch sends one instance of check c to the least loaded eligible
// worker on a host that has neither voted nor been asked. With none:
//   - a value only one host gave stands unverified once no second host
//     has been there for FirstDeadline, or once every other host was
//     asked and none can still answer in time (a silent one never does;
//     one whose stop is on its way can: mayAnswer);
//   - votes that disagree, with every host connected asked, wait
//     VerifyWait for a worker on another host, then fail the generation
//     (ErrUndecided);
//   - any other check waits for a worker to join.
func (m *Master) dispatch(b *batch, c *check) {
	var best *mworker
	bestLoad := 0
	others := 0
	for _, w := range m.order {
		if !m.eligible(w) {
			continue
		}
		if len(c.votes) == 0 || w.host != c.votes[0].host {
			others++
		}
		if c.asked[w.host] || c.voted(w.host) {
			continue // one host, one voice; and never two instances of a check on one host (it would take the second for the first)
		}
		load := (len(w.out) + m.v.load[w.id]) * 1024 / max(w.slots, 1)
		if best == nil || load < bestLoad || (load == bestLoad && w.id < best.id) {
			best, bestLoad = w, load
		}
	}
	now := m.now()
	if others > 0 {
		m.v.alone, m.v.saidAlone = -1, false
	} else if m.v.alone < 0 {
		m.v.alone = now
	}
	if best != nil {
		c.tied = -1
		m.send(b, c, best, now)
		return
	}
	pending := slices.ContainsFunc(c.out, func(o checkOut) bool { return m.mayAnswer(o, now) })
	switch {
	case len(c.votes) == 1 && !pending && (others > 0 || now-m.v.alone >= m.cfg.FirstDeadline):
		m.unverified(b, c, others)
	case len(c.votes) >= 2 && !pending:
		m.tie(b, c, now)
	case !c.warned && !pending:
		c.warned = true
		m.log.Debug("verification waits for a worker on another host to join", "gen", b.gen, "task", c.task, "votes", len(c.votes))
	}
}

// mayAnswer reports whether check instance o may still be answered in
// time: it is not overdue, or its stop is on its way. A worker that
// answered about a slot since its instance went overdue (it is no longer
// slow) serves, and answers this stop too, its host then asked again
// with a deadline grown by the overrun. Taking its host for one that
// cannot answer left the value unverified: with the deadline a liar's
// 1 ns set, the checks on both honest hosts of a loaded grid went
// overdue before the first host's stop came back, and the lies stood.
// A worker that serves yet keeps a stop back is waited for
// FirstDeadline at most.
func (m *Master) mayAnswer(o checkOut, now time.Duration) bool {
	return !o.overdue || !m.v.slow[o.w.id] && now-o.stopAt < m.cfg.FirstDeadline
}

// send gives w an instance of check c.
func (m *Master) send(b *batch, c *check, w *mworker, now time.Duration) {
	tok := m.newToken()
	m.log.Debug("check sent", "gen", b.gen, "task", c.task, "worker", w.name, "host", w.host, "votes", len(c.votes), "reeval", c.reeval)
	c.asked[w.host] = true
	m.v.given[tok] = checkGiven{task: c.task, w: w}
	c.out = append(c.out, checkOut{w: w, token: tok, at: now})
	m.v.load[w.id]++
	w.checkTasks = append(w.checkTasks, Task{ID: checkBase + c.task, X: b.xs[c.task], Token: tok})
	m.counts.TasksSent++
	m.markDirty(w)
}

// unverified closes check c, whose one vote stands unchecked: no second
// host is connected, or none could answer in time.
func (m *Master) unverified(b *batch, c *check, others int) {
	delete(m.v.checks, c.task)
	m.counts.Unverified++
	x := c.votes[0]
	if c.reeval {
		// Evaluated again after its first value's host was excluded:
		// the one value there is is the task's.
		b.f[c.task] = math.Float64frombits(x.bits)
		m.v.from[c.task] = x.host
	}
	if others > 0 {
		m.vlog.Warn("result not verified: no other host answered its check in time", "gen", b.gen, "task", c.task, "host", x.host)
		return
	}
	if !m.v.saidAlone {
		m.v.saidAlone = true
		m.log.Warn("-verify: results stand unverified while no worker on a second host is connected: hosts vote, and one host (its every connection, every worker behind one relay) is one vote",
			"gen", b.gen, "host", x.host, "waited", m.cfg.FirstDeadline)
	}
}

// tie handles check c, whose votes disagree with no host left to ask: it
// waits VerifyWait for a worker on another host, said once per batch,
// then fails the generation.
func (m *Master) tie(b *batch, c *check, now time.Duration) {
	if c.tied < 0 {
		c.tied = now
	}
	if now-c.tied >= m.cfg.VerifyWait {
		delete(m.v.checks, c.task)
		b.fail(fmt.Errorf("grid: generation %d, task %d: %w: %s, and no worker on another host joined within %v to break the tie. -verify decides by a majority of distinct hosts (IP addresses; the workers behind one relay are one host): start a worker on another machine, or run without -verify",
			b.gen, c.task, ErrUndecided, c.disagreement(), m.cfg.VerifyWait))
		return
	}
	if !m.v.saidTie {
		m.v.saidTie = true
		m.log.Warn("verification cannot decide a value: the hosts connected disagree and have all answered; it waits for a worker on another host to join, then fails the generation (start a worker on another machine)",
			"gen", b.gen, "task", c.task, "votes", c.disagreement(), "wait", m.cfg.VerifyWait)
	}
}

// disagreement lists c's votes, host by host.
func (c *check) disagreement() string {
	var s []string
	for _, x := range c.votes {
		s = append(s, fmt.Sprintf("host %s says %v", x.host, math.Float64frombits(x.bits)))
	}
	return strings.Join(s, ", ")
}

// checkResult handles a result of a check's instance (its id is
// checkBase + task) that ran for exec. It reports whether w answered about
// a slot: a value or an error, or an instance stopped or found finished
// (not a held one dropped, which a silent worker gives too), whatever
// became of the check since. That ends a late worker's lateness, as a
// task's cancel acknowledgement does (cancelAck): a one-slot worker whose
// check hung is late for the tasks held behind it, and the stopped check
// may be all it ever answers (seed 845702: decided on another host
// meanwhile, it was stale, and the lone worker left got nothing for hours).
func (m *Master) checkResult(w *mworker, b *batch, r *Result, exec time.Duration) (slot bool) {
	slot = !r.Cancelled || r.Ack != AckDropped
	if b == nil || r.Gen != b.id {
		m.counts.Stale++ // a check of an earlier batch: decided or dropped with it
		return slot
	}
	t := r.ID - checkBase
	c := m.v.checks[t]
	if g, ok := m.v.given[r.Token]; !ok || g.w != w || g.task != t {
		m.unsolicited(w, r)
		return false
	}
	if !r.Cancelled {
		// A value or a failure answers its instance once: a copy is
		// unsolicited, or a key holder that sent it again and again
		// would wear the check out, or move its measurements at will.
		delete(m.v.given, r.Token)
	}
	if !r.Cancelled && r.Err == "" && exec > 0 {
		// A check is an evaluation like any: it says how long w takes,
		// so that its next instances' deadlines are w's, not those grown
		// by a task that hung on it (sched.Deadlines.OfWorker).
		m.measured(w, exec)
	}
	if c == nil {
		m.counts.Stale++ // a copy of a check decided already
		return slot
	}
	i := slices.IndexFunc(c.out, func(o checkOut) bool { return o.token == r.Token })
	if i < 0 && (r.Cancelled || r.Err != "") {
		// Its instance left the books (it answered already, or its
		// worker was lost and the check asked elsewhere): a stop or a
		// failure of it changes nothing, or copies of a stop would have
		// the check asked again for every copy.
		return false
	}
	overdue, sent := false, time.Duration(0)
	if i >= 0 {
		overdue, sent = c.out[i].overdue, c.out[i].at
		c.out = slices.Delete(c.out, i, i+1)
		m.v.load[w.id]--
	}
	if r.Cancelled {
		m.log.Debug("check instance stopped", "gen", b.gen, "task", t, "worker", w.name, "ack", r.Ack)
		if overdue {
			// Stopped as asked: it may be asked again. A stop this
			// master did not ask for (dropped, stopped, or with no
			// outcome at all, as a session that ends says) is the worker
			// declining the check: another host is asked (else a worker
			// that dropped each instance on arrival would be sent the
			// check again, as the least loaded, for ever). An honest
			// session that ends costs its host the vote on this check
			// alone; a lost worker's instances still out are asked
			// again (checksLost).
			delete(c.asked, w.host)
		}
		if r.Ack == AckStopped && overdue {
			// It ran past its deadline (a hang), and this master stopped
			// it: one attempt failed, as an evaluation error is, so that
			// a check whose every instance hangs is given up after
			// MaxRetries, not sent to the same host for ever. One
			// dropped from the worker's queue waited behind another and
			// is charged nothing, nor is a stop this master never asked
			// for (a worker cannot wear a check out by itself).
			c.fails = append(c.fails, w.name+": overdue, stopped")
			// And w takes at least as long as it ran (at most since it
			// was sent: not w's word alone), as a task's overrun says
			// (sched.Deadlines.OfWorker): a worker that has finished
			// nothing, its deadline the hosts' time (perhaps only a
			// liar's), gets its next checks' grown, and ends one within
			// MaxRetries instead of being cut short at each.
			w.overran = max(w.overran, min(exec, m.now()-sent))
			if m.givenUp(b, c) {
				return slot
			}
		}
		m.dispatch(b, c)
		return slot
	}
	m.counts.Results++
	if r.Err == "" && !m.cfg.Problem.NonFinite && !finite(r.F) {
		r.Err = nonFiniteError(r.F)
	}
	if r.Err != "" {
		m.counts.Failed++
		delete(c.asked, w.host) // it may be asked again, MaxRetries failures in all
		c.fails = append(c.fails, w.name+": "+logx.Cut(r.Err, logx.MaxErrText))
		m.failing(w, r.Err) // workers.go: set aside if it keeps failing
		if !m.givenUp(b, c) {
			m.dispatch(b, c)
		}
		return true
	}
	w.fails = 0
	if c.voted(w.host) {
		return true // a host votes once, under whatever connection
	}
	c.votes = append(c.votes, vote{w: w.id, host: w.host, bits: math.Float64bits(r.F)})
	delete(c.asked, w.host)
	m.decide(b, c)
	return true
}

// givenUp closes check c once its instances failed (an error, or a hang
// stopped) more than MaxRetries times: a value with one vote stands
// unverified; one evaluated again, or disputed, fails the generation.
func (m *Master) givenUp(b *batch, c *check) bool {
	if len(c.fails) <= m.cfg.MaxRetries {
		return false
	}
	delete(m.v.checks, c.task)
	switch {
	case c.reeval || len(c.votes) > 1:
		what := "evaluated again after its host was excluded"
		if !c.reeval {
			what = "its hosts disagree: " + c.disagreement()
		}
		b.fail(fmt.Errorf("grid: generation %d, task %d (%s) failed %d times: %v",
			b.gen, c.task, what, len(c.fails), c.fails))
	default:
		m.vlog.Warn("verification given up: the task failed or hung on every worker asked to check it",
			"gen", b.gen, "task", c.task, "failures", len(c.fails))
		m.counts.Unverified++
	}
	return true
}

// decide closes check c if one value has the votes it needs: the value
// becomes the task's, and every host that voted otherwise is excluded.
// Otherwise it asks one more host, unless one is already asked.
func (m *Master) decide(b *batch, c *check) {
	var agreed uint64
	found := false
	for _, x := range c.votes {
		n := 0
		for _, y := range c.votes {
			if y.bits == x.bits {
				n++
			}
		}
		if n >= c.need {
			agreed, found = x.bits, true
			break
		}
	}
	if !found {
		if !slices.ContainsFunc(c.out, func(o checkOut) bool { return !o.overdue }) {
			m.dispatch(b, c)
		}
		return
	}
	delete(m.v.checks, c.task)
	b.f[c.task] = math.Float64frombits(agreed)
	for _, x := range c.votes {
		if x.bits == agreed {
			m.v.from[c.task] = x.host // the value is now theirs, not the liar's
			break
		}
	}
	if c.reeval {
		m.counts.Reevaluated++
	} else {
		m.counts.Verified++
	}
	for _, x := range c.votes {
		if x.bits != agreed {
			m.counts.Mismatches++
			m.exclude(b, x.host, fmt.Sprintf("its fitness value %v for task %d of generation %d differs from the value %v that workers on other hosts agree on",
				math.Float64frombits(x.bits), c.task, b.gen, math.Float64frombits(agreed)))
		}
	}
}

// exclude takes host out of the run: it is reported, the connections
// from it closed with the reason and every later one refused, its votes
// struck from the open checks, and the values accepted from it in this
// batch evaluated again elsewhere.
func (m *Master) exclude(b *batch, host, why string) {
	v := &m.v
	v.exMu.Lock()
	_, again := v.excluded[host]
	if !again {
		v.excluded[host] = why
	}
	v.exMu.Unlock()
	if again {
		return
	}
	m.counts.Excluded++
	m.hosts.exclude(host)
	var names []string
	for _, w := range m.order {
		if w.host == host && !v.exIDs[w.id] {
			names = append(names, w.name)
		}
	}
	m.log.Error("host excluded from the run: "+why+"; every connection from it is refused until the run ends, and its results of this generation are evaluated again elsewhere",
		"host", host, "workers", names)
	for _, w := range slices.Clone(m.order) {
		if w.host == host && !v.exIDs[w.id] {
			v.exIDs[w.id] = true
			m.workerLeft(w)
			w.conn.SendAndClose(&Reject{Reason: excludedReason(host, why)})
		}
	}
	// Its votes no longer count, nor its instances.
	for _, c := range v.checks {
		c.votes = slices.DeleteFunc(c.votes, func(x vote) bool { return x.host == host })
		c.out = slices.DeleteFunc(c.out, func(o checkOut) bool { return o.w.host == host })
	}
	// What it answered in this batch is evaluated again.
	for t, from := range v.from {
		if from != host {
			continue
		}
		v.from[t] = ""
		if c := v.checks[int32(t)]; c != nil {
			c.reeval = true
			continue
		}
		need := 1
		if m.cfg.Verify > 0 && (m.cfg.Verify >= 1 || v.rng.Uint64()>>11 < uint64(m.cfg.Verify*(1<<53))) {
			need = 2
		}
		v.checks[int32(t)] = &check{task: int32(t), need: need, asked: map[string]bool{}, reeval: true, tied: -1}
	}
	for _, t := range v.open() {
		if c := v.checks[t]; c != nil && len(c.out) == 0 {
			m.decide(b, c)
		}
	}
}

// Exclusion is a host excluded from the run, and why.
type Exclusion struct {
	// Host is the IP address the host's connections come from, as the
	// master writes it: as net.IP's String does ("10.0.0.9",
	// "2001:db8::1"; an IPv4 address in IPv6 form as IPv4). Behind a
	// relay, the relay's.
	Host string
	// Why is the reason, as logged when the host was excluded: at most
	// MaxExclusionWhy bytes, one line.
	Why string
}

// MaxExclusionWhy bounds an Exclusion's Why.
const MaxExclusionWhy = 1024

// Validate refuses an Exclusion whose Host is not an IP address as the
// master writes it, or whose Why is empty, longer than MaxExclusionWhy
// or more than one line.
func (x Exclusion) Validate() error {
	if ip := net.ParseIP(x.Host); ip == nil || ip.String() != x.Host {
		return fmt.Errorf("excluded host %.64q: not an IP address as the master writes it (such as 10.0.0.9 or 2001:db8::1)", x.Host)
	}
	switch {
	case x.Why == "":
		return fmt.Errorf("excluded host %s: no reason given", x.Host)
	case len(x.Why) > MaxExclusionWhy:
		return fmt.Errorf("excluded host %s: a reason of %d bytes, at most %d", x.Host, len(x.Why), MaxExclusionWhy)
	case strings.ContainsAny(x.Why, "\r\n"):
		return fmt.Errorf("excluded host %s: a reason of more than one line", x.Host)
	}
	return nil
}

// excludeBefore puts in force the exclusions a master starts with, and
// says each once.
func (m *Master) excludeBefore(xs []Exclusion) {
	for _, x := range xs {
		if _, dup := m.v.excluded[x.Host]; dup {
			continue
		}
		m.v.excluded[x.Host] = x.Why
		m.log.Warn("host "+x.Host+" stays excluded from this run: "+x.Why, "host", x.Host)
	}
}

// Excluded returns the hosts excluded from the run so far, in the order
// of their addresses' text: those the master started with
// (MasterConfig.Excluded) and those verification excluded since. It may
// be called at any time, from any goroutine.
func (m *Master) Excluded() []Exclusion {
	m.v.exMu.Lock()
	defer m.v.exMu.Unlock()
	xs := make([]Exclusion, 0, len(m.v.excluded))
	for _, h := range slices.Sorted(maps.Keys(m.v.excluded)) {
		xs = append(xs, Exclusion{Host: h, Why: m.v.excluded[h]})
	}
	return xs
}

// excludedReason is what an excluded host's workers are told.
func excludedReason(host, why string) string {
	return "excluded from this run: " + why + "; every connection from host " + host + " is refused until the run ends"
}

// open lists the tasks of the open checks in task order: the loop visits
// them in it, never in the map's order, so that one seed replays one
// simulated run.
func (v *verifyState) open() []int32 {
	return slices.Sorted(maps.Keys(v.checks))
}

// excludedWhy is why host was excluded from the run, or "" if it was
// not. Called by the handshakes and the loop.
func (m *Master) excludedWhy(host string) string {
	m.v.exMu.Lock()
	defer m.v.exMu.Unlock()
	if why, ok := m.v.excluded[host]; ok {
		return excludedReason(host, why)
	}
	return ""
}

// checksLost gives the check instances outstanding on w, which has left,
// to other workers.
func (m *Master) checksLost(w *mworker) {
	delete(m.v.slow, w.id)
	b := m.cur
	if b == nil {
		return
	}
	for _, t := range m.v.open() {
		c := m.v.checks[t]
		if c == nil {
			continue // decided by a dispatch earlier in this pass
		}
		n := len(c.out)
		c.out = slices.DeleteFunc(c.out, func(o checkOut) bool { return o.w == w })
		if len(c.out) < n {
			m.v.load[w.id] -= n - len(c.out)
			delete(c.asked, w.host) // unanswered: asked again if it comes back
			m.dispatch(b, c)
		}
	}
}

// checkReturned takes check t's instance on w, given back unrun by a
// worker that drains (a held instance), out of the check and asks
// another host, as for a worker lost (checksLost). A check's instance is
// in no worker's books, which drain searches: left in the check as
// pending, it held the generation until four deadlines of w had passed,
// or w's session ended.
func (m *Master) checkReturned(w *mworker, b *batch, t int32) {
	c := m.v.checks[t]
	if c == nil {
		return
	}
	i := slices.IndexFunc(c.out, func(o checkOut) bool { return o.w == w })
	if i < 0 {
		return
	}
	m.log.Debug("check instance given back by a draining worker; another host is asked", "gen", b.gen, "task", t, "worker", w.name)
	delete(m.v.given, c.out[i].token) // never run: a result of it would be made up
	c.out = slices.Delete(c.out, i, i+1)
	m.v.load[w.id]--
	delete(c.asked, w.host) // unanswered: asked again if it comes back
	m.dispatch(b, c)
}

// checkChecks runs with the deadlines: a check instance late by four
// deadlines of its worker (it waits behind the worker's held tasks) gets
// a second worker, and checks that wait for a worker try again: those
// with no instance out, and those whose every instance is overdue (a
// silent worker's never answers; a worker that joins since may).
func (m *Master) checkChecks(now time.Duration) {
	b := m.cur
	if b == nil || b.replied || len(m.v.checks) == 0 {
		return
	}
	for _, t := range m.v.open() {
		c := m.v.checks[t]
		if c == nil || b.replied {
			continue // decided by a dispatch earlier in this pass, or the batch failed
		}
		late, waiting := false, true
		for i := range c.out {
			o := &c.out[i]
			d := max(m.deadline(o.w), m.cfg.DeadlineFloor) * 4
			if !o.overdue && now-o.at > d {
				o.overdue, o.stopAt, late = true, now, true
				m.v.slow[o.w.id] = true
				m.cancelCheck(o.w, c.task)
			}
			waiting = waiting && o.overdue
		}
		if late || waiting {
			m.dispatch(b, c)
		}
	}
	m.maybeReply() // the last checks may have been given up
}

// cancelCheck tells w to stop its overdue instance of task t's check:
// one that hangs deaf to its cancel is then abandoned after the worker's
// grace, and the slot it held freed (on a one-slot worker, everything
// else waited behind it).
func (m *Master) cancelCheck(w *mworker, t int32) {
	if w.left || w.closed || m.cur == nil {
		return
	}
	m.queueCancel(w, m.cur.id, checkBase+t)
}

// checksDone reports whether every check of the batch is decided.
func (m *Master) checksDone() bool { return len(m.v.checks) == 0 }
