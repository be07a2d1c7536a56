package grid

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// stallBooks is policyBooks (10-minute task timeout, 3 retries, a first
// deadline of 30 s and nothing measured: a stall deadline of 30 s
// doubled) with a batch of one task, and stalled children counted so
// that the next is cut off at the ceiling, half the timeout.
func stallBooks(t *testing.T) (*Master, chan evalReply) {
	t.Helper()
	m := policyBooks(t, "wq")
	reply := make(chan evalReply, 1)
	m.startBatch(&evalReq{gen: 1, xs: [][]float64{{0.5}}, reply: reply})
	m.flush()
	m.proto().stalled = 3 // 30 s doubled 4 times reaches 5 min
	return m, reply
}

// lendOnLink has m lend its queued tasks to a new child master whose
// control link is open (a pipe whose far end discards what it is sent:
// a child heard, its link alive), as a split would.
func lendOnLink(t *testing.T, m *Master, token uint64) *childMaster {
	t.Helper()
	p := m.proto()
	c := &childMaster{token: token, name: "c", batch: m.cur.id, created: m.now(), progress: m.now(), masters: 1, inR: true}
	for _, tk := range m.takeTasks(len(m.cur.xs)) {
		p.lent[tk.ID] = c
		c.lent++
	}
	if c.lent == 0 {
		t.Fatal("setup: nothing queued to lend")
	}
	c.link = discardConn(t)
	p.children[c.token] = c
	p.order = append(p.order, c)
	return c
}

// stallFor moves m's clock on a second at a time for up to d, checking
// its children at each, and returns how long passed before c was cut
// off (ok false: it was not).
func stallFor(m *Master, c *childMaster, d time.Duration) (elapsed time.Duration, ok bool) {
	for elapsed < d {
		m.start = m.start.Add(-time.Second)
		elapsed += time.Second
		m.checkChildren()
		if c.lost {
			return elapsed, true
		}
	}
	return elapsed, false
}

// near says a child was cut off at the step that took its silence past
// d: the clock moves a second at a step, plus the real time the test
// takes, so at d or a second after.
func near(took, d time.Duration) bool { return took >= d && took <= d+time.Second }

// TestLongTaskOnChildEnds: once a child master was cut off at the stall
// deadline's ceiling (half the task timeout), a child heard holding a
// task of 7 minutes, within the timeout of 10, is not cut off: it runs
// it under its own deadlines, cut at 4 s, 8 s … 4 min 16 s and 5 min,
// then for its 7 minutes (docs/faults.md), and returns it 20 min 28 s
// after it was lent. Before, every such child was cut off at the
// ceiling, and the task run by the parent; with several such tasks,
// every child in turn. A child heard that never returns its task is
// still cut off, at MaxRetries+3 task timeouts (an hour here: longer
// than its own cuts and timeouts take to fail a task that hangs).
func TestLongTaskOnChildEnds(t *testing.T) {
	m, reply := stallBooks(t)
	const ceiling = 5 * time.Minute
	first := lendOnLink(t, m, 1)
	if took, ok := stallFor(m, first, time.Hour); !ok || !near(took, ceiling) {
		t.Fatalf("setup: the first child, silent, cut off %v after %v; want at the ceiling, %v", ok, took, ceiling)
	}
	// Its task came back; the next child runs it, heard, and returns it.
	const runs = 20*time.Minute + 28*time.Second
	second := lendOnLink(t, m, 2)
	if took, lost := stallFor(m, second, runs); lost {
		t.Fatalf("the child running a task of 7m0s under its own deadlines was cut off as stalled after %v; it needs %v", took, runs)
	}
	m.onChildResults(second, &ChildResults{Gen: m.cur.id, IDs: []int32{0}, F: []float64{0.25}, Masters: 1})
	select {
	case r := <-reply:
		if r.err != nil || len(r.f) != 1 || r.f[0] != 0.25 {
			t.Fatalf("the batch answered %v, %v; want the child's value", r.f, r.err)
		}
	default:
		t.Fatal("the child's result did not end the batch")
	}
	// A child that holds a task of the next batch and never returns it
	// is cut off at MaxRetries+3 timeouts, no sooner, no later.
	m.startBatch(&evalReq{gen: 2, xs: [][]float64{{0.5}}, reply: make(chan evalReply, 1)})
	m.flush()
	third := lendOnLink(t, m, 3)
	const bound = 6 * 10 * time.Minute
	if took, ok := stallFor(m, third, 2*bound); !ok || !near(took, bound) {
		t.Fatalf("a child that never returns its task cut off %v after %v; want after %v", ok, took, bound)
	}
	if m.lentCount() != 0 {
		t.Fatalf("%d tasks still lent after the child was cut off", m.lentCount())
	}
}

// TestSilentChildPastTheCeilingIsCutOff: past the stall deadline's
// ceiling a child is bound by the task timeout only while it is heard;
// one that goes silent (its machine frozen: not even a heartbeat) is
// still cut off, within IdleTimeout, when its link closes, and its task
// goes back to the queue.
func TestSilentChildPastTheCeilingIsCutOff(t *testing.T) {
	leaktest.Check(t)
	key := splitTestKey(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: ProblemSpec{Name: "sphere", Dim: 2},
		Logger: quietConfig().Logger, IdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	defer evaluating(ctx, root, [][]float64{{1, 2}})()
	if !waitLoop(ctx, root, func() bool {
		b := root.cur
		if b == nil {
			return false
		}
		root.proto().stallCeilinged = true // a child was cut off at the ceiling
		lendToChild(root, b, 1)
		return true
	}) {
		t.Fatal("the root did not lend its task to c")
	}
	link, in := silentChildLink(ctx, t, root, key, "c", 1)
	if awaitFrame(ctx, link, in, func(Message) bool { return false }); ctx.Err() != nil {
		t.Fatal("the root never cut off a silent child past the stall deadline's ceiling")
	}
	var queued int
	var lost int64
	if !waitLoop(ctx, root, func() bool {
		queued, lost = sched.Queued(root.policy), root.split.stats.ChildrenLost
		return lost == 1
	}) || queued != 1 {
		t.Fatalf("after the silent child's link closed: %d lost, %d queued; want c lost and its task queued", lost, queued)
	}
}

// TestStallDeadlinePastTheCeilingDoesNotWrap: MaxRetries+3 task
// timeouts can be past what a time.Duration holds (a child keeps up to
// 65536 retries and a week's timeout from its parent's Promote; a
// MasterConfig has no bound); the stall deadline is then as long as it
// can be, never a product wrapped negative. Before, 20003 weeks wrapped
// to a negative deadline, and a child heard holding a task was cut off
// as stalled within a second of being lent it.
func TestStallDeadlinePastTheCeilingDoesNotWrap(t *testing.T) {
	m, _ := stallBooks(t)
	m.cfg.MaxRetries, m.cfg.TaskTimeout = 20000, 7*24*time.Hour
	m.proto().stallCeilinged = true // a child was cut off at the ceiling
	c := lendOnLink(t, m, 1)
	if took, lost := stallFor(m, c, time.Hour); lost {
		t.Fatalf("a child heard, under %d retries of a week's timeout, was cut off as stalled after %v", m.cfg.MaxRetries, took)
	}
	if d, _ := m.stallDeadline(); d <= 0 {
		t.Fatalf("stall deadline %v; want the longest there is", d)
	}
}
