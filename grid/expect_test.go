package grid

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// TestExpectAgain: a worker told to find a master afresh is awaited until
// it comes on a new connection; its old connection, still open or gone,
// does not count, and its grace passing ends the wait. The master's
// books only, no network.
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

	m.expectAgain(m.byName["w1"], -time.Second) // its grace is over
	if n := m.awaiting(); n != 0 {
		t.Fatalf("awaiting %d past its grace; want 0", n)
	}
}

// TestExpectedJoinsAndLeavesInOneTurn: a worker expected here that
// joins and is moved on within one turn of the loop (a slow master's
// turn takes many messages; a returning child moves on at once what
// reaches it) is expected no more: at the turn's end it is gone again,
// and noteJoins alone never saw it here. Before, the master waited for
// it returnGrace (seen in TestLostGrandchild's runs: a child master
// returning held its own agent 30 s, and the root's end with it). The
// master's books only, no network.
func TestExpectedJoinsAndLeavesInOneTurn(t *testing.T) {
	m := &Master{start: time.Now()}
	m.loopState.init()
	m.expectWorkers([]string{"w1"}, time.Hour)
	// One turn: w1 joins (joined, which notes it), and leaves.
	m.cameHere("w1")
	if n := m.awaiting(); n != 0 {
		t.Fatalf("awaiting %d after w1 joined and left in one turn; want 0", n)
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

// finishChild makes c's share done, as a child g of its own would: c
// lends its task to g, g returns the result with Done and goes, and c
// sends its Done to the root, which holds it among the children waiting
// for its word to return.
func finishChild(ctx context.Context, t *testing.T, root, c *Master, key *Key) {
	t.Helper()
	if !waitLoop(ctx, c, func() bool {
		p := c.proto()
		if p.parent == nil {
			return false
		}
		g := &childMaster{token: 7, name: "g", batch: 1, created: c.now(), masters: 1}
		for _, tk := range c.takeTasks(1) {
			p.lent[tk.ID] = g
			g.lent++
		}
		p.children[g.token] = g
		p.order = append(p.order, g)
		return true
	}) {
		t.Fatal("c never started")
	}
	glink, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "g/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	defer glink.Close()
	glink.Send(&ChildHello{Token: 7, Addr: "127.0.0.1:1"})
	glink.SendAndClose(&ChildResults{Gen: 1, IDs: []int32{0}, F: []float64{5}, Masters: 1, Done: true})
	if !waitLoop(ctx, root, func() bool { return len(root.proto().returning) == 1 }) {
		t.Fatal("c's Done did not reach the root")
	}
}

// endsRunFor dials the root as each of names, in turn, while the root
// closes, and then checks that each is told the run is over.
func endsRunFor(ctx context.Context, t *testing.T, root *Master, key *Key, names ...string) {
	t.Helper()
	conns := make([]*Conn, len(names))
	ins := make([]<-chan Message, len(names))
	for i, name := range names {
		conn, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatalf("%s cannot reach the root as it closes (it did not wait for it): %v", name, err)
		}
		defer conn.Close()
		conns[i], ins[i] = conn, frames(conn)
	}
	for i, name := range names {
		runOver(t, name+" at the root", awaitFrame(ctx, conns[i], ins[i], isShutdown))
	}
}

// rootAndChildEnd is rootAndChild with childEnd, which waits for the
// child's run to end and returns its error; the cleanup (after cancel)
// waits for it if the test did not.
func rootAndChildEnd(ctx context.Context, t *testing.T) (root, c *Master, key *Key, childEnd func() error) {
	t.Helper()
	root, c, key, runDone := rootAndChild(ctx, t)
	var err error
	var once sync.Once
	childEnd = func() error {
		once.Do(func() { err = <-runDone })
		return err
	}
	t.Cleanup(func() { childEnd() })
	return root, c, key, childEnd
}

// TestPromotedWorkerAwaitedOnItsNewConnection: the root waits for a
// promoted worker c whose child master has returned while c's old
// worker connection to the root is still open (its evaluations ignore
// their cancel, so it drains for long): that connection does not count
// as its coming back. Before, the root took it for come, and a run that
// ended after that connection closed left c looking for a master (seed
// 512830 of the simulation).
func TestPromotedWorkerAwaitedOnItsNewConnection(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, childEnd := rootAndChildEnd(ctx, t)
	// c's old connection as a worker of the root, promoted: moved.
	old, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "c", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if !waitLoop(ctx, root, func() bool {
		w := root.byName["c"]
		if w != nil {
			w.moved = true
		}
		return w != nil
	}) {
		t.Fatal("c never joined the root")
	}
	finishChild(ctx, t, root, c, key)
	root.ask(func() {
		p := root.proto()
		for _, x := range p.returning {
			root.returnChild(x)
		}
		p.returning = nil
	})
	if err := childEnd(); err != nil {
		t.Fatalf("c ended with %v, want nil (returned)", err)
	}
	// c's link closed after its last word.
	if !waitLoop(ctx, root, func() bool { return len(root.proto().recalled) == 0 }) {
		t.Fatal("the root never saw c's link close")
	}
	var n int
	root.ask(func() { n = root.awaiting() })
	if n != 1 {
		t.Fatalf("the root awaits %d with c's old connection open; want 1 (c)", n)
	}
	old.Close()
	if !waitLoop(ctx, root, func() bool { return root.byName["c"] == nil }) {
		t.Fatal("the root never saw c's old connection close")
	}
	go root.Close()
	endsRunFor(ctx, t, root, key, "c")
}

// TestLostReturningChildsWorkersAwaited: a child master c that is done
// and waits for the root's word to return, its workers still on it, is
// lost (killed): its workers, and its own agent, go home to the root,
// which waits for them at the end of the run as it does for a lost
// child's at work. Before,
// the root closed without them, and they looked for a master for ever
// (seed 510973 of the simulation).
func TestLostReturningChildsWorkersAwaited(t *testing.T) { lostChildAwaited(t, false) }

// lostChildAwaited: child master c, done, with worker w1 (moved to it by
// the root) on it, loses its link to the root, waiting for the root's
// word to return or (recalled) told to return but the word lost. The
// root expects w1 and c's own agent home, waits for both at the end, and
// tells both the run is over.
func lostChildAwaited(t *testing.T, recalled bool) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, childEnd := rootAndChildEnd(ctx, t)
	finishChild(ctx, t, root, c, key)
	root.ask(func() {
		p := root.proto()
		x := p.returning[0]
		x.moved = append(x.moved, "w1") // as childFrame does
		if recalled {
			x.recalled = true
			p.recalled, p.returning = append(p.recalled, x), nil
		}
	})
	w1, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w1", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if !waitLoop(ctx, c, func() bool { return c.byName["w1"] != nil }) {
		t.Fatal("w1 never joined c")
	}
	// c's link to the root breaks before c heard the root's word.
	c.ask(func() { c.proto().parent.conn.Close() })
	if err := childEnd(); !errors.Is(err, errParentLost) {
		t.Fatalf("c ended with %v, want %v", err, errParentLost)
	}
	if !waitLoop(ctx, root, func() bool {
		_, w := root.proto().expect["w1"]
		_, a := root.proto().expect["c"]
		return w && a
	}) {
		t.Fatal("the root does not expect w1 and c's own agent back from its lost child")
	}
	w1.Close()
	go root.Close()
	// Both come home: the root waits for each, then tells both the end.
	endsRunFor(ctx, t, root, key, "w1", "c")
}

// TestLostChildsAgentAwaited: the root that cuts off a child master as
// lost waits for the worker the child was promoted from, which goes home
// once its child master stops (seed 607541 of the simulation: the run
// ended as it came, and it looked for a master for ever); its old
// connection, if it still drains here, does not count.
func TestLostChildsAgentAwaited(t *testing.T) {
	for _, drains := range []bool{false, true} {
		m := &Master{start: time.Now(), log: slog.New(slog.DiscardHandler)}
		m.loopState.init()
		p := m.proto()
		c := &childMaster{token: 1, name: "g", masters: 1}
		p.children[c.token] = c
		p.order = append(p.order, c)
		if drains {
			m.byName["g"] = &mworker{name: "g"}
		}
		m.childLost(c)
		if n := m.awaiting(); n != 1 {
			t.Fatalf("old connection draining %v: awaiting %d once its child is lost; want 1 (g)", drains, n)
		}
		m.byName["g"] = &mworker{name: "g"} // it comes home
		if n := m.awaiting(); n != 0 {
			t.Fatalf("old connection draining %v: awaiting %d once g came home; want 0", drains, n)
		}
	}
}

// TestLostChildsSubtreeAwaitedLostGrace: a master, the root or a child,
// that cuts off a frozen child c waits for what c held past a link's idle
// timeout and an agent's grace for evaluations deaf to their cancel: a
// worker under c (or c's own child, promoted from it) hears that c is
// gone only once its link to c times out, or c thaws, and its agent then
// waits that grace before it dials (seed 2814825 of the simulation: the
// root waited returnGrace, and grandchild w3's agent came home 470 ms
// after it had closed). The wait, and the end's, is bounded all the same.
func TestLostChildsSubtreeAwaitedLostGrace(t *testing.T) {
	for _, root := range []bool{true, false} {
		m := &Master{start: time.Now(), log: slog.New(slog.DiscardHandler)}
		m.loopState.init()
		p := m.proto()
		want := 2 // w3, and c's agent w1, which goes home to the root
		if !root {
			p.parent = &parentLink{self: "c"}
			want = 1
		}
		c := &childMaster{token: 1, name: "w1", masters: 2, moved: []string{"w3"}}
		p.children[c.token] = c
		p.order = append(p.order, c)
		m.childLost(c)
		m.start = m.start.Add(-(defaultIdleTimeout + DefaultAbandonGrace + time.Second)) // w3 still to come
		if n := m.awaiting(); n != want || m.endBy() <= m.now() {
			t.Errorf("root %v: awaiting %d, end held until %v at %v, once w3's agent's grace is over; want %d, held",
				root, n, m.endBy(), m.now(), want)
		}
		m.start = m.start.Add(-(lostGrace - defaultIdleTimeout - DefaultAbandonGrace)) // past lostGrace
		if n := m.awaiting(); n != 0 || m.endBy() > m.now() {
			t.Errorf("root %v: awaiting %d, end held until %v at %v, past lostGrace; want 0, not held",
				root, n, m.endBy(), m.now())
		}
	}
}

// TestChildAwaitsItsMovedWorkerAtTheEnd: a child master told that the
// run is over waits for a worker the root moved to it that has not come
// yet (its agent may wait a redirect back-off before it dials) beyond the
// short wait for workers on their way back to it, and tells it the run is
// over. Before, it closed after childReturnWait; the worker then found no
// child, went home to a root that had ended, and looked for a master for
// ever (seed 669601 of the simulation).
func TestChildAwaitsItsMovedWorkerAtTheEnd(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// c must wait for w far longer than this test waits to send it, so
	// that a loaded machine cannot make it fail.
	defer func(d time.Duration) { movedWait = d }(movedWait)
	movedWait = time.Minute
	root, c, key, runDone := rootAndChildMoving(ctx, t, "w")
	ended := false
	defer func() {
		cancel()
		if !ended {
			<-runDone
		}
	}()
	finishChild(ctx, t, root, c, key)
	// The run ends: the root, expecting nothing, tells c at once
	// (endChildren) and closes.
	go root.Close()
	// w is in its back-off past c's wait for workers coming back.
	select {
	case err := <-runDone:
		ended = true
		t.Fatalf("c ended (%v) before w, moved to it, came", err)
	case <-time.After(2 * childReturnWait):
	}
	conn, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w", Slots: 1})
	if err != nil {
		t.Fatalf("w cannot reach c: %v", err)
	}
	defer conn.Close()
	runOver(t, "w at c", awaitFrame(ctx, conn, frames(conn), isShutdown))
	ended = true
	select {
	case err := <-runDone:
		if !errors.Is(err, ErrRunOver) {
			t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
		}
	case <-ctx.Done():
		t.Fatal("c never ended")
	}
}

// TestLostRecalledChildsWorkersAwaited: a child master c that the root
// told to return (its word did not reach c: c's machine froze) is lost
// before its answer, which would name the workers it sends back: they
// and c's own agent go home to the root once they miss c, and the root
// waits for them at the end of the run. Before, the root closed as c's
// link timed out, and c's six workers, whose links to c timed out a
// moment later, looked for a master for ever (seed 808522 of the
// simulation).
func TestLostRecalledChildsWorkersAwaited(t *testing.T) { lostChildAwaited(t, true) }

// TestAnsweredChildsWorkersAwaitedAsNamed: a child told to return that
// answered, naming the workers it sends back, is waited for as it said
// once its link closes, not for every worker once moved to it (w2 left
// it before: waited for, it would hold the run's end for returnGrace).
// The master's books only, no network.
func TestAnsweredChildsWorkersAwaitedAsNamed(t *testing.T) {
	for _, answered := range []bool{false, true} {
		m := &Master{start: time.Now(), log: slog.New(slog.DiscardHandler)}
		m.loopState.init()
		p := m.proto()
		c := &childMaster{token: 1, name: "g", masters: 1, done: true, recalled: true, moved: []string{"w1", "w2"}}
		p.recalled = append(p.recalled, c)
		want := []string{"g", "w1", "w2"}
		if answered {
			m.onChildResults(c, &ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"g", "w1"}})
			want = []string{"g", "w1"}
		}
		m.heardBack(c)
		if got := slices.Sorted(maps.Keys(p.expect)); !slices.Equal(got, want) || m.awaiting() != len(want) {
			t.Errorf("answered %v: expected %v once its link closed; want %v", answered, got, want)
		}
	}
}

// TestNamedWorkersAwaitedAgainOnceLinkCloses: a child told to return
// named its workers, and its machine froze before two of them left it.
// They come once their links to it time out, up to their idle timeout
// after they were named, so the wait that began then may be over; the
// child's own link, timing out too, says it is gone. The root then
// waits for those two, and the child's agent, anew (and holds its end
// for them), not for w2, which came. Before, it waited for nothing, and
// closed 16 ms before they came (seed 2079761 of the simulation). A
// child master does not: its parent, unaware of such a hold, could close
// first (seed 2513961). The master's books only, no network.
func TestNamedWorkersAwaitedAgainOnceLinkCloses(t *testing.T) {
	for _, root := range []bool{true, false} {
		m := &Master{start: time.Now().Add(-time.Minute), log: slog.New(slog.DiscardHandler)}
		m.loopState.init()
		p := m.proto()
		if !root {
			p.parent = &parentLink{self: "c"}
		}
		c := &childMaster{token: 1, name: "g", masters: 1, done: true, recalled: true, moved: []string{"w1", "w2", "w3"}}
		p.recalled = append(p.recalled, c)
		m.onChildResults(c, &ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"g", "w1", "w2", "w3"}})
		m.cameHere("w2")
		for name, x := range p.expect {
			x.by = m.now() - time.Millisecond // named longer ago than returnGrace
			p.expect[name] = x
		}
		if n := m.awaiting(); n != 1 { // the link, still open
			t.Fatalf("root %v: awaiting %d before the link closed, want 1 (the link)", root, n)
		}
		m.heardBack(c)
		want := []string{"g", "w1", "w3"}
		if !root {
			want = []string{}
		}
		if got := slices.Sorted(maps.Keys(p.expect)); !slices.Equal(got, want) || m.awaiting() != len(want) {
			t.Errorf("root %v: expected %v once its link closed, want %v", root, got, want)
		}
		if held := p.endHold > m.now(); held != root {
			t.Errorf("root %v: end held until %v, now %v", root, p.endHold, m.now())
		}
	}
}

// TestReturningChildNamesWhomItStillExpects: a returning child master
// c that ends, its own wait over, with a worker still on its way to it
// (g, the agent of a returning child of its own, named in that child's
// last frame) and a child of its own still at work (h, to which c moved
// y) names them in its own last frame, beside its agent: they will find
// c closed and go home to the root, which must wait for them (seeds
// 4649628, 4670250 and 4869473 of the simulation: the root closed as c
// did, and g, or h, found no master). A worker expected no more (old)
// is not named. The master's books, and a pipe for c's link up.
func TestReturningChildNamesWhomItStillExpects(t *testing.T) {
	last := make(chan *ChildResults, 1)
	ctx, link := linkUp(t, func(msg Message) {
		if r, ok := msg.(*ChildResults); ok {
			last <- r
		}
	})
	m := &Master{start: time.Now().Add(-time.Minute), log: slog.New(slog.DiscardHandler), ledger: sched.NewLedger(sched.LedgerConfig{})}
	m.loopState.init()
	m.cur = &batch{id: 1, replied: true}
	p := m.proto()
	pl := &parentLink{conn: link, self: "c", finishing: true, moving: true, finishBy: m.now() - time.Second, done: make(chan error, 1)}
	p.parent = pl
	m.expect("g", expected{by: m.now() + returnGrace})
	m.expect("old", expected{by: m.now() - time.Second})
	p.children[9] = &childMaster{token: 9, name: "h", masters: 1, link: link, moved: []string{"y"}}
	m.maybeFinish()
	if !pl.answered {
		t.Fatal("c did not return once its wait was over")
	}
	select {
	case r := <-last:
		if want := []string{"c", "g", "h", "y"}; !slices.Equal(r.Moved, want) {
			t.Errorf("c's last frame named %v, want %v", r.Moved, want)
		}
	case <-ctx.Done():
		t.Fatal("c's last frame never came")
	}
}

// TestReturningChildHeldForALostChildsWorkers: a returning child master
// c that finds its own child g lost, told to return and silent since,
// once c's wait for its workers to leave (finishBy) is over, still waits
// for the workers g held: g's link times out 30 s after its machine
// froze, as c's own wait ends, and g's workers, timing out on g a moment
// later, come back to c (seed 981636 of the simulation: c had stopped,
// and so had the root). Once they came, c returns. The master's books,
// and a pipe for c's link up.
func TestReturningChildHeldForALostChildsWorkers(t *testing.T) {
	_, link := linkUp(t, func(Message) {}) // the root's side reads c's last word
	m := &Master{start: time.Now(), log: slog.New(slog.DiscardHandler), ledger: sched.NewLedger(sched.LedgerConfig{})}
	m.loopState.init()
	m.cur = &batch{id: 1, replied: true}
	p := m.proto()
	pl := &parentLink{conn: link, self: "c", finishing: true, moving: true, finishBy: m.now() - time.Second, done: make(chan error, 1)}
	p.parent = pl
	g := &childMaster{token: 1, name: "g", masters: 1, done: true, recalled: true, moved: []string{"w1"}}
	p.recalled = append(p.recalled, g)
	m.heardBack(g) // its link closed, and it never named its workers
	m.maybeFinish()
	if pl.answered {
		t.Fatal("c returned, its own wait over, without awaiting w1, which its lost child g held")
	}
	m.cameHere("w1") // and is sent on to the root
	m.maybeFinish()
	if !pl.answered {
		t.Fatal("c did not return once w1 had come")
	}
}

// TestChildsEndBoundedWhateverItsChildrenName: a child master told the
// end, whose own returning child g names a worker over and over (a
// broken or hostile peer: the name never comes), is held no longer than
// its parent waits for anything of it, its word's cap (maxEndHold past
// the wait it was given) and then lostGrace for what it held. Before,
// each naming waited returnGrace anew, and the child never closed. The
// master's books, and a pipe for c's link up.
func TestChildsEndBoundedWhateverItsChildrenName(t *testing.T) {
	_, link := linkUp(t, func(Message) {}) // the root's side reads c's holds
	m := &Master{start: time.Now(), log: slog.New(slog.DiscardHandler), ledger: sched.NewLedger(sched.LedgerConfig{})}
	m.loopState.init()
	p := m.proto()
	p.parent = &parentLink{conn: link, self: "c", runOver: true, answered: true, wordBy: m.now() + endHeardWait}
	ceiling := p.parent.wordBy + maxEndHold + lostGrace
	g := &childMaster{token: 1, name: "g", masters: 1, done: true, recalled: true}
	p.recalled = append(p.recalled, g)
	for m.now() <= ceiling {
		m.onChildResults(g, &ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"x"}})
		if by := m.endBy(); by > ceiling {
			t.Fatalf("at %v, c's end held until %v, past %v, when its parent waits for it no more", m.now(), by, ceiling)
		}
		m.start = m.start.Add(-returnGrace / 2)
	}
	if by := m.endBy(); by > m.now() {
		t.Errorf("at %v, past %v, c's end still held until %v", m.now(), ceiling, by)
	}
}

// linkUp is a child master's link up over a pipe, for tests of the
// master's books: the child's end (link), and the root's, which hands
// what it reads to root. Both close as the test ends, before leaktest
// counts goroutines; ctx bounds the test.
func linkUp(t *testing.T, root func(Message)) (context.Context, *Conn) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel) // after pipeLink's cleanup: cleanups run last first
	link, up := pipeLink(ctx, t)
	link.Start(func(Message) {})
	up.Start(root)
	return ctx, link
}

// pipeLink is a child's control link to the root over a pipe: the
// child's end (link) and the root's (up), unstarted. Both close, and
// their goroutines end, as the test ends.
func pipeLink(ctx context.Context, t *testing.T) (link, up *Conn) {
	childEnd, rootEnd := net.Pipe()
	link = NewConn(ctx, childEnd, ConnConfig{})
	up = NewConn(ctx, rootEnd, ConnConfig{})
	t.Cleanup(func() {
		link.Close()
		up.Close()
		<-link.Done()
		<-up.Done()
	})
	return link, up
}
