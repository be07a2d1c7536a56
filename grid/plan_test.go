package grid

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/sched"
)

func TestGroupOf(t *testing.T) {
	for name, want := range map[string]string{
		"fast-1": "fast", "lab-pc-12": "lab-pc", "host-4711": "host", "host-4711-2": "host",
		"local-3": "local", "pc12": "pc12", "slow": "slow", "-3": "-3", "a-": "a-", "a-b-7x": "a-b-7x",
	} {
		if got := GroupOf(name); got != want {
			t.Errorf("GroupOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPlanDecodeAndSlotsFor(t *testing.T) {
	p, err := DecodePlan(strings.NewReader(`{"version":1,
		"workers":[{"name":"fast-1","slots":3},{"name":"slow-1","slots":0}],
		"groups":[{"group":"fast","slots":2},{"group":"slow","slots":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"fast-1": 3, "fast-9": 2, "slow-1": 0, "slow-2": 0} {
		if got, ok := p.SlotsFor(name); !ok || got != want {
			t.Errorf("SlotsFor(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	if _, ok := p.SlotsFor("other-1"); ok {
		t.Error("a worker the plan does not know has slots")
	}
	var none *Plan
	if _, ok := none.SlotsFor("fast-1"); ok {
		t.Error("a nil plan has slots")
	}
	// Task-time priors: only for the plan's size, only for workers in use.
	q := &Plan{Version: PlanVersion, N: 600, Workers: []PlanWorker{{Name: "fast-1", Slots: 2, Exec: 0.25}, {Name: "slow-1", Slots: 0, Exec: 3}}}
	if d, ok := q.ExecFor("fast-1", 600); !ok || d != 250*time.Millisecond {
		t.Errorf("ExecFor(fast-1, 600) = %v, %v", d, ok)
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"fast-1", 500}, {"slow-1", 600}, {"other", 600}} {
		if d, ok := q.ExecFor(c.name, c.n); ok {
			t.Errorf("ExecFor(%s, %d) = %v", c.name, c.n, d)
		}
	}
	if _, ok := none.ExecFor("fast-1", 0); ok {
		t.Error("a nil plan has priors")
	}
	for _, bad := range []string{
		`{"version":2,"workers":[]}`,
		`{"version":1,"workers":[{"name":"","slots":1}]}`,
		`{"version":1,"workers":[{"name":"a","slots":1},{"name":"a","slots":2}]}`,
		`{"version":1,"workers":[{"name":"a","slots":-1}]}`,
		`{"version":1,"workers":[{"name":"a","slots":1,"exec":-1}]}`,
		`{"version":1,"groups":[{"group":"a","slots":1},{"group":"a","slots":1}]}`,
		`{"version":1,"workers":[`,
		// A key given twice was the last one's, silently.
		`{"version":1,"workers":[{"name":"a","slots":0,"slots":4}]}`,
		`{"version":1,"version":1,"workers":[]}`,
	} {
		if _, err := DecodePlan(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// A master given a plan sets aside the worker the plan leaves out: it
// receives no tasks, whatever the policy; given slots again (SetSlots) it
// takes its share. Reference: docs/papers.md §4, "which machines to use at all".
func TestMasterActsOnPlan(t *testing.T) {
	for _, policy := range []string{"wq", "r3q", "eft"} {
		t.Run(policy, func(t *testing.T) {
			plan := &Plan{Version: PlanVersion, Workers: []PlanWorker{{Name: "fast-1", Slots: 2}, {Name: "slow-1", Slots: 0}}}
			m := startMaster(t, policy, func(c *MasterConfig) { c.Plan = plan })
			fast, slow := newTestWorker("fast-1", 2, time.Millisecond), newTestWorker("slow-1", 1, 5*time.Millisecond)
			startWorkers(t, m, fast, slow)
			evalAndCheck(t, m, 3, 12)
			if n := slow.got.Load(); n != 0 {
				t.Fatalf("the worker set aside got %d tasks", n)
			}
			var slowID sched.WorkerID = -1
			for _, s := range m.WorkerStats() {
				if s.Name == "slow-1" {
					slowID = s.ID
				}
			}
			if err := m.SetSlots(slowID, 1); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			// Enough batches that the slow worker, open again, gets some.
			for g := 3; g < 10 && slow.got.Load() == 0; g++ {
				xs := make([][]float64, 12)
				for i := range xs {
					xs[i] = []float64{1, 2, 3, 4, 5}
				}
				if _, err := m.Evaluate(ctx, g, xs); err != nil {
					t.Fatal(err)
				}
			}
			if slow.got.Load() == 0 {
				t.Error("given slots again, the worker never got a task")
			}
			if err := m.SetSlots(12345, 1); err == nil {
				t.Error("SetSlots of an unknown worker succeeded")
			}
		})
	}
}
