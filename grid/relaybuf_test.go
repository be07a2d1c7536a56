package grid

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// pipeMux is a master's side of a relay's connection over a pipe: the
// relay's end collects the frames the master sends it.
func pipeMux(t *testing.T) (*relayMux, <-chan *RelayFrame) {
	t.Helper()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	mc := NewConn(ctx, a, ConnConfig{Logger: testLogger(t)})
	rc := NewConn(ctx, b, ConnConfig{Logger: testLogger(t)})
	got := make(chan *RelayFrame, 1024)
	rc.Start(func(m Message) {
		if f, ok := m.(*RelayFrame); ok {
			select {
			case got <- f:
			default:
			}
		}
	})
	mc.Start(func(Message) {})
	x := newRelayMux("relay", mc, testLogger(t))
	t.Cleanup(func() {
		x.Close()
		cancel()
		<-mc.Done()
		<-rc.Done()
	})
	return x, got
}

// open opens stream id on x and returns it, as serveRelay would.
func open(t *testing.T, x *relayMux, id uint32) *relayStream {
	t.Helper()
	x.handle(&RelayFrame{S: id, Op: RelayOpen, D: []byte("10.0.0.7")})
	nc, err := x.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return nc.(*relayStream)
}

// send delivers n bytes on stream id, in Relay frames of relayChunk.
func send(x *relayMux, id uint32, n int) {
	chunk := make([]byte, relayChunk)
	for ; n > 0; n -= relayChunk {
		x.handle(&RelayFrame{S: id, Op: RelayData, D: chunk[:min(n, relayChunk)]})
	}
}

// closedFor waits for the master to tell the relay that stream id is
// closed.
func closedFor(t *testing.T, got <-chan *RelayFrame, id uint32) {
	t.Helper()
	for {
		select {
		case f := <-got:
			if f.S == id && f.Op == RelayClose {
				return
			}
		case <-t.Context().Done():
			t.Fatalf("stream %d: the relay was never told it closed", id)
		}
	}
}

// A stream whose handshake has not ended holds a Hello's worth at most:
// anyone may open one through a relay's port, and a worker sends
// nothing past its Hello before the Welcome.
func TestRelayStreamHoldsAHelloBeforeItsHandshake(t *testing.T) {
	leaktest.Check(t)
	x, got := pipeMux(t)
	s := open(t, x, 1)
	send(x, 1, 1<<20) // nobody reads: the handshake has not begun
	b := make([]byte, 1)
	if _, err := s.Read(b); err == nil {
		t.Fatalf("a stream not yet authenticated holds %d bytes unread, want it closed past %d", len(s.buf), relayHelloBuffered)
	}
	closedFor(t, got, 1)
	if n := x.budget; n != nil && n.held() != 0 {
		t.Errorf("%d bytes still counted", n.held())
	}
}

// Streams past their handshakes share one budget: the stream that would
// pass it is closed (and the relay told), the others keep what they
// hold, and bytes read make room again.
func TestRelayStreamsShareABudget(t *testing.T) {
	leaktest.Check(t)
	x, got := pipeMux(t)
	x.budget = newRelayBudget(1 << 20)
	var ss []*relayStream
	for id := range uint32(3) {
		s := open(t, x, id)
		s.authenticated()
		ss = append(ss, s)
	}
	send(x, 0, 400<<10)
	send(x, 1, 400<<10)
	send(x, 2, 400<<10) // 1.2 MiB held in all: over
	b := make([]byte, 400<<10)
	if _, err := ss[2].Read(b); !errors.Is(err, errRelayTotal) {
		t.Fatalf("the stream that passed the budget: %v, want %v", err, errRelayTotal)
	}
	closedFor(t, got, 2)
	for _, s := range ss[:2] {
		if n, err := io.ReadFull(s, b); err != nil {
			t.Fatalf("a stream within the budget: read %d bytes: %v", n, err)
		}
	}
	if n := x.budget.held(); n != 0 {
		t.Fatalf("%d bytes counted once all is read", n)
	}
	s := open(t, x, 3)
	s.authenticated()
	send(x, 3, 900<<10)
	if _, err := io.ReadFull(s, b); err != nil {
		t.Fatalf("a stream once the others were read: %v", err)
	}
}

// A key holder posing as a relay's master cannot make the relay hold
// more than its budget for workers that do not read: the stream that
// passes it is dropped, the master told, and the others carry on.
func TestRelayFakeMasterCannotPileUpBuffers(t *testing.T) {
	leaktest.Check(t)
	r, up := relayUnderFakeMaster(t, RelayConfig{Name: "relay", MaxBuffered: 1 << 20})
	opened := make(chan uint32, 2)
	closed := make(chan uint32, 2)
	up.Start(func(m Message) {
		if f, ok := m.(*RelayFrame); ok && f.Op == RelayOpen {
			opened <- f.S
		} else if ok && f.Op == RelayClose {
			closed <- f.S
		}
	})
	eventually(t, "the relay to take downstream connections", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.up != nil
	})
	stream := func() (net.Conn, uint32) {
		w, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		select {
		case s := <-opened:
			return w, s
		case <-t.Context().Done():
			t.Fatal("no stream opened")
		}
		return nil, 0
	}
	_, deaf := stream() // never reads
	w, s := stream()
	// 32 MiB: more than the kernel's socket buffers take, and less than
	// one stream's bound (64 MiB), so only the budget stops it.
	chunk := make([]byte, relayChunk)
	for range 32 << 20 / relayChunk {
		if err := up.Send(&RelayFrame{S: deaf, Op: RelayData, D: chunk}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-closed:
		if c != deaf {
			t.Fatalf("stream %d closed, want %d (the one not read)", c, deaf)
		}
	case <-t.Context().Done():
		t.Fatal("the relay never dropped the stream that passed its budget")
	}
	if err := up.Send(&RelayFrame{S: s, Op: RelayData, D: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(w, chunk[:1]); err != nil {
		t.Fatalf("the other stream: %v", err)
	}
	eventually(t, "the relay to count nothing held", func() bool { return r.budget.held() == 0 })
}

// A relay carries a Hello's worth at most from a connection whose
// handshake has not ended (the master's Welcome has not come down):
// anyone may connect to its port, and what it floods would sit in the
// upstream connection's queue, ahead of every worker's frames, until its
// cap closed the connection. The stream is closed and the master told.
func TestRelayCarriesAHelloBeforeTheWelcome(t *testing.T) {
	leaktest.Check(t)
	r, up := relayUnderFakeMaster(t, RelayConfig{Name: "relay"})
	carried, closed, over := 0, make(chan struct{}), make(chan struct{})
	up.Start(func(m Message) { // the master says nothing: no Challenge, no Welcome
		f, ok := m.(*RelayFrame)
		switch {
		case !ok:
		case f.Op == RelayData:
			if carried += len(f.D); carried > relayHelloBuffered && carried-len(f.D) <= relayHelloBuffered {
				close(over)
			}
		case f.Op == RelayClose:
			close(closed)
		}
	})
	eventually(t, "the relay to take downstream connections", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.up != nil
	})
	flood, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	go flood.Write(make([]byte, 1<<20)) // fails once the relay closes it
	select {
	case <-closed:
	case <-over:
		t.Fatalf("the relay carried more than %d bytes before the handshake ended", relayHelloBuffered)
	case <-t.Context().Done():
		t.Fatal("the stream was never closed")
	}
}

// relayUnderFakeMaster runs a relay of cfg (its Key and Upstream set
// here) whose master is the test: it returns the relay and the master's
// side of the relay's link, welcomed but not started, closed when the
// test ends.
func relayUnderFakeMaster(t *testing.T, cfg RelayConfig) (*Relay, *Conn) {
	t.Helper()
	cfg.Key = testClusterKey(t, "test cluster")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg.Upstream = func(context.Context, int) (string, error) { return ln.Addr().String(), nil }
	r := runRelayWith(t, cfg)
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	up, _, err := Accept(t.Context(), nc, AcceptConfig{Key: cfg.Key,
		Welcome: func(*Hello) (int32, ProblemSpec, error) { return 1, ProblemSpec{Name: "sphere", Dim: 5}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close(); <-up.Done() })
	return r, up
}
