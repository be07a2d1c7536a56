package simgrid

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
)

// grandchildScenario is a run whose masters split twice over (sixteen
// fast one-slot workers, a slow master), and whose first grandchild
// master of generation loss.Gen or later is lost at work, as loss says.
func grandchildScenario(seed uint64, policy string, loss GrandchildLoss) Scenario {
	sc := Scenario{Seed: seed, Policy: policy, MaxRetries: 3, Split: true, MessageCost: time.Millisecond, LoseGrandchild: &loss,
		ES: es.Config{Problem: "sphere", Strategy: es.StrategyES, Mu: 4, Lambda: 200, Dim: 3, Lower: -5, Upper: 5,
			Seed: seed, Stop: es.Stop{Generations: 4}}}
	for i := range 16 {
		d := time.Duration(100+50*i) * time.Microsecond
		sc.Workers = append(sc.Workers, WorkerSpec{Name: fmt.Sprintf("w%d", i), Host: fmt.Sprintf("127.0.1.%d", i+1),
			Slots: 1, Task: time.Duration(2+i%5) * time.Millisecond, Delay: [2]time.Duration{d, 2 * d}})
	}
	return sc
}

// TestLostGrandchild: a grandchild master (a child master's child) lost
// at work, its machine killed or its connections broken, in the first
// generation or the last, at once or a moment after its first worker
// joined it. Every task is counted once as an original, the run ends
// within its bound with the in-process trajectory, and every worker
// hears that it is over (Check): the grandchild's workers, and its
// agent when it lives, go back the way they came, to the child master,
// which expects them (as a lost child's come back to the root). Each
// case runs the first seeds whose run has such a grandchild: which do
// moves with any change in what the slow root spends its time on.
func TestLostGrandchild(t *testing.T) {
	seeds := uint64(2)
	if testing.Short() || raceEnabled {
		seeds = 1
	}
	for _, how := range []Loss{LoseKill, LoseCut} {
		for _, gen := range []int{1, 4} {
			for _, after := range []time.Duration{0, 10 * time.Millisecond, 30 * time.Millisecond} {
				for _, policy := range []string{"wq", "rr", "rwq", "r3q", "eft"} {
					// The first seeds whose run splits twice over in
					// generation gen or later (not every one does).
					lost := uint64(0)
					for seed := uint64(1); lost < seeds; seed++ {
						loss := GrandchildLoss{How: how, Gen: gen, After: after}
						if seed > seeds+4 {
							t.Errorf("%s, %+v: no grandchild master was lost in seeds 1–%d (the scenario no longer splits twice over)", policy, loss, seed-1)
							break
						}
						sc := grandchildScenario(seed, policy, loss)
						out, trace, bad := simulateScenario(t, sc)
						if !strings.Contains(trace, `msg="sim: grandchild master to be lost"`) {
							continue
						}
						lost++
						if len(bad) > 0 {
							t.Errorf("%s, seed %d, %+v broke:\n  %s\nscenario: %s\ntrace (last lines):\n%s",
								policy, seed, loss, strings.Join(bad, "\n  "), sc, tail(trace, 40))
						}
						t.Logf("%s, seed %d, %+v: %v of virtual time", policy, seed, loss, out.Elapsed.Round(time.Millisecond))
					}
				}
			}
		}
	}
}

// TestChildNotHeldByAWorkerThatPassed: seed 9 under r3q, its first
// grandchild cut off. Two generations later a child master, returning,
// was named its own returned child's agent, which joined it and was
// moved on to the root within one turn of that slow master: the child
// never saw it come, and waited for it returnGrace (30 s), holding its
// own agent, and the run's end, so long. It is expected no more once it
// joins (grid: cameHere).
func TestChildNotHeldByAWorkerThatPassed(t *testing.T) {
	loss := GrandchildLoss{How: LoseCut, Gen: 1, After: 10 * time.Millisecond}
	sc := grandchildScenario(9, "r3q", loss)
	out, trace, bad := simulateScenario(t, sc)
	for _, b := range bad {
		t.Errorf("broke: %s", b)
	}
	if out.Elapsed > 10*time.Second {
		t.Errorf("the run took %v of virtual time: a master waited for a worker that had come and gone\nscenario: %s\ntrace (last lines):\n%s",
			out.Elapsed, sc, tail(trace, 40))
	}
}

// TestGrandchildFrozenAsItHearsTheEnd: a grandchild master frozen at the
// instant its parent, a child master, hears that the run is over, before
// the parent's word reaches it, for longer than its workers wait on it:
// at work or done (told the end), or returning (told to return, its
// link's last frame still to come). They time out on it and go back the
// way they came, to the child, which never heard from the grandchild
// that they have the end (or come back): it awaits them (and the
// grandchild's agent), tells them, and only then says up that its
// workers heard it, having asked the root to wait that much longer.
// Before, the child closed a second after the end, and they looked for a
// master for ever.
func TestGrandchildFrozenAsItHearsTheEnd(t *testing.T) {
	defer func(was bool) { CheckWaiting = was }(CheckWaiting)
	CheckWaiting = true
	for _, c := range []struct {
		policy string
		seed   uint64
		frozen time.Duration
		gap    string // the child's word for the frozen grandchild
	}{
		{"wq", 3, 35 * time.Second, "did not say its workers heard it"},
		{"rr", 6, 35 * time.Second, "did not say its workers heard it"},
		{"r3q", 6, 35 * time.Second, "did not say its workers heard it"},
		{"rr", 8, 35 * time.Second, "did not end its link in time"},
		{"rr", 9, 35 * time.Second, "did not end its link in time"},
		// Thawed as the child still waits, it names its agent, which
		// comes after its back-off.
		{"rr", 8, 12 * time.Second, "awaits workers on their way to it"},
	} {
		loss := GrandchildLoss{How: LoseFreeze, Gen: 1, For: c.frozen}
		sc := grandchildScenario(c.seed, c.policy, loss)
		out, trace, bad := simulateScenario(t, sc)
		if len(bad) > 0 {
			t.Errorf("%s, seed %d, frozen %v broke:\n  %s\nscenario: %s\ntrace (last lines):\n%s",
				c.policy, c.seed, c.frozen, strings.Join(bad, "\n  "), sc, tail(trace, 60))
			continue
		}
		// Not a run that missed the gap (its order moved on).
		if !strings.Contains(trace, `msg="sim: grandchild master frozen"`) || !strings.Contains(trace, c.gap) {
			t.Errorf("%s, seed %d, frozen %v: no %q in the trace: the scenario no longer freezes a grandchild in the gap\n%s",
				c.policy, c.seed, c.frozen, c.gap, tail(trace, 60))
			continue
		}
		t.Logf("%s, seed %d, frozen %v: %v of virtual time, bound %v", c.policy, c.seed, c.frozen, out.Elapsed, Bound(sc))
	}
}
