package report

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// The timeline keeps at most its limit, dropping the oldest generations
// whole, and counts what it left out.
func TestTimelineBound(t *testing.T) {
	tl := NewInstances(100)
	for g := range 50 {
		for i := range 10 {
			tl.Add(sched.Instance{Worker: 1, Task: sched.TaskID(i), Gen: g, Kind: sched.InstanceFinished, Known: true, Start: time.Duration(g) * time.Second})
		}
	}
	tl.Add(sched.Instance{Worker: 1, Gen: 3, Kind: sched.InstanceFinished}) // a late one of a dropped generation
	r := tl.Record(0, 7)
	perGen := map[int]int{}
	for _, in := range r.Instances {
		perGen[in.Gen]++
		if in.Gen < r.FromGen {
			t.Errorf("instance of generation %d kept, from %d on only", in.Gen, r.FromGen)
		}
	}
	if len(r.Instances) > 100 || r.Limit != 100 || r.Omitted+len(r.Instances) != 501 || perGen[7+49] != 10 {
		t.Errorf("%d instances kept (limit %d), %d omitted, %d of the last generation; want at most 100, 501 in all, 10", len(r.Instances), r.Limit, r.Omitted, perGen[56])
	}
	for g, n := range perGen {
		if n != 10 {
			t.Errorf("generation %d: %d instances, want all 10", g, n)
		}
	}
	// One generation larger than the limit keeps its first instances.
	tl = NewInstances(100)
	for i := range 250 {
		tl.Add(sched.Instance{Worker: 1, Task: sched.TaskID(i), Kind: sched.InstanceFinished, Known: true})
	}
	if r := tl.Record(0, 0); len(r.Instances) != 100 || r.Omitted != 150 || r.Instances[99].Task != 99 {
		t.Errorf("%d instances kept, %d omitted; want 100 and 150", len(r.Instances), r.Omitted)
	}
}

// An instance the ledger places before the first generation (Gen -1) is
// kept with the first generation: nothing is omitted under the limit.
func TestTimelineBeforeFirstGeneration(t *testing.T) {
	tl := NewInstances(100)
	tl.Add(sched.Instance{Worker: 1, Task: 1, Gen: -1, Kind: sched.InstanceCancelledHeld})
	tl.Add(sched.Instance{Worker: 1, Task: 2, Gen: 0, Kind: sched.InstanceFinished, Known: true})
	r := tl.Record(0, 3)
	if r.Omitted != 0 || r.FromGen != 3 || len(r.Instances) != 2 || r.Instances[0].Gen != 3 || r.Instances[1].Gen != 3 {
		t.Errorf("timeline %+v: want both instances, of generation 3, none omitted", r)
	}
}
