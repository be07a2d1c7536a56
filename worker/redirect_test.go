package worker

import (
	"context"
	"io"
	"testing"
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
