package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// The fuzz targets play a master that holds the key: whatever it sends, a
// worker must refuse it or serve it, and never panic, hang, or take more
// memory than its limits. Run one for a while with, e.g.,
//
//	go test -run '^$' -fuzz FuzzWelcome -fuzztime 60s ./worker/

// fuzzMemory is the machine memory the fuzzed agents believe they have:
// a budget of 32 MiB, so that the memory refusals are reached.
const fuzzMemory = 64 << 20

// handshakeFrame is the cap on a handshake frame, the Welcome's
// (grid's handshakeMaxFrame).
const handshakeFrame = 16 << 10

// welcomeConn is the configuration of the worker's connection after a
// Welcome with the master's frame cap mf, as grid.ClientHandshake makes
// it from the worker's default configuration.
func welcomeConn(mf int) grid.ConnConfig {
	f := max(grid.DefaultMaxFrame, min(mf, grid.MaxFrameLimit))
	return grid.ConnConfig{MaxFrame: f, MaxQueued: max(64<<20, 4*f)}
}

// fuzzAgent is an agent whose problems are the built-in ones, on 2 slots,
// with a 32 MiB budget.
func fuzzAgent(t testing.TB) *Agent {
	a, err := New(Config{Master: "127.0.0.1:1", Key: testKey(t), Slots: 2, Limits: Limits{Memory: fuzzMemory}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkAdmit runs the agent's admission of spec on connection cc, as
// Agent.serve does with a Welcome, and checks the outcome: a refusal, or
// a problem that works and whose footprint is within the budget, built
// with no more allocation than the budget.
func checkAdmit(t *testing.T, a *Agent, spec grid.ProblemSpec, cc grid.ConnConfig) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, ad, err := a.admit(context.Background(), spec, cc, nil)
	runtime.ReadMemStats(&after)
	budget := a.cfg.Limits.budget().Bytes
	if grew := float64(after.TotalAlloc - before.TotalAlloc); grew > budget+1<<20 {
		t.Fatalf("admitting %+v allocated %.0f bytes, over the budget of %.0f", spec, grew, budget)
	}
	if err != nil {
		if p != nil {
			t.Fatalf("refused %+v (%v), yet a problem came out", spec, err)
		}
		if err.Error() == "" {
			t.Fatalf("refused %+v without a reason", spec)
		}
		return
	}
	defer closeProblem(p)
	f := footprintOf(spec, a.cfg.Slots, cc, grid.DefaultMaxFrame)
	switch {
	case p == nil:
		t.Fatalf("admitted %+v, but no problem", spec)
	case spec.Dim < 1 || spec.Dim > MaxDim || spec.LoadN > problems.MaxLoadN:
		t.Fatalf("admitted %+v, over a hard limit", spec)
	case !(f.total() <= budget):
		t.Fatalf("admitted %+v, which needs %.0f bytes, over the budget of %.0f", spec, f.total(), budget)
	case ad.dim != spec.Dim || !(ad.heldMax >= f.held):
		t.Fatalf("admitted %+v as %+v", spec, ad)
	}
	if lo, hi := p.Bounds(); !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		t.Fatalf("%s: box [%v, %v]", p.Name(), lo, hi)
	}
}

// FuzzWelcome feeds arbitrary bytes to the worker as the master's Welcome
// frame: decoded as the handshake decodes it, then admitted and built as
// the agent does.
func FuzzWelcome(f *testing.F) {
	for _, w := range []*grid.Welcome{
		{Version: grid.ProtocolVersion, Worker: 1, Problem: grid.ProblemSpec{Name: "sphere", Dim: 30}},
		{Version: grid.ProtocolVersion, Worker: 2, Problem: grid.ProblemSpec{Name: "ellipsoid", Dim: 1 << 30}},
		{Version: grid.ProtocolVersion, Worker: 3, Problem: grid.ProblemSpec{Name: "ellipsoid", Dim: MaxDim, LoadN: 100}},
		{Version: grid.ProtocolVersion, Worker: 4, Problem: grid.ProblemSpec{Name: "rosenbrock", Dim: 1, LoadN: -3}},
		{Version: grid.ProtocolVersion, Worker: 5, Problem: grid.ProblemSpec{Name: "mandelbrot", Dim: 1, LoadN: 1000}, MaxFrame: 1 << 30},
		{Version: grid.ProtocolVersion, Worker: 6, Problem: grid.ProblemSpec{Name: "ridge", Dim: math.MaxInt, LoadN: math.MinInt}, MaxFrame: -1},
		{Version: grid.ProtocolVersion, Worker: 7, Problem: grid.ProblemSpec{Name: "no such problem", Dim: 3}},
	} {
		b, err := grid.AppendFrame(nil, w, handshakeFrame)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	a := fuzzAgent(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := grid.NewFrameReader(bytes.NewReader(frame), handshakeFrame).Next()
		if err != nil {
			return // the handshake ends there, with a Reject
		}
		w, ok := m.(*grid.Welcome)
		if !ok {
			return // "expected welcome": a Reject
		}
		checkAdmit(t, a, w.Problem, welcomeConn(w.MaxFrame))
	})
}

// FuzzProblemSpec is FuzzWelcome on the spec's fields themselves, so that
// the fuzzer explores the numbers rather than their encoding.
func FuzzProblemSpec(f *testing.F) {
	f.Add("sphere", 30, 0, 0)
	f.Add("ellipsoid", 1<<30, 0, 0)
	f.Add("ellipsoid", MaxDim, 0, 0)
	f.Add("ackley", 100, problems.MaxLoadN, 0)
	f.Add("ridge", 2, 1200, 0)
	f.Add("rastrigin", 1000, 10, grid.MaxFrameLimit)
	f.Add("mandelbrot", 1, 0, 1<<22)
	f.Add("mandelbrot", 2, 0, 0)
	f.Add("rosenbrock", -1, -1, -1)
	a := fuzzAgent(f)
	f.Fuzz(func(t *testing.T, name string, dim, loadN, maxFrame int) {
		checkAdmit(t, a, grid.ProblemSpec{Name: name, Dim: dim, LoadN: loadN}, welcomeConn(maxFrame))
	})
}

// blockProblem's evaluations end only when cancelled: the slots stay
// busy, and tasks pile up in the remote queue.
type blockProblem struct{}

func (blockProblem) Name() string                   { return "block" }
func (blockProblem) Bounds() (lower, upper float64) { return -1, 1 }
func (blockProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// FuzzTasks feeds arbitrary bytes to a real agent as frames of its
// master, over a real TCP connection: those that decode as tasks or
// cancels are sent (the agent decodes them again on its side), each
// followed by a sentinel: a task of the session's newest generation that
// it neither holds nor runs, of the wrong dimension, whose refusal says
// the agent has handled the frame (a cancel of a task the agent never had
// gets no answer). The agent's slots never finish (blockProblem), so
// the remote queue fills; after every frame its bytes must be within the
// agent's limit, the running tasks within its slots, and the connection
// alive.
func FuzzTasks(f *testing.F) {
	seeds := []*grid.Tasks{
		{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{0, 0.5, -0.5, 1}, Token: 1}}},
		{Gen: 1, Items: []grid.Task{{ID: 0, X: []float64{1, 2}}, {ID: 1, X: []float64{math.NaN(), 0, 0, 0}}, {ID: 2, X: []float64{math.Inf(1), 0, 0, 0}}}},
		{Gen: math.MaxInt32, Items: []grid.Task{{ID: -1, X: nil}}},
		{Gen: 2, Items: make([]grid.Task, 2000)},
	}
	for i := range seeds[3].Items {
		seeds[3].Items[i] = grid.Task{ID: int32(i), X: []float64{0, 0, 0, float64(i) / 2000}}
	}
	for _, ts := range seeds {
		b, err := grid.AppendFrame(nil, ts, grid.DefaultMaxFrame)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, _ := grid.AppendFrame(nil, &grid.Cancel{Gen: 2, IDs: []int32{0, 1, 5, math.MaxInt32}}, grid.DefaultMaxFrame)
	f.Add(b)

	a, mc, acked := startFuzzSession(f)
	gen := int32(0)
	newest := int32(-1 << 31) // the session's newest generation
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := grid.NewFrameReader(bytes.NewReader(frame), grid.DefaultMaxFrame).Next()
		if err != nil {
			return // the worker's reader would close the connection with a Reject
		}
		// Generations are taken near the session's newest, so that one
		// input's huge generation does not make the session ignore every
		// later one (as late sends of a finished generation): an input
		// is older, the same or newer, and the session moves on.
		switch m := m.(type) {
		case *grid.Tasks:
			m.Gen = gen + m.Gen%3
		case *grid.Cancel:
			m.Gen = gen + m.Gen%3
		default:
			return // the session's other messages end it or move it
		}
		gen += 3
		a.mu.Lock()
		s := a.current
		a.mu.Unlock()
		if s == nil {
			t.Fatal("the agent left its session")
		}
		if err := mc.Send(m); errors.Is(err, grid.ErrFrameTooLarge) {
			return // re-encoded larger than a frame: the master could not send it
		} else if err != nil {
			t.Fatalf("send: %v", err)
		}
		// The session is quiet (the last sentinel came back): what it
		// holds and runs now, and m's tasks, are all the sentinel must
		// avoid.
		var sent []int32
		if ts, ok := m.(*grid.Tasks); ok {
			newest = max(newest, ts.Gen)
			for _, it := range ts.Items {
				if ts.Gen == newest {
					sent = append(sent, it.ID)
				}
			}
		}
		k := taskKey{newest, 0}
		s.mu.Lock()
		for {
			_, running := s.running[k]
			if !running && !s.held.Has(k) && !slices.Contains(sent, k.id) {
				break
			}
			k.id++
		}
		s.mu.Unlock()
		if err := mc.Send(&grid.Tasks{Gen: k.gen, Items: []grid.Task{{ID: k.id, X: []float64{1}}}}); err != nil {
			t.Fatalf("send the sentinel: %v", err)
		}
		if err := acked(k.gen, k.id); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		held, limit, running := s.held.Bytes(), s.admitted.heldMax, len(s.running)
		s.mu.Unlock()
		if held > limit || running > a.cfg.Slots {
			t.Fatalf("the agent holds %.0f bytes of tasks (limit %.0f) and runs %d (slots %d)", held, limit, running, a.cfg.Slots)
		}
	})
}

// startFuzzSession starts a master's side of a connection and a real
// agent (2 slots, blockProblem in 4 dimensions, a 32 KiB budget: about
// a hundred held tasks) in a
// session with it, over TCP. acked waits until the agent has refused
// the sentinel task id of generation gen (every other message is read
// and dropped), and fails if the connection closes or 30 s pass first.
func startFuzzSession(f *testing.F) (a *Agent, mc *grid.Conn, acked func(gen, id int32) error) {
	key := testKey(f)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	spec := grid.ProblemSpec{Name: "block", Dim: 4}
	a, err = New(Config{
		Master: ln.Addr().String(), Key: key, Name: "fuzzed", Slots: 2, Problems: []string{"block"},
		Limits: Limits{Memory: 64 << 10}, Logger: logger(io.Discard),
		Build: func(grid.ProblemSpec) (problems.Problem, error) { return blockProblem{}, nil },
	})
	if err != nil {
		f.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	nc, err := ln.Accept()
	ln.Close()
	if err != nil {
		f.Fatal(err)
	}
	mc, _, err = grid.Accept(ctx, nc, grid.AcceptConfig{
		Key:     key,
		Welcome: func(*grid.Hello) (int32, grid.ProblemSpec, error) { return 1, spec, nil },
		Conn:    grid.ConnConfig{Logger: logger(io.Discard)},
	})
	if err != nil {
		f.Fatal(err)
	}
	// The agent's side of the session starts after the handshake.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		s := a.current
		a.mu.Unlock()
		if s != nil {
			break
		}
		if time.Now().After(deadline) {
			f.Fatal("the agent's session did not start within 30 s")
		}
	}
	var mu sync.Mutex
	refused := map[taskKey]bool{}
	news := make(chan struct{}, 1)
	mc.Start(func(m grid.Message) {
		rs, ok := m.(*grid.Results)
		if !ok {
			return
		}
		mu.Lock()
		for _, r := range rs.Items {
			if r.Err != "" {
				refused[taskKey{r.Gen, r.ID}] = true
			}
		}
		mu.Unlock()
		select {
		case news <- struct{}{}:
		default:
		}
	})
	seen := func(k taskKey) bool {
		mu.Lock()
		defer mu.Unlock()
		ok := refused[k]
		clear(refused) // what came before the sentinel is old news
		return ok
	}
	acked = func(gen, id int32) error {
		timeout := time.NewTimer(30 * time.Second)
		defer timeout.Stop()
		for !seen(taskKey{gen, id}) {
			select {
			case <-news:
			case <-mc.Done():
				return fmt.Errorf("the connection closed: %w", mc.Err())
			case <-timeout.C:
				return errors.New("the agent did not handle the frame within 30 s")
			}
		}
		return nil
	}
	f.Cleanup(func() {
		cancel()
		mc.Close()
		<-mc.Done()
		<-ran
	})
	return a, mc, acked
}
