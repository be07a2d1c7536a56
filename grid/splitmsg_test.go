package grid

import (
	"context"
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
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
		&ChildResults{Gen: 3, IDs: []int32{1}, F: []float64{2}, Masters: 1, C: &ChildCounts{First: []int32{1, 7}, Resends: 2, Wasted: 1e9, Failed: 1, CancelAcks: 3}},
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

// TestMasterGivenListener: transports are given, not opened:
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

// A Promote is refused unless every setting is one a master would send:
// a child master that could not start, or that would sleep for ever on
// each message, is no child. The master's own settings at their bounds
// pass.
func TestPromoteCheck(t *testing.T) {
	ok := Promote{Token: 1, N: 2, Tasks: []Task{{ID: 1, X: []float64{1}}}, Workers: []string{"a"}, Policy: "r3q",
		Depth: sched.MaxDepth, Rule: uint8(SplitGain), Window: MaxOverloadWindow, MessageCost: int64(MaxMessageCost), GainMargin: 0.1}
	if err := ok.Check(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	for _, lim := range [][2]int64{{-1, -1}, {0, 0}, {int64(maxPromoteTimeout), maxPromoteRetries}} {
		pr := ok
		pr.TaskTimeout, pr.MaxRetries = lim[0], int(lim[1])
		if err := pr.Check(); err != nil {
			t.Errorf("task timeout %d, max retries %d (-1: none, 0: not said): %v", lim[0], lim[1], err)
		}
	}
	for _, name := range sched.Names {
		if err := (&Promote{Policy: name}).Check(); err != nil {
			t.Errorf("policy %q: %v", name, err)
		}
	}
	for _, c := range []struct {
		edit func(*Promote)
		why  string
	}{
		{func(p *Promote) { p.MessageCost = math.MaxInt64 }, "message cost"},
		{func(p *Promote) { p.MessageCost = int64(MaxMessageCost) + 1 }, "message cost"},
		{func(p *Promote) { p.MessageCost = -1 }, "message cost"},
		{func(p *Promote) { p.GainMargin = math.NaN() }, "gain margin"},
		{func(p *Promote) { p.GainMargin = math.Inf(1) }, "gain margin"},
		{func(p *Promote) { p.GainMargin = math.Inf(-1) }, "gain margin"},
		{func(p *Promote) { p.GainMargin = -0.1 }, "gain margin"},
		{func(p *Promote) { p.Rule = uint8(SplitGain) + 1 }, "split rule"},
		{func(p *Promote) { p.Window = -1 }, "overload window"},
		{func(p *Promote) { p.Window = MaxOverloadWindow + 1 }, "overload window"},
		{func(p *Promote) { p.Depth = -1 }, "depth"},
		{func(p *Promote) { p.Depth = sched.MaxDepth + 1 }, "depth"},
		{func(p *Promote) { p.Policy = "" }, "policy"},
		{func(p *Promote) { p.Policy = strings.Repeat("x", 1000) }, "policy"},
		{func(p *Promote) { p.N = -1 }, "batch of -1"},
		{func(p *Promote) { p.N = sched.MaxTaskID + 2 }, "batch of"},
		{func(p *Promote) { p.N = 0 }, "1 tasks in a batch of 0"},
		{func(p *Promote) { p.Workers = make([]string, MaxPromoteWorkers+1) }, "workers moved"},
		{func(p *Promote) { p.MaxRetries = -2 }, "max retries"},
		{func(p *Promote) { p.MaxRetries = maxPromoteRetries + 1 }, "max retries"},
		{func(p *Promote) { p.TaskTimeout = -2 }, "task timeout"},
		{func(p *Promote) { p.TaskTimeout = int64(maxPromoteTimeout) + 1 }, "task timeout"},
	} {
		pr := ok
		c.edit(&pr)
		err := pr.Check()
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%+v: %v, want an error saying %q", pr, err, c.why)
		}
		if len(err.Error()) > 300 {
			t.Errorf("an error of %d bytes (the master logs 300)", len(err.Error()))
		}
		// RunChild refuses it before it listens or dials.
		if err2 := RunChild(t.Context(), ChildConfig{Promote: &pr, Listen: "no such address"}, MasterConfig{}); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("RunChild: %v, want %v", err2, err)
		}
	}
}

// A master that emulates a slow one (SplitConfig.MessageCost) closes at
// once, though a worker's messages wait for it (each of which would
// cost the loop a second's sleep): Close gives way to the sleep.
func TestMasterCostCloses(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) { c.Split.MessageCost = MaxMessageCost })
	w := newTestWorker("chatty", 1, 0)
	startWorkers(t, m, w)
	const n = 600 // ten minutes of sleep
	for i := range n {
		if err := w.conn.Send(&Results{Items: []Result{{Gen: -1, ID: int32(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the messages to wait for the master", func() bool { return len(m.in) >= n/2 })
	closed := make(chan struct{})
	go func() {
		m.Close()
		close(closed)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // patience for a loaded machine; Close is the event
	defer cancel()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatalf("Close did not return with %d messages waiting", len(m.in))
	}
}

// A master's split settings are bounded as a Promote's are.
func TestMasterRefusesUnboundedSplit(t *testing.T) {
	for _, s := range []SplitConfig{{MessageCost: MaxMessageCost + 1}, {GainMargin: math.NaN()}, {Rule: 9}, {Window: -1}} {
		m, err := NewMaster(t.Context(), MasterConfig{Key: splitTestKey(t), Problem: ProblemSpec{Name: "sphere", Dim: 1}, Split: s, Listen: "127.0.0.1:0"})
		if err == nil {
			t.Errorf("%+v: a master", s)
			m.Close()
		}
	}
}
