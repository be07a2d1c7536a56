package grid

import (
	"context"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// TestPromotedWorkerLostBeforeHello: a worker the root promoted whose
// connection breaks before its child master says hello, without the
// Drain.Last a promoted worker ends with, died (killed, or cut off): its
// child counts as lost at once, as its connection closes, and the worker
// waiting to be moved to it is sent home and awaited, with the agent,
// returnGrace at most (nothing was moved to the child, so nothing has to
// time out on it first). Before, the root took the close for the planned
// end of a worker leaving to become a child master, counted the child
// lost only once the hello timeout (15 s) had passed, and then waited
// lostGrace (40 s) for what it held: a run lost 55 s so.
func TestPromotedWorkerLostBeforeHello(t *testing.T) { promotedWorkerEnds(t, false) }

// TestPromotedWorkerLeavesBeforeHello: a promoted worker with nothing
// left to run closes its connection at once, before its child master
// (still dialling) says hello; it says first that its end is planned
// (Drain.Last), so the root keeps its child, whose hello then moves the
// waiting worker to it.
func TestPromotedWorkerLeavesBeforeHello(t *testing.T) { promotedWorkerEnds(t, true) }

// promotedWorkerEnds: over real TCP, worker p promoted by the root (as
// maybeSplit does, its hello timeout far off), q waiting to be moved to
// p's child; p's connection ends, planned or not.
func promotedWorkerEnds(t *testing.T, planned bool) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	key := splitTestKey(t)
	root := plainRoot(ctx, t, key)
	p, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "p", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "q", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	qin := frames(q)
	if !waitLoop(ctx, root, func() bool { return root.byName["p"] != nil && root.byName["q"] != nil }) {
		t.Fatal("p and q never joined the root")
	}
	var c *childMaster
	root.ask(func() {
		pr := root.proto()
		pw := root.byName["p"]
		c = &childMaster{token: 1, name: "p", masters: 1, inR: true, created: root.now() + time.Hour, from: pw}
		pr.children[c.token] = c
		pr.order = append(pr.order, c)
		pw.moved = true
		root.setDraining(root.byName["q"])
		pr.moving[root.byName["q"]] = c
	})
	if planned {
		p.SendAndClose(&Drain{Last: true})
	} else {
		p.Close()
	}
	var lost bool
	var expected map[string]time.Duration
	var hold, now time.Duration
	if !waitLoop(ctx, root, func() bool {
		if root.byName["p"] != nil {
			return false
		}
		// The turn that took p's close counted its child lost, or not.
		pr := root.proto()
		lost, hold, now = c.lost, pr.endHold, root.now()
		expected = map[string]time.Duration{}
		for name, x := range pr.expect {
			expected[name] = x.by
		}
		return true
	}) {
		t.Fatal("the root never saw p's connection close")
	}
	if !planned {
		if !lost {
			t.Fatal("p's connection broke before its child master's hello, without Drain.Last: its child is not counted lost")
		}
		for _, name := range []string{"p", "q"} {
			if by, ok := expected[name]; !ok || by > now+returnGrace {
				t.Errorf("%s: expected back %v (until %v at %v), want so for returnGrace at most", name, ok, by, now)
			}
		}
		if hold > now+returnGrace {
			t.Errorf("the end is held until %v at %v: more than returnGrace for a child that held nothing", hold, now)
		}
		mv := awaitFrame(ctx, q, qin, func(m Message) bool { _, ok := m.(*Move); return ok })
		if mv == nil || mv.(*Move).Addr != "" {
			t.Fatalf("q got %v, want an empty Move (home)", mv)
		}
		// Both come home as the run ends, and hear that it is over.
		q.Close()
		closed := closeAsync(root)
		endsRunFor(ctx, t, root, key, "q", "p")
		<-closed
		return
	}
	if lost {
		t.Fatal("p said its end was planned (Drain.Last), yet its child counts as lost")
	}
	link, in := silentChildLink(ctx, t, root, key, "p", c.token)
	mv := awaitFrame(ctx, q, qin, func(m Message) bool { _, ok := m.(*Move); return ok })
	if mv == nil || mv.(*Move).Addr != "127.0.0.1:1" {
		t.Fatalf("q got %v, want a Move to p's child master", mv)
	}
	// p's child master hears the end, and says its workers did.
	q.Close()
	closed := closeAsync(root)
	runOver(t, "p's child master", awaitFrame(ctx, link, in, isShutdown))
	link.SendAndClose(&Shutdown{})
	<-closed
}
