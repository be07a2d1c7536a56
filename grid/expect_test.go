package grid

import (
	"testing"
	"time"
)

// TestExpectAgain: a worker told to find a master afresh is awaited until
// it comes on a new connection; its old connection, still open or gone,
// does not count, and gossip saying it is gone, or its grace passing,
// ends the wait. The master's books only, no network.
func TestExpectAgain(t *testing.T) {
	m := &Master{start: time.Now()}
	m.loopState.init()
	old := &mworker{name: "w1"}
	m.byName["w1"] = old
	m.expectAgain(old, time.Hour)
	if n := m.awaiting(); n != 1 {
		t.Fatalf("awaiting %d with the old connection open; want 1", n)
	}
	delete(m.byName, "w1") // the old connection closes
	if n := m.awaiting(); n != 1 {
		t.Fatalf("awaiting %d between connections; want 1", n)
	}
	m.byName["w1"] = &mworker{name: "w1"} // it comes again
	if n := m.awaiting(); n != 0 {
		t.Fatalf("awaiting %d once it came again; want 0", n)
	}

	m.expectAgain(m.byName["w1"], time.Hour)
	m.unexpect("w1") // gossip: gone
	if n := m.awaiting(); n != 0 {
		t.Fatalf("awaiting %d after gossip said it is gone; want 0", n)
	}

	m.expectAgain(m.byName["w1"], -time.Second) // its grace is over
	if n := m.awaiting(); n != 0 {
		t.Fatalf("awaiting %d past its grace; want 0", n)
	}
}
