package sim

import (
	"testing"
	"time"
)

// LB follows -slowdown: every machine twice as slow from the start makes
// LB twice as long, and a machine slowed halfway through lengthens it.
func TestLBHonoursSlowdowns(t *testing.T) {
	set, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Set: set, Policy: "r3q", Workload: ES(30, 70, 10, 100*time.Millisecond), Seed: 1}
	r0, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	slow := base
	for _, m := range set.Machines {
		slow.Slowdowns = append(slow.Slowdowns, Slowdown{Machine: m.Name, At: 0, Factor: 2})
	}
	r1, err := Run(slow)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r1.Report.LB, 2*r0.Report.LB; got < want-time.Microsecond || got > want+time.Microsecond {
		t.Errorf("LB %v with every machine twice as slow, want %v (2 × %v)", got, want, r0.Report.LB)
	}
	half := base
	half.Slowdowns = []Slowdown{{Machine: set.Machines[0].Name, At: r0.End / 2, Factor: 4}}
	r2, err := Run(half)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Report.LB <= r0.Report.LB || r2.Report.LB >= r1.Report.LB {
		t.Errorf("LB %v with one machine slowed halfway, want between %v and %v", r2.Report.LB, r0.Report.LB, r1.Report.LB)
	}
}
