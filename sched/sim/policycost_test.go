package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// TestMeasuredPolicyCost checks the table: every policy measured at
// every size, the measured figure at a measured size, a figure between
// its neighbours' between them, and the nearest size's beyond them.
func TestMeasuredPolicyCost(t *testing.T) {
	for _, name := range sched.Names {
		c, ok := policyCosts[name]
		if !ok {
			t.Fatalf("%s: not measured", name)
		}
		for i, n := range policyCostSizes {
			if got := MeasuredPolicyCost(name, n); got != time.Duration(c[i]) {
				t.Errorf("%s at %d: %v, want %v", name, n, got, time.Duration(c[i]))
			}
			if i > 0 {
				lo, hi := min(c[i-1], c[i]), max(c[i-1], c[i])
				if got := float64(MeasuredPolicyCost(name, (policyCostSizes[i-1]+n)/2)); got < lo-1 || got > hi+1 {
					t.Errorf("%s at %d: %v, not between %v and %v", name, (policyCostSizes[i-1]+n)/2, got, lo, hi)
				}
			}
		}
		if got := MeasuredPolicyCost(name, 3); got != time.Duration(c[0]) {
			t.Errorf("%s at 3 workers: %v, want %v", name, got, time.Duration(c[0]))
		}
		if got := MeasuredPolicyCost(name, 100_000); got != time.Duration(c[len(c)-1]) {
			t.Errorf("%s at 100,000 workers: %v, want %v", name, got, time.Duration(c[len(c)-1]))
		}
	}
	if got := MeasuredPolicyCost("nope", 16); got != 0 {
		t.Errorf("unknown policy: %v, want 0", got)
	}
}

// TestPolicyCostCharged checks that the simulated master spends the
// policy's time: with a master that costs nothing per message, a policy
// step of 1 ms makes a bag of tasks on one worker end later by at least
// one step per task (each result's step delays the next send), and the
// default charges nothing; with a cost per message, the default charges
// the measured cost.
func TestPolicyCostCharged(t *testing.T) {
	set, err := ParseSet("one", strings.NewReader("master cost=0s\nmachine A cpus=1 speed=1 delay=1ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(cost time.Duration) time.Duration {
		r, err := Run(Config{Set: set, Policy: "wq", Workload: BagUniform(20, 10*time.Millisecond), PolicyCost: cost, NoOptimum: true})
		if err != nil {
			t.Fatal(err)
		}
		return r.End
	}
	free, none, charged := run(0), run(-1), run(time.Millisecond)
	if free != none {
		t.Errorf("master cost 0: the default charged the policy (%v, against %v with none)", free, none)
	}
	if charged < none+19*time.Millisecond {
		t.Errorf("1 ms a step: ended at %v, want at least %v", charged, none+19*time.Millisecond)
	}
	set.MasterCost = 10 * time.Microsecond
	if measured, none := run(0), run(-1); measured <= none {
		t.Errorf("master cost 10 µs: the measured policy cost delayed nothing (%v, against %v)", measured, none)
	}
}
