package grid

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A task that runs past the task timeout on every worker fails its
// generation once MaxRetries workers more than allowed were dropped for
// it, naming the timeout. Each drop counted for nothing: the workers
// came back (esrun's local agents, esworker) and took the task again, one
// dropped after another, and the run never ended (esrun -task-timeout 3s
// on a task of 5 s: 124 workers dropped in 200 s).
func TestTaskPastTheTimeoutEverywhereFails(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) {
		c.DeadlineFloor = time.Hour // no soft deadline: only the hard one
		c.TaskTimeout = 2 * time.Second
		c.MaxRetries = 1
	})
	a, b := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0)
	a.freeze, b.freeze = true, true
	a.heartbeat, b.heartbeat = 100*time.Millisecond, 100*time.Millisecond
	startWorkers(t, m, a, b)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := m.Evaluate(ctx, 0, [][]float64{{1}})
	var rx *RetriesExhaustedError
	if !errors.As(err, &rx) || len(rx.Failures) != 2 || !strings.Contains(rx.Failures[0].Err, "ran past the task timeout of 2s") {
		t.Fatalf("Evaluate: %v; want the task failed twice, past the task timeout", err)
	}
	if st := m.Stats(); st.Dropped != 2 {
		t.Errorf("%d workers dropped, want 2", st.Dropped)
	}
}
