package grid

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// Outstanding lists the instances on the workers, the running ones with
// their start, within its limit and counting the rest.
func TestMasterOutstanding(t *testing.T) {
	m := startMaster(t, "wq")
	w := newTestWorker("w", 2, 0)
	w.hold = make(chan struct{})
	startWorkers(t, m, w)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Evaluate(ctx, 0, randomBatch(rand.New(rand.NewPCG(1, 2)), 2, 5))
		done <- err
	}()
	eventually(t, "both tasks to be sent", func() bool { return w.got.Load() == 2 })
	now, out, more := m.Outstanding(10)
	if len(out) != 2 || more != 0 {
		t.Fatalf("outstanding %+v, %d more; want the 2 tasks", out, more)
	}
	for _, o := range out {
		if o.Worker != out[0].Worker || o.Started < o.Sent || o.Sent > now {
			t.Errorf("instance %+v at %v: want it running on w (2 slots) since it was sent", o, now)
		}
	}
	if _, out, more := m.Outstanding(1); len(out) != 1 || more != 1 {
		t.Errorf("limit 1: %d listed, %d more; want 1 and 1", len(out), more)
	}
	close(w.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, out, _ := m.Outstanding(10); len(out) != 0 {
		t.Errorf("outstanding %+v once the batch is done, want none", out)
	}
}
