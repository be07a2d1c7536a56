package grid

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

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
