package grid

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
)

// waitLoop waits until cond, run on m's loop, holds (or ctx ends: false).
func waitLoop(ctx context.Context, m *Master, cond func() bool) bool {
	for {
		ok := false
		if !m.ask(func() { ok = cond() }) {
			return false
		}
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
}

// evaluating has root evaluate xs as generation 1 in the background
// (bounded by ctx); the func it returns stops the evaluation and waits
// for its end.
func evaluating(ctx context.Context, root *Master, xs [][]float64) (stop func()) {
	evalCtx, cancel := context.WithCancel(ctx)
	evalDone := make(chan error, 1)
	go func() {
		_, err := root.Evaluate(evalCtx, 1, xs)
		evalDone <- err
	}()
	return func() { cancel(); <-evalDone }
}

// frames starts c and hands its frames on.
func frames(c *Conn) <-chan Message {
	ch := make(chan Message, 64)
	c.Start(func(m Message) {
		select {
		case ch <- m:
		default:
		}
	})
	return ch
}

// awaitFrame waits for the first frame of c that want takes, or for c to
// close (nil).
func awaitFrame(ctx context.Context, c *Conn, ch <-chan Message, want func(Message) bool) Message {
	for {
		select {
		case m := <-ch:
			if want(m) {
				return m
			}
		case <-c.Done():
			select {
			case m := <-ch:
				if want(m) {
					return m
				}
				continue
			default:
			}
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// rootAndChild starts a root master and c, a real child master of it
// promoted over task 0 of batch 1 (policy rwq), as a split would. It
// returns both, the cluster key and where RunChild's end arrives; the
// root closes when the test ends.
func rootAndChild(ctx context.Context, t *testing.T) (root, c *Master, key *Key, runDone <-chan error) {
	t.Helper()
	return rootAndChildMoving(ctx, t)
}

// rootAndChildMoving is rootAndChild whose Promote names workers, moved
// to the child by the root (played by the test).
func rootAndChildMoving(ctx context.Context, t *testing.T, workers ...string) (root, c *Master, key *Key, runDone <-chan error) {
	t.Helper()
	key = splitTestKey(t)
	spec := ProblemSpec{Name: "sphere", Dim: 2}
	log := quietConfig().Logger
	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: spec, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	root.ask(func() { root.proto().children[1] = &childMaster{token: 1, name: "c", masters: 1} })
	started := make(chan *Master, 1)
	childStarted = func(m *Master) { started <- m }
	t.Cleanup(func() { childStarted = nil })
	done := make(chan error, 1)
	go func() {
		done <- RunChild(ctx, ChildConfig{
			Promote: &Promote{Token: 1, Gen: 1, ESGen: 1, N: 1, Tasks: []Task{{ID: 0, X: []float64{1, 2}}}, Workers: workers, Policy: "rwq"},
			Parent:  root.Addr(), Listen: "127.0.0.1:0", Key: key, Name: "c", Problem: spec,
		}, MasterConfig{Logger: log})
	}()
	select {
	case c = <-started:
	case <-ctx.Done():
		t.Fatal("no child master started")
	}
	return root, c, key, done
}

// grandchildDone plays g, a child master of c that took c's one task
// and the workers moved (as a split of c's own would): g's link to c
// says it is done, c returns its Done to the root, and the root tells c
// to return. It returns g's link, for the caller to close, and its
// frames.
func grandchildDone(ctx context.Context, t *testing.T, root, c *Master, key *Key, moved []string) (*Conn, <-chan Message) {
	t.Helper()
	lent := 0
	if !waitLoop(ctx, c, func() bool {
		p := c.proto()
		if p.parent == nil {
			return false
		}
		g := &childMaster{token: 7, name: "g", batch: 1, created: c.now(), masters: 1, moved: moved}
		for _, tk := range c.takeTasks(1) {
			p.lent[tk.ID] = g
			g.lent++
		}
		p.children[g.token] = g
		p.order = append(p.order, g)
		lent = g.lent
		return true
	}) || lent != 1 {
		t.Fatalf("c did not lend its task to g (%d lent)", lent)
	}
	glink, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "g/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	gin := frames(glink)
	glink.Send(&ChildHello{Token: 7, Addr: "127.0.0.1:1"})
	glink.Send(&ChildResults{Gen: 1, IDs: []int32{0}, F: []float64{5}, Masters: 1, Done: true})
	if !waitLoop(ctx, root, func() bool { return len(root.proto().returning) == 1 }) {
		t.Fatal("c's Done did not reach the root")
	}
	root.ask(func() {
		p := root.proto()
		for _, x := range p.returning {
			root.returnChild(x)
		}
		p.returning = nil
	})
	return glink, gin
}

// TestReturningChildWaitsForItsChildren: a child master c told to
// return while a child of its own, g, told to return too, has not yet
// named the workers it sends back (the race of nested splits at the end
// of a run) waits for g's word, sends g's workers on to the root, and
// only then returns; the root waits for every one of them and tells them
// the run is over. Before, c closed at once, g's workers found no master
// (and -once workers waited for one for ever). The order of events is
// forced: the test plays g, its worker w1, and the root's decisions.
func TestReturningChildWaitsForItsChildren(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone := rootAndChild(ctx, t)
	// c lends its task to g, as a split of its own would; g is done, and
	// c returns its Done to the root, which tells c to return.
	glink, gin := grandchildDone(ctx, t, root, c, key, nil)
	defer glink.Close()
	if !waitLoop(ctx, root, func() bool { _, ok := root.proto().expect["c"]; return ok || len(runDone) > 0 }) {
		t.Fatal("c did not name itself to the root as it returned")
	}
	select {
	case err := <-runDone:
		t.Fatalf("c returned (%v) before its child g named the workers it sends back", err)
	default:
	}
	isMove := func(m Message) bool { _, ok := m.(*Move); return ok }
	if awaitFrame(ctx, glink, gin, isMove) == nil {
		t.Fatal("c did not tell g to return")
	}
	// Only now does g name the workers it sends back to c (its last word,
	// as it returns), and they come.
	glink.SendAndClose(&ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"g", "w1"}})
	for _, name := range []string{"w1", "g"} {
		conn, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatalf("%s, sent back to c by g, cannot reach c (it closed before its child's workers came): %v", name, err)
		}
		in := frames(conn)
		m := awaitFrame(ctx, conn, in, func(m Message) bool {
			switch m.(type) {
			case *Move, *Shutdown:
				return true
			}
			return false
		})
		conn.Close()
		if mv, ok := m.(*Move); !ok || mv.Addr != root.Addr() {
			t.Fatalf("%s at c got %#v, want a move on to the root at %s", name, m, root.Addr())
		}
	}
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("c ended with %v, want nil (returned)", err)
		}
	case <-ctx.Done():
		t.Fatal("c did not return once its child's workers had gone on")
	}
	// The root waits for all three, and tells them that the run is over.
	want := []string{"c", "g", "w1"}
	var missing []string
	root.ask(func() {
		for _, name := range want {
			if _, ok := root.proto().expect[name]; !ok {
				missing = append(missing, name)
			}
		}
	})
	if len(missing) > 0 {
		t.Fatalf("the root does not expect %v back", missing)
	}
	type worker struct {
		conn *Conn
		in   <-chan Message
	}
	var ws []worker
	for _, name := range want {
		conn, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ws = append(ws, worker{conn, frames(conn)})
	}
	if err := root.WaitWorkers(ctx, len(want)); err != nil {
		t.Fatal(err)
	}
	go root.Close()
	for i, w := range ws {
		m := awaitFrame(ctx, w.conn, w.in, func(m Message) bool { _, ok := m.(*Shutdown); return ok })
		if sd, ok := m.(*Shutdown); !ok || sd.Restart {
			t.Errorf("%s at the root got %#v at the end, want the run over", want[i], m)
		}
	}
}

// TestReturningChildAwaitsALostChildsWorkers: a child master c told to
// return tells its own child g to return too, and g is lost before it
// names the workers it sends back (its machine froze: neither its answer
// nor its word to its workers got through, and its link timed out). Its
// worker w1, timing out on g, comes back the way it came, to c: c waits
// for it, sends it on to the root, and only then returns; the root tells
// both the run is over. Before, c returned as g's link closed, and w1
// found no master (seed 981636 of the simulation: w1 was w0 and w3, and
// the root had closed as c's agent came). The test plays g, w1 and the
// root's decisions.
func TestReturningChildAwaitsALostChildsWorkers(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone := rootAndChild(ctx, t)
	// c lends its task to g, and moved w1 to g, as a split of its own
	// would; g is done, and the root tells c to return.
	glink, gin := grandchildDone(ctx, t, root, c, key, []string{"w1"})
	defer glink.Close()
	if awaitFrame(ctx, glink, gin, func(m Message) bool { _, ok := m.(*Move); return ok }) == nil {
		t.Fatal("c did not tell g to return")
	}
	// g is lost without a word.
	glink.Close()
	if !waitLoop(ctx, c, func() bool { _, ok := c.proto().expect["w1"]; return ok }) {
		t.Fatalf("c returned (%v) without awaiting w1, which its lost child g held", <-runDone)
	}
	w1, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w1", Slots: 1})
	if err != nil {
		t.Fatalf("w1, back from lost g, cannot reach c: %v", err)
	}
	m := awaitFrame(ctx, w1, frames(w1), func(m Message) bool {
		switch m.(type) {
		case *Move, *Shutdown:
			return true
		}
		return false
	})
	w1.Close()
	if mv, ok := m.(*Move); !ok || mv.Addr != root.Addr() {
		t.Fatalf("w1 at c got %#v, want a move on to the root at %s", m, root.Addr())
	}
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("c ended with %v, want nil (returned)", err)
		}
	case <-ctx.Done():
		t.Fatal("c did not return once w1 had gone on")
	}
	// The root awaits both, and tells them that the run is over.
	names := []string{"w1", "c"}
	var conns []*Conn
	var ins []<-chan Message
	for _, name := range names {
		if !waitLoop(ctx, root, func() bool { _, ok := root.proto().expect[name]; return ok }) {
			t.Fatalf("the root does not expect %s", name)
		}
		conn, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns, ins = append(conns, conn), append(ins, frames(conn))
	}
	go root.Close()
	for i, name := range names {
		runOver(t, name+" at the root", awaitFrame(ctx, conns[i], ins[i], isShutdown))
	}
}

// TestStalledChildIsCutOff: a child master that holds lent tasks and
// returns none of them (its workers never answer) is cut off after the
// parent's stall deadline: its link closes and its tasks go back to the
// parent's queue. Before, the parent waited for them for ever.
func TestStalledChildIsCutOff(t *testing.T) {
	leaktest.Check(t)
	key := splitTestKey(t)
	spec := ProblemSpec{Name: "sphere", Dim: 2}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: spec, Logger: quietConfig().Logger,
		DeadlineFloor: 10 * time.Millisecond, FirstDeadline: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	defer evaluating(ctx, root, [][]float64{{1, 2}, {3, 4}})()
	// The root lends both tasks of its batch to c, as a split would.
	lent := 0
	if !waitLoop(ctx, root, func() bool {
		b := root.cur
		if b == nil {
			return false
		}
		c, _ := lendToChild(root, b, 2)
		lent = c.lent
		return true
	}) || lent != 2 {
		t.Fatalf("the root did not lend its tasks to c (%d lent)", lent)
	}
	link, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "c/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	in := frames(link)
	link.Send(&ChildHello{Token: 1, Addr: "127.0.0.1:1"})
	// c says nothing more: the root closes its link.
	if awaitFrame(ctx, link, in, func(Message) bool { return false }); ctx.Err() != nil {
		t.Fatal("the root never cut off a child that returned none of its tasks")
	}
	var queued, stillLent int
	var lost int64
	if !waitLoop(ctx, root, func() bool {
		queued, stillLent, lost = sched.Queued(root.policy), root.lentCount(), root.split.stats.ChildrenLost
		return lost == 1
	}) {
		t.Fatal("the root did not count c lost")
	}
	if queued != 2 || stillLent != 0 {
		t.Fatalf("after c was cut off: %d tasks queued, %d still lent; want 2 and 0", queued, stillLent)
	}
}

// childDoneWithWorker starts a root and a real child master c (as
// rootAndChildMoving, moved naming the workers its Promote says the root
// moves to it) with a worker w connected to c that runs c's task: c's
// share is done and its Done has reached the root, whose batch is over
// (it has none), so c keeps w until the end. It returns w and its frames.
func childDoneWithWorker(ctx context.Context, t *testing.T, moved ...string) (root, c *Master, key *Key, runDone <-chan error, w *Conn, win <-chan Message) {
	t.Helper()
	root, c, key, runDone = rootAndChildMoving(ctx, t, moved...)
	w, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "w", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	win = frames(w)
	m := awaitFrame(ctx, w, win, func(m Message) bool { _, ok := m.(*Tasks); return ok })
	ts, ok := m.(*Tasks)
	if !ok || len(ts.Items) != 1 {
		t.Fatalf("w at c got %#v, want c's one task", m)
	}
	tk := ts.Items[0]
	w.Send(&Results{Items: []Result{{Gen: ts.Gen, ID: tk.ID, F: 5, Exec: 1, Token: tk.Token}}})
	if !waitLoop(ctx, root, func() bool { return len(root.proto().returning) == 1 }) {
		t.Fatal("c's Done did not reach the root")
	}
	return root, c, key, runDone, w, win
}

// plainRoot starts a root master on loopback, for sphere in 2-D, that
// never splits by itself (the test plays its children); it closes when
// the test ends.
func plainRoot(ctx context.Context, t *testing.T, key *Key) *Master {
	t.Helper()
	root, err := NewMaster(ctx, MasterConfig{Listen: "127.0.0.1:0", Key: key, Problem: ProblemSpec{Name: "sphere", Dim: 2}, Logger: quietConfig().Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// isShutdown takes a Shutdown frame.
func isShutdown(m Message) bool { _, ok := m.(*Shutdown); return ok }

// runOver fails t unless m is a Shutdown that says the run is over.
func runOver(t *testing.T, who string, m Message) {
	t.Helper()
	if sd, ok := m.(*Shutdown); !ok || sd.Restart {
		t.Fatalf("%s got %#v at the end, want the run over", who, m)
	}
}

// TestReturningChildHearsTheEndAtOnce: a child master c done after its
// parent's last batch ended keeps its workers until the end; it and its
// worker w hear that the run is over as the root's Close begins, while
// the root still waits for a worker x on its way back from another
// child. Before, the root said it only once that wait was over (up to
// returnGrace): w sat idle meanwhile, cut off from the end should c's
// machine fail (seed 307184 of the simulation).
func TestReturningChildHearsTheEndAtOnce(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, _, key, runDone, w, win := childDoneWithWorker(ctx, t)
	root.ask(func() { root.expectWorkers([]string{"x"}, returnGrace) })
	closed := closeAsync(root)
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	waiting := false
	if !root.ask(func() { _, waiting = root.proto().expect["x"] }) || !waiting {
		t.Fatal("w heard the end only once the root had stopped waiting for x")
	}
	if err := <-runDone; !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	// x comes: the root's wait ends, and x hears the end too.
	xComes(ctx, t, root, key, closed)
}

// xComes plays x, the worker the root awaits as it closes: x comes,
// hears the run is over, and the root closes (closed).
func xComes(ctx context.Context, t *testing.T, root *Master, key *Key, closed <-chan struct{}) {
	t.Helper()
	x, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "x", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	runOver(t, "x at the root", awaitFrame(ctx, x, frames(x), isShutdown))
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once x had come")
	}
}

// TestMovingWorkerHearsTheEndAtTheRoot: a child master c done after the
// batch ended, to which the root moved a worker v still connected to the
// root (finishing its tasks), is told the end as the root's Close begins,
// and v hears it from the root, while the root still waits for a worker
// x on its way back from another child: c waits for v only movedWait, a
// back-off and a dial, not v's tasks (seed 6760 of the simulation: c,
// told alone, closed, and v, later, found no master). Before, both
// heard it only as the root's loop exited, x's wait over, cut off from
// the end should c's machine freeze meanwhile.
func TestMovingWorkerHearsTheEndAtTheRoot(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone, w, win := childDoneWithWorker(ctx, t)
	v, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "v", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	vin := frames(v)
	if err := root.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	root.ask(func() {
		root.proto().returning[0].moved = []string{"v"}
		root.moveWorker(root.byName["v"], c.Addr())
		root.expectWorkers([]string{"x"}, returnGrace)
	})
	closed := closeAsync(root)
	runOver(t, "v, moving to c, at the root", awaitFrame(ctx, v, vin, isShutdown))
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	if err := <-runDone; !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	waiting := false
	if !root.ask(func() { _, waiting = root.proto().expect["x"] }) || !waiting {
		t.Fatal("v and c heard the end only once the root had stopped waiting for x")
	}
	xComes(ctx, t, root, key, closed)
}

// TestFrozenWorkingChildsWorkersHearTheEnd: a child master c still at
// work as the root's Close begins (the run ended before c's share did)
// is told the end then, and freezes before it passes it on. The root
// awaits c's worker and agent, which time out on c and come home, and
// tells them the run is over. Before, c heard the end only as the
// root's loop exited, with no word back awaited, and they looked for a
// master for ever. The test plays c, frozen, and its workers.
func TestFrozenWorkingChildsWorkersHearTheEnd(t *testing.T) {
	frozenChildsWorkersHearTheEnd(t, true)
}

// TestFrozenChildsWorkersHearTheEnd: a child master c done after the
// root's last batch ended is told the end as the root's Close begins,
// and freezes before it passes it on (its link stays open and says
// nothing). The root counts it gone once endHeardWait is over, awaits
// the worker it moved to c and c's own agent, which time out on c and
// come home, and tells them the run is over. Before, the root closed
// at once, and they looked for a master for ever (seed 307184 of the
// simulation, in a rare order). The test plays c, frozen, and its
// workers.
func TestFrozenChildsWorkersHearTheEnd(t *testing.T) {
	frozenChildsWorkersHearTheEnd(t, false)
}

// frozenChildsWorkersHearTheEnd plays a child master c, to which the
// root moved a worker w, at work (atWork) or done after the root's last
// batch: told the end as the root's Close begins, c freezes, and the
// root must await w and c's own agent, and tell them the run is over.
func frozenChildsWorkersHearTheEnd(t *testing.T, atWork bool) {
	leaktest.Check(t)
	setEndHeardWait(t, 0) // c never answers: any wait would do
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	key := splitTestKey(t)
	root := plainRoot(ctx, t, key)
	root.ask(func() {
		p := root.proto()
		c := &childMaster{token: 1, name: "c", masters: 1, moved: []string{"w"}}
		p.children[1] = c
		if atWork {
			p.order = append(p.order, c)
		}
	})
	link, in := silentChildLink(ctx, t, root, key, "c", 1)
	if atWork {
		if !waitLoop(ctx, root, func() bool { return root.proto().children[1].link != nil }) {
			t.Fatal("c's hello did not reach the root")
		}
	} else {
		link.Send(&ChildResults{Gen: 1, Masters: 1, Done: true})
		if !waitLoop(ctx, root, func() bool { return len(root.proto().returning) == 1 }) {
			t.Fatal("c's Done did not reach the root")
		}
	}
	closed := closeAsync(root)
	runOver(t, "c", awaitFrame(ctx, link, in, isShutdown))
	// c freezes here: it says nothing more, and its link stays open.
	if !waitLoop(ctx, root, func() bool {
		_, w := root.proto().expect["w"]
		_, c := root.proto().expect["c"]
		return w && c
	}) {
		t.Fatalf("the root closed without awaiting the workers of a child (at work: %v) that never said they heard the end", atWork)
	}
	// Both come before either hears the end: the root says it as it
	// closes, once all it awaits came.
	var conns []*Conn
	var ins []<-chan Message
	for _, name := range []string{"w", "c"} {
		conn, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatalf("%s, home from frozen c, cannot reach the root: %v", name, err)
		}
		defer conn.Close()
		conns, ins = append(conns, conn), append(ins, frames(conn))
	}
	for i, name := range []string{"w", "c"} {
		runOver(t, name+" at the root", awaitFrame(ctx, conns[i], ins[i], isShutdown))
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once c's workers had come")
	}
}

// TestChildSaysItsWorkersHeardTheEnd: a live child master c told the end
// early passes it on to its worker w, then says so to the root, which
// then closes without awaiting c's workers (it would for one that said
// nothing: TestFrozenChildsWorkersHearTheEnd).
func TestChildSaysItsWorkersHeardTheEnd(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, _, _, runDone, w, win := childDoneWithWorker(ctx, t)
	closed := closeAsync(root)
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	if err := <-runDone; !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close")
	}
	// The loop has ended: its state is read here alone. Had c's word not
	// come, the root would have awaited c's workers (endHold set), and
	// closed only once they lapsed.
	if p := root.split.splitProto; p.endHold != 0 || len(p.ended) > 0 {
		t.Fatal("the root took c for gone, and awaited its workers, though c said they heard the end")
	}
}

// TestFrozenGrandchildsWorkersHearTheEnd: a child master c, told the end
// by the root, tells its own child g (played by the test), done after
// c's batch ended, giving it less time for its word than the root gives
// c (Shutdown.Within); g freezes before it passes the end on. Once g's
// time is over, c counts it gone, awaits the worker it moved to g (x) and
// g's agent, which time out on g and come back to c, and asks the root to
// wait that much longer for its own word (Shutdown.Hold); they hear the
// end at c, whose word then closes the root, which never took c for
// gone. Before, c waited a second for g's word and closed, and x and g
// found no master.
func TestFrozenGrandchildsWorkersHearTheEnd(t *testing.T) {
	frozenGrandchildsWorkersHearTheEnd(t, false)
}

// TestFrozenReturningGrandchildsWorkersHearTheEnd: the same with g told
// to return by c, frozen before its link's last frame (which names its
// agent): c gives it as long to end its link as it would give it for its
// word, then tells it the end, awaits x and g, and says so up.
func TestFrozenReturningGrandchildsWorkersHearTheEnd(t *testing.T) {
	frozenGrandchildsWorkersHearTheEnd(t, true)
}

// frozenGrandchildsWorkersHearTheEnd plays g, a child of the real child
// master c, to which c moved a worker x: done after c's batch ended or
// returning, g freezes as c hears the end, and c must await x and g's
// agent, and have the root wait for it meanwhile.
func frozenGrandchildsWorkersHearTheEnd(t *testing.T, returning bool) {
	leaktest.Check(t)
	setEndHeardWait(t, time.Hour) // the root never gives up on c here
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone, w, win := childDoneWithWorker(ctx, t)
	c.ask(func() {
		p := c.proto()
		g := &childMaster{token: 7, name: "g", masters: 1, moved: []string{"x"}, recalled: returning}
		p.children[7] = g
		if returning {
			p.recalled = append(p.recalled, g)
		} else {
			p.returning = append(p.returning, g)
		}
	})
	link, in := silentChildLink(ctx, t, c, key, "g", 7)
	if !waitLoop(ctx, c, func() bool { return c.proto().children[7].link != nil }) {
		t.Fatal("g's hello did not reach c")
	}
	closed := closeAsync(root)
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	// g freezes here; once c has given it its time, that time is over.
	var within time.Duration
	if !waitLoop(ctx, c, func() bool {
		g := c.proto().children[7]
		within = g.wordBy - g.told
		return g.wordBy != 0
	}) {
		t.Fatal("c gave g no time at the end")
	}
	if within <= 0 || within >= endHeardWait {
		t.Fatalf("c gave g %v at the end; the root gives c %v: c must find g gone first", within, endHeardWait)
	}
	c.ask(func() { c.proto().children[7].wordBy = 1 })
	runOver(t, "g", awaitFrame(ctx, link, in, isShutdown))
	if !waitLoop(ctx, c, func() bool {
		_, x := c.proto().expect["x"]
		_, g := c.proto().expect["g"]
		return x && g
	}) {
		t.Fatal("c closed without awaiting the workers of a child silent at the end")
	}
	if !waitLoop(ctx, root, func() bool {
		p := root.proto()
		return len(p.ended) == 1 && p.ended[0].wordBy > p.ended[0].told+endHeardWait
	}) {
		t.Fatal("the root did not hear from c that it awaits g's workers, and so waits no longer for c's word")
	}
	for _, name := range []string{"x", "g"} {
		conn, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: name, Slots: 1})
		if err != nil {
			t.Fatalf("%s, back from frozen g, cannot reach c: %v", name, err)
		}
		defer conn.Close()
		runOver(t, name+" at c", awaitFrame(ctx, conn, frames(conn), isShutdown))
	}
	if err := <-runDone; !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once c had said its word")
	}
	// The loop has ended: its state is read here alone.
	if p := root.split.splitProto; p.endHold != 0 {
		t.Fatal("the root took c for gone, and awaited its workers, though c said its word")
	}
}

// TestReturningGrandchildsAgentNamedAtTheEnd: a child master c, told the
// end by the root, still waits for its own child g, told to return, to
// end its link; g's last frame names its agent, which comes once its
// back-off allows (its dial to c failed meanwhile, say). c awaits it
// until it is expected no more, not a second (childReturnWait), and asks
// the root to wait that much longer for its word; the agent hears the
// end at c, and c's word closes the root. Before, c closed a second
// after the end, and the agent found no master (seed 4 of the
// simulation's TestGrandchildFrozenAsItHearsTheEnd, g frozen 12 s).
func TestReturningGrandchildsAgentNamedAtTheEnd(t *testing.T) {
	leaktest.Check(t)
	setEndHeardWait(t, time.Hour) // the root never gives up on c here
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone, w, win := childDoneWithWorker(ctx, t)
	c.ask(func() {
		p := c.proto()
		g := &childMaster{token: 7, name: "g", masters: 1, recalled: true, done: true}
		p.children[7], p.recalled = g, append(p.recalled, g)
	})
	link, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "g/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	link.Send(&ChildHello{Token: 7, Addr: "127.0.0.1:1"})
	if !waitLoop(ctx, c, func() bool { return c.proto().children[7].link != nil }) {
		t.Fatal("g's hello did not reach c")
	}
	closed := closeAsync(root)
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	// g's last frame, which names its agent, and its link ends.
	link.SendAndClose(&ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"g"}})
	if !waitLoop(ctx, c, func() bool {
		_, g := c.proto().expect["g"]
		return g && len(c.proto().recalled) == 0
	}) {
		t.Fatal("c closed without awaiting the agent its returning child named")
	}
	if !waitLoop(ctx, root, func() bool {
		p := root.proto()
		return len(p.ended) == 1 && p.ended[0].wordBy > p.ended[0].told+endHeardWait
	}) {
		t.Fatal("the root did not hear from c that it awaits g's agent, and so waits no longer for c's word")
	}
	g, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "g", Slots: 1})
	if err != nil {
		t.Fatalf("g's agent cannot reach c: %v", err)
	}
	defer g.Close()
	runOver(t, "g's agent at c", awaitFrame(ctx, g, frames(g), isShutdown))
	if err := <-runDone; !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once c had said its word")
	}
}

// TestChildHoldsAreBounded: a child master c told the end that says
// again and again that it awaits a lost child's workers, each time for
// ever (Shutdown.Hold), pushes the root's wait for its word maxEndHold
// past the wait it was given, no further; its word still ends it.
func TestChildHoldsAreBounded(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	key := splitTestKey(t)
	root := plainRoot(ctx, t, key)
	root.ask(func() {
		c := &childMaster{token: 1, name: "c", masters: 1}
		root.proto().children[1] = c
		root.proto().order = append(root.proto().order, c)
	})
	link, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "c/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	in := frames(link)
	link.Send(&ChildHello{Token: 1, Addr: "127.0.0.1:1"})
	if !waitLoop(ctx, root, func() bool { return root.proto().children[1].link != nil }) {
		t.Fatal("c's hello did not reach the root")
	}
	closed := closeAsync(root)
	m := awaitFrame(ctx, link, in, isShutdown)
	runOver(t, "c", m)
	if within := time.Duration(m.(*Shutdown).Within); within != endHeardWait {
		t.Fatalf("the root gave c %v for its word, want endHeardWait (%v)", within, endHeardWait)
	}
	for range 3 {
		link.Send(&Shutdown{Reason: "awaiting a lost child's workers", Hold: 1<<63 - 1})
	}
	// The root answers a request after the holds before it: it has taken them.
	link.Send(&TaskRequest{Gen: 1})
	awaitFrame(ctx, link, in, func(m Message) bool { _, ok := m.(*TaskRefusal); return ok })
	var by, bound time.Duration
	if !root.ask(func() {
		c := root.proto().children[1]
		by, bound = c.wordBy, c.told+c.within+maxEndHold
	}) || by != bound {
		t.Fatalf("c's holds pushed the root's wait for its word to %v, want %v", by, bound)
	}
	link.SendAndClose(&Shutdown{Reason: "passed on"})
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close on c's word")
	}
}

// TestChildTellsItsWorkersTheEndAtOnce: a child master c told by the
// root that the run is over, while it still waits for v, a worker the
// root moved to it that has not come (the root may have told v the end
// itself), tells its worker w the end at once, and x, which joins
// meanwhile, at its join; its own end still waits for v. Before, c held
// w until that wait was over (movedWait): in seed 1175458 of the
// simulation c's machine froze until 9 s after the end, and its workers
// sat in a session, idle, 16 s after the run ended.
func TestChildTellsItsWorkersTheEndAtOnce(t *testing.T) {
	leaktest.Check(t)
	defer func(d time.Duration) { movedWait = d }(movedWait)
	movedWait = time.Hour // c waits for v far longer than the test runs
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root, c, key, runDone, w, win := childDoneWithWorker(ctx, t, "v")
	dialV := func(ctx context.Context) (*Conn, error) {
		v, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "v", Slots: 1})
		return v, err
	}
	vCame, ended := false, false
	defer func() {
		if ended {
			return
		}
		if !vCame {
			// c ends once v came (or its hour passed), whatever ctx
			// says: a failing test brings v, so that c ends now.
			vctx, vcancel := context.WithTimeout(context.Background(), time.Minute)
			defer vcancel()
			if v, err := dialV(vctx); err == nil {
				defer v.Close()
			}
		}
		<-runDone
	}()
	// Nothing moved to c is at the root: its Close tells c at once
	// (endReturning), and waits for c's word that its workers heard it.
	closed := closeAsync(root)
	runOver(t, "w at c", awaitFrame(ctx, w, win, isShutdown))
	x, _, err := Dial(ctx, c.Addr(), DialConfig{Key: key, Name: "x", Slots: 1})
	if err != nil {
		t.Fatalf("x cannot reach c: %v", err)
	}
	defer x.Close()
	runOver(t, "x, joining c after the end", awaitFrame(ctx, x, frames(x), isShutdown))
	// c's own end still waits for v.
	n := 0
	if !c.ask(func() { n = c.awaiting() }) || n != 1 {
		t.Fatalf("c awaits %d once it told its workers the end; want 1 (v)", n)
	}
	v, err := dialV(ctx)
	if err != nil {
		t.Fatalf("v cannot reach c: %v", err)
	}
	vCame = true
	defer v.Close()
	runOver(t, "v at c", awaitFrame(ctx, v, frames(v), isShutdown))
	err = <-runDone
	ended = true
	if !errors.Is(err, ErrRunOver) {
		t.Fatalf("c ended with %v, want %v", err, ErrRunOver)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once c had passed the end on")
	}
}

// TestDrainingWorkerOfAGoneChildIsAwaited: the root moved a worker v to
// a child master c, and v is still connected to the root, finishing a
// task deaf to its cancel; c, done, told to return, names only itself (v
// never reached it) and is gone. The root awaits v's new connection (v
// finds c gone and comes back the way it came) and tells it the run is
// over. Before, the root awaited only c's agent, and closed once it came
// (seed 2041889 of the simulation: v went to c, then home to no master).
func TestDrainingWorkerOfAGoneChildIsAwaited(t *testing.T) {
	drainingWorkerOfAGoneChild(t, false)
}

// TestDrainingWorkerOfAGoneChildHearsTheEnd: the same, c gone as the
// root's Close waits for it: v hears the end at once, where it is.
// Before, it heard nothing until c's agent came, and, its drain over
// first, went to c and then home to no master (seed 2041889).
func TestDrainingWorkerOfAGoneChildHearsTheEnd(t *testing.T) {
	drainingWorkerOfAGoneChild(t, true)
}

// drainingWorkerOfAGoneChild plays c and v, c gone as the root's Close
// waits for it (closing) or before the run's end.
func drainingWorkerOfAGoneChild(t *testing.T, closing bool) {
	leaktest.Check(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	key := splitTestKey(t)
	root := plainRoot(ctx, t, key)
	v, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "v", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	vin := frames(v)
	if err := root.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var old *mworker
	root.ask(func() {
		p := root.proto()
		c := &childMaster{token: 1, name: "c", masters: 1}
		p.children[1] = c
		old = root.byName["v"]
		p.moving[old] = c // moved to c once c says hello
	})
	link, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "c/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	in := frames(link)
	link.Send(&ChildHello{Token: 1, Addr: "127.0.0.1:1"})
	if mv, ok := awaitFrame(ctx, v, vin, func(m Message) bool { _, ok := m.(*Move); return ok }).(*Move); !ok || mv.Addr != "127.0.0.1:1" {
		t.Fatalf("v got %#v, want a move to c", mv)
	}
	// v stays, draining. c is done, after the root's batch, and is told
	// to return.
	link.Send(&ChildResults{Gen: 1, Masters: 1, Done: true})
	if !waitLoop(ctx, root, func() bool { return len(root.proto().returning) == 1 }) {
		t.Fatal("c's Done did not reach the root")
	}
	root.ask(func() {
		p := root.proto()
		root.returnChild(p.returning[0])
		p.returning = nil
	})
	if awaitFrame(ctx, link, in, func(m Message) bool { _, ok := m.(*Move); return ok }) == nil {
		t.Fatal("the root did not tell c to return")
	}
	closed := make(chan struct{})
	closeRoot := func() {
		go func() {
			root.Close()
			close(closed)
		}()
	}
	if closing {
		closeRoot()
		// Close has begun before c's link ends, however late the
		// goroutine that calls it runs on a loaded machine.
		if !waitLoop(ctx, root, func() bool { return root.closing.Load() }) {
			t.Fatal("the root's Close did not begin")
		}
	}
	// c names itself, not v, and is gone.
	link.SendAndClose(&ChildResults{Gen: 1, Masters: 1, Done: true, Moved: []string{"c"}})
	if !waitLoop(ctx, root, func() bool { return len(root.proto().recalled) == 0 }) {
		t.Fatal("the root did not see c's link close")
	}
	var x expected
	awaited, ended := false, false
	root.ask(func() { x, awaited = root.proto().expect["v"]; ended = old.ended })
	// c's agent comes (before any Fatal: the root awaits it).
	cw, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "c", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	cin := frames(cw)
	if closing {
		if !ended {
			t.Fatal("v, moved to c, still here, and c gone as the root closes, was not told the end at once")
		}
		runOver(t, "v at the root", awaitFrame(ctx, v, vin, isShutdown))
	} else {
		if !awaited || x.old != old {
			t.Fatalf("the root does not await v again (%v, %+v), moved to c, still here, and c gone", awaited, x)
		}
		// v's drain ends, it finds c gone and comes back.
		v.Close()
		if !waitLoop(ctx, root, func() bool { return old.closed }) {
			t.Fatal("the root did not see v's first connection close")
		}
		closeRoot()
		v2, _, err := Dial(ctx, root.Addr(), DialConfig{Key: key, Name: "v", Slots: 1})
		if err != nil {
			t.Fatalf("v, back from gone c, cannot reach the root: %v", err)
		}
		defer v2.Close()
		runOver(t, "v at the root", awaitFrame(ctx, v2, frames(v2), isShutdown))
	}
	runOver(t, "c at the root", awaitFrame(ctx, cw, cin, isShutdown))
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the root did not close once v and c had heard the end")
	}
}

// closeAsync closes m in the background, and says when it has.
func closeAsync(m *Master) <-chan struct{} {
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	return closed
}

// silentChildLink opens the control link of child master name (token)
// to m, as a frozen machine would keep it: its hello sent, then nothing,
// not even a heartbeat. It closes as the test ends.
func silentChildLink(ctx context.Context, t *testing.T, m *Master, key *Key, name string, token uint64) (*Conn, <-chan Message) {
	t.Helper()
	link, _, err := Dial(ctx, m.Addr(), DialConfig{Key: key, Name: name + "/master", Slots: 1, Problems: []string{helloSubMaster},
		Conn: ConnConfig{Heartbeat: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	in := frames(link)
	link.Send(&ChildHello{Token: token, Addr: "127.0.0.1:1"})
	return link, in
}

// setEndHeardWait sets endHeardWait to d for the test, and back as it
// ends.
func setEndHeardWait(t *testing.T, d time.Duration) {
	old := endHeardWait
	endHeardWait = d
	t.Cleanup(func() { endHeardWait = old })
}

// lendToChild has root lend n tasks of its batch b to a new child master
// "c" (token 1), as a split would, and returns it and the tasks. It runs
// on root's loop.
func lendToChild(root *Master, b *batch, n int) (*childMaster, []Task) {
	p := root.proto()
	c := &childMaster{token: 1, name: "c", batch: b.id, created: root.now(), progress: root.now(), masters: 1, inR: true}
	tasks := root.takeTasks(n)
	for _, tk := range tasks {
		p.lent[tk.ID] = c
		c.lent++
	}
	p.children[c.token] = c
	p.order = append(p.order, c)
	return c, tasks
}
