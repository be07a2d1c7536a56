package grid

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// A child master's counts are counted, within bounds that keep the
// totals consistent whatever it claims: an original only for a task lent
// to it and sent nowhere before, so never more originals than tasks; a
// count out of bounds cut to them; instances sent counted as originals +
// resends + replicas; nothing for a batch never started.
func TestChildCountsBounded(t *testing.T) {
	m := startMaster(t, "wq")
	const n = 10
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = make([]float64, 5)
	}
	var lent []int32
	var c *childMaster
	m.ask(func() {
		m.startBatch(&evalReq{gen: 3, xs: xs, reply: make(chan evalReply, 1)})
		p := m.proto()
		c = &childMaster{token: 1, name: "c", batch: m.cur.id, masters: 1}
		p.children[c.token], p.order = c, append(p.order, c)
		for _, tk := range m.takeTasks(4) {
			p.lent[tk.ID] = c
			c.lent++
			lent = append(lent, tk.ID)
		}
	})
	if len(lent) != 4 {
		t.Fatalf("%d tasks lent, want 4", len(lent))
	}
	notLent := int32(0)
	for _, id := range lent {
		if id == notLent {
			t.Fatal("task 0 was lent")
		}
	}
	claim := func(r *ChildResults) (rep sched.Report, st MasterStats) {
		m.ask(func() {
			m.onChildResults(c, r)
			rep, st = m.ledger.Report(), m.stats()
		})
		return rep, st
	}
	first := append(append(append([]int32{}, lent...), lent...), notLent, -5, 1<<30)
	rep, st := claim(&ChildResults{Gen: 3, Masters: 1, C: &ChildCounts{
		First: first, Replicas: -7, Resends: 1 << 62, Wasted: -1, Failed: 3, Overdue: 2,
	}})
	want := sched.Counts{Originals: len(lent), Resends: len(lent) + 1 + maxChildCount}
	if rep.Counts != want {
		t.Errorf("counts %+v, want %+v", rep.Counts, want)
	}
	if st.TasksSent != int64(want.Originals+want.Resends) || st.Failed != 3 || st.Overdue != 2 {
		t.Errorf("sent %d, failed %d, overdue %d; want %d, 3, 2", st.TasksSent, st.Failed, st.Overdue, want.Originals+want.Resends)
	}
	// A First longer than the batch is cut to it.
	long := make([]int32, 3*n)
	for i := range long {
		long[i] = lent[0]
	}
	rep, st = claim(&ChildResults{Gen: 3, Masters: 1, C: &ChildCounts{First: long}})
	want.Resends += n
	if rep.Counts != want || st.TasksSent != int64(want.Originals+want.Resends) {
		t.Errorf("a First of %d ids: counts %+v, sent %d; want %+v (%d ids counted)", len(long), rep.Counts, st.TasksSent, want, n)
	}
	// A batch never started counts nothing; a first send again is a
	// resend, with the results.
	if rep, _ = claim(&ChildResults{Gen: 4, Masters: 1, C: &ChildCounts{First: lent, Failed: 1}}); rep.Counts != want {
		t.Errorf("a later batch's claim counted: %+v, want %+v", rep.Counts, want)
	}
	f := make([]float64, len(lent))
	rep, st = claim(&ChildResults{Gen: 3, IDs: lent, F: f, Masters: 1, Done: true, C: &ChildCounts{First: lent[:1]}})
	want.Resends++
	if rep.Counts != want || st.TasksSent != int64(want.Originals+want.Resends) || st.FromChildren != int64(len(lent)) {
		t.Errorf("counts %+v, sent %d, from children %d; want %+v, %d, %d", rep.Counts, st.TasksSent, st.FromChildren, want, want.Originals+want.Resends, len(lent))
	}
	if rep.Generations[0].Originals > n {
		t.Errorf("%d originals in a batch of %d", rep.Generations[0].Originals, n)
	}
}

// A child master that grants a task back to its parent reports the task's
// first send in its tree before the grant: the parent counts a child's
// first send as an original only while the task is lent to it, and the
// child reports a first send once. Before, the report could follow the
// grant (seed 249041 of internal/simgrid): the root counted a resend, lent
// the task to the child again, and the task was nobody's original (396
// originals for 397 tasks). Here the child's worker takes the task and
// leaves, the task goes back to the child's queue, and the root asks for
// it; the root's books are fed the frames of the control link in order.
func TestChildReportsFirstSendBeforeGrantingBack(t *testing.T) {
	root, child := startMaster(t, "wq"), startMaster(t, "wq")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	link, up := pipeLink(ctx, t) // the child's control link to the root
	link.Start(func(Message) {}) // the test plays the root's side
	got := frames(up)

	// The root lends task 0 of a one-task batch to child c.
	var c *childMaster
	var pr *Promote
	root.ask(func() {
		root.startBatch(&evalReq{gen: 1, xs: [][]float64{make([]float64, 5)}, reply: make(chan evalReply, 1)})
		p := root.proto()
		c = &childMaster{token: 1, name: "c", batch: root.cur.id, masters: 1, created: root.now()}
		p.children[c.token], p.order = c, append(p.order, c)
		tasks := root.takeTasks(1)
		for _, tk := range tasks {
			p.lent[tk.ID] = c
			c.lent++
		}
		pr = &Promote{Token: c.token, Gen: root.cur.id, ESGen: 1, N: 1, Tasks: tasks, Policy: "wq"}
	})
	if len(pr.Tasks) != 1 || pr.Tasks[0].ID != 0 {
		t.Fatalf("lent %v, want task 0", pr.Tasks)
	}
	child.ask(func() { child.startShare(link, pr, "root", "c", make(chan error, 1)) })

	// The child sends it to its worker, which leaves before it ends: the
	// task is back in the child's queue, its first send not reported.
	w := newTestWorker("w", 1, 0)
	w.hold = make(chan struct{})
	startWorkers(t, child, w)
	eventually(t, "the child to send the task", func() bool { return w.got.Load() == 1 })
	w.stop()
	if !waitLoop(ctx, child, func() bool { return sched.Queued(child.policy) == 1 }) {
		t.Fatal("the task did not come back to the child's queue")
	}

	// The root asks for tasks: the child grants the task back.
	child.ask(func() { child.onTaskRequest(&TaskRequest{Gen: pr.Gen}, nil, link) })
	reported := false
	for {
		msg := awaitFrame(ctx, up, got, func(m Message) bool {
			switch m.(type) {
			case *ChildResults, *TaskGrant:
				return true
			}
			return false
		})
		if msg == nil {
			t.Fatal("no grant came up")
		}
		if r, ok := msg.(*ChildResults); ok {
			reported = reported || r.C != nil && slices.Contains(r.C.First, 0)
			root.ask(func() { root.onChildResults(c, r) })
			continue
		}
		root.ask(func() { root.onGrant(msg.(*TaskGrant), c) })
		break
	}
	if !reported {
		t.Error("the child granted the task back before it reported its first send")
	}
	// What the child reports next (before, the first send came now).
	var cc *ChildCounts
	child.ask(func() { cc = child.childCounts() })
	var counts sched.Counts
	root.ask(func() {
		if cc != nil {
			root.onChildResults(c, &ChildResults{Gen: pr.Gen, Masters: 1, C: cc})
		}
		counts = root.ledger.RunCounts()
	})
	if counts.Originals != 1 || counts.Resends != 0 {
		t.Errorf("the root counted %d originals and %d resends for the one send of its one task; want 1 and 0", counts.Originals, counts.Resends)
	}
}
