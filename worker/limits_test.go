package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// plenty is a system with more memory available than any test asks.
func plenty() (float64, string, bool) { return math.Inf(1), "test", true }

// defaultConn is a connection at the worker's own frame cap.
var defaultConn = grid.ConnConfig{MaxFrame: grid.DefaultMaxFrame, MaxQueued: 64 << 20}

func TestAdmitRefusesWhatTheWorkerCannotGive(t *testing.T) {
	const gib = 1 << 30
	small := Limits{MemShare: 0.5, Memory: 2 * gib} // a 1 GiB budget
	tests := []struct {
		name   string
		spec   grid.ProblemSpec
		slots  int
		frame  int // the master's frame cap; 0: the worker's own
		limits Limits
		want   string // in the refusal; "" admits
	}{
		{"sane", grid.ProblemSpec{Name: "sphere", Dim: 30, LoadN: 200}, 8, 0, small, ""},
		{"largest dimension", grid.ProblemSpec{Name: "ellipsoid", Dim: MaxDim}, 8, 0, small, ""},
		{"2^30 dimensions", grid.ProblemSpec{Name: "ellipsoid", Dim: 1 << 30}, 1, 0, small, "dimension 1073741824 is more than 1048576"},
		{"max int dimensions", grid.ProblemSpec{Name: "sphere", Dim: math.MaxInt}, 1, 0, small, "is more than 1048576"},
		{"no dimension", grid.ProblemSpec{Name: "sphere"}, 1, 0, small, "dimension 0: must be ≥ 1"},
		{"negative dimension", grid.ProblemSpec{Name: "sphere", Dim: -5}, 1, 0, small, "dimension -5"},
		{"negative load", grid.ProblemSpec{Name: "sphere", Dim: 2, LoadN: -1}, 1, 0, small, "LU load -1"},
		{"load over the cap", grid.ProblemSpec{Name: "sphere", Dim: 2, LoadN: problems.MaxLoadN + 1}, 1, 0, small, "LU load of 4097×4097 is more than"},
		{"load on many slots", grid.ProblemSpec{Name: "sphere", Dim: 2, LoadN: problems.MaxLoadN}, 64, 0, small, "needs 8.13 GiB on 64 slots (load 8.12 GiB, vectors 20 KiB), over its 1 GiB (0.5 × 2 GiB, set); raise esworker -mem-share"},
		{"load on few slots", grid.ProblemSpec{Name: "sphere", Dim: 2, LoadN: problems.MaxLoadN}, 3, 0, small, ""},
		{"vectors on many slots", grid.ProblemSpec{Name: "sphere", Dim: MaxDim}, 64, 0, small, "on 64 slots (vectors"},
		{"a larger share takes them", grid.ProblemSpec{Name: "sphere", Dim: MaxDim}, 64, 0, Limits{MemShare: 0.9, Memory: 4 * gib}, ""},
		{"frames at the largest cap", grid.ProblemSpec{Name: "sphere", Dim: 2}, 1, grid.MaxFrameLimit, small, "frames 4.25 GiB"},
		{"frames a little larger", grid.ProblemSpec{Name: "sphere", Dim: 2}, 1, 16 << 20, small, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.limits.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			cc := defaultConn
			if tt.frame > 0 {
				cc = grid.ConnConfig{MaxFrame: tt.frame, MaxQueued: 4 * tt.frame}
			}
			ad, err := l.admit(tt.spec, tt.slots, cc, grid.DefaultMaxFrame, plenty)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
				if ad.dim != tt.spec.Dim || !(ad.heldMax >= float64(tt.slots)*taskBytes(tt.spec.Dim)) {
					t.Errorf("admitted %+v: want dim %d and room for a held task per slot", ad, tt.spec.Dim)
				}
			case err == nil:
				t.Fatalf("admitted; want a refusal saying %q", tt.want)
			case !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("refusal %q; want ErrLimit saying %q", err, tt.want)
			case len("worker: cannot build problem \"ellipsoid\" (dim 1048576): "+err.Error()) > 300:
				// The master logs a refusal's first 300 bytes.
				t.Errorf("refusal of %d bytes, too long for the master's log: %q", len(err.Error()), err)
			}
		})
	}
}

// A problem that fits the share but not what the system has available
// now is refused, saying so.
func TestAdmitRefusesWhatIsNotAvailableNow(t *testing.T) {
	l, _ := Limits{Memory: 64 << 30}.withDefaults()
	spec := grid.ProblemSpec{Name: "sphere", Dim: 2, LoadN: problems.MaxLoadN}
	scarce := func() (float64, string, bool) { return 100 << 20, "MemAvailable", true }
	_, err := l.admit(spec, 4, defaultConn, grid.DefaultMaxFrame, scarce)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "the system has 100 MiB available now (MemAvailable)") {
		t.Errorf("refusal %v", err)
	}
	unknown := func() (float64, string, bool) { return 0, "", false }
	if _, err := l.admit(spec, 4, defaultConn, grid.DefaultMaxFrame, unknown); err != nil {
		t.Errorf("refused where availability is unknown: %v", err)
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	l, err := Limits{}.withDefaults()
	if err != nil || l.MemShare != DefaultMemShare {
		t.Errorf("defaults %+v, %v", l, err)
	}
	if b := l.budget(); b.Physical <= 0 || b.Bytes != b.Physical*DefaultMemShare {
		t.Errorf("budget %+v", b)
	}
	for _, bad := range []Limits{{MemShare: -0.1}, {MemShare: 0.95}, {MemShare: math.NaN()}, {Memory: -1}, {Memory: math.Inf(1)}, {Memory: math.NaN()}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := New(Config{Master: "x:1", Key: testKey(t), Limits: Limits{MemShare: 2}}); err == nil {
		t.Error("New accepted a memory share of 2")
	}
}

func TestCheckTask(t *testing.T) {
	ad := admission{dim: 3, heldMax: 3 * taskBytes(3)}
	tests := []struct {
		x    []float64
		held float64
		want string
	}{
		{[]float64{1, 2, 3}, 0, ""},
		{[]float64{1, 2, 3}, 2 * taskBytes(3), ""},
		{[]float64{1, 2, 3}, 3 * taskBytes(3), "the remote queue already holds"},
		{[]float64{1, 2}, 0, "task vector of length 2, the problem's dimension is 3"},
		{nil, 0, "task vector of length 0"},
		{[]float64{1, math.NaN(), 3}, 0, "task coordinate 1 is NaN"},
		{[]float64{1, 2, math.Inf(-1)}, 0, "task coordinate 2 is -Inf"},
	}
	for _, tt := range tests {
		err := ad.checkTask(&grid.Task{X: tt.x}, tt.held)
		if (tt.want == "") != (err == nil) || err != nil && (!errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkTask(%v, held %v) = %v; want %q", tt.x, tt.held, err, tt.want)
		}
	}
}

// The remote queue counts the bytes its tasks take, whichever way they
// leave it.
func TestRemoteQueueBytes(t *testing.T) {
	q := newRemoteQueue()
	for id := range int32(4) {
		q.Push(heldTask{gen: 1, task: grid.Task{ID: id, X: make([]float64, 10)}})
	}
	q.Push(heldTask{gen: 1, task: grid.Task{ID: 0, X: make([]float64, 10)}}) // held already
	if got := q.Bytes(); got != 4*taskBytes(10) {
		t.Fatalf("bytes %v, want %v", got, 4*taskBytes(10))
	}
	q.Pop()
	q.Take(taskKey{1, 1})
	q.Remove(taskKey{1, 2})
	if got := q.Bytes(); got != taskBytes(10) {
		t.Errorf("bytes %v after three left, want %v", got, taskBytes(10))
	}
	q.RemoveIf(func(heldTask) bool { return true })
	if q.Bytes() != 0 || q.Len() != 0 {
		t.Errorf("bytes %v, len %d when empty", q.Bytes(), q.Len())
	}
}

func testKey(t testing.TB) *grid.Key {
	t.Helper()
	key, err := grid.NewKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// A master holding the key asks for the ellipsoid in 2^30 dimensions (a
// vector of 8 GiB; building it was a fatal out-of-memory error that
// killed the worker): the real agent, over real TCP, refuses with a
// reason that the master's run fails with, stays up, and serves the sane
// master that comes next at the same address.
func TestAgentRefusesAHugeProblemAndServesTheNextMaster(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	hostile, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listener: ln, Key: key, Problem: grid.ProblemSpec{Name: "ellipsoid", Dim: 1 << 30},
		FirstDeadline: 500 * time.Millisecond, Logger: logger(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wlog := new(logBuffer)
	a, wait := startAgent(t, ctx, Config{
		Master: addr, Key: key, Name: "lab-1", Slots: 2, Logger: logger(wlog),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	// Two workers are never there: the wait ends when the run fails for
	// want of a worker that can evaluate.
	err = hostile.WaitWorkers(ctx, 2)
	const reason = "dimension 1073741824 is more than 1048576, the largest vector a task can carry"
	if !errors.Is(err, grid.ErrNoWorkerCan) || !strings.Contains(err.Error(), "lab-1: worker: cannot build problem \"ellipsoid\" (dim 1073741824): over this worker's limits: "+reason) {
		t.Fatalf("the hostile master's wait: %v; want the worker's refusal", err)
	}
	if !strings.Contains(wlog.String(), reason) {
		t.Errorf("the worker's log does not say why it refused:\n%s", wlog)
	}
	hostile.Close()

	// The next master, sane, at the same address.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again at %s: %v", addr, err)
	}
	sane, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listener: ln, Key: key, Problem: grid.ProblemSpec{Name: "ellipsoid", Dim: 3}, Logger: logger(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sane.Close()
	if err := sane.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	xs := [][]float64{{1, 2, 3}, {0, 0, 1}, {-1, 0.5, 0}}
	fs, err := sane.Evaluate(ctx, 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := problems.New("ellipsoid", 3)
	for i, x := range xs {
		if want, _ := p.Eval(ctx, x); fs[i] != want {
			t.Errorf("f(%v) = %v, want %v", x, fs[i], want)
		}
	}
	if act := a.Activity(); act.Finished < int64(len(xs)) {
		t.Errorf("the agent finished %d evaluations, want %d", act.Finished, len(xs))
	}
	sane.Close()
	if err := wait(); !errors.Is(err, ErrShutdown) {
		t.Errorf("the agent's Run returned %v, want ErrShutdown (the sane run's end)", err)
	}
}

// A master holding the key sends tasks a worker must not hold: vectors of
// the wrong length, with NaN or ±Inf, and more than its memory share
// holds. Each is refused as a failed evaluation with the reason; the
// sane one is evaluated, and the worker stays connected.
func TestAgentRefusesHostileTasks(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	g := newGateProblem()
	spec := grid.ProblemSpec{Name: "gate", Dim: 1}
	fm := startFakeMaster(t, key, spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, fm.addr(), g, 1)
	f := footprintOf(spec, 1, defaultConn, grid.DefaultMaxFrame)
	// Room for 5 held tasks: every task of a frame is held before the
	// slot takes the first.
	cfg.Limits = Limits{MemShare: 0.5, Memory: 2 * (f.total() + 4*taskBytes(1))}
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	items := []grid.Task{
		{ID: 0, X: []float64{0}, Token: 100},           // runs (its gate stays shut)
		{ID: 1, X: []float64{1, 2}, Token: 101},        // wrong length
		{ID: 2, X: []float64{math.NaN()}, Token: 102},  // NaN
		{ID: 3, X: []float64{math.Inf(1)}, Token: 103}, // +Inf
		{ID: 4, X: nil, Token: 104},                    // empty
		{ID: 5, X: []float64{5}, Token: 105},           // held
		{ID: 6, X: []float64{6}, Token: 106},           // held
		{ID: 7, X: []float64{7}, Token: 107},           // held
		{ID: 8, X: []float64{8}, Token: 108},           // held
		{ID: 9, X: []float64{9}, Token: 109},           // over the share
	}
	mc.c.Send(&grid.Tasks{Gen: 0, Items: items})
	want := map[int32]string{
		1: "task vector of length 2, the problem's dimension is 1",
		2: "task coordinate 0 is NaN",
		3: "task coordinate 0 is +Inf",
		4: "task vector of length 0",
		9: "the remote queue already holds",
	}
	got := map[int32]grid.Result{}
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case m := <-mc.msgs:
			if rs, ok := m.(*grid.Results); ok {
				for _, r := range rs.Items {
					got[r.ID] = r
				}
			}
		case <-timeout:
			t.Fatalf("refusals %v; want one for each of %v", got, want)
		}
	}
	for id, reason := range want {
		r := got[id]
		if !strings.Contains(r.Err, reason) || r.Token != uint64(100+id) || r.Cancelled {
			t.Errorf("task %d: result %+v; want a failure saying %q, with its token", id, r, reason)
		}
	}
	for id := range got {
		if _, refused := want[id]; !refused {
			t.Errorf("task %d answered %+v before its gate opened", id, got[id])
		}
	}
	// The held ones run, in order, once the slot is free.
	for id := int32(0); id <= 8; id++ {
		if _, refused := want[id]; refused {
			continue
		}
		g.open(id)
		r := waitResult(t, mc, id)
		if r.Err != "" || r.F != 10*float64(id) {
			t.Errorf("task %d: %+v", id, r)
		}
	}
	cancel()
	wait()
}

// waitResult waits for the result of task id.
func waitResult(t *testing.T, mc *masterConn, id int32) grid.Result {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-mc.msgs:
			if rs, ok := m.(*grid.Results); ok {
				for _, r := range rs.Items {
					if r.ID == id {
						return r
					}
				}
			}
		case <-timeout:
			t.Fatalf("no result for task %d", id)
		}
	}
}

// A master holding the key promotes the worker to a child master of a
// batch of 2^26 tasks (arrays of gigabytes): the worker refuses, says
// why, and works on as a worker.
func TestAgentRefusesAHugePromotion(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	g := newGateProblem()
	spec := grid.ProblemSpec{Name: "gate", Dim: 1}
	fm := startFakeMaster(t, key, spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, fm.addr(), g, 1)
	wlog := new(logBuffer)
	cfg.Logger = logger(wlog)
	cfg.Limits = Limits{Memory: 256 << 20}
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	mc.c.Send(&grid.Promote{Token: 1, Gen: 0, N: 1<<26 - 1, Policy: "r3q"})
	mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 3, X: []float64{3}, Token: 7}}})
	g.open(3)
	if r := waitResult(t, mc, 3); r.Err != "" || r.F != 30 || r.Token != 7 {
		t.Errorf("the task after the promotion: %+v", r)
	}
	if !strings.Contains(wlog.String(), "refusing to be promoted to a child master") ||
		!strings.Contains(wlog.String(), "a child master of a batch of 67108863 tasks needs 4 GiB") {
		t.Errorf("the worker's log does not say why it refused:\n%s", wlog)
	}
	cancel()
	wait()
}

// A master holding the key promotes the worker to child masters that
// could not start, or would sleep for ever on each message (a message
// cost of 292 years): the worker refuses each, says why, and works on as
// a worker.
func TestAgentRefusesAnUnboundedPromotion(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	g := newGateProblem()
	spec := grid.ProblemSpec{Name: "gate", Dim: 1}
	fm := startFakeMaster(t, key, spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, fm.addr(), g, 1)
	wlog := new(logBuffer)
	cfg.Logger = logger(wlog)
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	ok := grid.Promote{Token: 1, N: 1, Policy: "wq"}
	bad := []struct {
		edit func(*grid.Promote)
		why  string
	}{
		{func(p *grid.Promote) { p.MessageCost = math.MaxInt64 }, "message cost 2562047h47m16.854775807s outside [0, 1s]"},
		{func(p *grid.Promote) { p.MessageCost = -1 }, "message cost -1ns outside"},
		{func(p *grid.Promote) { p.GainMargin = math.NaN() }, "gain margin NaN"},
		{func(p *grid.Promote) { p.GainMargin = math.Inf(1) }, "gain margin +Inf"},
		{func(p *grid.Promote) { p.GainMargin = -0.5 }, "gain margin -0.5"},
		{func(p *grid.Promote) { p.Rule = 200 }, "unknown split rule 200"},
		{func(p *grid.Promote) { p.Window = -1 }, "overload window -1 outside"},
		{func(p *grid.Promote) { p.Window = grid.MaxOverloadWindow + 1 }, fmt.Sprintf("overload window %d outside", grid.MaxOverloadWindow+1)},
		{func(p *grid.Promote) { p.Depth = 1 << 30 }, "depth 1073741824 outside"},
		{func(p *grid.Promote) { p.Policy = "nope" }, `unknown policy \"nope\"`},
		{func(p *grid.Promote) { p.N = -1 }, "batch of -1 tasks outside"},
		{func(p *grid.Promote) { p.Tasks = []grid.Task{{ID: 0, X: []float64{1}}, {ID: 1, X: []float64{2}}} }, "2 tasks in a batch of 1"},
		{func(p *grid.Promote) { p.Tasks = []grid.Task{{ID: 0, X: []float64{1, 2}}} }, "task vector of length 2, the problem's dimension is 1"},
	}
	for _, b := range bad {
		pr := ok
		b.edit(&pr)
		if err := mc.c.Send(&pr); err != nil {
			t.Fatal(err)
		}
	}
	mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 3, X: []float64{3}, Token: 7}}})
	g.open(3)
	if r := waitResult(t, mc, 3); r.Err != "" || r.F != 30 || r.Token != 7 {
		t.Errorf("the task after the promotions: %+v", r)
	}
	// The refusals are logged at the rate limit (burst 10): the first
	// ones say why.
	logs := wlog.String()
	if n := strings.Count(logs, "refusing to be promoted to a child master"); n < 10 {
		t.Errorf("%d refusals logged, want at least the limiter's burst:\n%s", n, logs)
	}
	for i, b := range bad {
		if i < 10 && !strings.Contains(logs, b.why) {
			t.Errorf("the worker's log does not say %q:\n%s", b.why, logs)
		}
		pr := ok
		b.edit(&pr)
		if err := (admission{dim: 1, heldMax: 1 << 30}).checkPromote(&pr); err == nil || !errors.Is(err, ErrLimit) ||
			!strings.Contains(strings.ReplaceAll(err.Error(), `"`, `\"`), b.why) {
			t.Errorf("checkPromote: %v, want an ErrLimit saying %q", err, b.why)
		}
	}
	if strings.Contains(logs, "promoted to a child master\"") || strings.Contains(logs, "child master started") {
		t.Errorf("a child master started:\n%s", logs)
	}
	cancel()
	wait()
}

// MaxDim is the wire's own bound on a task's vector, and a plugin's: a
// problem in more dimensions could never be evaluated.
func TestMaxDimIsTheWires(t *testing.T) {
	if MaxDim != plugin.MaxDim {
		t.Errorf("MaxDim %d, a plugin's %d", MaxDim, plugin.MaxDim)
	}
	for _, n := range []int{MaxDim, MaxDim + 1} {
		b, err := grid.AppendFrame(nil, &grid.Tasks{Items: []grid.Task{{X: make([]float64, n)}}}, grid.MaxFrameLimit)
		if err != nil {
			t.Fatal(err)
		}
		_, err = grid.NewFrameReader(bytes.NewReader(b), grid.MaxFrameLimit).Next()
		if n == MaxDim && err != nil {
			t.Errorf("a task of %d coordinates does not decode: %v", n, err)
		}
		if n > MaxDim && !errors.Is(err, grid.ErrMalformed) {
			t.Errorf("a task of %d coordinates decodes (%v)", n, err)
		}
	}
}

// A master holding the key that floods the worker with frames a worker
// does not take (a Drain, here) gets them ignored with a rate-limited
// line: the burst and one a second, not one each.
func TestUnexpectedFramesLogLimited(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	g := newGateProblem()
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, fm.addr(), g, 1)
	wlog := new(logBuffer)
	cfg.Logger = logger(wlog)
	start := time.Now()
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	const n = 2000
	for range n {
		if err := mc.c.Send(&grid.Drain{}); err != nil {
			t.Fatal(err)
		}
	}
	mc.c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 3, X: []float64{3}, Token: 7}}})
	g.open(3)
	if r := waitResult(t, mc, 3); r.Err != "" || r.F != 30 {
		t.Errorf("the task after the flood: %+v", r)
	}
	// The limiter's burst, and a line a second since the agent began.
	most := 10 + int(time.Since(start).Seconds()) + 1
	if got := strings.Count(wlog.String(), "ignoring an unexpected message from the master"); got < 1 || got > most {
		t.Errorf("%d lines for %d unexpected frames, want 1 to %d", got, n, most)
	}
	cancel()
	wait()
}
