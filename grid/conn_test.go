package grid

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

// collector is a Handler that keeps what arrives.
type collector struct {
	mu   sync.Mutex
	msgs []Message
	at   []time.Time
	got  chan struct{} // one tick per message, never blocks the reader
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1<<16)} }

func (c *collector) handle(m Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	c.got <- struct{}{}
}

func (c *collector) wait(t *testing.T, n int) []Message {
	t.Helper()
	timeout := time.After(time.Minute)
	for range n {
		select {
		case <-c.got:
		case <-timeout:
			t.Fatalf("timed out waiting for %d messages", n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Message(nil), c.msgs...)
}

func quietConfig() ConnConfig {
	return ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestConnDeliversInOrderBothWays(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ctx := context.Background()
	ca, cb := NewConn(ctx, a, quietConfig()), NewConn(ctx, b, quietConfig())
	ra, rb := newCollector(), newCollector()
	ca.Start(ra.handle)
	cb.Start(rb.handle)
	const n = 2000
	for i := range n {
		if err := ca.Send(&Tasks{Gen: int32(i), Items: []Task{{ID: int32(i), X: []float64{float64(i)}}}}); err != nil {
			t.Fatal(err)
		}
		if err := cb.Send(Results{Items: []Result{{ID: int32(i)}}, Queued: int32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range rb.wait(t, n) {
		ts, ok := m.(*Tasks)
		if !ok || ts.Gen != int32(i) || ts.Items[0].X[0] != float64(i) {
			t.Fatalf("message %d at b: %#v", i, m)
		}
	}
	for i, m := range ra.wait(t, n) {
		rs, ok := m.(*Results)
		if !ok || rs.Queued != int32(i) {
			t.Fatalf("message %d at a: %#v", i, m)
		}
	}
	// The writer counts a batch after its write returns, which can be
	// after the reader has handled every frame: read the counts once both
	// ends have stopped.
	ca.Close()
	cb.Close()
	<-ca.Done()
	<-cb.Done()
	st := ca.Stats()
	if st.FramesOut < n || st.Writes > st.FramesOut || st.BytesOut == 0 {
		t.Errorf("stats %+v", st)
	}
	// What one end wrote is exactly what the other read.
	if sb := cb.Stats(); sb.BytesIn != st.BytesOut || sb.FramesIn != st.FramesOut {
		t.Errorf("b read %d bytes in %d frames, a wrote %d in %d", sb.BytesIn, sb.FramesIn, st.BytesOut, st.FramesOut)
	}
}

// Both ends answer every message from inside the handler with a large
// frame. Were the answers written inline, both readers would block in
// writes that nobody reads, and the test would hang.
func TestConnHandlersSendingInlineCannotDeadlock(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ctx := context.Background()
	ca, cb := NewConn(ctx, a, quietConfig()), NewConn(ctx, b, quietConfig())
	big := &Tasks{Items: []Task{{X: make([]float64, 4000)}}} // ~36 KB
	const rounds = 300
	var wg sync.WaitGroup
	wg.Add(2)
	echo := func(self *Conn) Handler {
		count := 0
		return func(m Message) {
			count++
			if count == rounds {
				wg.Done()
			}
			if count <= rounds {
				self.Send(big)
			}
		}
	}
	ca.Start(echo(ca))
	cb.Start(echo(cb))
	for range 50 { // many frames in flight each way at once
		ca.Send(big)
		cb.Send(big)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("echoing handlers deadlocked")
	}
	ca.Close()
	cb.Close()
	<-ca.Done()
	<-cb.Done()
}

// deadlineRecorder is a TCP connection that notes the read deadlines its
// Conn sets instead of applying them: a test can see the idle clock
// pushed forward without racing it.
type deadlineRecorder struct {
	*net.TCPConn
	mu  sync.Mutex
	set []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.set = append(d.set, t)
	d.mu.Unlock()
	return nil
}

func (d *deadlineRecorder) deadlines() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.set...)
}

// An idle link carries heartbeats both ways, the handlers never see them,
// and every heartbeat that arrives pushes the idle deadline forward (that
// a deadline reached does close the link is TestConnIdleTimeout's part).
// The deadlines are recorded, not applied, so that however late a loaded
// machine runs a heartbeat, the test waits for events, not for a margin.
func TestConnHeartbeatsKeepIdleLinkAlive(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ra, rb := &deadlineRecorder{TCPConn: a.(*net.TCPConn)}, &deadlineRecorder{TCPConn: b.(*net.TCPConn)}
	cfg := quietConfig()
	cfg.IdleTimeout = 160 * time.Millisecond // extended at most every 10 ms
	cfg.Heartbeat = 20 * time.Millisecond
	ca, cb := NewConn(context.Background(), ra, cfg), NewConn(context.Background(), rb, cfg)
	r := newCollector()
	ca.Start(r.handle)
	cb.Start(r.handle)
	// Past the first deadline, every extension is a heartbeat's doing.
	const extensions = 5
	extended := func(d *deadlineRecorder) bool { return len(d.deadlines()) > extensions }
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for !extended(ra) || !extended(rb) {
		select {
		case <-ctx.Done():
			t.Fatalf("heartbeats extended the idle deadline %d and %d times, want %d each", len(ra.deadlines())-1, len(rb.deadlines())-1, extensions)
		case <-ca.Done():
			t.Fatalf("idle but heartbeating link closed: %v", ca.Err())
		case <-cb.Done():
			t.Fatalf("idle but heartbeating link closed: %v", cb.Err())
		case <-time.After(cfg.Heartbeat):
		}
	}
	for _, d := range []*deadlineRecorder{ra, rb} {
		ds := d.deadlines()
		for i := 1; i < len(ds); i++ {
			if !ds[i].After(ds[i-1]) {
				t.Errorf("deadline %d (%v) does not extend deadline %d (%v)", i, ds[i], i-1, ds[i-1])
			}
		}
	}
	if ca.Err() != nil || cb.Err() != nil {
		t.Fatalf("idle but heartbeating link closed: %v / %v", ca.Err(), cb.Err())
	}
	if sa, sb := ca.Stats(), cb.Stats(); sa.FramesIn < extensions || sb.FramesIn < extensions {
		t.Errorf("%d and %d frames in, want at least %d heartbeats each", sa.FramesIn, sb.FramesIn, extensions)
	}
	r.mu.Lock()
	if len(r.msgs) != 0 {
		t.Errorf("heartbeats reached the handler: %v", r.msgs)
	}
	r.mu.Unlock()
	ca.Close()
	cb.Close()
	<-ca.Done()
	<-cb.Done()
}

func TestConnIdleTimeout(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close() // a silent peer
	cfg := quietConfig()
	cfg.IdleTimeout = 100 * time.Millisecond
	ca := NewConn(context.Background(), a, cfg)
	ca.Start(func(Message) {})
	select {
	case <-ca.Done():
	case <-time.After(time.Minute):
		t.Fatal("silent peer not timed out")
	}
	if !errors.Is(ca.Err(), ErrIdleTimeout) {
		t.Errorf("Err = %v, want ErrIdleTimeout", ca.Err())
	}
}

func TestConnBadFrameClosesThatConnection(t *testing.T) {
	hostile := func(ty MsgType, body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+1)), append([]byte{byte(ty)}, body...)...)
	}
	cases := []struct {
		name string
		raw  []byte
		want error
	}{
		{"oversized", []byte{0x7f, 0xff, 0xff, 0xff, byte(MsgTasks)}, ErrFrameTooLarge},
		{"hostile count", hostile(MsgTasks, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}), ErrMalformed},
		{"unknown type", hostile(99, []byte{0x80}), ErrUnknownType},
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leaktest.Check(t)
			a, b := tcpPair(t)
			defer b.Close()
			ca := NewConn(context.Background(), a, quietConfig())
			var handled int
			ca.Start(func(Message) { handled++ })
			ok, _ := AppendFrame(nil, &Shutdown{Reason: "fine"}, 0)
			if _, err := b.Write(append(ok, c.raw...)); err != nil {
				t.Fatal(err)
			}
			// The peer hears why, then the connection ends.
			b.SetReadDeadline(time.Now().Add(10 * time.Second))
			m, err := NewFrameReader(b, 0).Next()
			if err != nil {
				t.Fatalf("no Reject before close: %v", err)
			}
			if r, isReject := m.(*Reject); !isReject || !strings.Contains(r.Reason, "malformed") {
				t.Errorf("peer got %#v, want a Reject naming the bad frame", m)
			}
			b.Close()
			<-ca.Done()
			if !errors.Is(ca.Err(), c.want) {
				t.Errorf("Err = %v, want %v", ca.Err(), c.want)
			}
			if handled != 1 {
				t.Errorf("handler saw %d messages, want the 1 good one", handled)
			}
		})
	}
}

func TestConnCloseIdempotentAndSendAfterClose(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close()
	ca := NewConn(context.Background(), a, quietConfig()) // never started
	if ca.Err() != nil {
		t.Fatalf("fresh conn has Err %v", ca.Err())
	}
	for range 3 {
		if err := ca.Close(); err != nil {
			t.Fatal(err)
		}
	}
	<-ca.Done()
	if !errors.Is(ca.Err(), ErrClosed) {
		t.Errorf("Err = %v, want ErrClosed", ca.Err())
	}
	if err := ca.Send(Heartbeat{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close = %v", err)
	}
	ca.Start(func(Message) {}) // no effect, no goroutine
}

func TestConnContextCancelCloses(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	ca, cb := NewConn(ctx, a, quietConfig()), NewConn(context.Background(), b, quietConfig())
	ca.Start(func(Message) {})
	cb.Start(func(Message) {})
	cancel()
	<-ca.Done()
	if !errors.Is(ca.Err(), context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", ca.Err())
	}
	<-cb.Done() // the peer sees the close
	if !errors.Is(cb.Err(), ErrPeerClosed) {
		t.Errorf("peer Err = %v, want ErrPeerClosed", cb.Err())
	}
	// Already cancelled before NewConn.
	c2, d2 := tcpPair(t)
	defer d2.Close()
	cc := NewConn(ctx, c2, quietConfig())
	<-cc.Done()
}

func TestConnSendAndCloseDeliversLastFrames(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ca, cb := NewConn(context.Background(), a, quietConfig()), NewConn(context.Background(), b, quietConfig())
	r := newCollector()
	ca.Start(func(Message) {})
	cb.Start(r.handle)
	// The far side keeps talking while we close: our unread input must not
	// destroy our last frames.
	for range 100 {
		cb.Send(&Tasks{Items: []Task{{X: make([]float64, 1000)}}})
	}
	for i := range 50 {
		ca.Send(&Results{Queued: int32(i)})
	}
	ca.SendAndClose(&Shutdown{Reason: "done"})
	if err := ca.Send(Heartbeat{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after SendAndClose = %v", err)
	}
	msgs := r.wait(t, 51)
	if s, ok := msgs[50].(*Shutdown); !ok || s.Reason != "done" {
		t.Errorf("last message %#v", msgs[50])
	}
	<-cb.Done()
	<-ca.Done()
	if !errors.Is(cb.Err(), ErrPeerClosed) {
		t.Errorf("peer Err = %v", cb.Err())
	}
}

func TestConnRejectFromPeerCloses(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	ca, cb := NewConn(context.Background(), a, quietConfig()), NewConn(context.Background(), b, quietConfig())
	ca.Start(func(Message) {})
	cb.Start(func(Message) {})
	cb.SendAndClose(&Reject{Reason: "go away"})
	<-ca.Done()
	var re *RejectError
	if !errors.As(ca.Err(), &re) || re.Reason != "go away" {
		t.Errorf("Err = %v, want RejectError(go away)", ca.Err())
	}
	<-cb.Done()
}

func TestConnDelayDelaysEveryFrameInOrder(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	cfg := quietConfig()
	cfg.Delay = 80 * time.Millisecond
	ca, cb := NewConn(context.Background(), a, cfg), NewConn(context.Background(), b, quietConfig())
	r := newCollector()
	ca.Start(func(Message) {})
	cb.Start(r.handle)
	const n = 20
	sent := make([]time.Time, n)
	for i := range n {
		sent[i] = time.Now()
		ca.Send(&Cancel{Gen: int32(i)})
		time.Sleep(7 * time.Millisecond)
	}
	msgs := r.wait(t, n)
	for i, m := range msgs {
		if m.(*Cancel).Gen != int32(i) {
			t.Fatalf("out of order at %d: %#v", i, m)
		}
		if early := sent[i].Add(cfg.Delay).Sub(r.at[i]); early > 0 {
			t.Errorf("frame %d arrived %v before its delay was up", i, early)
		}
	}
	ca.Close()
	cb.Close()
	<-ca.Done()
	<-cb.Done()
}

func TestConnSendQueueFull(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close() // never reads
	cfg := quietConfig()
	cfg.MaxQueued = 1 << 20
	ca := NewConn(context.Background(), a, cfg)
	big := &Tasks{Items: []Task{{X: make([]float64, 10000)}}}
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		err = ca.Send(big)
	}
	if !errors.Is(err, ErrSendQueueFull) && !errors.Is(err, ErrClosed) {
		t.Fatalf("Send to a peer that never reads: %v", err)
	}
	<-ca.Done()
	if !errors.Is(ca.Err(), ErrSendQueueFull) {
		t.Errorf("Err = %v", ca.Err())
	}
}

func TestConnSendTooLargeKeepsConnection(t *testing.T) {
	a, b := tcpPair(t)
	defer b.Close()
	cfg := quietConfig()
	cfg.MaxFrame = 1024
	ca := NewConn(context.Background(), a, cfg)
	defer ca.Close()
	if err := ca.Send(&Tasks{Items: []Task{{X: make([]float64, 1000)}}}); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("Send = %v, want ErrFrameTooLarge", err)
	}
	if err := ca.Send(Heartbeat{}); err != nil {
		t.Errorf("connection unusable after a refused frame: %v", err)
	}
}

func BenchmarkConnTaskResultRoundTrip(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	cl, _ := net.Dial("tcp", ln.Addr().String())
	sv := <-acc
	cfg := ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	master, worker := NewConn(context.Background(), sv, cfg), NewConn(context.Background(), cl, cfg)
	worker.Start(func(m Message) {
		ts := m.(*Tasks)
		rs := Results{Items: make([]Result, len(ts.Items))}
		for i, t := range ts.Items {
			rs.Items[i] = Result{Gen: ts.Gen, ID: t.ID, F: 1}
		}
		worker.Send(&rs)
	})
	done := make(chan struct{}, 1024)
	master.Start(func(m Message) {
		for range m.(*Results).Items {
			done <- struct{}{}
		}
	})
	task := &Tasks{Gen: 1, Items: []Task{{X: make([]float64, 30)}}}
	const window = 64
	b.ReportAllocs()
	inflight := 0
	for i := 0; i < b.N; i++ {
		task.Items[0].ID = int32(i)
		master.Send(task)
		inflight++
		if inflight == window {
			<-done
			inflight--
		}
	}
	for ; inflight > 0; inflight-- {
		<-done
	}
	b.StopTimer()
	st := master.Stats()
	b.ReportMetric(float64(st.BytesOut+st.BytesIn)/float64(b.N), "wireB/task")
	master.Close()
	worker.Close()
}

// TestConnEchoesEchoHeartbeats: a Heartbeat with Echo set is answered at
// once with a plain one (which asks nothing back), a plain Heartbeat is
// not answered, and a flood of echo requests while the answers cannot be
// written gets at most one answer queued beside the one being written.
func TestConnEchoesEchoHeartbeats(t *testing.T) {
	leaktest.Check(t)
	raw, nc := net.Pipe() // unbuffered: the Conn's writes wait for raw's reads
	cfg := quietConfig()
	cfg.Heartbeat, cfg.WriteTimeout = time.Hour, time.Hour // no heartbeat of its own
	c := NewConn(t.Context(), nc, cfg)
	defer func() { c.Close(); <-c.Done() }()
	marked := make(chan struct{}, 1)
	c.Start(func(m Message) {
		if _, ok := m.(*Tasks); ok {
			c.Send(&Results{}) // the marker: whatever was answered before it came first
			marked <- struct{}{}
		}
	})
	send := func(ms ...Message) {
		var b []byte
		for _, m := range ms {
			var err error
			if b, err = AppendFrame(b, m, 0); err != nil {
				t.Error(err)
				return
			}
		}
		if _, err := raw.Write(b); err != nil {
			t.Error(err) // not Fatal: it runs on its own goroutine
		}
	}
	fr := NewFrameReader(raw, 0)
	// answers reads up to the marker and counts the heartbeats before it.
	answers := func() (n int) {
		t.Helper()
		raw.SetReadDeadline(time.Now().Add(time.Minute)) // bounds a broken Conn, not the test's pace
		for {
			m, err := fr.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch v := m.(type) {
			case *Heartbeat:
				if v.Echo {
					t.Fatal("an echo asked for an echo")
				}
				n++
			case *Results:
				return n
			default:
				t.Fatalf("unexpected %v", m.Type())
			}
		}
	}

	go send(Heartbeat{}, Tasks{})
	if n := answers(); n != 0 {
		t.Errorf("a plain heartbeat was answered %d times", n)
	}
	<-marked
	go send(Heartbeat{Echo: true}, Tasks{})
	if n := answers(); n != 1 {
		t.Errorf("an echo heartbeat was answered %d times, want 1", n)
	}
	<-marked
	// raw reads nothing while it sends: the first answer waits in the
	// writer, a second is queued, and the rest are not.
	flood := make([]Message, 1000)
	for i := range flood {
		flood[i] = Heartbeat{Echo: true}
	}
	go send(append(flood, Tasks{})...)
	<-marked // every request taken: its reader reads ahead of raw's Write, so that alone would not say
	if n := answers(); n < 1 || n > 2 {
		t.Errorf("1000 echo requests sent while nothing was read were answered %d times, want 1 or 2", n)
	}
}
