package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
)

// An agent whose build may take long (Config.StartBound) says so before
// it builds a problem that is not built in (grid.Heartbeat.Starting, the
// bound), and once it serves (a plain status report), before any result:
// the master times the tasks it sent meanwhile from then. A built-in
// problem builds at once: nothing is said, the first frame is a result.
func TestAgentSaysItStarts(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	for _, spec := range []grid.ProblemSpec{{Name: "plug", Dim: 3}, sphereSpec} {
		ctx, cancel := context.WithCancel(context.Background())
		fm := startFakeMaster(t, key, spec)
		built := make(chan struct{}, 1)
		_, wait := startAgent(t, ctx, Config{
			Master: fm.addr(), Key: key, Name: "w1", Slots: 1, StartBound: time.Minute,
			Build: func(grid.ProblemSpec) (problems.Problem, error) {
				built <- struct{}{}
				return BuildProblem(sphereSpec)
			},
		})
		mc := fm.next()
		mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{1, 1, 1}}}}) // sent at once, as a master does
		if spec.Name == "plug" {
			if hb := receive[*grid.Heartbeat](t, mc); hb.Starting != int64(time.Minute) {
				t.Errorf("%s: first frame %+v; want Starting of a minute", spec.Name, hb)
			}
			if rs := receive[*grid.Results](t, mc); len(rs.Items) != 0 {
				t.Errorf("%s: second frame %+v; want a plain status report", spec.Name, rs)
			}
		}
		if rs := receive[*grid.Results](t, mc); len(rs.Items) != 1 || rs.Items[0].F != 3 {
			t.Errorf("%s: got %+v; want the task's value", spec.Name, rs)
		}
		<-built
		cancel()
		wait()
	}
}

// An agent whose plugin does not start sends no Results before its
// refusal: a master older than the word that it starts drops a worker's
// record of refusals at any Results (refusals.go), and a Results that
// said the start cleared it at every session, so that with a plugin that
// never starts such a master never found that no worker can evaluate,
// and waited for ever. The word is a Heartbeat's field, which such a
// master's connection absorbs.
func TestAgentsStartWordIsNoResults(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "plug", Dim: 3})
	ctx, cancel := context.WithCancel(context.Background())
	_, wait := startAgent(t, ctx, Config{
		Master: fm.addr(), Key: key, Name: "w1", Slots: 1, StartBound: time.Minute,
		Build: func(grid.ProblemSpec) (problems.Problem, error) {
			return nil, errors.New("no hello within 30s")
		},
	})
	mc := fm.next()
	<-mc.c.Done() // its refusal closes the connection, every frame before it handled
	var rej *grid.RejectError
	if !errors.As(mc.c.Err(), &rej) {
		t.Errorf("connection ended with %v; want the worker's refusal", mc.c.Err())
	}
	said := false
	for len(mc.msgs) > 0 {
		switch m := (<-mc.msgs).(type) {
		case *grid.Results:
			t.Errorf("before its refusal the worker sent results %+v, which a master older than its word that it starts takes for a word that it can evaluate", m)
		case *grid.Heartbeat:
			said = said || m.Starting == int64(time.Minute)
		}
	}
	if !said {
		t.Error("the worker did not say that it starts")
	}
	cancel()
	wait()
}
