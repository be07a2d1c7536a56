// Package member holds what gossip needs below the grid: a memberlist
// Transport with bounds (wrapping memberlist's own NetTransport), and the
// Tally that turns what anyone on the network can cause into a summary
// rather than a flood of log lines. It imports memberlist and the
// standard library only.
package member

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Why bounds. memberlist reads an encrypted TCP stream (a push/pull of
// the cluster's state, message type 10) in full before it can check it:
// the 4-byte length after the type may claim up to 20 MiB, and nothing
// bounds how many such streams run at once. So anyone who can reach the
// gossip port, without the key, can make a node buffer 20 MiB per
// stream. This transport takes each stream before memberlist does:
//
//   - at most MaxStreams inbound streams at once, MaxStreamsPerSource
//     from one address, and the last ReservedStreams of them only for
//     addresses that have none open (Slots): an honest peer that
//     opens a stream is admitted whenever fewer than Slots.Lockout()
//     other addresses hold streams (50 with the defaults), whatever
//     they send and however fast they reopen;
//   - a token bucket per source address (StreamRate per second, bursts
//     of StreamBurst);
//   - the first 5 bytes within HeaderTimeout, and an encrypted stream
//     whose length claims more than the size cap is refused before a
//     byte of it is buffered; no stream may feed memberlist more than the
//     cap (nor may a peer this node dialled), and none lasts longer than
//     StreamTimeout, so a stream that trickles its bytes (a slowloris)
//     holds its place at most that long;
//   - a UDP datagram that cannot be an encrypted memberlist packet (too
//     short, or an unknown version byte) is dropped before memberlist
//     tries to decrypt it and logs a line.
//
// The size cap follows the cluster: a push/pull carries one entry per
// node (name, address, metadata of at most a few hundred bytes), so the
// cap is StreamBase + PerNode × max(MinNodes, 2 × the members known now)
// — room for a cluster twice the size this node sees (a restarted master
// that knows nobody yet still takes the state of a full lab).
//
// Memberlist buffers a stream as it arrives, so the most an attacker
// without the key can make this node hold is MaxStreams × the cap
// (12 MiB with the defaults and up to 64 members).
//
// Every refusal is counted in the Tally, which logs one summary line per
// interval; none is logged one by one.

// Defaults.
const (
	DefaultMaxStreams          = 64
	DefaultMaxStreamsPerSource = 8
	DefaultReservedStreams     = 48
	DefaultStreamRate          = 16 // per second and source
	DefaultStreamBurst         = 64
	DefaultHeaderTimeout       = 2 * time.Second
	DefaultStreamTimeout       = 5 * time.Second
	DefaultStreamBase          = 64 << 10
	DefaultPerNode             = 1 << 10
	DefaultMinNodes            = 128
	// maxSources bounds the table of token buckets: when it is full,
	// the buckets of the sources with no stream open are forgotten
	// (they start full again), so that no number of addresses can fill
	// it for good.
	maxSources = 4096
)

// memberlist's message types that matter here (net.go).
const (
	encryptMsg = 10
	// An encrypted packet is at least version (1) + nonce (12) + tag
	// (16) bytes; the version byte is 0 or 1.
	minEncryptedPacket = 29
	maxEncryptVersion  = 1
)

// Kinds of refusal, as counted in the Tally.
const (
	RefusedBusy      = "refused_busy"       // MaxStreams open, or all but the reserve and the address has some
	RefusedPerSource = "refused_per_source" // MaxStreamsPerSource from that address
	RefusedRate      = "refused_rate"       // the source's token bucket was empty
	RefusedTooLarge  = "refused_too_large"  // the stream claimed more than the cap
	RefusedSlow      = "refused_slow"       // no header within HeaderTimeout
	RefusedEmpty     = "refused_empty"      // closed before its header
	CutTooLarge      = "cut_too_large"      // sent more than the cap
	JunkDatagram     = "junk_datagram"      // a UDP datagram that cannot be gossip
)

// TransportConfig configures a Transport. Zero fields take the defaults.
type TransportConfig struct {
	// BindAddr and BindPort are where gossip listens (TCP and UDP); port 0
	// lets the OS choose (Port says which).
	BindAddr string
	BindPort int
	// Logger is memberlist's logger, for the NetTransport's own lines.
	Logger *log.Logger
	// MaxStreams bounds the inbound streams open at once (default 64),
	// MaxStreamsPerSource those from one address (default 8), and the
	// last ReservedStreams of them (default 48) go only to addresses
	// with none open (see Slots).
	MaxStreams, MaxStreamsPerSource, ReservedStreams int
	// StreamRate and StreamBurst shape each source address's token
	// bucket of inbound streams.
	StreamRate  float64
	StreamBurst int
	// HeaderTimeout bounds the wait for a stream's first 5 bytes, and
	// StreamTimeout a stream's whole life.
	HeaderTimeout, StreamTimeout time.Duration
	// StreamBase, PerNode and MinNodes size the cap on one stream:
	// StreamBase + PerNode × max(MinNodes, 2 × Nodes()).
	StreamBase, PerNode, MinNodes int
	// Nodes reports the members known now (memberlist.NumMembers, once
	// memberlist exists). Nil: MinNodes.
	Nodes func() int
	// Tally counts refusals (nil: counted nowhere but Stats).
	Tally *Tally
}

func (c TransportConfig) withDefaults() TransportConfig {
	if c.BindAddr == "" {
		c.BindAddr = "0.0.0.0"
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxStreams, DefaultMaxStreams)
	def(&c.MaxStreamsPerSource, DefaultMaxStreamsPerSource)
	if c.ReservedStreams <= 0 {
		c.ReservedStreams = min(DefaultReservedStreams, c.MaxStreams*3/4)
	}
	def(&c.StreamBurst, DefaultStreamBurst)
	def(&c.StreamBase, DefaultStreamBase)
	def(&c.PerNode, DefaultPerNode)
	def(&c.MinNodes, DefaultMinNodes)
	c.MaxStreamsPerSource = min(c.MaxStreamsPerSource, c.MaxStreams)
	if c.StreamRate <= 0 {
		c.StreamRate = DefaultStreamRate
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.StreamTimeout <= 0 {
		c.StreamTimeout = DefaultStreamTimeout
	}
	if c.Logger == nil {
		c.Logger = log.New(io.Discard, "", 0)
	}
	return c
}

// TransportStats counts what a Transport let through and refused.
type TransportStats struct {
	Streams  int64            // inbound streams handed to memberlist
	Packets  int64            // datagrams handed to memberlist
	Refused  map[string]int64 // by kind (the Refused* and JunkDatagram constants)
	Open     int              // inbound streams open now
	Lockout  int              // the fewest addresses that can hold every stream place (Slots.Lockout)
	MaxBytes int              // the cap on one stream now
	Largest  int              // the largest encrypted stream admitted so far, in bytes
}

// Transport is a memberlist.NodeAwareTransport: memberlist's
// NetTransport behind the bounds described above.
type Transport struct {
	cfg   TransportConfig
	inner *memberlist.NetTransport
	// loopback is the bound address when it is a loopback one, and
	// local this machine's addresses then: see reroute.
	loopback netip.Addr
	local    map[netip.Addr]bool

	streamCh chan net.Conn
	packetCh chan *memberlist.Packet
	done     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	slots   *Slots
	sources map[string]*source // token buckets

	streams, packets atomic.Int64
	largest          atomic.Int64
	refusedMu        sync.Mutex
	refused          map[string]int64
}

// source is one address's token bucket.
type source struct {
	tokens float64
	last   time.Time
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// NewTransport listens on cfg's address and port (TCP and UDP) and
// starts taking streams and datagrams. With port 0 it retries a few
// times: the OS picks a free TCP port, which may be taken for UDP.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	cfg = cfg.withDefaults()
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{cfg.BindAddr}, BindPort: cfg.BindPort, Logger: cfg.Logger}
	tries := 1
	if cfg.BindPort == 0 {
		tries = 10
	}
	var inner *memberlist.NetTransport
	var err error
	for range tries {
		if inner, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:      cfg,
		inner:    inner,
		streamCh: make(chan net.Conn),
		packetCh: make(chan *memberlist.Packet),
		done:     make(chan struct{}),
		slots:    NewSlots(cfg.MaxStreams, cfg.MaxStreamsPerSource, cfg.ReservedStreams),
		sources:  make(map[string]*source),
		refused:  make(map[string]int64),
	}
	t.loopback, t.local = loopbackAndLocal(cfg.BindAddr)
	t.wg.Add(2)
	go t.takeStreams()
	go t.takePackets()
	return t, nil
}

// Port is the port the transport listens on (TCP and UDP).
func (t *Transport) Port() int { return t.inner.GetAutoBindPort() }

// SetNodes sets the function that reports the members known now, which
// sizes the stream cap (memberlist exists only once the transport does).
func (t *Transport) SetNodes(f func() int) {
	t.mu.Lock()
	t.cfg.Nodes = f
	t.mu.Unlock()
}

// MaxStreamBytes is the cap on one stream now.
func (t *Transport) MaxStreamBytes() int {
	t.mu.Lock()
	f := t.cfg.Nodes
	t.mu.Unlock()
	n := 0
	if f != nil {
		n = 2 * f()
	}
	return t.cfg.StreamBase + t.cfg.PerNode*max(t.cfg.MinNodes, n)
}

// Stats returns the transport's counters so far.
func (t *Transport) Stats() TransportStats {
	st := TransportStats{Streams: t.streams.Load(), Packets: t.packets.Load(), MaxBytes: t.MaxStreamBytes(),
		Largest: int(t.largest.Load())}
	t.refusedMu.Lock()
	st.Refused = make(map[string]int64, len(t.refused))
	for k, v := range t.refused {
		st.Refused[k] = v
	}
	t.refusedMu.Unlock()
	t.mu.Lock()
	st.Open, st.Lockout = t.slots.Held(), t.slots.Lockout()
	t.mu.Unlock()
	return st
}

func (t *Transport) refuse(kind string, from net.Addr, why string) {
	t.refusedMu.Lock()
	t.refused[kind]++
	t.refusedMu.Unlock()
	addr := "?"
	if from != nil {
		addr = from.String()
	}
	t.cfg.Tally.Add(kind, addr+": "+why)
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

// WriteTo implements memberlist.Transport.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.inner.WriteTo(b, t.reroute(addr))
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	a.Addr = t.reroute(a.Addr)
	return t.inner.WriteToAddress(b, a)
}

// loopbackAndLocal returns the bind address and this machine's addresses
// when the bind address is a loopback one (nothing otherwise).
func loopbackAndLocal(bind string) (netip.Addr, map[netip.Addr]bool) {
	ip, err := netip.ParseAddr(bind)
	if err != nil || !ip.Unmap().IsLoopback() {
		return netip.Addr{}, nil
	}
	local := make(map[netip.Addr]bool)
	addrs, _ := net.InterfaceAddrs() // none known: only the other loopback is rerouted
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if la, ok := netip.AddrFromSlice(n.IP); ok {
				local[la.Unmap()] = true
			}
		}
	}
	return ip.Unmap(), local
}

// reroute says where to send what memberlist sends to addr. A transport
// bound to loopback cannot send to an address of the other family (an
// IPv4 socket has no IPv6 route), yet that is what a member on this
// machine bound to every interface advertises when the machine's
// private address is IPv6: the master of "esrun -gossip 0.0.0.0:7946" for
// "esworker -join 127.0.0.1:7946". Such a member listens on loopback too,
// so its packets and streams go there, at the same port; every other
// address is left as it is (one of the same family is reachable).
func (t *Transport) reroute(addr string) string {
	if !t.loopback.IsValid() {
		return addr
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() == t.loopback.Is4() || !(ip.IsLoopback() || t.local[ip]) {
		return addr
	}
	return netip.AddrPortFrom(t.loopback, ap.Port()).String()
}

// PacketCh implements memberlist.Transport.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout implements memberlist.Transport.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport. What the
// peer sends back is capped like an inbound stream.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	a.Addr = t.reroute(a.Addr)
	c, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c, budget: int64(t.MaxStreamBytes()), t: t}, nil
}

// StreamCh implements memberlist.Transport.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown implements memberlist.Transport: memberlist calls it while its
// own readers still take what is in flight.
func (t *Transport) Shutdown() error {
	var err error
	t.stopOnce.Do(func() {
		err = t.inner.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return err
}

// takeStreams admits or refuses each inbound stream.
func (t *Transport) takeStreams() {
	defer t.wg.Done()
	for {
		select {
		case c := <-t.inner.StreamCh():
			t.admit(c)
		case <-t.done:
			return
		}
	}
}

// admit applies the places and the rate, then checks the header on a
// goroutine of the stream's own (holding its place).
func (t *Transport) admit(c net.Conn) {
	ip := hostOf(c.RemoteAddr())
	now := time.Now()
	t.mu.Lock()
	s := t.sources[ip]
	if s == nil {
		if len(t.sources) >= maxSources {
			t.forgetLocked()
		}
		s = &source{tokens: float64(t.cfg.StreamBurst), last: now}
		t.sources[ip] = s
	}
	s.tokens = min(float64(t.cfg.StreamBurst), s.tokens+now.Sub(s.last).Seconds()*t.cfg.StreamRate)
	s.last = now
	var kind, why string
	if s.tokens < 1 {
		kind, why = RefusedRate, fmt.Sprintf("over %v streams a second", t.cfg.StreamRate)
	} else {
		switch t.slots.Take(ip) {
		case SlotsFull:
			kind, why = RefusedBusy, fmt.Sprintf("%d gossip streams open", t.slots.Held())
		case SlotsReserved:
			kind, why = RefusedBusy, fmt.Sprintf("%d gossip streams open; the last %d are kept for addresses with none open",
				t.slots.Held(), t.cfg.ReservedStreams)
		case SlotsPerSource:
			kind, why = RefusedPerSource, fmt.Sprintf("%d gossip streams open from this address", t.slots.HeldBy(ip))
		default:
			s.tokens--
		}
	}
	t.mu.Unlock()
	if kind != "" {
		c.Close()
		t.refuse(kind, c.RemoteAddr(), why)
		return
	}
	bc := &boundedConn{Conn: c, t: t, src: ip, counted: true, deadline: now.Add(t.cfg.StreamTimeout)}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.check(bc)
	}()
}

// forgetLocked empties the table of token buckets but for the sources
// with streams open (at most MaxStreams): rarely, since it then has room
// for maxSources−MaxStreams new ones.
func (t *Transport) forgetLocked() {
	for ip := range t.sources {
		if t.slots.HeldBy(ip) == 0 {
			delete(t.sources, ip)
		}
	}
}

// check reads the stream's header and hands the stream to memberlist,
// or refuses it.
func (t *Transport) check(bc *boundedConn) {
	limit := t.MaxStreamBytes()
	bc.Conn.SetReadDeadline(time.Now().Add(t.cfg.HeaderTimeout))
	var hdr [5]byte
	n, err := io.ReadFull(bc.Conn, hdr[:])
	switch {
	case n == 0 && err != nil:
		bc.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.refuse(RefusedSlow, bc.RemoteAddr(), fmt.Sprintf("nothing within %v", t.cfg.HeaderTimeout))
		} else {
			t.refuse(RefusedEmpty, bc.RemoteAddr(), "closed before sending anything")
		}
		return
	case err != nil && n < len(hdr) && hdr[0] == encryptMsg:
		bc.Close()
		t.refuse(RefusedSlow, bc.RemoteAddr(), fmt.Sprintf("%d header bytes within %v", n, t.cfg.HeaderTimeout))
		return
	}
	if hdr[0] == encryptMsg {
		claim := binary.BigEndian.Uint32(hdr[1:])
		if int64(claim) > int64(limit) {
			bc.Close()
			t.refuse(RefusedTooLarge, bc.RemoteAddr(), fmt.Sprintf("encrypted stream claims %d bytes, cap %d", claim, limit))
			return
		}
		for {
			old := t.largest.Load()
			if int64(claim) <= old || t.largest.CompareAndSwap(old, int64(claim)) {
				break
			}
		}
	}
	// Memberlist sets its own deadlines; boundedConn keeps them within
	// StreamTimeout.
	bc.Conn.SetDeadline(bc.deadline)
	bc.prefix = append([]byte(nil), hdr[:n]...)
	bc.budget = int64(limit) + 5
	select {
	case t.streamCh <- bc:
		t.streams.Add(1)
	case <-t.done:
		bc.Close()
	}
}

// takePackets drops datagrams that cannot be encrypted gossip and hands
// the rest on.
func (t *Transport) takePackets() {
	defer t.wg.Done()
	for {
		var p *memberlist.Packet
		select {
		case p = <-t.inner.PacketCh():
		case <-t.done:
			return
		}
		if len(p.Buf) < minEncryptedPacket || p.Buf[0] > maxEncryptVersion {
			t.refuse(JunkDatagram, p.From, fmt.Sprintf("datagram of %d bytes starting 0x%02x", len(p.Buf), firstByte(p.Buf)))
			continue
		}
		select {
		case t.packetCh <- p:
			t.packets.Add(1)
		case <-t.done:
			return
		}
	}
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// boundedConn is a stream as memberlist sees it: the header bytes read
// ahead come first, it reads at most budget bytes in all, its deadlines
// never pass its own, and closing it gives its place back.
type boundedConn struct {
	net.Conn
	t        *Transport
	src      string
	counted  bool      // holds a place among the open streams
	deadline time.Time // zero: none of its own
	prefix   []byte
	budget   int64
	cut      bool // the cap was hit (counted once)
	once     sync.Once
}

// errTooLarge ends a stream that sends more than the cap.
var errTooLarge = errors.New("member: gossip stream larger than the cap")

func (c *boundedConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		c.budget -= int64(n)
		return n, nil
	}
	if c.budget <= 0 {
		if !c.cut {
			c.cut = true
			c.t.refuse(CutTooLarge, c.RemoteAddr(), "sent more than the cap")
		}
		return 0, errTooLarge
	}
	if int64(len(p)) > c.budget {
		p = p[:c.budget]
	}
	n, err := c.Conn.Read(p)
	c.budget -= int64(n)
	return n, err
}

func (c *boundedConn) clamp(d time.Time) time.Time {
	if c.deadline.IsZero() || (!d.IsZero() && d.Before(c.deadline)) {
		return d
	}
	return c.deadline
}

func (c *boundedConn) SetDeadline(d time.Time) error { return c.Conn.SetDeadline(c.clamp(d)) }

func (c *boundedConn) SetReadDeadline(d time.Time) error { return c.Conn.SetReadDeadline(c.clamp(d)) }

func (c *boundedConn) SetWriteDeadline(d time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(d))
}

func (c *boundedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if !c.counted {
			return
		}
		t := c.t
		t.mu.Lock()
		t.slots.Give(c.src)
		t.mu.Unlock()
	})
	return err
}
