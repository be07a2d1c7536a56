package grid

import (
	"testing"

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
