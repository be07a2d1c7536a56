package grid

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

func splitTestKey(t *testing.T) *Key {
	t.Helper()
	k, err := NewKey("split messages test key 0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSplitMessagesRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&Promote{Token: 7, Gen: 3, ESGen: 3, N: 70, Tasks: []Task{{ID: 69, X: []float64{1, -2.5}}, {ID: 4, X: []float64{0, 0}}},
			Workers: []string{"a", "b"}, Policy: "rwq", Depth: 2, Rule: uint8(SplitGain), Window: 36, MessageCost: 1000, GainMargin: 0.1},
		&Move{Addr: "10.0.0.2:40001"},
		&Move{},
		&ChildHello{Token: 7, Addr: "10.0.0.2:40001"},
		&TaskRequest{Gen: 3},
		&TaskGrant{Gen: 3, Tasks: []Task{{ID: 9, X: []float64{3}}}},
		&TaskRefusal{Gen: 3},
		&ChildResults{Gen: 3, IDs: []int32{1, 2}, F: []float64{0.5, -1}, Masters: 2, Done: true, Moved: []string{"w1"}},
		&RelayFrame{S: 12, Op: RelayData, D: []byte("frame bytes")},
		&RelayFrame{S: 12, Op: RelayClose},
	} {
		b, err := AppendFrame(nil, m, 0)
		if err != nil {
			t.Fatalf("%v: %v", m.Type(), err)
		}
		got, n, err := DecodeFrame(b, 0)
		if err != nil || n != len(b) {
			t.Fatalf("%v: decode: %v (%d of %d bytes)", m.Type(), err, n, len(b))
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: got %+v, want %+v", m.Type(), got, m)
		}
		if name := m.Type().String(); name == "" || strings.HasPrefix(name, "type(") {
			t.Errorf("type %d has no name", m.Type())
		}
	}
}

// TestMasterGivenListener: transports are given, not opened (DESIGN.md):
// the master serves the listener it is handed, and closes it.
func TestMasterGivenListener(t *testing.T) {
	leaktest.Check(t)
	key := splitTestKey(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMaster(t.Context(), MasterConfig{Listener: ln, Key: key, Problem: ProblemSpec{Name: "sphere", Dim: 2}, Logger: quietConfig().Logger})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Addr() != ln.Addr().String() {
		t.Errorf("master at %s, listener at %s", m.Addr(), ln.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, _, err := Dial(ctx, ln.Addr().String(), DialConfig{Key: key, Name: "w", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Start(func(Message) {})
	if err := m.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// A child master's control link is not a worker.
	link, _, err := Dial(ctx, ln.Addr().String(), DialConfig{Key: key, Name: "w/master", Slots: 1, Problems: []string{helloSubMaster}})
	if err != nil {
		t.Fatal(err)
	}
	link.Start(func(Message) {})
	link.Send(&ChildHello{Token: 99, Addr: "127.0.0.1:1"}) // no such child: refused
	select {
	case <-link.Done():
		var rej *RejectError
		if !errors.As(link.Err(), &rej) {
			t.Errorf("unknown child link closed with %v, want a reject", link.Err())
		}
	case <-ctx.Done():
		t.Fatal("a child hello with an unknown token was not refused")
	}
	if n := m.Workers(); n != 1 {
		t.Errorf("%d workers, want 1 (a control link is none)", n)
	}
	m.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the given listener is still open after Close: %v", err)
	}
}
