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

// A generation larger than the limit is left out past the limit without
// sorting the timeline again for each of its instances: every add sorted
// the whole timeline once one generation filled it, on the master's loop,
// so a generation of 10⁵ tasks took minutes. The next generation still
// replaces it whole.
func TestTimelineLargeGenerationSortsOnce(t *testing.T) {
	tl := NewInstances(100)
	for i := range 10000 {
		tl.Add(sched.Instance{Worker: 1, Task: sched.TaskID(i), Gen: 1, Kind: sched.InstanceFinished, Known: true})
	}
	tl.Add(sched.Instance{Worker: 1, Task: 1, Gen: 0, Kind: sched.InstanceFinished}) // a late one, older
	if tl.sorts > 1 {
		t.Errorf("%d sorts for 10001 instances of one generation over a limit of 100, want 1", tl.sorts)
	}
	if r := tl.Record(0, 0); len(r.Instances) != 100 || r.Omitted != 9901 || r.Instances[99].Task != 99 {
		t.Errorf("%d instances kept, %d omitted; want the first 100, 9901 omitted", len(r.Instances), r.Omitted)
	}
	for i := range 10 {
		tl.Add(sched.Instance{Worker: 1, Task: sched.TaskID(i), Gen: 2, Kind: sched.InstanceFinished, Known: true})
	}
	r := tl.Record(0, 0)
	if len(r.Instances) != 10 || r.FromGen != 2 || r.Omitted != 10001 {
		t.Errorf("after generation 2: %d instances from generation %d, %d omitted; want its 10, from 2, 10001 omitted", len(r.Instances), r.FromGen, r.Omitted)
	}
}
