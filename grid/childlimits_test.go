package grid

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// TestChildTakesParentsLimits: a child master runs under its parent's
// task timeout and retries, as the parent says them in Promote. With
// its own defaults (10 min, 3) a child dropped a task the run allows an
// hour for, and cut its deadlines at 5 min rather than the parent's
// ceiling; with none set on the parent, the child still dropped a task
// at 10 min.
func TestChildTakesParentsLimits(t *testing.T) {
	for _, tc := range []struct {
		name        string
		timeout     time.Duration
		retries     int
		wantTimeout time.Duration
		wantRetries int
	}{
		{"set", 3 * time.Minute, 1, 3 * time.Minute, 1},
		{"none", -1, -1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaktest.Check(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := splitTestKey(t)
			spec := ProblemSpec{Name: "sphere", Dim: 2}
			log := quietConfig().Logger
			root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: spec, Logger: log,
				TaskTimeout: tc.timeout, MaxRetries: tc.retries})
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			root.ask(func() { root.proto().children[1] = &childMaster{token: 1, name: "c", masters: 1} })
			pr := &Promote{Token: 1, Gen: 1, ESGen: 1, N: 1, Tasks: []Task{{ID: 0, X: []float64{1, 2}}}, Policy: "rwq"}
			pr.limits(&root.cfg)
			started := make(chan *Master, 1)
			childStarted = func(m *Master) { started <- m }
			defer func() { childStarted = nil }()
			cctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- RunChild(cctx, ChildConfig{Promote: pr, Parent: root.Addr(), Listen: "127.0.0.1:0", Key: key, Name: "c", Problem: spec},
					MasterConfig{Logger: log})
			}()
			var c *Master
			select {
			case c = <-started:
			case <-ctx.Done():
				t.Fatal("no child master started")
			}
			if c.cfg.TaskTimeout != tc.wantTimeout || c.cfg.MaxRetries != tc.wantRetries {
				t.Errorf("child's task timeout %v and max retries %d, want the parent's %v and %d",
					c.cfg.TaskTimeout, c.cfg.MaxRetries, tc.wantTimeout, tc.wantRetries)
			}
			stop()
			<-done
		})
	}
}

// TestChildCountsOverruns: a child master counts its tasks' overruns,
// so that a task's deadline doubles at each, up to the ceiling, as on
// the root. Its batch had no count of them: every instance of a task
// longer than its worker's deadline was cut at that deadline, never
// marked as cut at the ceiling, and the task never ended on the child.
func TestChildCountsOverruns(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, c, _, _ := rootAndChild(ctx, t)
	var n int
	var again time.Duration
	if !waitLoop(ctx, c, func() bool {
		if c.cur == nil {
			return false
		}
		c.cur.overrun(0)
		n = c.cur.overruns(0)
		again = c.cfg.deadlines().Again(4*time.Second, n, c.cur.ceilinged(0))
		return true
	}) {
		t.Fatal("the child's batch never started")
	}
	if n != 1 || again != 8*time.Second {
		t.Errorf("task 0 overdue once on the child: %d overruns counted, its next deadline %v on a worker of 4s; want 1 and 8s", n, again)
	}
}
