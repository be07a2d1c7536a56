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
