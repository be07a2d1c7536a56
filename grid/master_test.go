package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/sched"
)

// The master is an es.Evaluator.
var _ es.Evaluator = (*Master)(nil)

func sphere(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return s
}

func testClusterKey(t testing.TB, secret string) *Key {
	t.Helper()
	k, err := NewKey(testSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testWorker is a minimal worker speaking the protocol directly: a FIFO
// remote queue, Slots goroutines running its head, cancel of held and
// running tasks, results with its status. Its misbehaviours are switched
// on by fields set before start.
type testWorker struct {
	name  string
	slots int
	delay time.Duration // compute time per task

	dupResults bool                                  // send every result twice
	sendStale  bool                                  // also send a wrong result of an earlier batch
	failTask   int32                                 // evaluation of this task id fails (-1: none)
	failAll    bool                                  // every evaluation fails
	freeze     bool                                  // take tasks, never answer
	onTasks    func(w *testWorker, nc net.Conn) bool // called on each Tasks frame; true: stop handling
	onCancel   func(c *Cancel)                       // called on each Cancel frame, before it is carried out
	fitness    func(x []float64) float64             // default sphere
	log        *slog.Logger                          // default testLogger
	heartbeat  time.Duration                         // the connection's; default ConnConfig's
	forge      func(ts *Tasks) []Result              // extra results sent on each Tasks frame
	hold       chan struct{}                         // evaluations end only once it is closed (nil: no wait)
	from       string                                // local IP it dials from, a host of its own (127.0.0.x); default the system's choice
	deaf       bool                                  // a cancelled running task runs to its end, then is acknowledged as stopped (a plugin that cannot be cancelled)
	stopAck    bool                                  // a cancelled running task is acknowledged as stopped (AckStopped), as worker.Agent does
	claim      time.Duration                         // the execution time every result reports (0: the real one); a liar's
	drainCheck bool                                  // a check's instance makes it drain: it gives the instance back unrun, as held, and runs the rest
	drained    atomic.Int64                          // check instances it gave back (drainCheck)
	rawConn    net.Conn                              // the socket under conn
	conn       *Conn
	welcome    *Welcome
	ctx        context.Context
	cancel     context.CancelFunc
	wake       chan struct{}
	shutdownCh chan struct{}

	mu      sync.Mutex
	queue   []queuedTask
	running map[[2]int32]context.CancelFunc
	nRun    int32
	got     atomic.Int64 // tasks received
	shut    bool
}

type queuedTask struct {
	gen int32
	t   Task
}

func newTestWorker(name string, slots int, delay time.Duration) *testWorker {
	return &testWorker{name: name, slots: slots, delay: delay, failTask: -1}
}

// start dials the master with key and starts the worker.
func (w *testWorker) start(t testing.TB, addr string, key *Key) error {
	t.Helper()
	if w.log == nil {
		w.log = testLogger(t)
	}
	t.Cleanup(w.stop)
	return w.connect(t.Context(), addr, key)
}

// connect is start without the test's cleanup: the caller stops w.
func (w *testWorker) connect(ctx context.Context, addr string, key *Key) error {
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.wake = make(chan struct{}, w.slots)
	w.shutdownCh = make(chan struct{})
	w.running = make(map[[2]int32]context.CancelFunc)
	if w.fitness == nil {
		w.fitness = sphere
	}
	var d net.Dialer
	if w.from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(w.from)}
	}
	nc, err := d.DialContext(w.ctx, "tcp", addr)
	if err != nil {
		return err
	}
	w.rawConn = nc
	conn, wel, err := ClientHandshake(w.ctx, nc, DialConfig{
		Key: key, Name: w.name, Slots: w.slots,
		Conn: ConnConfig{Logger: w.log, Heartbeat: w.heartbeat},
	})
	if err != nil {
		return err
	}
	w.conn, w.welcome = conn, wel
	for range w.slots {
		go w.slot()
	}
	conn.Start(w.handle)
	return nil
}

func (w *testWorker) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.conn != nil {
		w.conn.Close()
		<-w.conn.Done()
	}
}

func (w *testWorker) handle(m Message) {
	switch v := m.(type) {
	case *Tasks:
		w.got.Add(int64(len(v.Items)))
		if w.onTasks != nil && w.onTasks(w, w.rawConn) {
			return
		}
		if w.drainCheck {
			var back []int32
			v.Items = slices.DeleteFunc(v.Items, func(it Task) bool {
				if it.ID >= checkBase {
					back = append(back, it.ID)
					return true
				}
				return false
			})
			if len(back) > 0 {
				w.drained.Add(int64(len(back)))
				w.conn.Send(&Drain{Gen: v.Gen, Returned: back})
			}
		}
		if w.forge != nil {
			if rs := w.forge(v); len(rs) > 0 {
				w.conn.Send(&Results{Items: rs})
			}
		}
		if w.freeze {
			return
		}
		w.mu.Lock()
		for _, it := range v.Items {
			w.queue = append(w.queue, queuedTask{gen: v.Gen, t: it})
		}
		w.mu.Unlock()
		for range v.Items {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	case *Cancel:
		if w.onCancel != nil {
			w.onCancel(v)
		}
		w.mu.Lock()
		for _, id := range v.IDs {
			w.queue = slices.DeleteFunc(w.queue, func(q queuedTask) bool { return q.gen == v.Gen && q.t.ID == id })
			if c := w.running[[2]int32{v.Gen, id}]; c != nil {
				c()
			}
		}
		w.mu.Unlock()
	case *Shutdown:
		w.mu.Lock()
		if !w.shut {
			w.shut = true
			close(w.shutdownCh)
		}
		w.mu.Unlock()
	}
}

func (w *testWorker) slot() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.mu.Unlock()
			select {
			case <-w.wake:
				continue
			case <-w.ctx.Done():
				return
			}
		}
		q := w.queue[0]
		w.queue = w.queue[1:]
		ctx, cancel := context.WithCancel(w.ctx)
		key := [2]int32{q.gen, q.t.ID}
		w.running[key] = cancel
		w.nRun++
		w.mu.Unlock()

		start := time.Now()
		cancelled := false
		stop := ctx.Done()
		if w.deaf {
			stop = w.ctx.Done() // only the worker's end stops it
		}
		if w.hold != nil {
			select {
			case <-w.hold:
			case <-stop:
				cancelled = true
			}
		}
		if w.delay > 0 && !cancelled {
			tm := time.NewTimer(w.delay)
			select {
			case <-tm.C:
			case <-stop:
				cancelled = true
			}
			tm.Stop()
		}
		if w.deaf && ctx.Err() != nil {
			cancelled = true // it ran to its end all the same
		}
		cancel()
		r := Result{Gen: q.gen, ID: q.t.ID, Exec: int64(time.Since(start)), Cancelled: cancelled, Token: q.t.Token}
		if w.claim > 0 {
			r.Exec = int64(w.claim)
		}
		if cancelled && (w.deaf || w.stopAck) {
			r.Ack = AckStopped
		}
		if !cancelled {
			if q.t.ID == w.failTask || w.failAll {
				r.Err = "boom"
			} else {
				r.F = w.fitness(q.t.X)
			}
		}
		w.mu.Lock()
		delete(w.running, key)
		w.nRun--
		rs := &Results{Items: []Result{r}, Queued: int32(len(w.queue)), Running: w.nRun}
		w.mu.Unlock()
		if w.dupResults && !cancelled {
			rs.Items = append(rs.Items, r)
		}
		if w.sendStale && q.gen > 0 {
			rs.Items = append(rs.Items, Result{Gen: q.gen - 1, ID: q.t.ID, F: -1})
		}
		if err := w.conn.Send(rs); err != nil {
			return
		}
	}
}

type masterOpt func(*MasterConfig)

func startMaster(t *testing.T, policy string, opts ...masterOpt) *Master {
	t.Helper()
	leaktest.Check(t)
	cfg := MasterConfig{
		Listen:    "127.0.0.1:0",
		Key:       testClusterKey(t, "test cluster"),
		Policy:    policy,
		Problem:   ProblemSpec{Name: "sphere", Dim: 5},
		Logger:    testLogger(t),
		Progress:  time.Second,
		Heartbeat: time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := NewMaster(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// runRelay runs a relay named "relay" for m's workers, its links to m
// configured by conn, until the test ends.
func runRelay(t *testing.T, m *Master, conn ConnConfig) *Relay {
	t.Helper()
	return runRelayWith(t, RelayConfig{Key: m.cfg.Key, Name: "relay", Conn: conn,
		Upstream: func(context.Context, int) (string, error) { return m.Addr(), nil }})
}

// runRelayWith runs a relay of config cfg until the test ends, on a
// listener of its own at 127.0.0.1 unless cfg has one, logging to the
// test unless cfg says where.
func runRelayWith(t *testing.T, cfg RelayConfig) *Relay {
	t.Helper()
	if cfg.Listener == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = ln
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	r, err := NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return r
}

func startWorkers(t *testing.T, m *Master, ws ...*testWorker) {
	t.Helper()
	for _, w := range ws {
		if err := w.start(t, m.Addr(), m.cfg.Key); err != nil {
			t.Fatalf("worker %s: %v", w.name, err)
		}
	}
	eventually(t, "workers to join", func() bool { return m.Workers() >= len(ws) })
}

func randomBatch(rng *rand.Rand, n, dim int) [][]float64 {
	xs := make([][]float64, n)
	for i := range xs {
		xs[i] = make([]float64, dim)
		for j := range xs[i] {
			xs[i][j] = rng.Float64()*200 - 100
		}
	}
	return xs
}

// evalAndCheck evaluates gens batches of n tasks and checks every value
// against sphere.
func evalAndCheck(t *testing.T, m *Master, gens, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for g := range gens {
		xs := randomBatch(rng, n, 5)
		f, err := m.Evaluate(ctx, g, xs)
		if err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		if len(f) != n {
			t.Fatalf("generation %d: %d values, want %d", g, len(f), n)
		}
		for i := range xs {
			if want := sphere(xs[i]); f[i] != want {
				t.Fatalf("generation %d task %d: %v, want %v", g, i, f[i], want)
			}
		}
	}
}

func TestMasterEvaluatesWithEveryPolicy(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy)
			startWorkers(t, m,
				newTestWorker("fast", 2, 200*time.Microsecond),
				newTestWorker("mid", 1, time.Millisecond),
				newTestWorker("slow", 1, 4*time.Millisecond))
			evalAndCheck(t, m, 4, 25)

			rep := m.Report()
			if len(rep.Generations) != 4 {
				t.Fatalf("ledger has %d generations, want 4", len(rep.Generations))
			}
			for _, g := range rep.Generations {
				if !g.Complete || g.Tasks != 25 {
					t.Errorf("generation %d: complete %v, tasks %d", g.Index, g.Complete, g.Tasks)
				}
			}
			if len(rep.Workers) != 3 {
				t.Errorf("ledger knows %d workers, want 3", len(rep.Workers))
			}
			st := m.Stats()
			if st.Workers != 3 || st.Batches != 4 || st.TasksSent < 100 || st.BytesOut == 0 || st.FramesIn < 100 {
				t.Errorf("stats %+v", st)
			}
			if (policy == "rr" || policy == "r3q") && rep.Replicas == 0 {
				t.Errorf("%s sent no replica", policy)
			}
			// eft sends replicas only where they are expected to win, at
			// most one per task by default (sched.DefaultCopies).
			if (policy != "rr" && policy != "r3q" && policy != "eft") && rep.Replicas != 0 {
				t.Errorf("%s sent %d replicas", policy, rep.Replicas)
			}
			if policy == "eft" && rep.Replicas > 4*25 {
				t.Errorf("eft sent %d replicas for %d tasks", rep.Replicas, 4*25)
			}
		})
	}
}

func TestMasterSurvivesWorkerDeath(t *testing.T) {
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy)
			doomed := newTestWorker("doomed", 2, time.Millisecond)
			// Dies holding its first tasks, before answering any.
			doomed.onTasks = func(w *testWorker, nc net.Conn) bool {
				nc.Close()
				return true
			}
			startWorkers(t, m, newTestWorker("a", 1, 500*time.Microsecond), newTestWorker("b", 2, time.Millisecond), doomed)
			evalAndCheck(t, m, 3, 20)
			if doomed.got.Load() == 0 {
				t.Fatal("the doomed worker never got a task: nothing was tested")
			}
			eventually(t, "the dead worker to be dropped", func() bool { return m.Workers() == 2 })
		})
	}
}

func TestMasterMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	m := startMaster(t, "rwq")
	bad := newTestWorker("bad", 1, 0)
	bad.onTasks = func(w *testWorker, nc net.Conn) bool {
		// A results frame whose body is not msgpack of Results.
		nc.Write([]byte{0, 0, 0, 4, byte(MsgResults), 0xc1, 0xc1, 0xc1})
		return true
	}
	good := newTestWorker("good", 2, 500*time.Microsecond)
	startWorkers(t, m, good, bad)
	evalAndCheck(t, m, 3, 20)
	if bad.got.Load() == 0 {
		t.Fatal("the bad worker never got a task: nothing was tested")
	}
	select {
	case <-bad.conn.Done():
	case <-time.After(time.Minute):
		t.Fatal("the bad worker's connection is still open")
	}
	var rej *RejectError
	if err := bad.conn.Err(); !errors.As(err, &rej) {
		t.Errorf("bad worker's connection closed with %v, want a Reject from the master", err)
	}
	if good.conn.Err() != nil {
		t.Errorf("good worker's connection closed: %v", good.conn.Err())
	}
	// The worker's side may see the close before the master's loop has
	// forgotten it.
	eventually(t, "the master to forget the bad worker", func() bool { return m.Workers() == 1 })
}

// A draining worker gets no new work, but what it runs stays its own
// (Drain.Returned is honoured): it is present until its connection closes.
func TestMasterDrainedWorkerLeavesPolicy(t *testing.T) {
	m := startMaster(t, "rwq")
	drainer := newTestWorker("drainer", 1, 2*time.Millisecond)
	var once sync.Once
	drainer.onTasks = func(w *testWorker, nc net.Conn) bool {
		// Going away: announce it, keep running what it has (the results
		// still count), take nothing more.
		once.Do(func() { w.conn.Send(&Drain{}) })
		return false
	}
	startWorkers(t, m, drainer, newTestWorker("stayer", 2, 500*time.Microsecond))
	evalAndCheck(t, m, 3, 20)
	if drainer.got.Load() == 0 {
		t.Fatal("the draining worker never got a task: nothing was tested")
	}
	if drainer.conn.Err() != nil {
		t.Errorf("drainer's connection: %v (want open)", drainer.conn.Err())
	}
	got := drainer.got.Load()
	evalAndCheck(t, m, 3, 20)
	if more := drainer.got.Load() - got; more != 0 {
		t.Errorf("the draining worker got %d more tasks", more)
	}
}

func TestMasterIgnoresDuplicateAndStaleResults(t *testing.T) {
	m := startMaster(t, "r3q")
	noisy := newTestWorker("noisy", 2, 300*time.Microsecond)
	noisy.dupResults = true
	noisy.sendStale = true
	startWorkers(t, m, noisy, newTestWorker("plain", 1, time.Millisecond))
	evalAndCheck(t, m, 4, 20)
	st := m.Stats()
	// The made-up results of an earlier batch carry no token the master
	// sent: unsolicited, not even stale.
	if st.Duplicates == 0 || st.Unsolicited == 0 {
		t.Errorf("duplicates %d, unsolicited %d: the noisy worker was not noticed", st.Duplicates, st.Unsolicited)
	}
}

func TestMasterEvaluationErrorNamesGenerationAndTask(t *testing.T) {
	m := startMaster(t, "wq")
	w := newTestWorker("w", 2, 0)
	w.failTask = 7
	startWorkers(t, m, w)
	xs := randomBatch(rand.New(rand.NewPCG(3, 4)), 12, 3)
	_, err := m.Evaluate(t.Context(), 5, xs)
	if err == nil {
		t.Fatal("a failed evaluation went unnoticed")
	}
	for _, want := range []string{"generation 5", "task 7", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// The next batch works (task 7 of it fails again, so use fewer tasks).
	f, err := m.Evaluate(t.Context(), 6, xs[:5])
	if err != nil {
		t.Fatal(err)
	}
	for i := range f {
		if f[i] != sphere(xs[i]) {
			t.Errorf("task %d: %v, want %v", i, f[i], sphere(xs[i]))
		}
	}
}

func TestMasterWaitsForMinWorkers(t *testing.T) {
	m := startMaster(t, "rwq", func(c *MasterConfig) { c.MinWorkers = 2 })
	startWorkers(t, m, newTestWorker("first", 1, 0))
	xs := randomBatch(rand.New(rand.NewPCG(5, 6)), 6, 3)
	done := make(chan error, 1)
	go func() {
		_, err := m.Evaluate(t.Context(), 0, xs)
		done <- err
	}()
	// With one worker of two the batch must not start, however long we
	// look; a short look is enough to catch a master that does not wait.
	time.Sleep(100 * time.Millisecond)
	if st := m.Stats(); st.Batches != 0 {
		t.Fatalf("batch started with %d of 2 workers", st.Workers)
	}
	startWorkers(t, m, newTestWorker("second", 1, 0))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestMasterRejectsWrongKey(t *testing.T) {
	m := startMaster(t, "wq")
	intruder := newTestWorker("intruder", 4, 0)
	err := intruder.start(t, m.Addr(), testClusterKey(t, "another cluster"))
	var rej *RejectError
	if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "key") {
		t.Fatalf("wrong-key worker: %v, want a rejection naming the key", err)
	}
	if m.Workers() != 0 || intruder.got.Load() != 0 {
		t.Errorf("wrong-key worker counted (%d workers) or got %d tasks", m.Workers(), intruder.got.Load())
	}
	// A worker without the run's problem is refused too.
	c, _, err := Dial(t.Context(), m.Addr(), DialConfig{Key: m.cfg.Key, Name: "other", Slots: 1, Problems: []string{"ridge"}})
	if err == nil {
		c.Close()
		t.Fatal("a worker without the run's problem was welcomed")
	}
}

// TestMasterDropsWorkerGossipSaysGone: a frozen worker, whose data
// connection stays open but answers nothing (it reads nothing, sends no
// heartbeat), that gossip declares dead, or that leaves the cluster, is
// dropped as if its connection had broken, once its link has not
// answered the master's probe.
func TestMasterDropsWorkerGossipSaysGone(t *testing.T) {
	for _, tt := range []struct {
		name string
		gone func(*Membership)
	}{
		// No leave message: only failure detection can tell.
		{"failed", crashMember},
		{"left", func(m *Membership) { m.Close() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := startMaster(t, "rwq")
			frozen := newTestWorker("frozen", 2, 0)
			frozen.heartbeat = time.Hour
			frozen.onTasks = func(w *testWorker, _ net.Conn) bool {
				<-w.ctx.Done() // frozen: its connection reads nothing more
				return true
			}
			startWorkers(t, m, frozen, newTestWorker("alive", 2, 300*time.Microsecond))

			gossipKey := m.cfg.Key.GossipKey()
			master, err := startMemberWith(t, "master", gossipKey, NodeMeta{Role: RoleMaster, DataAddr: m.Addr()}, m.HandleMemberEvent)
			if err != nil {
				t.Fatal(err)
			}
			fm, err := startMemberWith(t, "frozen", gossipKey, NodeMeta{Role: RoleWorker, Slots: 2}, nil, master.Addr())
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "gossip join", func() bool { return len(master.Members()) == 2 })

			done := make(chan error, 1)
			xs := randomBatch(rand.New(rand.NewPCG(7, 8)), 20, 3)
			var f []float64
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			go func() {
				var err error
				f, err = m.Evaluate(ctx, 0, xs)
				done <- err
			}()
			eventually(t, "the frozen worker to hold tasks", func() bool { return frozen.got.Load() > 0 })
			tt.gone(fm)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for i := range xs {
				if f[i] != sphere(xs[i]) {
					t.Fatalf("task %d: %v, want %v", i, f[i], sphere(xs[i]))
				}
			}
			// The batch may end before gossip has declared the worker
			// gone: the master's deadlines move its tasks after 1 s, and
			// failure detection takes about as long. Only gossip drops it.
			eventually(t, "the master to drop the worker gossip says is gone", func() bool { return m.Workers() == 1 })
			if st := m.Stats(); st.Lost.Dead+st.Lost.Left != 1 || st.GossipKept != 0 {
				t.Errorf("lost as gossip said %d, kept %d; want the frozen worker dropped as gossip said", st.Lost.Dead+st.Lost.Left, st.GossipKept)
			}
			// Its reader is held in the handler, so its socket is read
			// here: past what the master sent, it ends.
			frozen.rawConn.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.Copy(io.Discard, frozen.rawConn); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Error("the dropped worker's connection is still open")
			}
		})
	}
}

// crashMember stops a member's gossip without a leave, as a crash or a
// frozen process would.
func crashMember(m *Membership) {
	m.closeOnce.Do(func() {
		close(m.leaving)
		m.ml.Shutdown()
		close(m.closing)
	})
}

func startMemberWith(t *testing.T, name string, key []byte, meta NodeMeta, on func(MemberEvent), seeds ...string) (*Membership, error) {
	t.Helper()
	mem, err := JoinMembership(t.Context(), MembershipConfig{
		Name: name, BindAddr: "127.0.0.1", SecretKey: key, Meta: meta,
		OnEvent: on, Tune: fastGossip, Logger: testLogger(t), LeaveTimeout: 200 * time.Millisecond,
	}, seeds...)
	if err == nil {
		t.Cleanup(func() { mem.Close() })
	}
	return mem, err
}

func TestMasterCancelledEvaluateThenRetry(t *testing.T) {
	m := startMaster(t, "r3q")
	xs := randomBatch(rand.New(rand.NewPCG(9, 10)), 10, 3)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	// No worker yet: the batch waits until ctx is cancelled.
	if _, err := m.Evaluate(ctx, 0, xs); !errors.Is(err, context.Canceled) {
		t.Fatalf("Evaluate with no worker and a cancelled ctx: %v", err)
	}
	// The same generation asked again is evaluated afresh.
	startWorkers(t, m, newTestWorker("w", 2, 200*time.Microsecond))
	f, err := m.Evaluate(t.Context(), 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range xs {
		if f[i] != sphere(xs[i]) {
			t.Fatalf("task %d: %v, want %v", i, f[i], sphere(xs[i]))
		}
	}
}

func TestMasterCloseSendsShutdown(t *testing.T) {
	m := startMaster(t, "wq")
	w := newTestWorker("w", 1, 0)
	startWorkers(t, m, w)
	m.Close()
	select {
	case <-w.shutdownCh:
	case <-time.After(time.Minute):
		t.Fatal("worker got no Shutdown")
	}
	if _, err := m.Evaluate(t.Context(), 0, [][]float64{{1}}); !errors.Is(err, ErrMasterClosed) {
		t.Errorf("Evaluate after Close: %v", err)
	}
}

// TestMasterCloseTellsLateJoiners: workers whose handshakes end after
// Close has stopped the master's loop (here through a relay, whose
// streams Close waits for) are each told that the run is over. Before,
// such a join went one time in two to the ended loop's queue, where
// nobody took it: the worker was never told, and Close waited
// ShutdownGrace for its stream to close (internal/simgrid seed 4650).
// They are told what the loop tells the others: after Interrupt, that
// the master will be back (Shutdown.Restart), so that they wait for the
// resumed run, -once or not; after Close, that the run is over.
func TestMasterCloseTellsLateJoiners(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*Master) error
		want Shutdown
	}{
		{"close", (*Master).Close, Shutdown{Reason: "run over"}},
		{"interrupt", (*Master).Interrupt, Shutdown{Reason: "master interrupted; it will be back", Restart: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { testLateJoinersTold(t, tc.end, tc.want) })
	}
}

// testLateJoinersTold ends a master with end while workers' handshakes
// through its relay are under way, and checks that each is told want.
func testLateJoinersTold(t *testing.T, end func(*Master) error, want Shutdown) {
	m := startMaster(t, "wq", func(c *MasterConfig) {
		// Generous: the test waits for events, never for these.
		c.ShutdownGrace, c.HandshakeTimeout, c.HelloTimeout = time.Minute, time.Minute, time.Minute
	})
	r := runRelay(t, m, ConnConfig{})
	eventually(t, "the relay to connect", func() bool { return m.Relays() == 1 && r.Stats().Upstreams == 1 })
	const n = 8 // before, each late join went astray one time in two
	ncs := make([]net.Conn, n)
	for i := range ncs {
		nc, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ncs[i] = nc
	}
	streams := func() int {
		m.relayReg.mu.Lock()
		x := m.relayReg.byName["relay"]
		m.relayReg.mu.Unlock()
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.streams)
	}
	eventually(t, "the streams to reach the master", func() bool { return streams() == n })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		end(m)
	}()
	select {
	case <-m.done: // the loop has ended; Close waits for the relay's streams
	case <-time.After(time.Minute):
		t.Fatal("the master's loop did not end on Close")
	}
	for i, nc := range ncs {
		conn, _, err := ClientHandshake(t.Context(), nc, DialConfig{Key: m.cfg.Key, Name: fmt.Sprintf("w%d", i), Slots: 1,
			Timeout: time.Minute, Conn: ConnConfig{Logger: testLogger(t)}})
		if err != nil {
			t.Fatalf("worker %d: handshake: %v", i, err)
		}
		var mu sync.Mutex
		var told []Shutdown
		conn.Start(func(msg Message) {
			if sd, ok := msg.(*Shutdown); ok {
				mu.Lock()
				told = append(told, *sd)
				mu.Unlock()
			}
		})
		<-conn.Done()
		mu.Lock()
		switch {
		case len(told) == 0:
			t.Errorf("worker %d: its connection closed (%v) and it was never told the run is over", i, conn.Err())
		case len(told) > 1 || told[0] != want:
			t.Errorf("worker %d: told %+v, want %+v once", i, told, want)
		}
		mu.Unlock()
	}
	<-closed
}

// TestMasterTrajectoryMatchesInProcess runs a whole ES over the grid, a
// worker dying in the middle, and compares every generation with the
// in-process run: the evolution must not depend on how it was evaluated.
func TestMasterTrajectoryMatchesInProcess(t *testing.T) {
	cfg := es.Config{Mu: 5, Lambda: 15, Dim: 6, Lower: -100, Upper: 100, Seed: 42, Stop: es.Stop{Generations: 8}}
	run := func(ev es.Evaluator) []es.Stats {
		e, err := es.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out []es.Stats
		if _, err := e.Run(t.Context(), ev, es.RunOptions{OnGeneration: func(s es.Stats) error {
			out = append(out, s)
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := run(es.EvaluatorFunc(func(_ context.Context, _ int, xs [][]float64) ([]float64, error) {
		f := make([]float64, len(xs))
		for i, x := range xs {
			f[i] = sphere(x)
		}
		return f, nil
	}))

	m := startMaster(t, "r3q")
	doomed := newTestWorker("doomed", 1, time.Millisecond)
	var seen atomic.Int32
	doomed.onTasks = func(w *testWorker, nc net.Conn) bool {
		if seen.Add(1) == 5 { // dies during a later generation
			nc.Close()
			return true
		}
		return false
	}
	startWorkers(t, m, newTestWorker("a", 2, 300*time.Microsecond), newTestWorker("b", 1, 2*time.Millisecond), doomed)
	got := run(m)
	if len(got) != len(want) {
		t.Fatalf("%d generations over the grid, %d in process", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("generation %d: grid %+v, in process %+v", i, got[i], want[i])
		}
	}
}

func ExampleMaster() {
	ctx := context.Background()
	key, _ := NewKey(testSecret("a long shared secret"))
	m, err := NewMaster(ctx, MasterConfig{
		Listen:  "127.0.0.1:0",
		Key:     key,
		Policy:  "r3q",
		Problem: ProblemSpec{Name: "ridge", Dim: 30},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	// Workers dial m.Addr(); gossip members find it through their
	// Membership.Master(). Then m is the es.Evaluator of the run:
	//   engine.Run(ctx, m, es.RunOptions{})
	fmt.Println(m.Policy())
	// Output: r3q
}

// TestMasterDistrustsResultsForTasksNeverGiven: a worker that answers for
// tasks it was never sent (made-up values, errors, ids out of range,
// another generation) neither decides nor fails the batch.
//
// The policies are those under which the liar cannot be given a task while
// its lies are on the way: wq gives its one slot the next task only after
// the result of the last, which it sends after its lies; cyclic deals the
// whole share at once. Elsewhere a lie may cross the Tasks frame that gives
// that very task, and is then believed, as it must be: the master cannot
// tell it from a real result.
func TestMasterDistrustsResultsForTasksNeverGiven(t *testing.T) {
	for _, policy := range []string{"wq", "cyclic"} {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy)
			liar := newTestWorker("liar", 1, 0)
			given := map[[2]int32]bool{} // every task it was given (forge runs on its reader)
			liar.forge = func(ts *Tasks) []Result {
				for _, it := range ts.Items {
					given[[2]int32{ts.Gen, it.ID}] = true
				}
				rs := []Result{
					{Gen: ts.Gen, ID: -1, F: -1},
					{Gen: ts.Gen, ID: 1 << 20, F: -1},
					{Gen: ts.Gen, ID: 1 << 20, Err: "forged"},
					{Gen: ts.Gen + 1, ID: 0, F: -1},
					{Gen: ts.Gen - 1, ID: 0, Err: "forged"},
				}
				for id := range int32(20) {
					switch {
					case given[[2]int32{ts.Gen, id}]:
					case id%3 == 0:
						rs = append(rs, Result{Gen: ts.Gen, ID: id, Err: "forged failure"})
					case id%3 == 1:
						rs = append(rs, Result{Gen: ts.Gen, ID: id, F: math.NaN()})
					default:
						rs = append(rs, Result{Gen: ts.Gen, ID: id, F: -1})
					}
				}
				return rs
			}
			// The honest workers are slow, so the lies arrive first.
			startWorkers(t, m, liar, newTestWorker("honest", 2, 2*time.Millisecond))
			evalAndCheck(t, m, 3, 20)
			if st := m.Stats(); st.Unsolicited == 0 {
				t.Errorf("no unsolicited result counted: %+v", st)
			}
		})
	}
}

// TestMasterDeliversNonFiniteFitness: NaN and ±Inf are legitimate values
// of a problem that says it may return them (ProblemSpec.NonFinite; the
// ES ranks NaN worst); the grid hands them over as computed.
func TestMasterDeliversNonFiniteFitness(t *testing.T) {
	fitness := func(x []float64) float64 {
		switch {
		case x[0] > 50:
			return math.NaN()
		case x[0] < -50:
			return math.Inf(-1)
		case x[0] < 0:
			return math.Inf(1)
		}
		return sphere(x)
	}
	m := startMaster(t, "r3q", func(c *MasterConfig) { c.Problem.NonFinite = true })
	w1, w2 := newTestWorker("a", 2, 0), newTestWorker("b", 1, 100*time.Microsecond)
	w1.fitness, w2.fitness = fitness, fitness
	startWorkers(t, m, w1, w2)
	xs := randomBatch(rand.New(rand.NewPCG(11, 12)), 40, 3)
	f, err := m.Evaluate(t.Context(), 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	nan := 0
	for i, x := range xs {
		want := fitness(x)
		if math.IsNaN(want) {
			nan++
			if !math.IsNaN(f[i]) {
				t.Errorf("task %d: %v, want NaN", i, f[i])
			}
			continue
		}
		if f[i] != want {
			t.Errorf("task %d: %v, want %v", i, f[i], want)
		}
	}
	if nan == 0 {
		t.Fatal("no NaN in the batch: nothing was tested")
	}
}

// TestMasterSurvivesBrokenHandshakes: peers that hang up, send garbage,
// stop inside a frame or say nothing at all cost the master nothing: a
// real worker still joins and works, and Close leaves no goroutine behind
// (the silent peer's handshake is cut by Close, not by its timeout).
func TestMasterSurvivesBrokenHandshakes(t *testing.T) {
	m := startMaster(t, "rwq", func(c *MasterConfig) { c.HandshakeTimeout = time.Minute })
	for _, send := range [][]byte{
		nil,                                 // connects and hangs up
		[]byte("GET / HTTP/1.1\r\n\r\n"),    // not the protocol
		{0, 0, 0, 40, byte(MsgHello), 0x86}, // a frame cut short
		{0xff, 0xff, 0xff, 0xff},            // a length over the cap
	} {
		nc, err := net.Dial("tcp", m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(send)
		nc.Close()
	}
	silent, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	nameless := newTestWorker("", 1, 0)
	var rej *RejectError
	if err := nameless.start(t, m.Addr(), m.cfg.Key); !errors.As(err, &rej) {
		t.Errorf("a worker without a name: %v, want a rejection", err)
	}
	startWorkers(t, m, newTestWorker("w", 2, 0))
	evalAndCheck(t, m, 2, 10)
	if m.Workers() != 1 {
		t.Errorf("%d workers, want 1", m.Workers())
	}
}

// TestMasterCloseMidBatch: Close while a batch is being evaluated fails
// that Evaluate with ErrMasterClosed, tells the workers, and leaves no
// goroutine behind (startMaster checks).
func TestMasterCloseMidBatch(t *testing.T) {
	m := startMaster(t, "r3q")
	frozen := newTestWorker("frozen", 2, 0)
	frozen.freeze = true
	startWorkers(t, m, frozen)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Evaluate(t.Context(), 0, randomBatch(rand.New(rand.NewPCG(1, 1)), 10, 3))
		errc <- err
	}()
	eventually(t, "the batch to start", func() bool { return frozen.got.Load() > 0 })
	m.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrMasterClosed) {
			t.Errorf("Evaluate = %v, want ErrMasterClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Evaluate still running after Close")
	}
	select {
	case <-frozen.shutdownCh:
	case <-time.After(time.Minute):
		t.Error("worker got no Shutdown")
	}
}
