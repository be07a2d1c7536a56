package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// gateProblem evaluates task x (x[0] is its id) to 10·x[0], but only once
// the test opens that id's gate; a cancel ends the wait.
type gateProblem struct {
	mu    sync.Mutex
	gates map[int32]chan struct{}
	start chan int32 // ids as they start, if not nil
}

func newGateProblem() *gateProblem {
	return &gateProblem{gates: map[int32]chan struct{}{}, start: make(chan int32, 100)}
}

func (g *gateProblem) gate(id int32) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[id]
	if !ok {
		c = make(chan struct{})
		g.gates[id] = c
	}
	return c
}

func (g *gateProblem) open(id int32) { close(g.gate(id)) }

func (g *gateProblem) Name() string                   { return "gate" }
func (g *gateProblem) Bounds() (lower, upper float64) { return 0, 100 }
func (g *gateProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	id := int32(x[0])
	g.start <- id
	select {
	case <-g.gate(id):
		return 10 * x[0], nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// logBuffer is a log sink safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func logger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// fakeMaster accepts workers on 127.0.0.1 with the real handshake and
// hands each authenticated connection to the test.
type fakeMaster struct {
	t     *testing.T
	ln    net.Listener
	conns chan *masterConn
	errs  chan error
	log   *logBuffer
	wg    sync.WaitGroup
}

// masterConn is one worker's connection as the fake master sees it.
type masterConn struct {
	c     *grid.Conn
	hello *grid.Hello
	msgs  chan grid.Message
}

func startFakeMaster(t *testing.T, key *grid.Key, spec grid.ProblemSpec) *fakeMaster {
	t.Helper()
	return startFakeMasterFrame(t, key, spec, 0)
}

// startFakeMasterFrame is startFakeMaster reading frames of at most
// maxFrame bytes (0: the default), a cap it tells the workers.
func startFakeMasterFrame(t *testing.T, key *grid.Key, spec grid.ProblemSpec, maxFrame int) *fakeMaster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fm := &fakeMaster{t: t, ln: ln, conns: make(chan *masterConn, 16), errs: make(chan error, 16), log: new(logBuffer)}
	ctx, cancel := context.WithCancel(context.Background())
	var opened []*grid.Conn
	var mu sync.Mutex
	fm.wg.Add(1)
	go func() {
		defer fm.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c, h, err := grid.Accept(ctx, nc, grid.AcceptConfig{
				Key:     key,
				Welcome: func(*grid.Hello) (int32, grid.ProblemSpec, error) { return 5, spec, nil },
				Conn:    grid.ConnConfig{Logger: logger(fm.log), MaxFrame: maxFrame},
			})
			if err != nil {
				fm.errs <- err
				continue
			}
			mc := &masterConn{c: c, hello: h, msgs: make(chan grid.Message, 1000)}
			c.Start(func(m grid.Message) { mc.msgs <- m })
			mu.Lock()
			opened = append(opened, c)
			mu.Unlock()
			fm.conns <- mc
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		fm.wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range opened {
			c.Close()
			<-c.Done()
		}
	})
	return fm
}

func (fm *fakeMaster) addr() string { return fm.ln.Addr().String() }

func (fm *fakeMaster) next() *masterConn {
	fm.t.Helper()
	select {
	case mc := <-fm.conns:
		return mc
	case err := <-fm.errs:
		fm.t.Fatalf("handshake failed at the master: %v", err)
	case <-time.After(time.Minute):
		fm.t.Fatal("no worker connected")
	}
	return nil
}

// receive waits for the next message of type T, skipping none.
func receive[T grid.Message](t *testing.T, mc *masterConn) T {
	t.Helper()
	select {
	case m := <-mc.msgs:
		v, ok := m.(T)
		if !ok {
			t.Fatalf("master got %T %+v, want %T", m, m, *new(T))
		}
		return v
	case <-time.After(time.Minute):
		t.Fatalf("master waited in vain for %T", *new(T))
	}
	panic("unreachable")
}

func tasks(gen int32, ids ...int32) *grid.Tasks {
	ts := &grid.Tasks{Gen: gen}
	for _, id := range ids {
		ts.Items = append(ts.Items, grid.Task{ID: id, X: []float64{float64(id)}})
	}
	return ts
}

// startAgent runs an agent in the background; the returned function waits
// for Run's result.
func startAgent(t *testing.T, ctx context.Context, cfg Config) (*Agent, func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = logger(io.Discard)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("agent did not return")
			return nil
		}
	}
}

func gateConfig(key *grid.Key, addr string, g *gateProblem, slots int) Config {
	return Config{
		Master: addr, Key: key, Name: "w1", Slots: slots, Problems: []string{"gate"},
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Build: func(spec grid.ProblemSpec) (problems.Problem, error) {
			if spec.Name != "gate" {
				return nil, errors.New("only gate here")
			}
			return g, nil
		},
	}
}

// waitStarted waits until the ids have started on slots (any order).
func waitStarted(t *testing.T, g *gateProblem, ids ...int32) {
	t.Helper()
	var got []int32
	for range ids {
		select {
		case id := <-g.start:
			got = append(got, id)
		case <-time.After(time.Minute):
			t.Fatalf("started %v, waiting for %v", got, ids)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
}

func TestAgentRunsCancelsAndReportsStatus(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, wait := startAgent(t, ctx, gateConfig(key, fm.addr(), g, 2))
	mc := fm.next()
	if mc.hello.Name != "w1" || mc.hello.Slots != 2 || !slices.Equal(mc.hello.Problems, []string{"gate"}) {
		t.Errorf("hello %+v", mc.hello)
	}

	// Two slots: 0 and 1 run, 2, 3 and 4 are held, in the order sent.
	mc.c.Send(tasks(1, 0, 1, 2, 3, 4))
	waitStarted(t, g, 0, 1)
	if q, r := a.Status(); q != 3 || r != 2 {
		t.Fatalf("status queued %d running %d, want 3 and 2", q, r)
	}

	// Cancel held 3 and running 0: 3 is gone, acknowledged as dropped at
	// once; 0 reports as cancelled (stopped), and its slot takes the head
	// of the queue (2).
	mc.c.Send(&grid.Cancel{Gen: 1, IDs: []int32{3, 0}})
	rs := receive[*grid.Results](t, mc)
	if len(rs.Items) > 0 && rs.Items[0].ID == 3 {
		if a := rs.Items[0]; a.Ack != grid.AckDropped || !a.Cancelled || a.Gen != 1 || a.Exec != 0 {
			t.Fatalf("acknowledgement of the held 3: %+v", a)
		}
		if rs.Items = rs.Items[1:]; len(rs.Items) == 0 {
			rs = receive[*grid.Results](t, mc)
		}
	} else {
		t.Fatalf("no acknowledgement of the held 3 first: %+v", rs)
	}
	if len(rs.Items) != 1 || rs.Items[0].ID != 0 || !rs.Items[0].Cancelled || rs.Items[0].Ack != grid.AckStopped || rs.Items[0].Gen != 1 {
		t.Fatalf("after cancel: %+v", rs)
	}
	if rs.Queued != 1 || rs.Running != 2 {
		t.Errorf("status with the cancelled result: queued %d running %d, want 1 and 2", rs.Queued, rs.Running)
	}
	waitStarted(t, g, 2)

	steps := []struct {
		open                  int32
		next                  []int32 // starts after it
		wantQueued, wantRunng int32
	}{
		{2, []int32{4}, 0, 2},
		{1, nil, 0, 1},
		{4, nil, 0, 0},
	}
	for _, s := range steps {
		g.open(s.open)
		rs := receive[*grid.Results](t, mc)
		if len(rs.Items) != 1 {
			t.Fatalf("results %+v", rs)
		}
		r := rs.Items[0]
		if r.ID != s.open || r.F != 10*float64(s.open) || r.Cancelled || r.Err != "" || r.Exec <= 0 {
			t.Errorf("result %+v", r)
		}
		if rs.Queued != s.wantQueued || rs.Running != s.wantRunng {
			t.Errorf("after %d: queued %d running %d, want %d and %d", s.open, rs.Queued, rs.Running, s.wantQueued, s.wantRunng)
		}
		waitStarted(t, g, s.next...)
	}
	select {
	case m := <-mc.msgs:
		t.Errorf("unexpected %T %+v (the cancelled held task 3 must never run)", m, m)
	case id := <-g.start:
		t.Errorf("task %d started", id)
	case <-time.After(50 * time.Millisecond):
	}

	mc.c.Send(&grid.Shutdown{Reason: "done"})
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v, want ErrShutdown", err)
	}
}

func TestAgentNewGenerationDropsStaleWork(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, wait := startAgent(t, ctx, gateConfig(key, fm.addr(), g, 1))
	mc := fm.next()
	mc.c.Send(tasks(1, 0, 1))
	waitStarted(t, g, 0)
	mc.c.Send(tasks(2, 7))
	rs := receive[*grid.Results](t, mc) // 0 of generation 1, cancelled
	if r := rs.Items[0]; r.Gen != 1 || r.ID != 0 || !r.Cancelled {
		t.Errorf("stale running task: %+v", r)
	}
	waitStarted(t, g, 7)   // 1 of generation 1 was dropped
	mc.c.Send(tasks(1, 9)) // late tasks of a finished generation are ignored
	g.open(7)
	rs = receive[*grid.Results](t, mc)
	if r := rs.Items[0]; r.Gen != 2 || r.ID != 7 || r.F != 70 || rs.Queued != 0 || rs.Running != 0 {
		t.Errorf("result %+v", rs)
	}
	if q, r := a.Status(); q != 0 || r != 0 {
		t.Errorf("status %d %d", q, r)
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

func TestAgentDrain(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, wait := startAgent(t, ctx, gateConfig(key, fm.addr(), g, 2))
	mc := fm.next()
	mc.c.Send(tasks(3, 0, 1, 2, 3))
	waitStarted(t, g, 0, 1)

	a.Drain()
	d := receive[*grid.Drain](t, mc)
	if d.Gen != 3 || !slices.Equal(d.Returned, []int32{2, 3}) {
		t.Errorf("drain %+v, want the held tasks 2 and 3 of generation 3", d)
	}
	// Tasks sent before the master read the Drain come straight back.
	mc.c.Send(tasks(3, 8))
	if d := receive[*grid.Drain](t, mc); !slices.Equal(d.Returned, []int32{8}) {
		t.Errorf("late tasks: %+v", d)
	}
	// The running ones finish and report; then the worker leaves.
	g.open(0)
	g.open(1)
	var got []int32
	for len(got) < 2 {
		rs := receive[*grid.Results](t, mc)
		for _, r := range rs.Items {
			if r.Cancelled {
				t.Errorf("a running task was cancelled by the drain: %+v", r)
			}
			got = append(got, r.ID)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("results for %v", got)
	}
	if err := wait(); err != nil {
		t.Errorf("Run after drain = %v", err)
	}
	<-mc.c.Done()
	if !errors.Is(mc.c.Err(), grid.ErrPeerClosed) {
		t.Errorf("master side: %v", mc.c.Err())
	}
}

func TestAgentReconnectsAndDropsTasksOfDeadConnection(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	g := newGateProblem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, wait := startAgent(t, ctx, gateConfig(key, fm.addr(), g, 1))
	mc := fm.next()
	mc.c.Send(tasks(1, 0, 1))
	waitStarted(t, g, 0)
	mc.c.Close() // the master is gone

	mc2 := fm.next() // ... and back
	// Nothing of the old connection survives: 0 was cancelled, 1 dropped.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if q, r := a.Status(); q == 0 && r == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tasks of the dead connection still held or running")
		}
	}
	mc2.c.Send(tasks(1, 5))
	waitStarted(t, g, 5)
	g.open(5)
	if rs := receive[*grid.Results](t, mc2); rs.Items[0].ID != 5 || rs.Items[0].F != 50 {
		t.Errorf("after reconnect: %+v", rs)
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

func TestAgentWrongKeyRefusedOnBothSides(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret + " right")
	wrong, _ := grid.NewKey(testSecret + " wrong")
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	wlog := new(logBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(wrong, fm.addr(), newGateProblem(), 1)
	cfg.Logger = logger(wlog)
	_, wait := startAgent(t, ctx, cfg)
	for range 2 { // refused, and refused again after the backoff
		select {
		case err := <-fm.errs:
			if !errors.Is(err, grid.ErrAuthFailed) {
				t.Errorf("master: %v", err)
			}
		case mc := <-fm.conns:
			t.Fatalf("a worker with the wrong key got a connection: %+v", mc.hello)
		case <-time.After(time.Minute):
			t.Fatal("no handshake")
		}
	}
	cancel()
	wait()
	if s := wlog.String(); !strings.Contains(s, "wrong cluster key") || !strings.Contains(s, "level=WARN") {
		t.Errorf("worker log:\n%s", s)
	}
	if s := fm.log.String(); !strings.Contains(s, "wrong cluster key") {
		t.Errorf("master log:\n%s", s)
	}
}

func TestAgentRefusesMasterOfAnotherVersion(t *testing.T) {
	leaktest.Check(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	key, _ := grid.NewKey(testSecret)
	wlog := new(logBuffer)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, ln.Addr().String(), newGateProblem(), 1)
	cfg.Logger = logger(wlog)
	_, wait := startAgent(t, ctx, cfg)
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := grid.AppendFrame(nil, &grid.Challenge{Version: grid.ProtocolVersion + 1, Nonce: make([]byte, 32)}, 0)
	nc.Write(b)
	m, err := grid.NewFrameReader(nc, 0).Next()
	if r, ok := m.(*grid.Reject); err != nil || !ok || !strings.Contains(r.Reason, "version mismatch") {
		t.Errorf("master of another version got %+v, %v", m, err)
	}
	cancel()
	wait()
	if !strings.Contains(wlog.String(), "version mismatch") {
		t.Errorf("worker log:\n%s", wlog.String())
	}
}

func TestAgentRejectsProblemItCannotBuild(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "no-such-problem", Dim: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, wait := startAgent(t, ctx, gateConfig(key, fm.addr(), newGateProblem(), 1))
	mc := fm.next()
	<-mc.c.Done()
	var re *grid.RejectError
	if !errors.As(mc.c.Err(), &re) || !strings.Contains(re.Reason, "no-such-problem") {
		t.Errorf("master side: %v", mc.c.Err())
	}
	cancel()
	wait()
}

// sleepProblem takes d per evaluation and returns x[0].
type sleepProblem struct{ d time.Duration }

func (sleepProblem) Name() string                   { return "sleep" }
func (sleepProblem) Bounds() (lower, upper float64) { return 0, 1 }
func (p sleepProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	time.Sleep(p.d)
	return x[0], nil
}

func TestAgentSlowdownAndDelay(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "sleep", Dim: 1})
	const compute, slowdown, delay = 20 * time.Millisecond, 3, 30 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{
		Master: fm.addr(), Key: key, Slots: 1, Slowdown: slowdown, SlowdownWall: true, Delay: delay, Logger: logger(io.Discard),
		Build: func(grid.ProblemSpec) (problems.Problem, error) { return sleepProblem{compute}, nil },
	}
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	sent := time.Now()
	mc.c.Send(tasks(0, 4))
	rs := receive[*grid.Results](t, mc)
	back := time.Since(sent)
	r := rs.Items[0]
	if r.F != 4 || r.Err != "" {
		t.Errorf("result %+v", r)
	}
	// Lower bounds only: the emulation may add, never take away.
	if min := time.Duration(slowdown) * compute; time.Duration(r.Exec) < min {
		t.Errorf("Exec %v with slowdown %d of a %v compute, want ≥ %v", time.Duration(r.Exec), slowdown, compute, min)
	}
	if min := time.Duration(r.Exec) + 2*delay; back < min {
		t.Errorf("round trip %v, want ≥ Exec + 2·delay = %v", back, min)
	}
	cancel()
	wait()
}

func TestNewChecksConfig(t *testing.T) {
	key, _ := grid.NewKey(testSecret)
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no key", Config{Master: "127.0.0.1:1"}},
		{"no master", Config{Key: key}},
		{"slowdown below 1", Config{Key: key, Master: "127.0.0.1:1", Slowdown: 0.5}},
		{"negative delay", Config{Key: key, Master: "127.0.0.1:1", Delay: -time.Second}},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	a, err := New(Config{Key: key, Master: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.Slots != runtime.NumCPU() || a.cfg.Slowdown != 1 || a.Name() == "" || len(a.cfg.Problems) == 0 {
		t.Errorf("defaults %+v", a.cfg)
	}
}

func TestAgentFindsMasterThroughGossip(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms, err := grid.JoinMembership(ctx, grid.MembershipConfig{
		Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta:   grid.NodeMeta{Role: grid.RoleMaster, DataAddr: fm.addr()},
		Logger: logger(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	g := newGateProblem()
	cfg := gateConfig(key, "", g, 1)
	cfg.Join = []string{ms.Addr()}
	cfg.GossipBind = "127.0.0.1:0"
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	if mc.hello.Name != "w1" {
		t.Errorf("hello %+v", mc.hello)
	}
	// The worker is a gossip member too, under the same name.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		i := slices.IndexFunc(ms.Members(), func(m grid.Member) bool { return m.Name == "w1" })
		if i >= 0 && ms.Members()[i].Meta.Role == grid.RoleWorker && ms.Members()[i].Meta.Slots == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not in gossip: %+v", ms.Members())
		}
	}
	mc.c.Send(&grid.Shutdown{})
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("Run = %v", err)
	}
}
