package grid

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
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

// TestChildSendsBackToItself: a child master c whose own promoted worker
// g never came up tells the worker that was waiting to move to g to come
// back to c itself (its home is the root, which would not know to expect
// it) and waits for it on a new connection; the old connection does not
// count.
func TestChildSendsBackToItself(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, c, key, runDone := rootAndChild(ctx, t)
	defer func() {
		cancel()
		<-runDone
	}()
	w1, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w1", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	in := frames(w1)
	// w1 waits to move to g, a promoted worker of c's that never came up.
	if !waitLoop(ctx, c, func() bool {
		w := c.byName["w1"]
		p := c.proto()
		if w == nil || p.parent == nil {
			return false
		}
		g := &childMaster{token: 7, name: "g", batch: 1, created: c.now() - childHelloTimeout - time.Second, masters: 1}
		p.children[g.token] = g
		p.order = append(p.order, g)
		p.moving[w] = g
		c.checkChildren()
		return true
	}) {
		t.Fatal("w1 never joined c")
	}
	m := awaitFrame(ctx, w1, in, func(m Message) bool { _, ok := m.(*Move); return ok })
	if mv, ok := m.(*Move); !ok || mv.Addr != c.Addr() {
		t.Fatalf("w1 got %#v, want a move back to c at %s", m, c.Addr())
	}
	var n int
	c.ask(func() { n = c.awaiting() })
	if n != 1 {
		t.Fatalf("c awaits %d with w1's old connection open; want 1", n)
	}
	w1.Close()
	again, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w1", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !waitLoop(ctx, c, func() bool { return c.awaiting() == 0 }) {
		t.Fatal("c still awaits w1 after it came back on a new connection")
	}
}
