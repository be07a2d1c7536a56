package simgrid

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// Reference runs sc's ES in-process, with no grid: the trajectory every
// simulated run of sc must equal, bit for bit.
func Reference(sc Scenario) ([]es.Stats, []es.Individual, error) {
	eng, err := es.New(sc.ES)
	if err != nil {
		return nil, nil, err
	}
	p, err := problems.New(sc.ES.Problem, sc.ES.Dim)
	if err != nil {
		return nil, nil, err
	}
	var traj []es.Stats
	ev := es.EvaluatorFunc(func(ctx context.Context, _ int, xs [][]float64) ([]float64, error) {
		f := make([]float64, len(xs))
		for i, x := range xs {
			v, err := p.Eval(ctx, x)
			if err != nil {
				return nil, err
			}
			f[i] = v
		}
		return f, nil
	})
	if _, err := eng.Run(context.Background(), ev, es.RunOptions{OnGeneration: func(st es.Stats) error {
		traj = append(traj, st)
		return nil
	}}); err != nil {
		return nil, nil, err
	}
	return traj, eng.Parents(), nil
}

// Bound is the virtual time within which a run of sc must end: every
// generation run serially on the slowest machine, plus, for every fault,
// what the deadlines and timeouts in force let it cost, twice over. A
// run that needs more waited on something no rule bounds: a stall.
func Bound(sc Scenario) time.Duration {
	mt, wt := masterTiming, workerTiming
	var slowest, maxDelay time.Duration
	for _, w := range sc.Workers {
		slowest = max(slowest, w.Task*3/2)
		maxDelay = max(maxDelay, w.Delay[1])
	}
	gens := sc.ES.Stop.Generations + 1
	tasks := gens * max(sc.ES.Lambda, sc.ES.Mu)
	// A task evaluated, and its answer back.
	task := slowest + 4*maxDelay + 10*time.Millisecond
	// Without faults: everything in a row on the slowest machine.
	b := time.Duration(tasks) * task
	// Joining: a handshake, after the first worker's start.
	b += sc.Workers[0].Join + time.Second
	// The deadline that catches a lost instance, and the wait to learn of
	// it: one deadline before anything is measured, the idle timeout for
	// a session that goes silent.
	lost := mt.FirstDeadline + mt.IdleTimeout + wt.AbandonGrace + task
	for _, w := range sc.Workers {
		switch {
		case w.HangEvery > 0:
			// Each hang costs at most one deadline, and the abandoned
			// slot's grace; but a task that hangs again has its deadline
			// doubled (up to half the task timeout), and among the tasks
			// the longest run of hangs of one is about log(tasks) /
			// log(HangEvery) long.
			hangs := tasks*2/w.HangEvery + 1
			b += time.Duration(hangs) * (mt.FirstDeadline + wt.AbandonGrace + task)
			chain := math.Ceil(math.Log(float64(tasks)) / math.Log(float64(w.HangEvery)))
			b += time.Duration(chain) * mt.TaskTimeout / 2
		case w.FailEvery > 0:
			b += time.Duration(tasks*2/w.FailEvery+1) * task
			// MaxFailures of them in a row set it aside while another
			// worker can take its tasks; should that one leave, it waits
			// the first deadline to be given tasks again (seed 226413).
			b += mt.FirstDeadline
		case w.NaN:
			// Its failures until it is set aside (what it runs then
			// too), in each of its sessions; and the first deadline
			// a worker set aside may wait to be given tasks again.
			b += time.Duration(2*(mt.MaxFailures+w.Slots)) * task
			b += mt.FirstDeadline
		case w.Silent:
			b += lost
			if sc.Split {
				// A child master left with it alone returns nothing:
				// its parent cuts it off after two deadlines (the first
				// ones, before anything is measured), and its workers
				// find the parent again.
				b += 2*mt.FirstDeadline + wt.MaxBackoff
			}
		}
		if w.Kill > 0 {
			b += lost + w.Back + wt.MaxBackoff + time.Second
		}
		if w.Freeze > 0 {
			b += w.FreezeFor + lost + wt.MaxBackoff
		}
		// A kill that leaves its connections half-open (HalfOpen) costs
		// what a kill does: the master drops the old connection when the
		// worker, back, connects from its host under its name, or when
		// its idle timeout or the late reset ends it, within lost.
		if w.OneWay > 0 {
			// As a freeze: the bytes held one way wait for the
			// partition's end, or the master's idle timeout drops the
			// session (or gossip's verdict does) and the worker comes
			// back after a back-off.
			b += w.OneWayFor + lost + wt.MaxBackoff
		}
		if w.Slow > 0 {
			// The slow time itself; the round trips under way as it
			// ends, each way up to SlowBy late (twice: a task and a
			// cancel, say); and an instance found overdue meanwhile, or
			// the session timed out, and the worker back.
			b += w.SlowFor + 4*w.SlowBy + lost + wt.MaxBackoff
		}
		if w.Drain > 0 {
			b += task * time.Duration(w.Slots*2+1)
		}
		if w.NoCancel > 0 {
			// Each instance cancelled while it runs may hold its slot
			// for a start's time, and then cost a start.
			b += time.Duration(2*tasks) * 2 * w.NoCancel
		}
		b += w.Join
	}
	if l := sc.Long; l != nil {
		// Each long point is cut short at deadlines that double up to
		// half the task timeout (under 1.5 timeouts in all), then runs
		// its time; one that hangs, its timeouts (Check counts each).
		b += time.Duration(tasks/max(l.Every, 1)+1) * (3*mt.TaskTimeout/2 + l.Took + task)
	}
	if sc.LoseGrandchild != nil {
		// As a worker killed: its workers find its parent again.
		b += lost + wt.MaxBackoff + time.Second
	}
	if r := sc.Relay; r != nil && r.Kill > 0 {
		// The relay's workers lose their connections, and find it again
		// once it is back.
		b += lost + r.Back + 2*wt.MaxBackoff
	}
	if sc.Verify > 0 {
		// A check waits one first deadline for a second worker before
		// its value stands unverified (each master, once).
		b += mt.FirstDeadline
		if sc.Restart != nil {
			b += mt.FirstDeadline
		}
		if sc.liar() {
			// A tie waits VerifyWait for a third host, then fails
			// the run.
			b += mt.VerifyWait
		}
	}
	if r := sc.Restart; r != nil {
		// Down, the workers' backoff to find the new master, and the
		// interrupted generation again.
		b += r.At + r.Down + 2*wt.MaxBackoff + time.Duration(max(sc.ES.Lambda, sc.ES.Mu))*task + lost
	}
	return 2 * b
}

// timeoutCost is what a try that runs to the task timeout costs: the
// timeout, and its worker's drop and return (the agent's grace for its
// abandoned evaluation, a back-off, a handshake).
var timeoutCost = masterTiming.TaskTimeout + workerTiming.AbandonGrace + workerTiming.MaxBackoff + handshakeBound

// timeout is a worker the root master dropped as an instance ran past
// the task timeout: the trace's line, and what the sim's record says of
// that try.
type timeout struct {
	inc, batch, task int // the master's incarnation, its batch (as Outcome.Batches), the task
	worker           string
	at, ran          time.Duration // when, after running how long
	// hung: the worker's evaluations of the task's point that began
	// since the instance was sent are one or more, every one an emulated
	// hang.
	hung bool
}

// taskTimeouts lists the root's drops of a worker for the task timeout,
// from its trace's lines, each with what the record (Outcome.Evals) says
// of the try.
func taskTimeouts(out *Outcome, trace string) []timeout {
	var ts []timeout
	for _, line := range strings.Split(trace, "\n") {
		if !strings.Contains(line, `msg="dropping worker: a task ran past the task timeout`) || attr(line, "child") != "" {
			continue
		}
		at, _, _ := strings.Cut(strings.TrimPrefix(line, "t="), " ")
		to := timeout{inc: atoi(attr(line, "master")), task: atoi(attr(line, "task")), worker: attr(line, "worker"), batch: -1}
		var err1, err2 error
		to.at, err1 = time.ParseDuration(at)
		to.ran, err2 = time.ParseDuration(attr(line, "running_for"))
		// The line's running_for is rounded to the millisecond: the
		// instance was sent within a millisecond of at − ran, in the last
		// batch begun by then (one begun a millisecond later would have
		// taken it out of the books).
		if err1 == nil && err2 == nil && to.inc >= 0 && to.inc < len(out.BatchAt) {
			for i, b := range out.BatchAt[to.inc] {
				if b <= to.at-to.ran+time.Millisecond {
					to.batch = i
				}
			}
		}
		if to.batch >= 0 && to.batch < len(out.BatchPoints[to.inc]) && to.task >= 0 && to.task < len(out.BatchPoints[to.inc][to.batch]) {
			point, sent := out.BatchPoints[to.inc][to.batch][to.task], to.at-to.ran-time.Millisecond
			tries := 0
			to.hung = true
			for _, e := range out.Evals {
				if e.Worker == to.worker && e.Point == point && e.At >= sent && e.At <= to.at {
					tries++
					to.hung = to.hung && e.Hung
				}
			}
			to.hung = to.hung && tries > 0
		}
		ts = append(ts, to)
	}
	return ts
}

// hangsTimedOut says the run failed as a task ran past the task timeout
// more often than MaxRetries allows, every one of its timed-out tries an
// emulated hang (timeouts): as the master must fail it
// (grid.RetriesExhaustedError, naming the timeout).
func hangsTimedOut(out *Outcome, timeouts []timeout) bool {
	var re *grid.RetriesExhaustedError
	if !errors.As(out.Err, &re) || len(re.Failures) == 0 || len(out.Batches) == 0 {
		return false
	}
	for _, f := range re.Failures {
		if !strings.HasPrefix(f.Err, "ran past the task timeout") {
			return false
		}
	}
	// The run failed in the last batch of the last master.
	inc := len(out.Batches) - 1
	batch := len(out.Batches[inc]) - 1
	n := 0
	for _, to := range timeouts {
		if to.inc == inc && to.batch == batch && to.task == re.Task {
			if !to.hung {
				return false
			}
			n++
		}
	}
	return n >= len(re.Failures)
}

// handshakeBound is how long a data connection's handshake may take at
// most (the master's hello timeout, grid's handshake bound).
const handshakeBound = 3 * time.Second

// CheckWaiting makes Check fail a split run that leaves a worker looking
// for a master after it ended (as esworker -once would, for ever). On by
// default (-sim.waiting=false turns it off); TestFixedWaitingSeeds keeps
// the seeds that found such a gap, each closed since.
var CheckWaiting = true

// Check returns every invariant that out breaks (none: nil). ref and
// refFinal are Reference's; trace is the run's trace.
func Check(sc Scenario, out *Outcome, ref []es.Stats, refFinal []es.Individual, trace string) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	// A liar that honest hosts cannot outvote may end the run with a tie
	// no third host broke: said, never a stall, and never its lie.
	undecided := errors.Is(out.Err, grid.ErrUndecided) && sc.liar() && !sc.decisive()
	// A task whose every try hung past the ceiling of its deadlines ran
	// to the task timeout each time, and failed the run after
	// MaxRetries+1 of them: said, naming the timeout, never a stall. Only
	// if the tries were hangs: a finite evaluation the master timed out
	// is a fault of the master's.
	timeouts := taskTimeouts(out, trace)
	hungOut := hangsTimedOut(out, timeouts)
	if out.Err != nil && !undecided && !hungOut {
		fail("the run failed: %v", out.Err)
	}
	for _, to := range timeouts {
		if !to.hung {
			fail("task timeout: %s was dropped as task %d of its batch (master %d) ran %v, at %v, and that try was no hang of the sim's", to.worker, to.task, to.inc, to.ran, to.at)
		}
	}
	// A try that hung past the ceiling of its deadlines costs the task
	// timeout (Bound counts the deadlines up to the ceiling), and its
	// worker's drop and return, twice over as Bound does.
	hung := 0
	for _, to := range timeouts {
		if to.hung {
			hung++
		}
	}
	if bound := Bound(sc) + 2*time.Duration(hung)*timeoutCost; out.Elapsed > bound {
		fail("liveness: the run took %v of virtual time, over its bound of %v", out.Elapsed, bound)
	}
	if undecided || hungOut {
		// The generations it completed are the in-process ones.
		for i := range min(len(out.Trajectory), len(ref)) {
			if !sameStats(out.Trajectory[i], ref[i]) {
				fail("trajectory: generation %d is %+v, in-process %+v", i, out.Trajectory[i], ref[i])
				break
			}
		}
	}
	// The trajectory equals the in-process one, bit for bit.
	if out.Err == nil {
		if len(out.Trajectory) != len(ref) {
			fail("trajectory: %d generations, in-process %d", len(out.Trajectory), len(ref))
		}
		for i := range min(len(out.Trajectory), len(ref)) {
			if !sameStats(out.Trajectory[i], ref[i]) {
				fail("trajectory: generation %d is %+v, in-process %+v", i, out.Trajectory[i], ref[i])
				break
			}
		}
		if !sameParents(out.Final, refFinal) {
			fail("trajectory: the final parents differ from the in-process run's")
		}
	}
	// Every task accepted exactly once by each master incarnation, in
	// every batch it completed; at most once in the one it was killed in.
	type key struct{ inc, gen, task int }
	seen := map[key]int{}
	for _, a := range out.Accepts {
		seen[key{a.Master, a.Gen, a.Task}]++
	}
	for k, n := range seen {
		if n > 1 {
			fail("accepted %d times: generation %d, task %d (master %d)", n, k.gen, k.task, k.inc)
		}
	}
	for inc, batches := range out.Batches {
		accepted := 0
		for k := range seen {
			if k.inc == inc {
				accepted++
			}
		}
		// With splits, child masters accept results too and return them.
		if inc < len(out.Stats) {
			accepted += int(out.Stats[inc].FromChildren)
		}
		done, all := 0, 0
		for i, n := range batches {
			all += n
			if i < out.Completed[inc] {
				done += n
			}
		}
		if accepted < done || accepted > all {
			fail("master %d accepted %d results; its completed batches had %d tasks, all its batches %d", inc, accepted, done, all)
		}
		// The counters agree: every task counted once as an original,
		// with splits too (the children's counts reach the root).
		if inc < len(out.Reports) {
			c := out.Reports[inc].Counts
			if c.Originals < done || c.Originals > all {
				fail("counts: master %d counted %d originals; its completed batches had %d tasks, all its batches %d", inc, c.Originals, done, all)
			}
			if killed := inc < len(out.Batches)-1; !killed && out.Err == nil && c.Originals != all {
				fail("counts: master %d counted %d originals for %d tasks", inc, c.Originals, all)
			}
			if st := out.Stats[inc]; sc.Verify == 0 && st.TasksSent != int64(c.Originals+c.Resends+c.Replicas) {
				fail("counts: master %d sent %d instances, its ledger counts %d originals + %d resends + %d replicas", inc, st.TasksSent, c.Originals, c.Resends, c.Replicas)
			}
		}
	}
	// Memory stays bounded: nothing piles up on a link.
	if out.NetPeak > 8<<20 {
		fail("memory: %d bytes waited on one link", out.NetPeak)
	}
	// A silent worker costs one deadline: it is found late once per
	// connection, and gets no work after that.
	late := lateEvents(trace)
	for _, w := range sc.Workers {
		if !w.Silent {
			continue
		}
		for conn, n := range late[w.Name] {
			if n > 1 {
				fail("silent worker %s (connection %s) was found late %d times, a deadline each", w.Name, conn, n)
			}
		}
	}
	// A master's machine crashed with its connections half-open (a child
	// master's): its workers hear nothing, and end their session at their
	// idle timeout from the last byte they got, which a freeze or a
	// one-way partition holds back to its end (seeds 54049609, 54087400).
	halfOpen := slices.ContainsFunc(sc.Workers, func(w WorkerSpec) bool { return w.HalfOpen > 0 })
	idle := masterTiming.IdleTimeout
	if out.Err == nil {
		// A worker cut off when the run ended hears of it only later.
		var lingering []string
		for _, name := range out.Lingering {
			i := slices.IndexFunc(sc.Workers, func(w WorkerSpec) bool { return w.Name == name })
			if w := sc.Workers[i]; w.Freeze > 0 && w.Freeze+w.FreezeFor > out.Elapsed ||
				w.OneWay > 0 && w.OneWay+w.OneWayFor > out.Elapsed ||
				halfOpen && w.Freeze > 0 && w.Freeze+w.FreezeFor+idle > out.Elapsed ||
				halfOpen && w.OneWay > 0 && w.OneWay+w.OneWayFor+idle > out.Elapsed ||
				w.Alias != "" || sc.aliased(w) {
				// Of two machines giving one name, the master knows one
				// at a time: awaiting that name back from a child master
				// lost, it may take the other, present, for it (seed
				// 52009443), and the first hears nothing of the end.
				continue
			}
			lingering = append(lingering, name)
		}
		if len(lingering) > 0 {
			fail("workers still in a session %v after the run ended: %v", lingerAfter, lingering)
		}
	}
	if CheckWaiting && out.Err == nil && sc.Split && sc.Restart == nil {
		// Every worker that was there at the end, under whichever master
		// (a child, a grandchild…), heard that the run is over. Those
		// the master could not tell (killed, cut off or joining at the
		// end, shut out as liars or on a liar's host, or in back-off
		// while a restarted master came and went) may still look for it;
		// so may a relay's, which it lets through to a master that has
		// ended the run (a gap of the relay's, not checked here).
		liarHosts := map[string]bool{}
		for _, w := range sc.Workers {
			if w.Liar > 0 {
				liarHosts[sc.host(w)] = true
			}
		}
		// A worker that joins within a second of the listener's closing
		// may find it closed.
		closed := out.Closed
		if closed == 0 {
			closed = out.Elapsed
		}
		var waiting []string
		for _, name := range out.Waiting {
			i := slices.IndexFunc(sc.Workers, func(w WorkerSpec) bool { return w.Name == name })
			w := sc.Workers[i]
			if w.Kill > 0 || liarHosts[sc.host(w)] || w.Freeze > 0 && w.Freeze+w.FreezeFor+w.Gossip > out.Elapsed ||
				w.Join+time.Second > closed || w.Relayed ||
				w.OneWay > 0 && w.OneWay+w.OneWayFor+w.Gossip > out.Elapsed ||
				w.Slow > 0 && w.Slow+w.SlowFor+w.SlowBy+handshakeBound+workerTiming.MaxBackoff+time.Second > closed ||
				halfOpen && w.Freeze > 0 && w.Freeze+w.FreezeFor+idle+workerTiming.MaxBackoff+time.Second > closed ||
				halfOpen && w.OneWay > 0 && w.OneWay+w.OneWayFor+idle+workerTiming.MaxBackoff+time.Second > closed ||
				w.Alias != "" || sc.aliased(w) {
				// (Under a master crashed half-open, as Lingering says:
				// then it finds the root closed, seed 54087400.)
				// A slow link's round trip may outlast the handshake's
				// bounds: such a worker is refused until it is fast
				// again (a handshake begun slow fails after, its last
				// writes late), then in back-off (seed 55022065). Of two machines that give one
				// name, the master refuses the second while the first is
				// there: it may be in back-off as the run ends.
				continue
			}
			waiting = append(waiting, name)
		}
		if len(waiting) > 0 {
			fail("workers still looking for a master %v after the run ended: %v", lingerAfter, waiting)
		}
	}
	for _, name := range unmeasured(sc, out) {
		fail("no worker left unmeasured: %s ran no evaluation in %d generations in a row", name, measureWithin)
	}
	if out.Unclosed > 0 {
		fail("leak: %d connections still open a minute after the run ended", out.Unclosed)
	}
	return bad
}

// measureWithin is how many generations in a row may pass without a
// worker running an evaluation: a policy may pass a slow worker over, or
// its copies lose their races, but it is measured again within that many
// (eft's probe: one task at the start of a batch after one that sent it
// nothing).
const measureWithin = 3

// unmeasured lists the workers that ran no evaluation in measureWithin
// generations in a row. It checks the workers that are there from the
// start, always answer and reach the master directly, in runs with one
// master, unverified, whose generations each have a task for every slot
// (a smaller one may leave a worker out, which says nothing of its
// measurement); each from when it first could have work, over windows
// long enough for two of its tasks.
func unmeasured(sc Scenario, out *Outcome) []string {
	slots := 0
	for _, w := range sc.Workers {
		slots += w.Slots
	}
	if out.Err != nil || sc.Split || sc.Restart != nil || sc.Verify > 0 || sc.ES.Lambda < slots || len(out.BatchAt) != 1 {
		return nil
	}
	// The generations' spans (the first batch, the initial parents, is
	// μ tasks and is skipped).
	at := out.BatchAt[0]
	type span struct{ from, to time.Duration }
	var spans []span
	for i := 1; i < len(at); i++ {
		to := out.Elapsed
		if i+1 < len(at) {
			to = at[i+1]
		}
		spans = append(spans, span{at[i], to})
	}
	var bad []string
	for _, w := range sc.Workers {
		if !w.healthy() || w.Join > 0 || w.Relayed || w.NoCancel > 0 || sc.aliased(w) {
			continue
		}
		began := out.Began[w.Name]
		ready, ok := out.Ready[w.Name]
		if !ok {
			continue // never in a session (its handshakes outlasted the run): nothing to measure
		}
		for i := 0; i+measureWithin <= len(spans); i++ {
			from, to := spans[i].from, spans[i+measureWithin-1].to
			if from < ready || to-from < 2*w.Task {
				// Before it could have work, or too short a window for
				// a task of its own to end and another to begin.
				continue
			}
			if !slices.ContainsFunc(began, func(t time.Duration) bool { return t >= from && t < to }) {
				bad = append(bad, fmt.Sprintf("%s (generations %d–%d)", w.Name, i+1, i+measureWithin))
				break
			}
		}
	}
	return bad
}

// lateEvents counts, per worker name and connection id, the times the
// master found the worker late (its "worker is late" lines).
func lateEvents(trace string) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, line := range strings.Split(trace, "\n") {
		if !strings.Contains(line, `msg="worker is late`) || attr(line, "child") != "" {
			// Child masters (their logs name them child=) come and go
			// under one name, each numbering its connections afresh
			// (seed 108931: two children's connection 3).
			continue
		}
		name, id := attr(line, "worker"), attr(line, "worker_id")
		if out[name] == nil {
			out[name] = map[string]int{}
		}
		out[name][attr(line, "master")+"/"+id]++
	}
	return out
}

// attr is the value of key=value in a text log line.
func attr(line, key string) string {
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

func sameStats(a, b es.Stats) bool {
	eq := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	return a.Gen == b.Gen && a.Evals == b.Evals && eq(a.Best, b.Best) && eq(a.Mean, b.Mean) && eq(a.BestEver, b.BestEver) && a.NaNs == b.NaNs
}

func sameParents(a, b []es.Individual) bool {
	if len(a) != len(b) {
		return false
	}
	eq := func(x, y []float64) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return true
	}
	for i := range a {
		if math.Float64bits(a[i].F) != math.Float64bits(b[i].F) || !eq(a[i].X, b[i].X) || !eq(a[i].Sigma, b[i].Sigma) {
			return false
		}
	}
	return true
}
