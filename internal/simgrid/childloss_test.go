package simgrid

import (
	"strings"
	"testing"
	"time"
)

// TestChildKilledAtPromotion: the root's first child master killed (its
// machine, SIGKILL: nothing said) the instant its agent hears its
// promotion, before its child master says hello to the root. The root
// counts it lost as the promoted worker's connection breaks (it did not
// end with Drain.Last), sends home the workers waiting to move to it, and
// waits for them and the agent returnGrace at most: the run loses about
// 30 s of virtual time (awaiting the dead agent), against the same run
// with no loss. Before, it took the break for the worker's planned end,
// counted the child lost only at the hello timeout (15 s), and then
// waited lostGrace (40 s) for what it held: 54.7 s lost under wq.
func TestChildKilledAtPromotion(t *testing.T) {
	for _, policy := range []string{"wq", "rr", "rwq", "r3q", "eft"} {
		base, _, bad := simulateScenario(t, grandchildScenario(1, policy, GrandchildLoss{Gen: 99}))
		if len(bad) > 0 {
			t.Fatalf("%s: the run with no loss broke:\n  %s", policy, strings.Join(bad, "\n  "))
		}
		loss := GrandchildLoss{How: LoseKill, Gen: 1, Child: true}
		sc := grandchildScenario(1, policy, loss)
		out, trace, bad := simulateScenario(t, sc)
		if !strings.Contains(trace, `msg="sim: grandchild master to be lost"`) {
			t.Errorf("%s: no child master was lost (the scenario no longer splits)", policy)
			continue
		}
		if len(bad) > 0 {
			t.Errorf("%s broke:\n  %s\nscenario: %s\ntrace (last lines):\n%s",
				policy, strings.Join(bad, "\n  "), sc, tail(trace, 40))
		}
		lost := out.Elapsed - base.Elapsed
		t.Logf("%s: %v of virtual time, %v with no loss: %v lost", policy,
			out.Elapsed.Round(time.Millisecond), base.Elapsed.Round(time.Millisecond), lost.Round(time.Millisecond))
		if lost > 31*time.Second {
			t.Errorf("%s: the run lost %v of virtual time to a child killed at its promotion; want 31 s at most (returnGrace for its agent, and a second)\ntrace (last lines):\n%s",
				policy, lost.Round(time.Millisecond), tail(trace, 40))
		}
	}
}
