package grid

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid/member"
	"github.com/esgrid/esgrid/internal/logx"
)

// Relays (docs/papers.md §1: the master reaches W1–W3 through R1; §3:
// Tascell's relay servers form a tree).
//
// A relay accepts workers the master cannot reach and carries each one's
// connection to the master over its single upstream connection, as a
// stream: the relay's frames (Relay) name the stream, and so the worker,
// and carry its bytes both ways. The relay does not read them: each
// relayed worker runs the ordinary handshake with the master through its
// stream, end to end, so the master authenticates it (the relay cannot
// answer for it) and serves it as any worker: its own connection, its
// own place in the policy, held and running cancels unchanged. On the
// master's side a relay's streams are a net.Listener the master serves
// like its own (transports are given, not opened).
//
// Relays chain: a relay whose upstream is another relay's downstream
// address is, to that relay, one more worker's connection; its own
// upstream handshake (Hello role "@relay") reaches the master through
// it, and the master serves its streams inside that stream. A tree of
// relays is relays all the way up.
//
// Gossip. Relayed workers do not join gossip (they are started with the
// relay's address, not -join): the peers that could probe them are on
// the far side of the relay, and memberlist, which declares dead a node
// it cannot probe directly or through k others, would declare them dead
// for the wrong reason. The relay speaks for them instead: it is the
// gossip member (its upstream hello carries its member name), and when
// gossip declares it dead or gone the master drops its connection,
// which closes every stream, so its workers' tasks go back to the queue.
// Whether each relayed worker itself is alive the master learns as for
// any worker, from its connection (its heartbeats and status reports go
// through the relay): the failure detector covers exactly the path the
// master depends on. A relay that dies closes its workers' connections;
// they reconnect through another path if they were given one (esworker
// -master takes a list) or wait for this one.

// Relay bounds.
const (
	// MaxRelayStreams bounds the streams one relay may have open.
	MaxRelayStreams = 4096
	// relayChunk is the most bytes one Relay frame carries.
	relayChunk = 32 << 10
	// relayBuffered bounds the bytes waiting on one stream for its
	// reader; past it the stream is closed (its peer does not read).
	relayBuffered = 64 << 20
	// relayHelloBuffered bounds them on a master's stream whose
	// handshake has not ended: a worker sends its Hello alone (one frame
	// and its length) and waits for the Welcome, and anyone may open a
	// stream through a relay's port, which needs no key.
	relayHelloBuffered = handshakeMaxFrame + 4
	// relayPerSource bounds the streams from one downstream address, and
	// the last relayReserved of MaxRelayStreams go to addresses that
	// have none (grid/member's Slots): the relay's port needs no key,
	// and one address holding every stream kept the relay's workers out.
	// To hold them all takes 3,088 addresses.
	relayPerSource = 64
	relayReserved  = MaxRelayStreams * 3 / 4
)

// relayAddr is the address of a stream that reached a master through a
// relay: "relay/NAME:STREAM".
type relayAddr struct {
	relay  string
	stream uint32
	// from is the downstream address the relay accepted the stream from
	// (its RelayOpen says), "" from a relay that does not say: the
	// handshake gate counts the stream as the source "relay/NAME/FROM",
	// so that an idle flood through the relay's port, which needs no
	// key, holds one address's share of the slots, not every relayed
	// worker's. A key holder's relay may lie about it, as a key holder
	// may start relays under many names.
	from string
	// host is the host the relay's own connection counts as (hostOf):
	// its workers count as that one host for verification, since the
	// master cannot see past the relay.
	host string
}

// Network implements net.Addr.
func (a relayAddr) Network() string { return "esgrid-relay" }

// String implements net.Addr.
func (a relayAddr) String() string {
	return net.JoinHostPort("relay/"+a.relay, strconv.FormatUint(uint64(a.stream), 10))
}

// source is the stream's source for the handshake gate.
func (a relayAddr) source() string {
	if a.from == "" {
		return "relay/" + a.relay
	}
	return "relay/" + a.relay + "/" + a.from
}

// openedFrom reads the downstream address a RelayOpen names: an IP, or
// "" when it names none (or nonsense).
func openedFrom(d []byte) string {
	if len(d) > len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") {
		return ""
	}
	ip := net.ParseIP(string(d))
	if ip == nil {
		return ""
	}
	return ip.String()
}

// DefaultRelayBuffered bounds the bytes that all the relay streams of a
// master (MasterConfig.RelayBuffered), or of a relay (RelayConfig.
// MaxBuffered), hold together waiting for their readers. A stream
// holds relayBuffered (64 MiB) at most, so without it a key holder's
// relay, or a key holder posing as a relay's master, could make each of
// thousands of streams hold that much.
const DefaultRelayBuffered = 256 << 20

// Errors that close a relay stream whose reader fell behind.
var (
	errRelayOverrun = errors.New("grid: relay: stream buffer full (reader not reading)")
	errRelayEarly   = errors.New("grid: relay: stream sent more than a hello before its handshake ended")
	errRelayTotal   = errors.New("grid: relay: the relay streams' buffers are full together (reader not reading)")
)

// relayBudget is the bytes relay streams may hold together: each byte
// queued is taken from it, and given back once read, or dropped.
type relayBudget struct {
	limit int64
	used  atomic.Int64
}

func newRelayBudget(limit int) *relayBudget {
	if limit <= 0 {
		limit = DefaultRelayBuffered
	}
	return &relayBudget{limit: int64(limit)}
}

// take takes n bytes, unless that would pass the limit.
func (b *relayBudget) take(n int) bool {
	if b.used.Add(int64(n)) > b.limit {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// give gives back n bytes taken.
func (b *relayBudget) give(n int) { b.used.Add(-int64(n)) }

// held is the bytes held now.
func (b *relayBudget) held() int64 { return b.used.Load() }

// relayStream is one relayed connection as a net.Conn: what is written
// goes out in Relay frames through send; what arrives is queued by
// deliver for Read. Writes never block (the frames are queued on the
// upstream connection, which bounds its queue).
type relayStream struct {
	id    uint32
	local net.Addr
	peer  net.Addr
	send  func(*RelayFrame) error
	gone  func(uint32) // the stream closed: forget it
	// budget is shared by the master's streams; overrun is told why a
	// stream was closed for holding too much (a rate-limited log).
	budget  *relayBudget
	overrun func(s *relayStream, err error)

	mu       sync.Mutex
	buf      []byte
	limit    int   // bytes buf may hold: relayHelloBuffered until authenticated
	charged  int   // bytes of buf taken from budget
	eof      bool  // the far end closed
	err      error // closed here (ErrClosed) or broken
	deadline time.Time
	wake     chan struct{} // capacity 1
	once     sync.Once
}

func newRelayStream(id uint32, local, peer net.Addr, send func(*RelayFrame) error, gone func(uint32)) *relayStream {
	return &relayStream{id: id, local: local, peer: peer, send: send, gone: gone, wake: make(chan struct{}, 1),
		budget: newRelayBudget(0), limit: relayHelloBuffered}
}

// authenticated lifts the stream's bound once its peer has proved the
// key (Accept calls it before its Welcome, after which the peer sends).
func (s *relayStream) authenticated() {
	s.mu.Lock()
	s.limit = relayBuffered
	s.mu.Unlock()
}

// uncharge gives back up to n bytes of what the stream took from the
// budget (under s.mu).
func (s *relayStream) uncharge(n int) {
	n = min(n, s.charged)
	s.charged -= n
	s.budget.give(n)
}

func (s *relayStream) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver queues bytes that arrived for the stream. A stream that
// would hold more than its bound, or pass the budget of all the
// streams, is closed: its reader gets the reason, the relay a
// RelayClose, and overrun (a rate-limited log) hears of it.
func (s *relayStream) deliver(b []byte) {
	s.mu.Lock()
	var over error
	if s.err == nil && !s.eof {
		switch {
		case len(s.buf)+len(b) > s.limit && s.limit < relayBuffered:
			over = errRelayEarly
		case len(s.buf)+len(b) > s.limit:
			over = errRelayOverrun
		case !s.budget.take(len(b)):
			over = errRelayTotal
		default:
			s.buf = append(s.buf, b...)
			s.charged += len(b)
		}
		if over != nil {
			s.err = over
			s.buf = nil
			s.uncharge(s.charged)
		}
	}
	s.mu.Unlock()
	s.nudge()
	if over != nil {
		s.send(&RelayFrame{S: s.id, Op: RelayClose})
		s.once.Do(func() { s.gone(s.id) })
		if s.overrun != nil {
			s.overrun(s, over)
		}
	}
}

// remoteClose marks the far end closed: Read returns io.EOF once the
// queued bytes are read.
func (s *relayStream) remoteClose() {
	s.mu.Lock()
	s.eof = true
	s.mu.Unlock()
	s.nudge()
	s.once.Do(func() { s.gone(s.id) })
}

// fail breaks the stream (the relay is gone). What it holds may still
// be read, but no longer counts: the relay's buffers go with it.
func (s *relayStream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.uncharge(s.charged)
	s.mu.Unlock()
	s.nudge()
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

// Read implements net.Conn.
func (s *relayStream) Read(b []byte) (int, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			n := copy(b, s.buf)
			s.buf = s.buf[n:]
			s.uncharge(n)
			if len(s.buf) == 0 {
				s.buf = nil
			}
			s.mu.Unlock()
			return n, nil
		}
		err, eof, dl := s.err, s.eof, s.deadline
		s.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case eof:
			return 0, io.EOF
		case !dl.IsZero() && !time.Now().Before(dl):
			return 0, timeoutError{}
		}
		var tc <-chan time.Time
		if !dl.IsZero() {
			if timer == nil {
				timer = time.NewTimer(time.Until(dl))
			} else {
				timer.Reset(time.Until(dl))
			}
			tc = timer.C
		}
		select {
		case <-s.wake:
		case <-tc:
		}
	}
}

// Write implements net.Conn.
func (s *relayStream) Write(b []byte) (int, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n := 0
	for len(b) > 0 {
		k := min(len(b), relayChunk)
		if err := s.send(&RelayFrame{S: s.id, Op: RelayData, D: b[:k]}); err != nil {
			return n, err
		}
		n += k
		b = b[k:]
	}
	return n, nil
}

// Close implements net.Conn: the far end is told.
func (s *relayStream) Close() error {
	s.mu.Lock()
	was := s.err
	if s.err == nil {
		s.err = net.ErrClosed
	}
	s.buf = nil // nobody reads it now
	s.uncharge(s.charged)
	s.mu.Unlock()
	s.nudge()
	if was == nil {
		s.send(&RelayFrame{S: s.id, Op: RelayClose})
	}
	s.once.Do(func() { s.gone(s.id) })
	return nil
}

// LocalAddr implements net.Conn.
func (s *relayStream) LocalAddr() net.Addr { return s.local }

// RemoteAddr implements net.Conn.
func (s *relayStream) RemoteAddr() net.Addr { return s.peer }

// SetDeadline implements net.Conn.
func (s *relayStream) SetDeadline(t time.Time) error { return s.SetReadDeadline(t) }

// SetReadDeadline implements net.Conn.
func (s *relayStream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
	s.nudge()
	return nil
}

// SetWriteDeadline implements net.Conn: writes never block.
func (s *relayStream) SetWriteDeadline(time.Time) error { return nil }

// relayMux is a relay's upstream connection, on the master's side: a
// net.Listener whose Accept yields the streams the relay opens.
type relayMux struct {
	name string
	conn *Conn
	log  *slog.Logger
	// budget bounds the bytes every relay's streams hold together (the
	// master's; its own when nil); odd logs the streams closed over it,
	// rate-limited.
	budget *relayBudget
	odd    *slog.Logger

	mu      sync.Mutex
	streams map[uint32]*relayStream
	empty   chan struct{} // closed once streams is empty (drained)
	accept  chan *relayStream
	closed  bool
	done    chan struct{}
}

func newRelayMux(name string, conn *Conn, log *slog.Logger) *relayMux {
	// Room for every stream the relay may have open: a burst of opens
	// (anyone can make one through the relay's port) waits for the
	// handshake gate, which refuses with a reason, rather than being
	// closed unheard, honest workers among them.
	return &relayMux{name: name, conn: conn, log: log, streams: map[uint32]*relayStream{},
		accept: make(chan *relayStream, MaxRelayStreams), done: make(chan struct{})}
}

// handle takes one frame from the relay (on its connection's reader).
func (x *relayMux) handle(msg Message) {
	r, ok := msg.(*RelayFrame)
	if !ok {
		x.log.Warn("unexpected message from a relay; closing it", "relay", x.name, "type", msg.Type())
		x.conn.SendAndClose(&Reject{Reason: fmt.Sprintf("unexpected %v from a relay", msg.Type())})
		return
	}
	switch r.Op {
	case RelayOpen:
		x.mu.Lock()
		_, dup := x.streams[r.S]
		full := len(x.streams) >= MaxRelayStreams
		var s *relayStream
		if !dup && !full && !x.closed {
			send := func(m *RelayFrame) error { return x.conn.Send(m) }
			peer := relayAddr{relay: x.name, stream: r.S, host: hostOf(x.conn.RemoteAddr()), from: openedFrom(r.D)}
			s = newRelayStream(r.S, x.conn.LocalAddr(), peer, send, x.forget)
			if x.budget != nil {
				s.budget = x.budget
			}
			s.overrun = x.overrun
			x.streams[r.S] = s
		}
		x.mu.Unlock()
		if s == nil {
			x.conn.Send(&RelayFrame{S: r.S, Op: RelayClose})
			return
		}
		select {
		case x.accept <- s:
		default:
			// Nobody accepts fast enough: refuse rather than block the
			// relay's reader.
			s.Close()
		}
	case RelayData:
		x.mu.Lock()
		s := x.streams[r.S]
		x.mu.Unlock()
		if s != nil {
			s.deliver(r.D)
		}
	case RelayClose:
		x.mu.Lock()
		s := x.streams[r.S]
		x.mu.Unlock()
		if s != nil {
			s.remoteClose()
		}
	}
}

// overrun logs a stream closed for holding too much, rate-limited.
func (x *relayMux) overrun(s *relayStream, err error) {
	log := x.odd
	if log == nil {
		log = x.log
	}
	log.Warn("closing a relayed stream that holds too much unread", "relay", x.name, "stream", s.id, "from", s.peer.(relayAddr).from, "reason", err)
}

func (x *relayMux) forget(id uint32) {
	x.mu.Lock()
	delete(x.streams, id)
	if len(x.streams) == 0 && x.empty != nil {
		close(x.empty)
		x.empty = nil
	}
	x.mu.Unlock()
}

// drained is closed once the relay has no stream open.
func (x *relayMux) drained() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	ch := make(chan struct{})
	if len(x.streams) == 0 {
		close(ch)
	} else {
		x.empty = ch
	}
	return ch
}

// Accept implements net.Listener.
func (x *relayMux) Accept() (net.Conn, error) {
	select {
	case s := <-x.accept:
		return s, nil
	case <-x.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: the relay is gone, and with it every
// stream.
func (x *relayMux) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	streams := x.streams
	x.streams = map[uint32]*relayStream{}
	x.mu.Unlock()
	close(x.done)
	for _, s := range streams {
		s.fail(io.EOF)
	}
	x.conn.Close()
	return nil
}

// Addr implements net.Listener.
func (x *relayMux) Addr() net.Addr { return relayAddr{relay: x.name} }

// relays is the master's registry of the relays connected to it.
type relays struct {
	mu     sync.Mutex
	byName map[string]*relayMux
	// byes counts the relays not yet told that the run is over: Close
	// waits for them (awaitByes) before it closes the connections; once
	// closing, no relay is added.
	byes    sync.WaitGroup
	closing bool
}

// awaitByes waits until every relay has been told that the run is over.
func (r *relays) awaitByes() {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	r.byes.Wait()
}

// acceptRelay serves a relay's upstream connection: its streams are
// served as the master's own listener is.
func (m *Master) acceptRelay(conn *Conn, h *Hello) {
	x := newRelayMux(h.Name, conn, m.log)
	x.budget, x.odd = m.relayBudget, m.relayOdd
	m.relayReg.mu.Lock()
	if m.relayReg.closing {
		m.relayReg.mu.Unlock()
		conn.SendAndClose(m.bye())
		return
	}
	if m.relayReg.byName == nil {
		m.relayReg.byName = map[string]*relayMux{}
	}
	old := m.relayReg.byName[h.Name]
	if old != nil && old.conn.Err() == nil && hostOf(old.conn.RemoteAddr()) != hostOf(conn.RemoteAddr()) {
		// As for workers (joined): a name proves nothing, and a live
		// relay keeps it against another host (one whose link has
		// ended, not yet struck off, does not).
		m.relayReg.mu.Unlock()
		reason := fmt.Sprintf("relay name %q is in use by a connection from another host; try again once it ends", logx.Cut(h.Name, logx.MaxErrText))
		m.refusals.Add(RefusedOther, conn.RemoteAddr().String()+": "+reason)
		conn.SendAndClose(&Reject{Reason: reason})
		return
	}
	m.relayReg.byName[h.Name] = x
	m.relayReg.byes.Add(1)
	m.relayReg.mu.Unlock()
	if old != nil {
		old.Close() // the same relay reconnected: the old link is dead
	}
	m.log.Info("relay connected", "relay", h.Name, "addr", conn.RemoteAddr().String())
	conn.Start(x.handle)
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		defer m.relayReg.byes.Done()
		select {
		case <-conn.Done():
			m.log.Warn("relay lost; its workers' connections close and their tasks go back to the queue", "relay", h.Name, "cause", conn.Err())
		case <-m.loopCtx.Done():
			m.byeRelay(x)
		}
		x.Close()
		m.relayReg.mu.Lock()
		if m.relayReg.byName[h.Name] == x {
			delete(m.relayReg.byName, h.Name)
		}
		m.relayReg.mu.Unlock()
	}()
	go func() {
		defer m.wg.Done()
		m.serveRelay(x)
	}()
}

// byeRelay tells a relay that the run is over, once the loop has told its
// workers (their Shutdowns travel on the relay's connection, before this
// one) and their streams have closed, so that the relay ends, or waits
// for the next master, as its workers do. It waits no longer than
// ShutdownGrace.
func (m *Master) byeRelay(x *relayMux) {
	<-m.done
	t := time.NewTimer(m.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-x.drained():
	case <-t.C:
	}
	x.conn.SendAndClose(m.bye())
	select {
	case <-x.conn.Done():
	case <-t.C:
	}
}

// bye is the master's last word to a relay, as to its workers.
func (m *Master) bye() *Shutdown {
	if m.restart.Load() {
		return &Shutdown{Reason: "master interrupted; it will be back", Restart: true}
	}
	return &Shutdown{Reason: "run over"}
}

// serveRelay accepts a relay's streams and runs each one's handshake,
// as acceptLoop does for the master's listener.
func (m *Master) serveRelay(x *relayMux) {
	for {
		nc, err := x.Accept()
		if err != nil {
			return
		}
		ip := sourceIP(nc.RemoteAddr())
		if kind, reason := m.gate.enter(ip); kind != "" {
			m.refuseConn(nc, kind, reason)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.handshake(nc, func() { m.gate.leave(ip) })
		}()
	}
}

// relayNamed is the relay connected under name, or nil.
func (m *Master) relayNamed(name string) *relayMux {
	m.relayReg.mu.Lock()
	defer m.relayReg.mu.Unlock()
	return m.relayReg.byName[name]
}

// dropRelay drops a relay that gossip says is gone (and whose link did
// not answer, probe.go): it speaks for its workers, which go with it.
func (m *Master) dropRelay(x *relayMux) {
	if x.conn.Err() != nil {
		return // closed already, and logged as lost
	}
	m.log.Warn("gossip says a relay is gone; dropping it and its workers", "relay", x.name)
	x.Close()
}

// Relays is the number of relays connected to the master now.
func (m *Master) Relays() int {
	m.relayReg.mu.Lock()
	defer m.relayReg.mu.Unlock()
	return len(m.relayReg.byName)
}

// RelayConfig configures RunRelay.
type RelayConfig struct {
	// Listener accepts the downstream connections: workers, or relays
	// further down. Required; RunRelay closes it when it returns.
	Listener net.Listener
	// Upstream returns the address to dial upstream (the master's data
	// address, or another relay's downstream address); attempt counts
	// the failures so far. Required.
	Upstream func(ctx context.Context, attempt int) (string, error)
	// Key is the cluster key; Name the relay's name (its gossip member
	// name, if it gossips). Required.
	Key  *Key
	Name string
	// Conn tunes the upstream connection.
	Conn ConnConfig
	// MinBackoff and MaxBackoff bound the wait between upstream
	// connection attempts. Defaults 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// Once makes Run return ErrRelayRunOver when the master ends its run (its
	// workers, told before the relay, end too), as a worker started with
	// -once does. Default false: the relay waits for the next master.
	Once bool
	// Network dials upstream. Default TCP; a simulated network in tests.
	Network Network
	// Rand draws the jitter of reconnection waits. Default: a generator
	// seeded at random (a simulation seeds it).
	Rand *rand.Rand
	// MaxBuffered bounds the bytes that all the relay's streams hold
	// together, waiting for their workers to read them (a stream alone
	// holds 64 MiB at most): a stream that would pass it is closed, and
	// the master told. Default DefaultRelayBuffered (256 MiB).
	MaxBuffered int
	// Logger receives the relay's logs. Default slog.Default().
	Logger *slog.Logger
}

// ErrRelayRunOver is what a relay's Run returns (with RelayConfig.Once)
// when the master ended the run.
var ErrRelayRunOver = errors.New("grid: relay: the master ended the run")

// RelayStats counts what a relay carried.
type RelayStats struct {
	Upstreams int64 // upstream connections made
	Streams   int64 // downstream connections carried
	Open      int   // streams open now
}

// Relay is a running relay.
type Relay struct {
	cfg     RelayConfig
	log     *slog.Logger
	odd     *slog.Logger // rate-limited: what an upstream should not have sent (a key holder may pose as it)
	mu      sync.Mutex
	up      *Conn
	over    *Shutdown // the master's word that the run is over, on up
	down    map[uint32]*downstream
	places  *member.Slots // the downstream connections' places, by address
	budget  *relayBudget  // the bytes queued for every downstream connection together
	next    uint32
	stats   RelayStats
	wg      sync.WaitGroup
	stopped chan struct{}
}

// downstream is one downstream connection: its socket and the writer
// that empties the bytes queued for it.
type downstream struct {
	nc      net.Conn
	src     string // its address, which holds a place until drop gives it back
	held    bool   // the place is still held (under Relay.mu)
	mu      sync.Mutex
	q       []byte
	charged int     // bytes queued and not yet written, taken from Relay.budget
	fin     bool    // upstream closed the stream, or is gone: close once q is written
	hs      hsWatch // the master's side of the handshake, as it comes down
	wake    chan struct{}
	dead    chan struct{}
	once    sync.Once
}

func (d *downstream) close() { d.once.Do(func() { close(d.dead); d.nc.Close() }) }

// hsWatch follows the master's first two frames on a stream, its
// Challenge and then its Welcome (or Reject), which go in clear: until
// both have come, an honest worker has sent its Hello and nothing more.
type hsWatch struct {
	frames int     // whole frames seen, up to 2
	hdr    [4]byte // the current frame's length prefix, as it comes
	nhdr   int
	left   int // bytes of the current frame still to come
}

// feed follows b, the next bytes from the master.
func (h *hsWatch) feed(b []byte) {
	for len(b) > 0 && h.frames < 2 {
		if h.nhdr < 4 {
			n := copy(h.hdr[h.nhdr:], b)
			h.nhdr += n
			b = b[n:]
			if h.nhdr == 4 {
				h.left = int(binary.BigEndian.Uint32(h.hdr[:]))
			}
		} else {
			n := min(len(b), h.left)
			h.left -= n
			b = b[n:]
		}
		if h.nhdr == 4 && h.left == 0 {
			h.frames++
			h.nhdr = 0
		}
	}
}

// over reports whether the handshake is over (under d.mu).
func (h *hsWatch) over() bool { return h.frames >= 2 }

// written gives back to budget up to n bytes of what d took.
func (d *downstream) written(budget *relayBudget, n int) {
	d.mu.Lock()
	n = min(n, d.charged)
	d.charged -= n
	d.mu.Unlock()
	budget.give(n)
}

// finish closes the downstream connection once what is queued for it is
// written (a master's last word, its Shutdown, must reach the worker).
func (d *downstream) finish() {
	d.mu.Lock()
	d.fin = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// RunRelay runs a relay until ctx is done: it keeps one upstream
// connection (reconnecting with backoff when it breaks) and carries
// every downstream connection over it as a stream. While it has no
// upstream, it refuses downstream connections (their workers retry).
func RunRelay(ctx context.Context, cfg RelayConfig) error {
	r, err := NewRelay(cfg)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// NewRelay checks cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.Listener == nil:
		return nil, errors.New("grid: relay: no listener")
	case cfg.Upstream == nil:
		return nil, errors.New("grid: relay: no upstream")
	case cfg.Key == nil:
		return nil, fmt.Errorf("grid: relay: %w", ErrNoKey)
	case cfg.Name == "":
		return nil, errors.New("grid: relay: no name")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.Network == nil {
		cfg.Network = TCP
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Conn.Logger == nil {
		cfg.Conn.Logger = cfg.Logger
	}
	log := cfg.Logger.With("relay", cfg.Name)
	return &Relay{cfg: cfg, log: log, odd: LimitLog(log, 1, 10), down: map[uint32]*downstream{},
		places: member.NewSlots(MaxRelayStreams, relayPerSource, relayReserved), budget: newRelayBudget(cfg.MaxBuffered),
		stopped: make(chan struct{})}, nil
}

// Addr is the relay's downstream address.
func (r *Relay) Addr() string { return r.cfg.Listener.Addr().String() }

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Open = len(r.down)
	return st
}

// Run serves until ctx is done, or, with Once, until the master ends the
// run (ErrRelayRunOver).
func (r *Relay) Run(ctx context.Context) error {
	defer r.wg.Wait()
	defer close(r.stopped)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.acceptLoop(ctx)
	}()
	stop := context.AfterFunc(ctx, func() { r.cfg.Listener.Close() })
	defer stop()
	defer r.cfg.Listener.Close()
	backoff := r.cfg.MinBackoff
	var quiet relayQuiet
	for attempt := 0; ctx.Err() == nil; attempt++ {
		addr, err := r.cfg.Upstream(ctx, attempt)
		var up *Conn
		if err == nil {
			up, _, err = Dial(ctx, addr, DialConfig{Key: r.cfg.Key, Name: r.cfg.Name, Slots: 1, Problems: []string{helloRelay}, Conn: r.cfg.Conn, Dial: r.cfg.Network.Dial})
		}
		if err != nil {
			if ctx.Err() == nil {
				quiet.log(r.log, err, "addr", addr, "retry_in", backoff)
			}
			sleepCtx(ctx, time.Duration(float64(backoff)*(0.8+0.4*r.cfg.Rand.Float64())))
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		attempt = -1
		r.mu.Lock()
		r.up = up
		r.over = nil
		r.stats.Upstreams++
		r.mu.Unlock()
		r.log.Info("relay connected upstream", "addr", addr)
		up.Start(r.fromUpstream)
		select {
		case <-up.Done():
		case <-ctx.Done():
			up.Close()
		}
		r.mu.Lock()
		r.up = nil
		down, over := r.down, r.over
		r.down = map[uint32]*downstream{}
		r.mu.Unlock()
		for _, d := range down {
			d.finish()
		}
		var rej *RejectError
		if ctx.Err() == nil && errors.As(up.Err(), &rej) {
			// Refused after the handshake (its name is taken, say):
			// backed off as a failed dial is, or the relay would
			// handshake again at once, thousands of times a second.
			quiet.log(r.log, rej, "addr", addr, "retry_in", backoff)
			sleepCtx(ctx, time.Duration(float64(backoff)*(0.8+0.4*r.cfg.Rand.Float64())))
			backoff = min(2*backoff, r.cfg.MaxBackoff)
			continue
		}
		backoff = r.cfg.MinBackoff
		quiet = relayQuiet{}
		switch {
		case ctx.Err() != nil:
		case over != nil && over.Restart:
			r.log.Info("the master was interrupted; waiting for it to come back", "addr", addr)
		case over != nil && r.cfg.Once:
			r.log.Info("the run is over; the relay ends")
			return ErrRelayRunOver
		case over != nil:
			r.log.Info("the run is over; waiting for the next master", "addr", addr)
		default:
			r.log.Warn("lost upstream; closing the relayed connections", "addr", addr, "err", up.Err())
		}
	}
	return ctx.Err()
}

// sleepCtx waits d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// relayQuiet logs failed upstream attempts: the first, then only a
// changed reason or one line a minute that counts the attempts, so that
// a relay waiting for its master for days does not fill its log.
type relayQuiet struct {
	last     string
	lastAt   time.Time
	repeated int
}

func (q *relayQuiet) log(log *slog.Logger, err error, args ...any) {
	msg := err.Error()
	if msg == q.last && time.Since(q.lastAt) < time.Minute {
		q.repeated++
		return
	}
	if msg == q.last {
		args = append(args, "attempts_since_last_line", q.repeated+1)
	}
	q.last, q.lastAt, q.repeated = msg, time.Now(), 0
	log.Warn("cannot reach upstream; retrying", append([]any{"err", msg}, args...)...)
}

// acceptLoop accepts downstream connections and opens a stream for each.
func (r *Relay) acceptLoop(ctx context.Context) {
	for {
		nc, err := r.cfg.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			r.log.Warn("accept failed", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			continue
		}
		src := sourceIP(nc.RemoteAddr())
		r.mu.Lock()
		up := r.up
		if up == nil {
			r.mu.Unlock()
			nc.Close() // no upstream: the worker retries
			continue
		}
		if why := r.places.Take(src); why != "" {
			r.mu.Unlock()
			r.refuse(nc, why)
			continue
		}
		r.next++
		id := r.next
		d := &downstream{nc: nc, src: src, held: true, wake: make(chan struct{}, 1), dead: make(chan struct{})}
		r.down[id] = d
		r.stats.Streams++
		r.mu.Unlock()
		// The master's handshake gate counts the stream by its source.
		if err := up.Send(&RelayFrame{S: id, Op: RelayOpen, D: []byte(src)}); err != nil {
			r.drop(id, d)
			continue
		}
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			r.readDown(id, d, up)
		}()
		go func() {
			defer r.wg.Done()
			r.writeDown(id, d)
		}()
	}
}

// drop forgets a downstream connection, gives back its place and
// closes it.
func (r *Relay) drop(id uint32, d *downstream) {
	r.mu.Lock()
	if r.down[id] == d {
		delete(r.down, id)
	}
	if d.held {
		d.held = false
		r.places.Give(d.src)
	}
	r.mu.Unlock()
	d.close()
	d.written(r.budget, math.MaxInt) // what is queued is not written now
}

// refuse tells a downstream connection the relay has no place for it
// why, in the handshake's Reject (which its worker logs), and closes it.
func (r *Relay) refuse(nc net.Conn, why string) {
	reason := "relay busy: its last places are kept for new addresses; try again"
	switch why {
	case member.SlotsFull:
		reason = fmt.Sprintf("relay busy: %d connections; try again", MaxRelayStreams)
	case member.SlotsPerSource:
		reason = fmt.Sprintf("relay busy: %d connections from your address; try again", relayPerSource)
	}
	if b, err := AppendFrame(nil, &Reject{Reason: reason}, handshakeMaxFrame); err == nil {
		nc.SetWriteDeadline(time.Now().Add(refuseWriteLimit))
		nc.Write(b)
	}
	nc.Close()
}

// readDown carries what a downstream connection sends upstream. Once
// upstream is gone it reads on, discarding, until the peer hangs up or
// writeDown closes: a socket closed with unread bytes is reset, and a
// reset loses what the peer had not read yet (the master's last word).
//
// Until the master's Welcome has come down, it carries a Hello's worth
// at most (relayHelloBuffered): anyone may connect to the relay's port,
// and a flood sent before the master could refuse it would fill the
// upstream connection's queue (its cap closes it, and every stream on
// it), faster than the master's refusals come back through that queue.
func (r *Relay) readDown(id uint32, d *downstream, up *Conn) {
	buf := make([]byte, relayChunk)
	upGone := false
	early := 0 // bytes carried before the handshake was over
	for {
		n, err := d.nc.Read(buf)
		if n > 0 && early >= 0 {
			d.mu.Lock()
			over := d.hs.over()
			d.mu.Unlock()
			if early += n; over {
				early = -1 // no need to look again
			} else if early > relayHelloBuffered {
				r.odd.Warn("a relayed connection sent more than a hello before its handshake ended; closing it", "stream", id, "from", d.src)
				if !upGone {
					up.Send(&RelayFrame{S: id, Op: RelayClose})
				}
				r.drop(id, d)
				return
			}
		}
		if n > 0 && !upGone && up.Send(&RelayFrame{S: id, Op: RelayData, D: buf[:n]}) != nil {
			upGone = true
			d.finish() // what upstream sent last still goes down
		}
		if err != nil {
			break
		}
	}
	select {
	case <-d.dead: // closed by the upstream side: it knows
	default:
		up.Send(&RelayFrame{S: id, Op: RelayClose})
	}
	r.drop(id, d)
}

// writeDown writes what arrives from upstream to the downstream
// connection, from its queue, so that the upstream reader never blocks
// on a slow worker.
func (r *Relay) writeDown(id uint32, d *downstream) {
	var out []byte
	for {
		select {
		case <-d.wake:
		case <-d.dead:
			return
		}
		d.mu.Lock()
		out, d.q = d.q, out[:0]
		fin := d.fin
		d.mu.Unlock()
		if len(out) > 0 {
			d.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := d.nc.Write(out); err != nil {
				r.drop(id, d)
				return
			}
			d.written(r.budget, len(out))
		}
		if fin {
			d.mu.Lock()
			empty := len(d.q) == 0
			d.mu.Unlock()
			if empty {
				r.lingerDrop(id, d)
				return
			}
		}
	}
}

// relayLinger bounds how long a downstream connection whose last bytes
// are written waits for its peer to hang up.
const relayLinger = 2 * time.Second

// lingerDrop ends a downstream connection once its last bytes are
// written: it half-closes, so the peer reads them and then the end, and
// waits for the peer to hang up (readDown sees it and drops the
// connection), no longer than relayLinger.
func (r *Relay) lingerDrop(id uint32, d *downstream) {
	if cw, ok := d.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		t := time.NewTimer(relayLinger)
		select {
		case <-d.dead:
		case <-t.C:
		}
		t.Stop()
	}
	r.drop(id, d)
}

// fromUpstream handles a frame from upstream (on the upstream reader).
func (r *Relay) fromUpstream(msg Message) {
	if sd, ok := msg.(*Shutdown); ok {
		// The master's last word, after its workers': the run is over.
		r.mu.Lock()
		r.over = sd
		r.mu.Unlock()
		return
	}
	x, ok := msg.(*RelayFrame)
	if !ok {
		r.odd.Warn("unexpected message from upstream", "type", msg.Type())
		return
	}
	r.mu.Lock()
	d := r.down[x.S]
	r.mu.Unlock()
	if d == nil {
		return
	}
	d.mu.Lock()
	select {
	case <-d.dead: // dropped: nothing it takes now would be given back
		d.mu.Unlock()
		return
	default:
	}
	switch x.Op {
	case RelayData:
		var over error
		switch {
		case d.charged+len(x.D) > relayBuffered:
			over = errRelayOverrun
		case !r.budget.take(len(x.D)):
			over = errRelayTotal
		}
		if over != nil {
			d.mu.Unlock()
			// The master is told, as when the worker hangs up, and
			// the log is rate-limited: a key holder posing as the
			// master may fill stream after stream.
			r.odd.Warn("a relayed worker does not read what its master sends; dropping it", "stream", x.S, "from", d.src, "reason", over)
			r.drop(x.S, d)
			r.mu.Lock()
			up := r.up
			r.mu.Unlock()
			if up != nil {
				up.Send(&RelayFrame{S: x.S, Op: RelayClose})
			}
			return
		}
		d.q = append(d.q, x.D...)
		d.charged += len(x.D)
		d.hs.feed(x.D)
	case RelayClose:
		d.fin = true
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
