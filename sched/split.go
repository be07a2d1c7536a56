package sched

// Tasks added to and taken from a running batch: the seam for masters
// that split (docs/papers.md §2). A master that splits takes half of its
// remaining tasks out of its batch and hands them to a child master; a
// master whose queue ran dry is granted tasks by another, which takes
// them out of its own batch; a child that dies or returns gives back
// what it did not finish. The policy sees only two events:
//
//	TasksTaken{N}    up to N tasks leave the batch from the tail of Q,
//	                 each named by a Taken action (the driver hands them
//	                 over); a task with a live instance is never taken
//	TasksAdded{IDs}  tasks join the batch at the back of Q
//
// A task taken out counts as done for Done (so a master whose every task
// was taken is done with its share) until TasksAdded brings it back; a
// result for it in the meantime is a duplicate (no Accept): the master it
// went to decides it. A sub-master is the same policy over its share:
// BatchStarted{N: 0}, then TasksAdded with the ids of its share, which
// keep their numbers (the parent's), so results need no translation.
//
// Nothing changes for a whole batch: without these events no task is
// ever absent, and every step is what New describes.

// MaxTaskID is the largest task id TasksAdded accepts: an id sizes the
// batch, and must not make a policy allocate without bound.
const MaxTaskID = 1<<26 - 1

// addTasks handles TasksAdded.
func (p *policy) addTasks(ids []TaskID) {
	for _, ti := range ids {
		if ti < 0 || ti > MaxTaskID {
			continue
		}
		if int(ti) >= len(p.tasks) {
			p.growAbsent(int(ti) + 1)
		}
		t := &p.tasks[ti]
		if !t.absent {
			continue // in the batch already (in Q, live or done)
		}
		t.absent, t.done, t.inQ = false, false, true
		p.nDone--
		p.q.pushBack(ti)
		p.qLive++
		if p.rBuilt {
			// Q is not empty any more: R is taken afresh when it empties.
			p.clearR()
		}
	}
}

// growAbsent grows the batch's id space to n tasks; the new ones are
// absent (not in the batch).
func (p *policy) growAbsent(n int) {
	old := len(p.tasks)
	if cap(p.tasks) < n {
		p.tasks = append(p.tasks[:cap(p.tasks)], make([]task, n-cap(p.tasks))...)
	}
	p.tasks = p.tasks[:n]
	for i := old; i < n; i++ {
		t := &p.tasks[i]
		*t = task{on: t.on[:0], failed: t.failed[:0], absent: true, done: true}
	}
	p.nDone += n - old
	p.n = n
}

// takeTasks handles TasksTaken: up to n tasks from the tail of Q.
func (p *policy) takeTasks(n int, out []Action) []Action {
	for ; n > 0 && p.qLive > 0; n-- {
		ti, ok := p.popQBack()
		if !ok {
			break
		}
		t := &p.tasks[ti]
		t.absent, t.done = true, true
		if len(t.failed) > 0 {
			p.nFail--
			t.failed = t.failed[:0]
		}
		p.nDone++
		out = append(out, Action{Kind: Taken, Task: ti})
	}
	return out
}

// popQBack takes the last task of Q that has no live instance (a task
// given back to Q while a late worker still runs it stays).
func (p *policy) popQBack() (TaskID, bool) {
	var keep []TaskID
	defer func() {
		for i := len(keep) - 1; i >= 0; i-- {
			p.q.pushBack(keep[i])
		}
	}()
	for p.q.size > 0 {
		ti := p.q.popBack()
		t := &p.tasks[ti]
		if !t.inQ {
			continue // a stale entry
		}
		if len(t.on) > 0 {
			keep = append(keep, ti)
			if len(keep) == p.qLive {
				return 0, false
			}
			continue
		}
		t.inQ = false
		p.qLive--
		return ti, true
	}
	return 0, false
}

// popBack removes and returns the last entry.
func (r *ring) popBack() TaskID {
	r.size--
	return r.buf[(r.head+r.size)%len(r.buf)]
}

// Queued reports how many tasks wait in p's Q (the tasks a master could
// hand to another), or -1 if p does not say.
func Queued(p Policy) int {
	if q, ok := p.(interface{ queued() int }); ok {
		return q.queued()
	}
	return -1
}

func (p *policy) queued() int { return p.qLive }

// MaxOverloadWindow bounds an Overload's window.
const MaxOverloadWindow = 1 << 16

// MaxDefaultOverloadWindow caps DefaultOverloadWindow: a few hundred
// assignments already give a steady mean, and a master overloaded k
// times over takes 2k task times to make 2 × processors of them (0.2 s
// at 4,096 workers and 25 µs a message), once to decide its first split
// and again after each, which the children's start and a run's end
// cannot afford.
const MaxDefaultOverloadWindow = 512

// DefaultOverloadWindow is the overload test's n when none is set: the
// paper's 2 × processors (the master and its workers' slots), at most
// MaxDefaultOverloadWindow.
func DefaultOverloadWindow(processors int) int {
	return min(2*max(processors, 1), MaxDefaultOverloadWindow)
}

// Overload is docs/papers.md §2's overload test: right after each assignment
// of a task, the master counts the messages already waiting for it; it
// is overloaded when that count, averaged over the last n assignments,
// is ≥ 1. The real master and the simulator feed it alike. The zero
// value has no window (never overloaded) until SetWindow.
type Overload struct {
	win    []int32 // the counts, a ring
	head   int     // next write
	filled int     // entries written, at most len(win)
	n      int
	sum    int64 // over the last min(n, filled) entries
	// Assignments counts every assignment noted; Overloaded those after
	// which the test said overloaded.
	Assignments, OverloadedAfter int64
}

// SetWindow sets n (clamped to [1, MaxOverloadWindow]); the counts
// already noted are kept.
func (o *Overload) SetWindow(n int) {
	n = min(max(n, 1), MaxOverloadWindow)
	if n == o.n {
		return
	}
	if len(o.win) < n {
		// Grow, keeping the newest entries in order.
		k := min(o.filled, len(o.win))
		old := make([]int32, k)
		for i := 0; i < k; i++ {
			old[i] = o.win[(o.head-k+i+len(o.win))%len(o.win)]
		}
		o.win = make([]int32, max(n, 64))
		copy(o.win, old)
		o.head, o.filled = k%len(o.win), k
	}
	o.n = n
	o.sum = 0
	for i := 1; i <= min(n, o.filled); i++ {
		o.sum += int64(o.win[(o.head-i+len(o.win))%len(o.win)])
	}
}

// Window is n.
func (o *Overload) Window() int { return o.n }

// Note records k assignments, each followed by waiting messages waiting.
func (o *Overload) Note(k, waiting int) {
	if o.n == 0 || k <= 0 {
		return
	}
	w := int32(min(max(waiting, 0), 1<<30))
	o.Assignments += int64(k)
	for i := 0; i < min(k, o.n); i++ {
		if o.filled >= o.n {
			o.sum -= int64(o.win[(o.head-o.n+len(o.win))%len(o.win)])
		}
		o.win[o.head] = w
		o.head = (o.head + 1) % len(o.win)
		o.filled = min(o.filled+1, len(o.win))
		o.sum += int64(w)
	}
	if o.Overloaded() {
		o.OverloadedAfter += int64(k)
	}
}

// Overloaded is the test's decision: n assignments noted since the last
// Reset, and the mean of the waiting counts over the last n ≥ 1.
func (o *Overload) Overloaded() bool {
	return o.n > 0 && o.filled >= o.n && o.sum >= int64(o.n)
}

// Mean is the mean waiting count over the last n assignments (over fewer
// while fewer were noted since the last Reset).
func (o *Overload) Mean() float64 {
	k := min(o.n, o.filled)
	if k == 0 {
		return 0
	}
	return float64(o.sum) / float64(k)
}

// Reset forgets the counts (not the totals): after a split the next
// decision rests on n fresh assignments.
func (o *Overload) Reset() { o.filled, o.sum = 0, 0 }

// SplitEstimate is what a master has measured when it considers a split,
// for SplitWorthIt (docs/papers.md §2's caveat: "a real implementation should
// weigh that loss").
type SplitEstimate struct {
	// MasterRate is how many tasks per second one master can hand out
	// when busy all the time: the tasks it handled per second of its own
	// busy time (or 1 / its cost per task).
	MasterRate float64
	// Exec and RTT are a task's mean execution time and a round trip,
	// in seconds, as the master measures them: from sending a task to
	// handling its result, less Exec, which includes the time the result
	// waited in the master's inbox.
	Exec, RTT float64
	// Waiting is the overload test's mean (messages waiting after an
	// assignment) and Service the master's busy time per message, in
	// seconds: a result waits about Waiting × Service in the inbox, and
	// that much of RTT is the master's overload, not the network's.
	Waiting, Service float64
	// Kept and Given are the slots of the workers the master keeps and
	// gives to the child; Lost those of the worker promoted, which stops
	// computing.
	Kept, Given, Lost int
	// Queued is the tasks left in Q, of which the child gets half.
	Queued int
	// Margin is the fraction by which the split must beat not splitting.
	Margin float64
}

// SplitWorthIt says whether a split is expected to pay: the throughput
// of the two masters after it, each limited by its own rate and by its
// workers' (slots ÷ (Exec + the network's round trip), the round trip
// being RTT less the inbox wait Waiting × Service), beats the throughput
// now by Margin, and the time it saves on the tasks left exceeds what it
// costs the moved workers (one task and two round trips each: they
// finish what they run and reconnect).
func SplitWorthIt(e SplitEstimate) bool {
	if e.MasterRate <= 0 || e.Exec <= 0 || e.Queued <= 0 {
		return false
	}
	e.RTT = max(e.RTT-e.Waiting*e.Service, 0)
	per := e.Exec + e.RTT
	workers := func(slots int) float64 { return float64(slots) / per }
	now := min(e.MasterRate, workers(e.Kept+e.Given+e.Lost))
	after := min(e.MasterRate, workers(e.Kept)) + min(e.MasterRate, workers(e.Given))
	if after <= now*(1+e.Margin) {
		return false
	}
	saved := float64(e.Queued)/now - float64(e.Queued)/after
	cost := e.Exec + 2*e.RTT
	return saved > cost
}
