package worker

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
)

// An agent whose build may take long (Config.StartBound) says so before
// it builds a problem that is not built in (grid.Results.Starting, the
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
			if rs := receive[*grid.Results](t, mc); rs.Starting != int64(time.Minute) || len(rs.Items) != 0 {
				t.Errorf("%s: first frame %+v; want Starting of a minute, no items", spec.Name, rs)
			}
			if rs := receive[*grid.Results](t, mc); rs.Starting != 0 || len(rs.Items) != 0 {
				t.Errorf("%s: second frame %+v; want a plain status report", spec.Name, rs)
			}
		}
		if rs := receive[*grid.Results](t, mc); len(rs.Items) != 1 || rs.Items[0].F != 3 || rs.Starting != 0 {
			t.Errorf("%s: got %+v; want the task's value", spec.Name, rs)
		}
		<-built
		cancel()
		wait()
	}
}
