package grid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// alwaysLies is sphere off by one ulp, on every task.
var alwaysLies = liarFitness(func([]float64) bool { return true })

// warnLog is a master's logger that keeps its Warn lines (and logs them
// to the test too).
func warnLog(t *testing.T) (*countingHandler, func(*MasterConfig)) {
	h := &countingHandler{}
	return h, func(cfg *MasterConfig) {
		cfg.Logger = slog.New(teeHandler{h, testLogger(t).Handler()})
	}
}

// teeHandler hands each record to both handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.a.Enabled(ctx, l) || h.b.Enabled(ctx, l)
}
func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.a.Enabled(ctx, r.Level) {
		h.a.Handle(ctx, r.Clone())
	}
	if h.b.Enabled(ctx, r.Level) {
		return h.b.Handle(ctx, r)
	}
	return nil
}
func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(as), h.b.WithAttrs(as)}
}
func (h teeHandler) WithGroup(n string) slog.Handler {
	return teeHandler{h.a.WithGroup(n), h.b.WithGroup(n)}
}

// matching counts the kept lines that contain s.
func (h *countingHandler) matching(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// Issue 26: a key holder connected twice, beside one honest worker, had
// two votes and got the honest worker excluded. Hosts vote now: its two
// connections are one host, the tie between the two hosts cannot be
// broken, and after VerifyWait the generation fails, saying so; nobody
// is excluded and no lie is returned.
func TestMasterVerifyLiarWithTwoConnectionsIsOneVote(t *testing.T) {
	m := startMaster(t, "wq", func(cfg *MasterConfig) { cfg.Verify = 1; cfg.VerifyWait = 300 * time.Millisecond })
	honest := newTestWorker("honest", 1, 0)
	honest.from = "127.0.0.2"
	var ws = []*testWorker{honest}
	for _, name := range []string{"liar-a", "liar-b"} {
		l := newTestWorker(name, 1, 0)
		l.from, l.fitness = "127.0.0.3", alwaysLies
		ws = append(ws, l)
	}
	startWorkers(t, m, ws...)
	xs := randomBatch(rand.New(rand.NewPCG(7, 8)), 6, 5)
	_, err := m.Evaluate(t.Context(), 0, xs)
	if !errors.Is(err, ErrUndecided) {
		t.Fatalf("got %v, want ErrUndecided", err)
	}
	for _, want := range []string{"127.0.0.2", "127.0.0.3", "another machine", "without -verify"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if st := m.Stats(); st.Excluded != 0 || st.Verified != 0 {
		t.Errorf("excluded %d, verified %d: one host against one decides nothing", st.Excluded, st.Verified)
	}
}

// A tie between two hosts waits for a third: once the master says it
// waits, a worker on a third host joins, breaks the tie, and the liar's
// host is excluded, both of its connections.
func TestMasterVerifyTieWaitsForThirdHost(t *testing.T) {
	logs, withLog := warnLog(t)
	m := startMaster(t, "wq", withLog, func(cfg *MasterConfig) { cfg.Verify = 1; cfg.VerifyWait = 10 * time.Minute })
	honest := newTestWorker("honest", 1, 0)
	honest.from = "127.0.0.2"
	liars := []*testWorker{newTestWorker("liar-a", 1, 0), newTestWorker("liar-b", 1, 0)}
	for _, l := range liars {
		l.from, l.fitness = "127.0.0.3", alwaysLies
	}
	startWorkers(t, m, honest, liars[0], liars[1])
	xs := randomBatch(rand.New(rand.NewPCG(9, 10)), 6, 5)
	type reply struct {
		f   []float64
		err error
	}
	done := make(chan reply, 1)
	go func() {
		f, err := m.Evaluate(t.Context(), 0, xs)
		done <- reply{f, err}
	}()
	eventually(t, "the master to say the tie waits for another host", func() bool { return logs.matching("cannot decide") > 0 })
	third := newTestWorker("third", 1, 0)
	third.from = "127.0.0.4"
	if err := third.start(t, m.Addr(), m.cfg.Key); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i := range xs {
		if r.f[i] != sphere(xs[i]) {
			t.Errorf("task %d: %v, want %v", i, r.f[i], sphere(xs[i]))
		}
	}
	if st := m.Stats(); st.Excluded != 1 {
		t.Errorf("%d hosts excluded, want the liar's", st.Excluded)
	}
	for _, l := range liars {
		<-l.conn.Done()
	}
	if n := logs.matching("cannot decide"); n != 1 {
		t.Errorf("the wait was said %d times, want once", n)
	}
}

// nanWorker answers NaN to every task.
func nanWorker(name, from string) *testWorker {
	w := newTestWorker(name, 2, 0)
	w.from, w.fitness = from, func([]float64) float64 { return math.NaN() }
	return w
}

// Issue 26: a worker that answers NaN to everything was never set aside:
// every task cost a retry and a WARN line. It is set aside after
// MaxFailures failures in a row, said in one line, and the run goes on
// on the others.
func TestMasterSetsAsideFailingWorker(t *testing.T) {
	logs, withLog := warnLog(t)
	m := startMaster(t, "wq", withLog)
	bad := nanWorker("nan", "")
	startWorkers(t, m, bad, newTestWorker("good", 1, 100*time.Microsecond))
	evalAndCheck(t, m, 5, 40)
	st := m.Stats()
	if st.SetAside != 1 {
		t.Errorf("set aside %d workers, want the failing one", st.SetAside)
	}
	// At most what it was running when its third failure came in.
	if limit := int64(m.cfg.MaxFailures + bad.slots); st.Failed > limit {
		t.Errorf("%d evaluations failed, want at most %d", st.Failed, limit)
	}
	if n := logs.matching("worker set aside"); n != 1 {
		t.Errorf("set aside said %d times, want once", n)
	}
	if got := bad.got.Load(); got > 2*int64(m.cfg.MaxFailures+bad.slots) {
		t.Errorf("the failing worker was sent %d tasks", got)
	}
}

// When every worker fails the same task, the problem fails there: the
// last worker open to tasks is never set aside (one set aside before is
// given tasks again in its place), and the generation fails by
// MaxRetries with every worker's error, rather than wait for ever.
func TestMasterEveryWorkerFailingFailsTheGeneration(t *testing.T) {
	m := startMaster(t, "wq")
	startWorkers(t, m, nanWorker("nan1", "127.0.0.2"), nanWorker("nan2", "127.0.0.3"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := m.Evaluate(ctx, 3, randomBatch(rand.New(rand.NewPCG(1, 1)), 10, 5))
	if err == nil || !strings.Contains(err.Error(), "non-finite") || !strings.Contains(err.Error(), "generation 3") {
		t.Fatalf("got %v, want the generation failed with the workers' errors", err)
	}
	if st := m.Stats(); st.SetAside-st.TakenBack > 1 {
		t.Errorf("%d workers set aside, %d taken back: one must stay open", st.SetAside, st.TakenBack)
	}
}

// A worker set aside is given tasks again once no other has been open
// for a first deadline (here the other one left): the batch does not
// wait for ever on a worker that failed only at times.
func TestMasterTakesBackWorkerSetAside(t *testing.T) {
	m := startMaster(t, "wq", func(cfg *MasterConfig) { cfg.FirstDeadline = 2 * time.Second })
	var calls atomic.Int64
	flaky := newTestWorker("flaky", 1, 0)
	flaky.fitness = func(x []float64) float64 {
		if calls.Add(1) <= 3 {
			return math.NaN() // its first three answers fail
		}
		return sphere(x)
	}
	other := newTestWorker("other", 1, 0)
	other.hold = make(chan struct{}) // takes tasks and holds them until it leaves
	startWorkers(t, m, flaky, other)
	xs := randomBatch(rand.New(rand.NewPCG(11, 12)), 8, 5)
	type reply struct {
		f   []float64
		err error
	}
	done := make(chan reply, 1)
	go func() {
		f, err := m.Evaluate(t.Context(), 0, xs)
		done <- reply{f, err}
	}()
	eventually(t, "the flaky worker set aside", func() bool { return m.Stats().SetAside == 1 })
	other.stop()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i := range xs {
		if r.f[i] != sphere(xs[i]) {
			t.Errorf("task %d: %v, want %v", i, r.f[i], sphere(xs[i]))
		}
	}
	if st := m.Stats(); st.TakenBack != 1 {
		t.Errorf("taken back %d times, want once", st.TakenBack)
	}
}

// A host is the address the master accepted the connection from; behind
// a relay, the relay's, however many workers and relays the stream
// crossed (a relay's own connection may itself be a relayed stream).
func TestHostOf(t *testing.T) {
	relayed := relayAddr{relay: "r2", stream: 7, host: hostOf(relayAddr{relay: "r1", stream: 3, host: "10.0.0.9"})}
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.168.1.4"), Port: 40000}, "192.168.1.4"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 40000}, "2001:db8::1"},
		{relayAddr{relay: "r1", stream: 3, host: "10.0.0.9"}, "10.0.0.9"},
		{relayed, "10.0.0.9"},
	} {
		if got := hostOf(c.addr); got != c.want {
			t.Errorf("hostOf(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// A master given an exclusion (a resumed run's) says it once, refuses
// every connection from that host with its reason, under any name, and
// takes workers from other hosts; Excluded lists it, and it is no new
// exclusion.
func TestMasterStartsWithExclusions(t *testing.T) {
	const why = "its fitness value 1.5 for task 3 of generation 7 differs from the value 1.25 that workers on other hosts agree on"
	logs, withLog := warnLog(t)
	prior := []Exclusion{{Host: "127.0.0.2", Why: why}}
	m := startMaster(t, "wq", withLog, func(cfg *MasterConfig) { cfg.Verify = 1; cfg.Excluded = prior })
	if n := logs.matching("host 127.0.0.2 stays excluded from this run: " + why); n != 1 {
		t.Errorf("the exclusion was said %d times at start, want once", n)
	}
	for _, name := range []string{"liar", "a new name"} {
		w := newTestWorker(name, 1, 0)
		w.from = "127.0.0.2"
		err := w.start(t, m.Addr(), m.cfg.Key)
		var rej *RejectError
		if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "excluded from this run") ||
			!strings.Contains(rej.Reason, "127.0.0.2") || !strings.Contains(rej.Reason, "task 3 of generation 7") {
			t.Errorf("a worker named %q from the excluded host: %v, want refused with the exclusion's reason", name, err)
		}
	}
	var ws []*testWorker
	for i, name := range []string{"h1", "h2"} {
		h := newTestWorker(name, 1, 0)
		h.from = fmt.Sprintf("127.0.0.%d", 3+i)
		ws = append(ws, h)
	}
	startWorkers(t, m, ws...)
	evalAndCheck(t, m, 2, 10)
	if got := m.Excluded(); !slices.Equal(got, prior) {
		t.Errorf("Excluded() = %v, want %v", got, prior)
	}
	if st := m.Stats(); st.Excluded != 0 || st.Verified == 0 || st.Workers != 2 {
		t.Errorf("excluded %d, verified %d, workers %d: want no new exclusion, the two hosts verifying each other", st.Excluded, st.Verified, st.Workers)
	}
	if n := logs.matching("stays excluded"); n != 1 {
		t.Errorf("the exclusion was said %d times, want once", n)
	}
}

// An exclusion whose host is not an IP address as the master writes it,
// or whose reason is missing, too long or not one line, is refused, and
// so is a master given it.
func TestExclusionValidate(t *testing.T) {
	const why = "it lied"
	for _, x := range []Exclusion{
		{"127.0.0.1", why}, {"10.0.0.9", why}, {"2001:db8::1", why}, {"::1", why},
		{"10.0.0.9", strings.Repeat("w", MaxExclusionWhy)},
	} {
		if err := x.Validate(); err != nil {
			t.Errorf("%.40q: %v", x, err)
		}
	}
	for _, tt := range []struct {
		x    Exclusion
		want string
	}{
		{Exclusion{"", why}, "not an IP address"},
		{Exclusion{"localhost", why}, "not an IP address"},
		{Exclusion{"10.0.0.9:7947", why}, "not an IP address"},
		{Exclusion{"010.0.0.9", why}, "not an IP address"},
		{Exclusion{"::ffff:10.0.0.9", why}, "not an IP address"}, // the master writes 10.0.0.9
		{Exclusion{"2001:DB8::1", why}, "not an IP address"},     // and lower case
		{Exclusion{"fe80::1%eth0", why}, "not an IP address"},
		{Exclusion{strings.Repeat("1", 1<<20), why}, "not an IP address"},
		{Exclusion{"10.0.0.9", ""}, "no reason"},
		{Exclusion{"10.0.0.9", "one\ntwo"}, "more than one line"},
		{Exclusion{"10.0.0.9", strings.Repeat("w", MaxExclusionWhy+1)}, "at most 1024"},
	} {
		err := tt.x.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) || len(err.Error()) > 200 {
			t.Errorf("%.40q: %v, want a short error saying %q", tt.x, err, tt.want)
		}
		_, err = NewMaster(t.Context(), MasterConfig{Listen: "127.0.0.1:0", Key: testClusterKey(t, "test cluster"),
			Problem: ProblemSpec{Name: "sphere", Dim: 5}, Excluded: []Exclusion{tt.x}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewMaster with %.40q: %v, want an error saying %q", tt.x, err, tt.want)
		}
	}
}

// A liar cannot shorten the deadlines of fresh honest workers. It
// answers at once, claims 1 ns for every evaluation, and lies on every
// value; fresh honest workers (100 ms an evaluation) join to check it.
// A fresh worker's deadline falls back on the grid's time. Were that the
// mean of every result, the liar's 64 would drive it to the floor, the
// checks (four deadlines: 40 ms) would be stopped on the honest workers
// every time and given up, and the lies would stand unverified (they
// did). On a loaded machine a check's instances on both honest hosts
// went overdue before the first stop came back, and 9 values stood
// unverified at once (TestCheckWaitsForStopOnItsWay). It is the upper median of the hosts' times: an honest host's
// when honest hosts measured the grid before the liar came (they left
// since), so no check is stopped, as -max-retries 0 requires. When none
// did, the liar's time is the only one, and a check stopped once says
// how long its worker takes at least: its next deadline grows from that.
// Either way the checks end, outvote the liar, and its host is excluded.
func TestMasterVerifyLiarCannotShortenFreshDeadlines(t *testing.T) {
	for _, c := range []struct {
		name           string
		measuredBefore bool
		maxRetries     int
	}{
		{"honest hosts measured before, no retry", true, -1},
		{"only the liar measured", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) { testLiarCannotShortenFreshDeadlines(t, c.measuredBefore, c.maxRetries) })
	}
}

func testLiarCannotShortenFreshDeadlines(t *testing.T, measuredBefore bool, maxRetries int) {
	const floor, eval, n = 10 * time.Millisecond, 100 * time.Millisecond, 64
	m := startMaster(t, "wq", func(c *MasterConfig) {
		c.Verify, c.DeadlineFloor, c.MaxRetries = 1, floor, maxRetries
		c.FirstDeadline = 10 * time.Minute // the liar's checks wait for the fresh hosts
		// The liar's 1 ns gives the floor, 40 ms a check, which a
		// 100 ms evaluation always outlasts, however loaded the machine.
		// Any longer deadline is minutes: an honest host's is 1000 × its
		// 100 ms (a check's four times that, up to half the task timeout),
		// and one grown from a check stopped at 40 ms is 1000 × that. The
		// test asserts what -verify does, not how fast the machine is.
		c.DeadlineFactor = 1000
	})
	honest := func(name, from string) *testWorker {
		w := newTestWorker(name, n, eval) // a slot per task: no check waits behind another
		w.from, w.stopAck = from, true
		return w
	}
	if measuredBefore {
		before := []*testWorker{honest("a", "127.0.0.3"), honest("b", "127.0.0.4")}
		startWorkers(t, m, before...)
		evalAndCheck(t, m, 1, n) // the grid measured: 100 ms an evaluation
		for _, w := range before {
			w.stop()
		}
		eventually(t, "the first hosts to leave", func() bool { return m.Workers() == 0 })
	}

	liar := newTestWorker("liar", 4, 0)
	liar.from, liar.claim, liar.fitness = "127.0.0.2", time.Nanosecond, alwaysLies
	startWorkers(t, m, liar)
	xs := randomBatch(rand.New(rand.NewPCG(11, 12)), n, 5)
	st0 := m.Stats()
	type reply struct {
		f   []float64
		err error
	}
	done := make(chan reply, 1)
	go func() {
		f, err := m.Evaluate(t.Context(), 1, xs)
		done <- reply{f, err}
	}()
	eventually(t, "the liar to answer every task", func() bool { return m.Stats().Results-st0.Results >= n })
	startWorkers(t, m, honest("c", "127.0.0.5"), honest("d", "127.0.0.6"))
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	lies := 0
	for i := range xs {
		if r.f[i] != sphere(xs[i]) {
			lies++
		}
	}
	st := m.Stats()
	if lies > 0 || st.Excluded != 1 || st.Unverified != st0.Unverified {
		t.Errorf("%d of %d lies returned, %d hosts excluded, %d values unverified; want none, the liar's, none",
			lies, n, st.Excluded, st.Unverified-st0.Unverified)
	}
	if x := m.Excluded(); len(x) != 1 || x[0].Host != liar.from {
		t.Errorf("Excluded() = %v, want the liar's host", x)
	}
}

// A check's instance that a draining worker gives back unrun is asked of
// another host at once. It is in no worker's books, which a Drain's
// Returned are looked up in: it stayed out as if running, and held the
// generation until four deadlines of the drained worker had passed (here
// 40 min) or its connection closed (here never).
func TestMasterCheckGivenBackByDrainIsAskedElsewhere(t *testing.T) {
	m := startMaster(t, "wq", func(cfg *MasterConfig) { cfg.Verify = 1; cfg.DeadlineFloor = 10 * time.Minute })
	a, b, c := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0), newTestWorker("c", 1, 0)
	a.from, b.from, c.from = "127.0.0.2", "127.0.0.3", "127.0.0.4"
	b.drainCheck = true
	startWorkers(t, m, a, b, c)
	// b gets no task of the policy, so it is the least loaded worker
	// that a check can go to: it gets the first.
	for _, s := range m.WorkerStats() {
		if s.Name == "b" {
			if err := m.SetSlots(s.ID, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	xs := randomBatch(rand.New(rand.NewPCG(11, 12)), 4, 5)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f, err := m.Evaluate(ctx, 0, xs)
	if err != nil {
		t.Fatalf("%v, with %d check instances given back by b's drain", err, b.drained.Load())
	}
	if b.drained.Load() == 0 {
		t.Fatal("b was given no check: nothing was tested")
	}
	for i := range xs {
		if f[i] != sphere(xs[i]) {
			t.Errorf("task %d: %v, want %v", i, f[i], sphere(xs[i]))
		}
	}
	if st := m.Stats(); st.Verified != int64(len(xs)) {
		t.Errorf("%d results verified, want all %d", st.Verified, len(xs))
	}
}
