package simgrid

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched"
)

// longScenario is three healthy workers, tasks of 50 ms, under policy,
// with one point in about five long on every worker as l says.
func longScenario(policy string, l LongPoints) Scenario {
	sc := Scenario{Seed: 7, Policy: policy, MaxRetries: 3, Long: &l,
		ES: es.Config{Problem: "sphere", Strategy: es.StrategyES, Mu: 3, Lambda: 8, Dim: 3, Lower: -5, Upper: 5,
			Seed: 7, Stop: es.Stop{Generations: 3}}}
	for i := range 3 {
		sc.Workers = append(sc.Workers, WorkerSpec{Name: fmt.Sprintf("w%d", i), Host: fmt.Sprintf("127.0.1.%d", i+1), Slots: 2,
			Task: 50 * time.Millisecond, Delay: [2]time.Duration{time.Millisecond, 3 * time.Millisecond}})
	}
	return sc
}

// TestLongPoints: under every policy, points that take 7 minutes on
// every worker, within the task timeout of 10, end the run as it should
// (the check: its trajectory is the in-process one, within its bound);
// points that hang on every worker fail it, naming the task timeout,
// after MaxRetries+1 timeouts of one task, each try a hang (Check
// accepts no other failure). Before, both were cut short at half the
// task timeout and sent again for ever, and the run stalled.
func TestLongPoints(t *testing.T) {
	for _, policy := range sched.Names {
		sc := longScenario(policy, LongPoints{Every: 5, Took: 7 * time.Minute})
		out, trace, bad := simulateScenario(t, sc)
		if len(bad) > 0 || out.Err != nil {
			t.Errorf("%s, points of 7m: %v\n  %s\nscenario: %s\ntrace (last lines):\n%s", policy, out.Err, strings.Join(bad, "\n  "), sc, tail(trace, 30))
			continue
		}
		if !strings.Contains(trace, "worker is late") {
			t.Errorf("%s, points of 7m: no task was ever cut short: the scenario has no long point", policy)
		}
		t.Logf("%s, points of 7m: %v of virtual time, bound %v", policy, out.Elapsed, Bound(sc))

		sc = longScenario(policy, LongPoints{Every: 5, Hang: true})
		out, trace, bad = simulateScenario(t, sc)
		var re *grid.RetriesExhaustedError
		if len(bad) > 0 || !errors.As(out.Err, &re) || !strings.Contains(out.Err.Error(), "ran past the task timeout of 10m0s") {
			t.Errorf("%s, points that hang: %v; want the run failed naming the task timeout\n  %s\nscenario: %s\ntrace (last lines):\n%s",
				policy, out.Err, strings.Join(bad, "\n  "), sc, tail(trace, 30))
			continue
		}
		t.Logf("%s, points that hang: %v of virtual time: %v", policy, out.Elapsed, out.Err)
	}
}
