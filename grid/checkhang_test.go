package grid

import (
	"log/slog"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// bareMaster is a master of config cfg an hour into its run, with its
// books and no network: its loop's functions are called directly.
func bareMaster(cfg MasterConfig) *Master {
	m := &Master{start: time.Now().Add(-time.Hour), log: slog.New(slog.DiscardHandler), vlog: slog.New(slog.DiscardHandler), cfg: cfg}
	m.loopState.init()
	return m
}

// policyBooks is a bareMaster with the usual deadlines, no -verify, and a
// fresh policy of the name given and its ledger: a master's books for the
// tests that take instances out of them.
func policyBooks(tb testing.TB, policy string) *Master {
	tb.Helper()
	m := bareMaster(MasterConfig{MaxRetries: 3, DeadlineFactor: 4, DeadlineFloor: time.Second,
		FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute, IdleTimeout: time.Hour})
	p, err := sched.New(policy, sched.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	m.policy, m.ledger = p, sched.NewLedger(sched.LedgerConfig{})
	return m
}

// joinBooks joins a worker of that many slots to m's books and policy,
// heard from now.
func joinBooks(m *Master, id sched.WorkerID, name, host string, slots int) *mworker {
	w := &mworker{id: id, name: name, host: host, slots: slots, heard: true, lastHeard: m.now()}
	m.byID[w.id], m.order = w, append(m.order, w)
	m.step(sched.Event{Kind: sched.WorkerJoined, Worker: w.id, Slots: w.slots}, 0)
	return w
}

// checkBooks is a master's books, no network, with w0 and w1 one-slot
// workers on two hosts, an hour into the run, and a batch of one task
// whose value w0 gave and which is checked: its check instance is out on
// w1.
func checkBooks(t testing.TB) (*Master, *batch, *mworker, *mworker) {
	t.Helper()
	m := bareMaster(MasterConfig{Verify: 1, MaxRetries: 3, DeadlineFactor: 4, DeadlineFloor: time.Second,
		FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute})
	w0 := &mworker{id: 1, name: "w0", host: "10.0.0.1", slots: 1}
	w1 := &mworker{id: 2, name: "w1", host: "10.0.0.2", slots: 1}
	for _, w := range []*mworker{w0, w1} {
		m.byID[w.id] = w
		m.order = append(m.order, w)
	}
	b := &batch{id: 1, gen: 1, xs: [][]float64{{0.5}}, f: make([]float64, 1), done: make([]bool, 1),
		overran: make([]uint8, 1), failures: map[int32][]TaskFailure{}}
	m.cur = b
	m.verifyStart(1)
	m.verifyAccepted(w0, b, 0, 1.5)
	return m, b, w0, w1
}

// outOn returns the token of the check instance of task 0 out on w, or
// fails the test.
func outOn(t *testing.T, m *Master, w *mworker) uint64 {
	t.Helper()
	c := m.v.checks[0]
	if c == nil || len(c.out) != 1 || c.out[0].w != w {
		t.Fatalf("want the check open with one instance, on %s; check %+v", w.name, c)
	}
	return c.out[0].token
}

// TestCheckHangingGivenUp: a check whose instance hangs on the only other
// host, and is stopped there each time, is given up after MaxRetries
// further tries, as a failing one is: the value stands unverified. It was
// sent to the same host again for ever, and the generation waited on it
// for hours (simgrid seed 308484). Instances dropped from the worker's
// queue, where they waited behind another, are charged nothing.
func TestCheckHangingGivenUp(t *testing.T) {
	m, b, _, w1 := checkBooks(t)
	for range 2 * m.cfg.MaxRetries {
		tok := outOn(t, m, w1)
		m.v.checks[0].out[0].overdue = true // overdue as it waited in w1's queue, and stopped
		m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckDropped, Token: tok})
	}
	for i := range m.cfg.MaxRetries + 1 {
		tok := outOn(t, m, w1)              // a hang may pass: the same host is asked again
		m.v.checks[0].out[0].overdue = true // checkChecks found it overdue and stopped it
		m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckStopped, Token: tok})
		if i < m.cfg.MaxRetries && m.checksDone() {
			t.Fatalf("check given up after %d hangs; MaxRetries is %d", i+1, m.cfg.MaxRetries)
		}
	}
	if !m.checksDone() {
		t.Fatalf("check still open after %d hangs (MaxRetries %d): instances %+v", m.cfg.MaxRetries+1, m.cfg.MaxRetries, m.v.checks[0].out)
	}
	if st := m.counts; st.Unverified != 1 || st.Verified != 0 || b.f[0] != 0 {
		t.Errorf("unverified %d, verified %d, value %v; want the value to stand unverified", st.Unverified, st.Verified, b.f[0])
	}
}

// TestCheckDeclinedNotAskedAgain: a stop this master did not ask for is
// charged nothing, but its host is not asked the check again: it
// declined it. With no other host, the value stands unverified. (The host
// was asked again: a key holder that dropped every instance on arrival,
// the only other host, was sent 40,732 of them in a batch of 20 tasks.)
// Copies of the answer count for nothing.
func TestCheckDeclinedNotAskedAgain(t *testing.T) {
	for _, ack := range []CancelAck{AckDropped, AckStopped} {
		m, b, _, w1 := checkBooks(t)
		tok := outOn(t, m, w1)
		for range m.cfg.MaxRetries + 2 {
			m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: ack, Token: tok})
		}
		if !m.checksDone() || len(w1.checkTasks) != 1 {
			t.Fatalf("ack %d: check open %v, %d instances sent to w1; want it closed after one", ack, !m.checksDone(), len(w1.checkTasks))
		}
		if st := m.counts; st.Unverified != 1 || st.Verified != 0 || b.f[0] != 0 {
			t.Errorf("ack %d: unverified %d, verified %d, value %v; want the value to stand unverified", ack, st.Unverified, st.Verified, b.f[0])
		}
	}
}

// TestCheckMeasuresWorker: a check's answer says how long its worker
// takes, as a task's does: a worker whose task hung, its deadline grown,
// gets its own deadline back once it answers a check in 140 ms (else its
// next checks wait four grown deadlines each, 20 minutes, behind a hang).
func TestCheckMeasuresWorker(t *testing.T) {
	m, b, w0, w1 := checkBooks(t)
	m.measured(w0, 40*time.Millisecond)
	w1.overran = 2 * time.Minute // a task of the batch hung on it
	if d := m.deadline(w1); d < time.Minute {
		t.Fatalf("deadline %v of a worker whose task ran 2 minutes; want it grown", d)
	}
	tok := outOn(t, m, w1)
	m.result(w1, b, &Result{Gen: b.id, ID: checkBase, F: 1.5, Exec: int64(140 * time.Millisecond), Token: tok})
	if !m.checksDone() || m.counts.Verified != 1 {
		t.Fatalf("check not verified: open %v, stats %+v", !m.checksDone(), m.counts)
	}
	if d := m.deadline(w1); d != time.Second {
		t.Errorf("deadline %v after a check answered in 140 ms; want the floor, 1s", d)
	}
}

// TestStoppedCheckEndsLateness: a one-slot worker whose check instance
// hangs is late for the task held behind it, and once that task's cancel
// drops it, the check's instance stopped may be all the worker ever
// answers. That answer about its slot ends its lateness, as a task's does,
// even for a check decided on another host meanwhile. Seed 845702 of the
// simulation: the stopped check was taken for stale, and the worker, the
// last one left, got nothing for hours.
func TestStoppedCheckEndsLateness(t *testing.T) {
	m := bareMaster(MasterConfig{Verify: 1, MaxRetries: 3, DeadlineFactor: 4, DeadlineFloor: time.Second,
		FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute, IdleTimeout: time.Hour})
	p, err := sched.New("wq", sched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.policy, m.ledger = p, sched.NewLedger(sched.LedgerConfig{})
	join := func(id sched.WorkerID, name, host string) *mworker {
		w := &mworker{id: id, name: name, host: host, slots: 1, heard: true, lastHeard: m.now()}
		m.byID[w.id] = w
		m.order = append(m.order, w)
		m.step(sched.Event{Kind: sched.WorkerJoined, Worker: w.id, Slots: 1}, 0)
		return w
	}
	checkTok := func(w *mworker, task int32) uint64 {
		for _, ct := range w.checkTasks {
			if ct.ID == checkBase+task {
				return ct.Token
			}
		}
		t.Fatalf("no check of task %d sent to %s", task, w.name)
		return 0
	}
	x := func(i int) []float64 { return []float64{float64(i)} }

	a, b := join(1, "a", "10.0.0.1"), join(2, "b", "10.0.0.2")
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{x(0), x(1)}, reply: make(chan evalReply, 1)})
	gen := m.cur.id
	ta, tb := a.out[0].task, b.out[0].task
	// a's value is checked on b, whose slot the check takes (it hangs
	// there), and b's task, held behind it, goes overdue: b is late, and
	// its task goes to a.
	m.results(a, &Results{Items: []Result{{Gen: gen, ID: ta, F: 1, Exec: int64(time.Millisecond), Token: a.tokens[ta]}}})
	hung := checkTok(b, ta)
	b.out[0].started = m.now() - time.Minute
	m.checkDeadlines()
	if !b.late {
		t.Fatal("setup: b is not late")
	}
	m.results(b, &Results{Items: []Result{{Gen: gen, ID: tb, Cancelled: true, Ack: AckDropped, Token: b.tokens[tb]}}})
	m.results(a, &Results{Items: []Result{{Gen: gen, ID: tb, F: 2, Exec: int64(time.Millisecond), Token: a.tokens[tb]}}})
	// A third host decides both checks, the one hung on b overdue.
	c := join(3, "c", "10.0.0.3")
	m.v.checks[ta].out[0].at = m.now() - time.Hour
	m.checkChecks(m.now())
	m.results(c, &Results{Items: []Result{
		{Gen: gen, ID: checkBase + ta, F: 1, Exec: int64(time.Millisecond), Token: checkTok(c, ta)},
		{Gen: gen, ID: checkBase + tb, F: 2, Exec: int64(time.Millisecond), Token: checkTok(c, tb)},
	}})
	if !m.cur.replied || m.counts.Verified != 2 {
		t.Fatalf("setup: generation not answered with both checks verified: %+v", m.counts)
	}
	// A held instance dropped says nothing of b's slot; the hung check,
	// stopped at last, does.
	m.results(b, &Results{Items: []Result{{Gen: gen, ID: checkBase + ta, Cancelled: true, Ack: AckDropped, Token: hung}}})
	if !b.late {
		t.Fatal("b's check dropped from its queue ended its lateness; want it late until it answers about a slot")
	}
	m.results(b, &Results{Items: []Result{{Gen: gen, ID: checkBase + ta, Cancelled: true, Ack: AckStopped, Exec: int64(time.Hour), Token: hung}}})
	if b.late {
		t.Fatal("b is still late after its hung check's instance stopped: it gets no new work")
	}
	for _, w := range m.dirty { // as if this turn's frames went out (there is no network)
		w.dirty, w.tasks, w.cancels, w.checkTasks = false, nil, nil, nil
	}
	m.dirty = m.dirty[:0]
	m.startBatch(&evalReq{gen: 2, xs: [][]float64{x(0), x(1), x(2)}, reply: make(chan evalReply, 1)})
	if len(b.out) == 0 {
		t.Errorf("generation 2 gave b nothing; want one of its 3 tasks on each of the 3 workers' slots (a %d, c %d)", len(a.out), len(c.out))
	}
}

// TestCheckOverrunGrowsDeadline: a check stopped as overdue on a worker
// that has finished nothing says how long it takes at least, as a task's
// overrun does: its next deadline grows from it. Its deadline was the
// hosts' time, here only a liar's 1 ns, which cut its every check at
// four floors until the check was given up. What counts is the run the
// worker reports, at most the time since the instance was sent: a worker
// cannot claim an hour to stretch its own deadline.
func TestCheckOverrunGrowsDeadline(t *testing.T) {
	m, b, w0, w1 := checkBooks(t)
	m.measured(w0, time.Nanosecond)
	if d := m.deadline(w1); d != m.cfg.DeadlineFloor {
		t.Fatalf("setup: deadline %v, want the floor", d)
	}
	m.v.checks[0].out[0].overdue = true // checkChecks found it overdue and stopped it
	sent := m.now() - 4*time.Second
	m.v.checks[0].out[0].at = sent
	m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckStopped, Exec: int64(time.Hour), Token: outOn(t, m, w1)})
	if since := m.now() - sent; w1.overran < 4*time.Second || w1.overran > since {
		t.Errorf("overran %v after a check stopped 4 s after it was sent, claiming an hour; want 4 s to the %v since", w1.overran, since)
	}
	if d := m.deadline(w1); d < 16*time.Second {
		t.Errorf("deadline %v after a check overran 4 s; want at least 4 × 4 s", d)
	}
}

// TestCancelAcksBookBounded: a worker that claims 65,536 slots and never
// answers the cancels of its running instances has at most sched.MaxSlots
// of them noted as stopping, the oldest giving way, and each
// acknowledgement looks its instance up in a map rather than scanning
// them. (Each scanned the whole book: 100,000 against 65,536 held the
// loop for 10 s, a frame's worth of them a minute.) What a frame of
// acknowledgements costs against a full book and an empty one,
// BenchmarkCancelAcks prints.
func TestCancelAcksBookBounded(t *testing.T) {
	m, _, _, w := checkBooks(t)
	w.slots, w.heard = MaxMetaSlots, true
	const noted = 2 * sched.MaxSlots
	for i := range noted {
		w.noteStopping(int32(i/1000), int32(i%1000), m.stopNotesShare(w))
	}
	if n := len(w.stopping); n != sched.MaxSlots {
		t.Fatalf("%d instances noted as stopping, want sched.MaxSlots (%d)", n, sched.MaxSlots)
	}
	if _, ok := w.stopping[[2]int32{0, 0}]; ok {
		t.Error("the oldest instance noted did not give way")
	}
	if _, ok := w.stopping[[2]int32{(noted - 1) / 1000, (noted - 1) % 1000}]; !ok {
		t.Error("the newest instance noted is not kept")
	}
	key := func(i int) [2]int32 { return [2]int32{int32(i / 1000), int32(i % 1000)} }
	w.stopped(key(noted - 1)[0], key(noted - 1)[1], -1)
	if n := len(w.stopping); n != sched.MaxSlots-1 {
		t.Errorf("%d instances noted after one acknowledged, want %d", n, sched.MaxSlots-1)
	}
	// The ten oldest acknowledged: once full again, the oldest left
	// gives way, not one acknowledged already.
	const first = noted - sched.MaxSlots // the oldest noted still there
	for i := first; i < first+10; i++ {
		w.stopped(key(i)[0], key(i)[1], -1)
	}
	for i := range 12 {
		w.noteStopping(key(noted + i)[0], key(noted + i)[1], m.stopNotesShare(w))
	}
	if n := len(w.stopping); n != sched.MaxSlots {
		t.Errorf("%d instances noted, want sched.MaxSlots (%d)", n, sched.MaxSlots)
	}
	if _, ok := w.stopping[key(first+10)]; ok {
		t.Error("the oldest instance left did not give way")
	}
	if _, ok := w.stopping[key(first+11)]; !ok {
		t.Error("the second oldest left gave way too")
	}
}

// BenchmarkCancelAcks measures a frame of 20,000 cancel acknowledgements
// for instances a worker never had, against an empty book of instances
// stopping and against a full one (sched.MaxSlots): the two should cost
// alike.
func BenchmarkCancelAcks(b *testing.B) {
	for _, full := range []bool{false, true} {
		b.Run(map[bool]string{false: "empty", true: "full"}[full], func(b *testing.B) {
			m, bt, _, w := checkBooks(b)
			w.slots, w.heard = MaxMetaSlots, true
			if full {
				for i := range sched.MaxSlots {
					w.noteStopping(int32(i/1000), int32(i%1000), m.stopNotesShare(w))
				}
			}
			acks := make([]Result, 20_000)
			for i := range acks {
				acks[i] = Result{Gen: bt.id, ID: 3, Cancelled: true, Ack: AckLate}
			}
			b.ResetTimer()
			for range b.N {
				for i := range acks {
					m.result(w, bt, &acks[i])
				}
			}
		})
	}
}

// TestCheckWaitsForStopOnItsWay: a check whose instances on the two
// honest hosts went overdue (their deadline the liar's 1 ns: the floor)
// waits for the stops on their way, and is asked again of the host that
// stopped: it is not left unverified because both hosts were asked. The
// first host's stop came after the second's instance went overdue, while
// that host had answered another check since (it is eligible again): the
// value stood unverified at once, so that a liar's values stood on a
// loaded grid (TestMasterVerifyLiarCannotShortenFreshDeadlines, once, at
// load 10: "9 values unverified").
// A worker that serves yet keeps its stop back is waited for
// FirstDeadline at most: then the value stands unverified, as before.
func TestCheckWaitsForStopOnItsWay(t *testing.T) {
	for _, withheld := range []bool{false, true} {
		t.Run(map[bool]string{false: "stops come", true: "stops withheld"}[withheld], func(t *testing.T) { testCheckWaitsForStop(t, withheld) })
	}
}

func testCheckWaitsForStop(t *testing.T, withheld bool) {
	m := bareMaster(MasterConfig{Verify: 1, MaxRetries: 3, DeadlineFactor: 4, DeadlineFloor: time.Second,
		FirstDeadline: 10 * time.Minute, TaskTimeout: time.Hour})
	p, err := sched.New("wq", sched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.policy, m.ledger = p, sched.NewLedger(sched.LedgerConfig{}) // no batch started in the policy: done, as once the liar answered every task
	liar := &mworker{id: 1, name: "liar", host: "10.0.0.1", slots: 4, heard: true}
	c := &mworker{id: 2, name: "c", host: "10.0.0.2", slots: 4, heard: true}
	d := &mworker{id: 3, name: "d", host: "10.0.0.3", slots: 4, heard: true}
	for _, w := range []*mworker{liar, c, d} {
		m.byID[w.id] = w
		m.order = append(m.order, w)
	}
	const n = 3
	xs := [][]float64{{0}, {1}, {2}}
	truth := func(t int32) float64 { return float64(t) }
	b := &batch{id: 1, gen: 1, xs: xs, f: make([]float64, n), done: make([]bool, n),
		overran: make([]uint8, n), failures: map[int32][]TaskFailure{}, reply: make(chan evalReply, 1)}
	m.cur = b
	m.verifyStart(n)
	m.measured(liar, time.Nanosecond)
	for i := range int32(n) {
		b.f[i] = -1
		m.verifyAccepted(liar, b, i, -1) // a lie, checked: task 0 on c, 1 on d, 2 on c
	}
	out := func(task int32, w *mworker) *checkOut {
		t.Helper()
		if c := m.v.checks[task]; c != nil {
			for i := range c.out {
				if c.out[i].w == w {
					return &c.out[i]
				}
			}
		}
		t.Fatalf("no instance of task %d's check on %s: %+v", task, w.name, m.v.checks[task])
		return nil
	}
	// Task 0's instance on c goes overdue: it is stopped, and asked of d.
	c0 := out(0, c)
	c0.at = m.now() - time.Hour
	m.checkChecks(m.now())
	d0 := out(0, d)
	// c answers task 2's check: it serves checks again, task 0's stop
	// still on its way.
	o2 := out(2, c)
	m.results(c, &Results{Items: []Result{{Gen: b.id, ID: checkBase + 2, F: truth(2), Exec: int64(time.Millisecond), Token: o2.token}}})
	// d's instance of task 0 goes overdue too.
	d0.at = m.now() - time.Hour
	m.checkChecks(m.now())
	if m.v.checks[0] == nil || m.counts.Unverified != 0 {
		t.Fatalf("task 0's check closed, %d values unverified, as its instance on d went overdue with c's stop on its way; want it to wait for the stop", m.counts.Unverified)
	}
	if withheld {
		out(0, c).stopAt -= m.cfg.FirstDeadline
		m.checkChecks(m.now())
		if m.v.checks[0] != nil || m.counts.Unverified != 1 {
			t.Errorf("task 0's check open %v, %d values unverified, a first deadline after its stop was asked of c; want it to stand unverified", m.v.checks[0] != nil, m.counts.Unverified)
		}
		return
	}
	// The stops come: task 0's check is asked again of c (measured now by
	// task 2's check, its deadline its own).
	m.results(c, &Results{Items: []Result{{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckStopped, Exec: int64(time.Hour), Token: c0.token}}})
	m.results(d, &Results{Items: []Result{{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckStopped, Exec: int64(time.Hour), Token: d0.token}}})
	if o := out(0, c); o.overdue || m.counts.Unverified != 0 {
		t.Errorf("task 0's check on c overdue %v, %d values unverified; want it asked of c again", o.overdue, m.counts.Unverified)
	}
}
