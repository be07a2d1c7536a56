package grid

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// roundTrip is the master's smoothed round trip of the worker named name.
func roundTrip(t *testing.T, m *Master, name string) time.Duration {
	t.Helper()
	for _, s := range m.WorkerStats() {
		if s.Name == name {
			return s.RoundTrip
		}
	}
	t.Fatalf("no worker %s", name)
	return 0
}

// A worker's round trip is measured only on tasks sent once its session
// has been heard from: the first tasks may wait for it to build the
// problem (a plugin's first process starting), and that wait is not the
// network's.
func TestMasterMeasuresRoundTripsOnceHeard(t *testing.T) {
	m := startMaster(t, "wq")
	w := newTestWorker("w", 1, 0)
	startWorkers(t, m, w)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := m.Evaluate(ctx, 0, randomBatch(rng, 1, 5)); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(t, m, "w"); rt != 0 {
		t.Errorf("round trip %v measured on a task sent before the worker said anything", rt)
	}
	if _, err := m.Evaluate(ctx, 1, randomBatch(rng, 1, 5)); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(t, m, "w"); rt <= 0 {
		t.Errorf("round trip %v once heard from, want it measured", rt)
	}
}

// A running instance that lost its race to a replica may hold its slot
// until the worker acknowledges the cancel (a plugin that cannot be
// cancelled finishes it): a task sent to that slot meanwhile waits for
// it, and that wait is not the network's. Worker b, deaf to cancels,
// holds its first task; a's replica wins; a leaves, and b's next task
// waits behind the lost one: its round trip is not measured.
func TestMasterMeasuresNoRoundTripBehindAStoppingInstance(t *testing.T) {
	m := startMaster(t, "rr")
	a, b := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0)
	b.deaf, b.hold = true, make(chan struct{})
	startWorkers(t, m, a, b)
	// b is heard from before any task: only the rule under test can keep
	// its round trip unmeasured.
	if err := b.conn.Send(&Results{Queued: 7}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's status to arrive", func() bool {
		for _, s := range m.WorkerStats() {
			if s.Name == "b" && s.Queued == 7 {
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := m.Evaluate(ctx, 0, randomBatch(rng, 2, 5)); err != nil {
		t.Fatal(err)
	}
	a.stop()
	eventually(t, "a to leave", func() bool { return m.Workers() == 1 })
	done := make(chan error, 1)
	go func() {
		_, err := m.Evaluate(ctx, 1, randomBatch(rng, 1, 5))
		done <- err
	}()
	eventually(t, "b to get its next task", func() bool { return b.got.Load() == 2 })
	close(b.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(t, m, "b"); rt != 0 {
		t.Errorf("round trip %v measured on a task that waited behind a cancelled one", rt)
	}
}
