package grid

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Results that come back in the order sent take their instances out of a
// worker's books without moving the rest: each one copied all the worker
// held, quadratic for cyclic's share of a large generation (a λ = 50,000
// run spent a third of its master's time in that copy).
func TestTakeOutInOrderMovesNothing(t *testing.T) {
	w := &mworker{slots: 1}
	for i := range 1000 {
		w.out = append(w.out, outInstance{task: int32(i), started: -1})
	}
	for i := range 999 {
		next := &w.out[1]
		if o, ok := w.takeOut(int32(i), 7); !ok || o.task != int32(i) {
			t.Fatalf("took out %+v, %v; want task %d", o, ok, i)
		}
		if &w.out[0] != next {
			t.Fatalf("result %d moved the %d instances behind it", i, len(w.out))
		}
		if w.out[0].task != int32(i+1) || w.out[0].started != 7 {
			t.Fatalf("after task %d: %+v heads the books, want task %d started at 7", i, w.out[0], i+1)
		}
	}
	// Out of order, the others keep their order.
	w.out = append(w.out, outInstance{task: 1000}, outInstance{task: 1001})
	if _, ok := w.takeOut(1000, 8); !ok || len(w.out) != 2 || w.out[0].task != 999 || w.out[1].task != 1001 {
		t.Errorf("after task 1000 out of order: %+v, want tasks 999 and 1001", w.out)
	}
}

// A late worker's held instances, withdrawn last sent first, leave the
// books, the running one as it was. They are searched for from the back
// (TestTakeOutOfATaskOnAWorkerTwice tells the two ways apart): from the
// front, each was a scan of the worker's share, quadratic in a large
// generation under cyclic (λ = 100,000: a generation stalled for 20 s
// once a worker was late).
func TestTakeOutHeldLastSentFirst(t *testing.T) {
	w := &mworker{slots: 1}
	for i := range 1000 {
		w.out = append(w.out, outInstance{task: int32(i), started: -1})
	}
	w.out[0].started = 3
	for i := 999; i >= 1; i-- {
		if o, ok := w.takeOutHeld(int32(i), 7); !ok || o.task != int32(i) {
			t.Fatalf("took out %+v, %v; want task %d", o, ok, i)
		}
	}
	if len(w.out) != 1 || w.out[0].task != 0 || w.out[0].started != 3 {
		t.Errorf("books %+v; want task 0 left as it was", w.out)
	}
}

// A task on a worker twice (an overdue instance sent again to it, held
// behind the one still running): a result answers the running instance,
// the earlier sent, and the held one starts; a cancel or a drain takes
// back the held one, the later sent, as the worker drops a held instance
// before it stops a running one, and the running one keeps its start.
func TestTakeOutOfATaskOnAWorkerTwice(t *testing.T) {
	books := func() *mworker {
		return &mworker{slots: 1, out: []outInstance{{task: 0, at: 1, started: 1}, {task: 1, at: 2, started: -1}, {task: 0, at: 5, started: -1}}}
	}
	w := books()
	if o, ok := w.takeOut(0, 9); !ok || o.at != 1 {
		t.Errorf("a result of task 0 took out %+v, want the instance sent at 1, running", o)
	}
	if len(w.out) != 2 || w.out[0].task != 1 || w.out[0].started != 9 || w.out[1].task != 0 || w.out[1].at != 5 {
		t.Errorf("after the result: %+v, want task 1 started at 9, then task 0 sent at 5, held", w.out)
	}
	w = books()
	if o, ok := w.takeOutHeld(0, 9); !ok || o.at != 5 {
		t.Errorf("a cancel of task 0 took out %+v, want the instance sent again at 5, held", o)
	}
	if len(w.out) != 2 || w.out[0].task != 0 || w.out[0].started != 1 || w.out[1].task != 1 || w.out[1].started != -1 {
		t.Errorf("after the cancel: %+v, want task 0 running since 1, then task 1 held", w.out)
	}
}

// A held instance withdrawn, sent again and withdrawn again before the
// worker answered the first cancel: the first answer must not end the
// note, or a result of the instance in between, crossing the second
// cancel, is taken for an instance sent a third time, which then stays
// on the worker out of the books (as seed 51001522 of the simulation
// found for running instances). An answer ends a running instance's
// cancel first; the notes stand while any cancel of the task is
// unanswered.
func TestWithdrawnNoteCountsItsCancels(t *testing.T) {
	const cur = 4
	noted := func(w *mworker, task int32) bool {
		_, s := w.stopping[[2]int32{cur, task}]
		_, h := w.withdrawn[task]
		return s || h
	}
	w := &mworker{slots: 1}
	w.noteWithdrawn(7)
	w.noteWithdrawn(7)
	w.stopped(cur, 7, cur)
	if !noted(w, 7) {
		t.Fatal("the answer to the first of two cancels of a held task ended its note")
	}
	w.stopped(cur, 7, cur)
	if noted(w, 7) {
		t.Fatal("the note outlived the answers to both cancels")
	}

	// One running instance stopped, one held instance withdrawn: the held
	// one's answer comes first, yet the task stays noted until both are.
	w.noteStopping(cur, 7, w.slots)
	w.noteWithdrawn(7)
	w.stopped(cur, 7, cur)
	if !noted(w, 7) {
		t.Fatal("one answer of two ended the task's notes")
	}
	w.stopped(cur, 7, cur)
	if noted(w, 7) || len(w.stopping) != 0 || len(w.withdrawn) != 0 {
		t.Fatalf("notes left after both answers: stopping %v, withdrawn %v", w.stopping, w.withdrawn)
	}
	// An earlier batch's answer leaves the open batch's withdrawals be.
	w.noteWithdrawn(7)
	w.stopped(cur-1, 7, cur)
	if !noted(w, 7) {
		t.Fatal("an earlier batch's answer ended the open batch's note")
	}
}

// TestDrainReturnsWhatItHolds: a Drain gives back the instances its
// worker holds, each once however often it is named, and the ids it
// does not hold cost no search of the books (BenchmarkDrainNotHeld).
func TestDrainReturnsWhatItHolds(t *testing.T) {
	m := policyBooks(t, "rr")
	w := joinBooks(m, 1, "w", "10.0.0.1", 2)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0}, {1}, {2}, {3}, {4}, {5}}, reply: make(chan evalReply, 1)})
	var held []int32
	for _, o := range w.out {
		held = append(held, o.task)
	}
	if len(held) < 2 {
		t.Fatalf("the worker holds %v; want two instances or more", held)
	}
	ids := []int32{-1, 1 << 20, 99}
	for _, t := range held {
		ids = append(ids, t, t, t) // each named three times
	}
	m.drain(w, &Drain{Gen: m.cur.id, Returned: ids})
	if len(w.out) != 0 || m.counts.Returned != int64(len(held)) {
		t.Errorf("after a drain naming %v: %d returned, %d left in the books; want %d returned, none left", ids, m.counts.Returned, len(w.out), len(held))
	}
}

// BenchmarkDrainNotHeld measures a Drain frame's worth of ids (4 million
// one-byte ids fill the 4 MiB cap) that its worker does not hold,
// against the instances it does hold. Each id was searched for in the
// books: 0.2 s against 70 held, 10.5 s against 4,096, 20.8 s against
// 8,192; now about 40 ms against any (on a loaded machine).
func BenchmarkDrainNotHeld(b *testing.B) {
	for _, n := range []int{70, 4096, 8192} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			m := bareMaster(MasterConfig{})
			w := &mworker{id: 1, name: "w", slots: sched.MaxSlots, draining: true}
			m.byID[w.id], m.order = w, append(m.order, w)
			m.cur = &batch{id: 5, replied: true} // its end is not what is timed (and a bare master has no policy)
			w.outN = make(map[int32]int32)
			for i := range n {
				w.out = append(w.out, outInstance{task: int32(i), started: -1})
				w.outN[int32(i)]++
			}
			ids := make([]int32, 4_000_000)
			for i := range ids {
				ids[i] = -1
			}
			for b.Loop() {
				m.drain(w, &Drain{Gen: 5, Returned: ids})
			}
		})
	}
}

// hoarderBooks is a bare master whose worker, claiming 4,096 slots
// under r3q, holds 8,192 instances of a batch of 10,000 tasks, one of
// which it has answered: r is that answer.
func hoarderBooks(tb testing.TB) (*Master, *mworker, Result) {
	tb.Helper()
	m := policyBooks(tb, "r3q")
	w := joinBooks(m, 1, "w", "10.0.0.1", sched.MaxSlots)
	xs := make([][]float64, 10_000)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	m.startBatch(&evalReq{gen: 1, xs: xs, reply: make(chan evalReply, 1)})
	if len(w.out) != 2*sched.MaxSlots {
		tb.Fatalf("the worker holds %d instances, want %d", len(w.out), 2*sched.MaxSlots)
	}
	task := w.out[len(w.out)-1].task
	r := Result{Gen: m.cur.id, ID: task, F: 1, Exec: int64(time.Millisecond), Token: w.tokens[task]}
	m.results(w, &Results{Items: []Result{r}})
	return m, w, r
}

// TestResultCopiesChangeNothing: copies of an answered result, and of a
// failure for it, change neither the master's books nor the policy's:
// each is a duplicate, and they cost no search of the instances the
// worker holds (BenchmarkResultCopies).
func TestResultCopiesChangeNothing(t *testing.T) {
	m, w, r := hoarderBooks(t)
	held := len(w.out)
	dups := m.counts.Duplicates
	rs := &Results{Items: make([]Result, 100)}
	for i := range rs.Items {
		rs.Items[i] = r
	}
	m.results(w, rs)
	r.Err = "a failure sent for an answered task"
	for i := range rs.Items {
		rs.Items[i] = r
	}
	m.results(w, rs)
	if len(w.out) != held || m.counts.Duplicates != dups+100 || m.cur.replied {
		t.Errorf("after 100 copies of an answer and 100 failures for it: %d held (want %d), %d duplicates (want %d), batch ended %v",
			len(w.out), held, m.counts.Duplicates-dups, 100, m.cur.replied)
	}
	// The books and the policy still agree on what the worker holds: its
	// next answer takes its instance out.
	next := w.out[0].task
	m.results(w, &Results{Items: []Result{{Gen: m.cur.id, ID: next, F: 2, Exec: int64(time.Millisecond), Token: w.tokens[next]}}})
	if slices.ContainsFunc(w.out, func(o outInstance) bool { return o.task == next }) || w.outN[next] != 0 {
		t.Errorf("an answer for held task %d left it in the books", next)
	}
}

// BenchmarkResultCopies measures a frame of 65,536 copies of an answered
// result (and of a failure for it) from a worker holding 8,192
// instances, and of an answer for an instance cancelled as it ran whose
// cancel is unanswered. Each copy searched the master's books and the
// policy's for its instance: 2.27 s a frame of answers, 1.48 s of
// failures, 0.56 s of answers of the cancelled instance (the policy's
// search gone); now 11 ms, 7 ms and 11 ms (on a loaded machine).
func BenchmarkResultCopies(b *testing.B) {
	for _, kind := range []string{"answers", "failures", "stopping"} {
		b.Run(kind, func(b *testing.B) {
			m, w, r := hoarderBooks(b)
			switch kind {
			case "failures":
				r.Err = "again"
			case "stopping":
				// Its instance was cancelled while it ran (the policy's
				// replica won) and the cancel is not answered.
				w.noteStopping(m.cur.id, r.ID, sched.MaxSlots)
			}
			rs := &Results{Items: make([]Result, maxItemsPerFrame)}
			for i := range rs.Items {
				rs.Items[i] = r
			}
			for b.Loop() {
				m.results(w, rs)
			}
		})
	}
}

// TestStopNoteOfATaskSentAgainKept: an honest worker of 32 slots among
// 4,096 connected (its share of the stopping notes is 16) has 17 running
// instances go overdue at once; none other is open, so each is cancelled
// and sent to it again. The first one's result, which left before its
// cancel came, must not be taken for the instance sent again: that
// instance runs on the worker (it got the task again after the cancel),
// and out of the books it would hold a slot for nothing, for ever if it
// hangs (seed 510859 of the simulation). Its note gives way to the
// share, but the bit it leaves (gone) says so.
func TestStopNoteOfATaskSentAgainKept(t *testing.T) {
	m := policyBooks(t, "rr")
	w := joinBooks(m, 1, "w", "10.0.0.1", 32)
	m.nLive = 4096 // the others late, say: none is open
	if share := m.stopNotesShare(w); share != minStopNotes {
		t.Fatalf("share %d, want %d", share, minStopNotes)
	}
	xs := make([][]float64, 64)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	m.startBatch(&evalReq{gen: 1, xs: xs, reply: make(chan evalReply, 1)})
	w.tasks = w.tasks[:0] // sent (a bare master has no connection to flush to)
	first, tok := overdueOnePastShare(m, w)
	if len(w.stopping) < minStopNotes {
		t.Fatalf("%d instances noted as stopping, want %d", len(w.stopping), minStopNotes)
	}
	if w.outN[first] != 1 {
		t.Fatalf("task %d is out %d times on the worker after its overdue instance's cancel, want once (sent again)", first, w.outN[first])
	}
	before := cancelsOf(w, first)
	// The result of the cancelled instance, which crossed its cancel.
	m.results(w, &Results{Items: []Result{{Gen: m.cur.id, ID: first, F: 1, Exec: int64(time.Millisecond), Token: tok}}})
	if w.outN[first] == 0 && cancelsOf(w, first) == before {
		t.Fatalf("the result of task %d's cancelled instance was taken for the instance sent again, which the worker runs, now out of the books and never cancelled (notes: %d)", first, len(w.stopping))
	}
	// The worker answers both cancels of the task: the first found its
	// instance finished, the second stopped the one sent again. No note
	// of the task outlives them.
	m.results(w, &Results{Items: []Result{
		{Gen: m.cur.id, ID: first, Cancelled: true, Ack: AckLate},
		{Gen: m.cur.id, ID: first, Cancelled: true, Ack: AckStopped, Exec: int64(time.Millisecond), Token: tok},
	}})
	_, s := w.stopping[[2]int32{m.cur.id, first}]
	if _, h := w.withdrawn[first]; s || h {
		t.Errorf("task %d still noted after both its cancels were answered: stopping %v, withdrawn %v", first, s, h)
	}
}

// TestStopNoteGoneBeforeTheTaskCameBack: as TestStopNoteOfATaskSentAgainKept,
// but the overdue tasks go back to the queue (another worker is open),
// the notes give way, and only then, that worker gone, the honest worker
// of 32 slots is given them again. The first one's result, which crossed
// its cancel, must still not be taken for the instance sent again.
func TestStopNoteGoneBeforeTheTaskCameBack(t *testing.T) {
	m := policyBooks(t, "rr")
	w := joinBooks(m, 1, "w", "10.0.0.1", 32)
	v := joinBooks(m, 2, "v", "10.0.0.2", 1)
	m.nLive = 4096
	xs := make([][]float64, 100)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	m.startBatch(&evalReq{gen: 1, xs: xs, reply: make(chan evalReply, 1)})
	w.tasks, v.tasks = w.tasks[:0], v.tasks[:0]
	first, tok := overdueOnePastShare(m, w)
	if w.outN[first] != 0 {
		t.Fatalf("task %d went back to the worker at once; want it queued for the other", first)
	}
	// The other worker goes; the honest one answers a running task and
	// is given the queued tasks again.
	v.left, v.out = true, v.out[:0] // workerLeft, less the live count a bare master has no channel for
	clear(v.outN)
	m.step(sched.Event{Kind: sched.WorkerLeft, Worker: v.id}, 0)
	next := w.out[0].task
	m.results(w, &Results{Items: []Result{{Gen: m.cur.id, ID: next, F: 1, Exec: int64(time.Millisecond), Token: w.tokens[next]}}})
	w.tasks = w.tasks[:0]
	if w.outN[first] != 1 {
		t.Fatalf("task %d is out %d times on the worker, want once (given again)", first, w.outN[first])
	}
	before := cancelsOf(w, first)
	m.results(w, &Results{Items: []Result{{Gen: m.cur.id, ID: first, F: 1, Exec: int64(time.Millisecond), Token: tok}}})
	if w.outN[first] == 0 && cancelsOf(w, first) == before {
		t.Fatalf("the result of task %d's cancelled instance was taken for the instance given again, which the worker runs, now out of the books and never cancelled", first)
	}
}

// TestStopNoteGoneClearedByItsAnswer: the bit a stopping note leaves as
// it gives way ends with the answer to its cancel, so the result of an
// instance of the task sent again later costs no needless cancel; a note
// of an earlier batch leaves none.
func TestStopNoteGoneClearedByItsAnswer(t *testing.T) {
	const cur = 4
	w := &mworker{slots: 1}
	w.markSent(cur, 64, 7)
	w.noteStopping(cur-1, 9, 1)
	w.noteStopping(cur, 7, 1) // the earlier batch's note gives way
	if hasBit(w.gone, 9) {
		t.Error("an earlier batch's note left a bit of the open batch")
	}
	w.noteStopping(cur, 8, 1) // task 7's gives way
	if !hasBit(w.gone, 7) {
		t.Fatal("task 7's note gave way and left no bit")
	}
	w.stopped(cur, 7, cur)
	if hasBit(w.gone, 7) {
		t.Error("the answer to task 7's cancel left its bit")
	}
	if _, ok := w.stopping[[2]int32{cur, 8}]; !ok {
		t.Error("the answer to task 7's cancel ended task 8's note")
	}
}

// overdueOnePastShare steps Overdue for the first minStopNotes+1
// instances out on w, one more than its share of the stopping notes
// (each cancelled and, none other open, sent to it again), and returns
// the first one's task and token.
func overdueOnePastShare(m *Master, w *mworker) (int32, uint64) {
	first := w.out[0].task
	tok := w.tokens[first]
	var overdue []int32
	for _, o := range w.out[:minStopNotes+1] {
		overdue = append(overdue, o.task)
	}
	w.late = true
	for _, task := range overdue {
		m.cur.overrun(task)
		m.step(sched.Event{Kind: sched.Overdue, Worker: w.id, Task: sched.TaskID(task)}, 0)
		w.tasks = w.tasks[:0]
	}
	return first, tok
}

// cancelsOf counts the cancels of task t queued for w.
func cancelsOf(w *mworker, t int32) int {
	n := 0
	for _, c := range w.cancels {
		if c == t {
			n++
		}
	}
	return n
}
