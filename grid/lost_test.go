package grid

import (
	"testing"
)

// Workers lost are counted by cause, a planned move is not a loss, a
// worker that comes back counts once by name, and
// every kind of refusal is exported from the start, at 0 (issue 27).
func TestWorkersLostAndMoved(t *testing.T) {
	m := startMaster(t, "wq")
	st := m.MetricsState()
	for _, k := range RefusedKinds() {
		if n, ok := st.Refused[k]; !ok || n != 0 {
			t.Errorf("refused %s: %d (present: %v), want 0 from the start", k, n, ok)
		}
	}
	lost, moved := newTestWorker("lost", 1, 0), newTestWorker("moved", 1, 0)
	startWorkers(t, m, lost, moved)
	if !m.ask(func() { m.moveWorker(m.byName["moved"], "127.0.0.1:1") }) {
		t.Fatal("the master stopped")
	}
	moved.stop() // its connection ends as planned
	eventually(t, "the moved worker to leave", func() bool { return m.Workers() == 1 })
	if l := m.Stats().Lost; l != (LostStats{}) {
		t.Errorf("after a planned move: lost %+v, want none", l)
	}
	back := newTestWorker("moved", 1, 0) // back from the other master
	startWorkers(t, m, back)
	eventually(t, "the worker to come back", func() bool { return m.Workers() == 2 })
	if st := m.Stats(); st.Joined != 3 || st.Named != 2 {
		t.Errorf("%d joins, %d named; want 3 and 2 (a worker that comes back counts once)", st.Joined, st.Named)
	}
	back.stop() // not moved this time: lost
	lost.stop()
	eventually(t, "the lost workers to leave", func() bool { return m.Workers() == 0 })
	if l := m.Stats().Lost; l != (LostStats{Closed: 2}) {
		t.Errorf("after two connections ended: lost %+v, want 2 closed", l)
	}
	if n := m.MetricsState().Lost["closed"]; n != 2 {
		t.Errorf("metrics: %d lost closed, want 2", n)
	}
}
