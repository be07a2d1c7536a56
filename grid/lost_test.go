package grid

import (
	"testing"
)

// Workers lost are counted by cause, a planned move is not a loss, and
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
	lost.stop()
	eventually(t, "the lost worker to leave", func() bool { return m.Workers() == 0 })
	if l := m.Stats().Lost; l != (LostStats{Closed: 1}) {
		t.Errorf("after a connection ended: lost %+v, want 1 closed", l)
	}
	if n := m.MetricsState().Lost["closed"]; n != 1 {
		t.Errorf("metrics: %d lost closed, want 1", n)
	}
}
