package worker

import (
	"context"
	"testing"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
)

// A cancel that finds its task finished is acknowledged as late, and the
// agent's activity counts what its slots did.
func TestCancelOfFinishedTaskIsLate(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _ := startAgent(t, ctx, gateConfig(key, fm.addr(), g, 1))
	mc := fm.next()
	mc.c.Send(tasks(1, 0))
	waitStarted(t, g, 0)
	g.open(0)
	if rs := receive[*grid.Results](t, mc); len(rs.Items) != 1 || rs.Items[0].ID != 0 || rs.Items[0].Cancelled {
		t.Fatalf("result %+v", rs)
	}
	mc.c.Send(&grid.Cancel{Gen: 1, IDs: []int32{0}})
	rs := receive[*grid.Results](t, mc)
	if len(rs.Items) != 1 || rs.Items[0] != (grid.Result{Gen: 1, ID: 0, Cancelled: true, Ack: grid.AckLate}) {
		t.Fatalf("acknowledgement %+v", rs)
	}
	if act := a.Activity(); act.Finished != 1 || act.Cancelled != 0 || act.Slots != 1 || !act.Connected || act.Busy <= 0 || act.Session <= 0 {
		t.Errorf("activity %+v", act)
	}
}

// A Cancel frame of 65,536 ids (64 KiB) names one task the worker
// finished, again and again, and tasks it never had: the
// worker acknowledges the finished one once and the others not at all,
// so that a master that stops reading cannot make the worker queue a
// megabyte of acknowledgements per 64 KiB frame.
func TestCancelAcknowledgesOnlyTheWorkersTasks(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startAgent(t, ctx, gateConfig(key, fm.addr(), g, 1))
	mc := fm.next()
	mc.c.Send(tasks(1, 0))
	g.open(0)
	if rs := receive[*grid.Results](t, mc); len(rs.Items) != 1 || rs.Items[0].ID != 0 || rs.Items[0].Cancelled {
		t.Fatalf("result %+v", rs)
	}
	ids := make([]int32, 65536)
	for i := range ids {
		ids[i] = int32(i % 3 * 50) // 0 (finished), 50 and 100 (never sent)
	}
	for range 2 {
		mc.c.Send(&grid.Cancel{Gen: 1, IDs: ids})
	}
	mc.c.Send(&grid.Cancel{Gen: 0, IDs: ids}) // an older generation's
	// A task after the cancels: its result comes after every
	// acknowledgement they caused.
	mc.c.Send(tasks(1, 7))
	g.open(7)
	var acks []grid.Result
	for {
		rs := receive[*grid.Results](t, mc)
		var last bool
		for _, r := range rs.Items {
			if r.Cancelled {
				acks = append(acks, r)
			}
			last = last || r.ID == 7 && !r.Cancelled
		}
		if last {
			break
		}
	}
	if len(acks) != 1 || acks[0] != (grid.Result{Gen: 1, ID: 0, Cancelled: true, Ack: grid.AckLate}) {
		t.Errorf("acknowledgements %+v, want task 0's, late, once", acks)
	}
}

// The acknowledgements of a cancel of 60,000 held tasks reach a master
// that reads frames of at most 1 MiB (esrun -max-frame 1): in one Results
// frame of about 1.6 MB (27 bytes an acknowledgement with its token),
// over its cap, they broke the connection, and the master lost the
// worker with its tasks.
func TestManyAcknowledgementsFitTheMastersFrames(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMasterFrame(t, key, grid.ProblemSpec{Name: "gate", Dim: 1}, 1<<20)
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startAgent(t, ctx, gateConfig(key, fm.addr(), g, 1))
	mc := fm.next()
	const n = 60000
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	for lo := 0; lo < n; lo += 10000 {
		ts := tasks(1, ids[lo:lo+10000]...)
		for i := range ts.Items {
			ts.Items[i].Token = 1<<63 + uint64(lo+i) // as a master's, which the acknowledgements return
		}
		mc.c.Send(ts)
	}
	waitStarted(t, g, 0)
	mc.c.Send(&grid.Cancel{Gen: 1, IDs: ids[1:]})
	dropped := 0
	for dropped < n-1 {
		select {
		case m := <-mc.msgs:
			if rs, ok := m.(*grid.Results); ok {
				for _, r := range rs.Items {
					if r.Cancelled && r.Ack == grid.AckDropped {
						dropped++
					}
				}
			}
		case <-mc.c.Done():
			t.Fatalf("the connection closed after %d of %d acknowledgements: %v", dropped, n-1, mc.c.Err())
		}
	}
	g.open(0)
	if rs := receive[*grid.Results](t, mc); len(rs.Items) != 1 || rs.Items[0].ID != 0 || rs.Items[0].Cancelled {
		t.Errorf("result %+v, want task 0's", rs)
	}
}
