package sim

import "time"

// evKind says what a simulation event does when its time comes.
type evKind uint8

const (
	evBatchStart   evKind = iota + 1 // the master starts batch ev.m.batch
	evAtRelay                        // ev.m reaches relay ev.m.route[hop]
	evAtWorker                       // ev.m reaches its worker
	evWorkerHandle                   // the worker has decoded ev.m
	evTaskDone                       // slot ev.slot of worker ev.m.w finishes (if ev.ver matches)
	evAtMaster                       // result ev.m reaches the master
	evMasterHandle                   // the master has decoded result ev.m
	evSlowdown                       // the engine's slows[ev.slot] takes effect
	evLeave                          // machine ev.m.w leaves
	evTick                           // the master's clock ticks in batch ev.m.batch (sched.Tick)
)

// msgKind is the kind of a simulated message.
type msgKind uint8

const (
	msgTask   msgKind = iota + 1 // master → worker: run a task (into the remote queue)
	msgCancel                    // master → worker: drop or stop a task
	msgResult                    // worker → master: a task's result
	msgAck                       // worker → master: a late worker's answer to a cancel
)

// up says m goes from its worker to the master.
func (m *msg) up() bool { return m.kind == msgResult || m.kind == msgAck }

// msg is one simulated message between the master and worker w, tagged with
// its batch so a late cancel or result never hits a later batch's task of
// the same id.
type msg struct {
	kind  msgKind
	hop   int8 // index of the next relay on the route (up: counted from the worker's end)
	w     int32
	batch int32
	task  int32
	exec  uint32 // msgResult: how long the task executed, as the worker reports it, in µs (0: unknown); 32 bits keep event small
}

// event is one entry of the event queue; seq breaks ties between events at
// the same time in insertion order, which makes every run deterministic.
type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	slot int32
	ver  uint32
	m    msg
}

// eventQueue is a binary min-heap of events by (at, seq), written out for
// the element type because it is the simulator's hot path.
type eventQueue struct {
	h   []event
	seq uint64
	// clock counts the queued slowdowns, leaves and ticks: events set by
	// the clock, not by work under way, that cannot end a batch.
	clock int
}

func (q *eventQueue) len() int { return len(q.h) }

// working is the number of queued events of work under way: messages,
// tasks running, the next batch.
func (q *eventQueue) working() int { return len(q.h) - q.clock }

// clockKind says events of kind k are the clock's (eventQueue.clock).
func clockKind(k evKind) bool { return k == evSlowdown || k == evLeave || k == evTick }

func (q *eventQueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// push adds ev, stamping its sequence number.
func (q *eventQueue) push(ev event) {
	if clockKind(ev.kind) {
		q.clock++
	}
	q.seq++
	ev.seq = q.seq
	q.h = append(q.h, ev)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

// pop removes and returns the earliest event.
func (q *eventQueue) pop() event {
	top := q.h[0]
	if clockKind(top.kind) {
		q.clock--
	}
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
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
