package worker

import (
	"context"
	"math"
	"testing"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// constProblem evaluates every x to f.
type constProblem struct{ f float64 }

func (constProblem) Name() string                   { return "const" }
func (constProblem) Bounds() (lower, upper float64) { return 0, 1 }
func (p constProblem) Eval(context.Context, []float64) (float64, error) {
	return p.f, nil
}

// TestAgentReturnsNonFiniteFitnessAsComputed: NaN and ±Inf are results,
// not errors (the ES ranks NaN worst); the agent must not alter them.
func TestAgentReturnsNonFiniteFitnessAsComputed(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)} {
		fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "const", Dim: 1})
		ctx, cancel := context.WithCancel(context.Background())
		_, wait := startAgent(t, ctx, Config{
			Master: fm.addr(), Key: key, Name: "w1", Slots: 1,
			Build: func(grid.ProblemSpec) (problems.Problem, error) { return constProblem{f}, nil },
		})
		mc := fm.next()
		mc.c.Send(tasks(0, 3))
		rs := receive[*grid.Results](t, mc)
		r := rs.Items[0]
		if r.Err != "" || r.Cancelled || math.Float64bits(r.F) != math.Float64bits(f) {
			t.Errorf("fitness %v came back as %+v", f, r)
		}
		cancel()
		wait()
	}
}
