package worker

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
)

// A worker moved from master B to master A goes to A, then back to B,
// then to the master it first found (the root), before it looks for a
// master afresh: when A and B are child masters that ended with the run,
// the root is the one that can tell it the run is over.
func TestMovedWorkerFallsBackToTheRoot(t *testing.T) {
	a := &Agent{cfg: Config{Master: "root:1"}, log: logger(io.Discard)}
	ctx := context.Background()
	var next redirect
	dial := func() string {
		t.Helper()
		addr, err := a.nextAddr(ctx, nil, 0, &next)
		if err != nil {
			t.Fatal(err)
		}
		return addr
	}
	if got := dial(); got != "root:1" {
		t.Fatalf("first dial %q, want the root", got)
	}
	// The root moves the worker to child B, and B moves it on to A.
	for _, mv := range []struct{ from, to string }{{"root:1", "b:2"}, {"b:2", "a:3"}} {
		var err error = &movedError{addr: mv.to}
		if !a.redirected(ctx, &err, mv.from, &next) {
			t.Fatalf("move to %s not taken as a redirect", mv.to)
		}
		if got := dial(); got != mv.to {
			t.Fatalf("after the move: dial %q, want %q", got, mv.to)
		}
	}
	// A and B are gone: back to B, then the root itself, not the usual
	// way (gossip, which may no longer name the root at the run's end).
	if got := dial(); got != "b:2" {
		t.Fatalf("dial %q, want b:2", got)
	}
	if !next.set || next.addr != "root:1" {
		t.Fatalf("after B, next is %+v; want the root", next)
	}
	if got := dial(); got != "root:1" {
		t.Fatalf("dial %q, want root:1", got)
	}
	if next.set {
		t.Fatalf("after the root, next is %+v; want the usual way", next)
	}
}

// A redirect counts as a failed attempt, with its back-off, when it led
// to no work: a move to the master itself, a child master that failed,
// or a second move in a row before a task was served. A worker that
// served, a child master that ended well, and one hop without work (a
// child master already done sends the worker back) stay prompt.
func TestRedirectsWithoutWorkBackOff(t *testing.T) {
	moved := func(addr string) error { return &movedError{addr: addr} }
	child := func(err error) error { return &promotedError{err: err} }
	var h redirectHops
	for i, c := range []struct {
		err    error
		served bool
		fail   string
	}{
		{moved("b:2"), true, ""},
		{moved("c:3"), false, ""}, // one hop without work
		{moved("b:2"), false, "moved on 2 times in a row"},
		{moved("b:2"), false, "moved on 3 times in a row"},
		{child(nil), false, ""}, // a child master that ended well
		{moved("b:2"), false, ""},
		{moved("b:2"), true, ""},
		{moved("a:1"), true, "moved this worker to itself"},
		{child(errors.New("no listener")), false, "the child master failed: no listener"},
		{child(context.Canceled), false, ""},
		{moved(""), false, ""},
		{moved(""), false, "moved on 2 times in a row"},
	} {
		got := h.failed(c.err, "a:1", c.served)
		if c.fail == "" && got != "" || c.fail != "" && !strings.Contains(got, c.fail) {
			t.Errorf("redirect %d (%v, served %v): %q, want %q", i, c.err, c.served, got, c.fail)
		}
	}
}

// A master holding the key that moves the worker to itself does not make
// it redial at once: the move is a failed attempt, logged as one, and the
// agent waits out its back-off (an hour here) before it dials again.
func TestMoveToItselfBacksOff(t *testing.T) {
	leaktest.Check(t)
	key := testKey(t)
	g := newGateProblem()
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := gateConfig(key, fm.addr(), g, 1)
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	wlog := new(logBuffer)
	cfg.Logger = logger(wlog)
	_, wait := startAgent(t, ctx, cfg)
	mc := fm.next()
	mc.c.Send(&grid.Move{Addr: fm.addr()})
	const line = `msg="redirected to no working session" worker=w1 err="the master moved this worker to itself" retry_in=1h0m0s`
	deadline := time.Now().Add(time.Minute) // patience for a loaded machine; the line is the event
	for !strings.Contains(wlog.String(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the worker's log:\n%s", line, wlog)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case mc := <-fm.conns:
		t.Errorf("the worker dialled again at once (%s)", mc.hello.Name)
	default:
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}
