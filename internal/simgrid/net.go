package simgrid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// Network is a simulated network of hosts on the virtual clock. A
// connection is a pair of endpoints; each direction delivers its bytes in
// order after a one-way delay drawn from the seed, the link and the
// instant of the write, never from how the writer split its bytes, so a
// seed fixes every delivery time. Hosts can be partitioned (their bytes
// wait, as TCP's would, until the partition heals, then arrive write by
// write, a nanosecond apart) and reset (their connections break at once,
// as when a process dies).
type Network struct {
	seed uint64

	mu        sync.Mutex
	listeners map[string]*Listener // by address
	links     []*link              // open links
	dials     map[string]uint64    // connections each host has dialled
	ports     map[string]uint64    // ports each host took with port 0
	cut       map[string]time.Time // host → partitioned until
	// holdOut and holdIn are one-way partitions: host → until when the
	// bytes it sends (holdOut), or those sent to it (holdIn), wait.
	holdOut, holdIn map[string]time.Time
	slow            map[string]slowLink // host → its links slow
	delays          map[string][2]time.Duration
	// peak is the most bytes ever waiting in one direction of a link.
	peak int
}

// NewNetwork returns an empty network whose delays derive from seed.
func NewNetwork(seed uint64) *Network {
	return &Network{seed: seed, listeners: map[string]*Listener{}, dials: map[string]uint64{}, ports: map[string]uint64{},
		cut: map[string]time.Time{}, holdOut: map[string]time.Time{}, holdIn: map[string]time.Time{}, slow: map[string]slowLink{},
		delays: map[string][2]time.Duration{}}
}

// slowLink is a host's links slow until a time: each write takes a draw
// in [by/2, by] more.
type slowLink struct {
	until time.Time
	by    time.Duration
}

// SetDelay sets the one-way delay range of every link that host opens or
// accepts from now on: each write waits a draw in [lo, hi].
func (n *Network) SetDelay(host string, lo, hi time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delays[host] = [2]time.Duration{lo, max(lo, hi)}
}

// Listen opens a listener at addr ("host:port").
func (n *Network) Listen(addr string) (*Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("simnet: listen %s: address in use", addr)
	}
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{n: n, addr: ta, conns: make(chan net.Conn, 64), closed: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial opens a connection from host (an IP, as a TCP address's) to addr.
// With no listener there, or with either host partitioned, it fails after
// a delay, as a refused or unanswered connection does.
func (n *Network) Dial(ctx context.Context, from, addr string) (net.Conn, error) {
	return n.dial(ctx, from, "", addr)
}

// dial is Dial by agent who on host from ("": the host's only one).
func (n *Network) dial(ctx context.Context, from, who, addr string) (net.Conn, error) {
	toHost, _, _ := net.SplitHostPort(addr)
	n.mu.Lock()
	// A link is named by its dialler and how many it dialled before:
	// never by the order in which diallers happened to dial at one
	// instant (two agents on one host count apart).
	key := from + "/" + who
	id := mix(hashString(from), n.dials[key])
	if who != "" {
		id = mix(hashString(from), hashString(who), n.dials[key])
	}
	n.dials[key]++
	n.mu.Unlock()
	// The dial itself takes a round trip; what it finds is what is there
	// when it arrives.
	if !sleep(ctx, 2*n.delayFor(from, id, 0, time.Now())) {
		return nil, ctx.Err()
	}
	n.mu.Lock()
	l := n.listeners[addr]
	now := time.Now()
	blocked := now.Before(n.cut[from]) || now.Before(n.cut[toHost])
	// A handshake needs both ways: one held, the dial fails (as one
	// whose SYN or SYN-ACK is lost does, sooner).
	for _, h := range [2]string{from, toHost} {
		blocked = blocked || now.Before(n.holdOut[h]) || now.Before(n.holdIn[h])
	}
	n.mu.Unlock()
	if l == nil || blocked {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (simulated)")}
	}
	local := &net.TCPAddr{IP: net.ParseIP(from), Port: 40000 + int(id%20000)}
	lk := n.newLink(id, local, l.addr)
	select {
	case l.conns <- lk.ends[1]:
		return lk.ends[0], nil
	case <-l.closed:
		lk.reset()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (simulated)")}
	}
}

// Host is the network as host sees it: a grid.Network whose connections
// leave from host and whose listeners are on it.
func (n *Network) Host(host string) grid.Network { return hostNet{n: n, host: host} }

// Agent is Host for one of several agents on host, named who: its
// connections are named by it, whichever agent dials first at an
// instant.
func (n *Network) Agent(host, who string) grid.Network { return hostNet{n, host, who} }

type hostNet struct {
	n    *Network
	host string
	who  string
}

func (h hostNet) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return h.n.dial(ctx, h.host, h.who, addr)
}

// Listen listens at addr, which must be on the host; port 0 takes the
// host's next free port from 7000 on.
func (h hostNet) Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host != h.host {
		return nil, fmt.Errorf("simnet: %s cannot listen on %s", h.host, addr)
	}
	if port != "0" {
		return h.n.Listen(addr)
	}
	h.n.mu.Lock()
	p := 7000 + h.n.ports[host]
	h.n.ports[host]++
	h.n.mu.Unlock()
	return h.n.Listen(net.JoinHostPort(host, strconv.Itoa(int(p))))
}

// Partition cuts host off until the virtual time until: bytes to and from
// it wait, and new connections fail.
func (n *Network) Partition(host string, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[host] = until
}

// OneWay partitions host in one direction until the virtual time until:
// the bytes it sends (out) or those sent to it wait, as Partition's, while
// the other direction flows; new connections fail.
func (n *Network) OneWay(host string, out bool, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if out {
		n.holdOut[host] = until
	} else {
		n.holdIn[host] = until
	}
}

// Slow makes host's links slow until the virtual time until: each write
// on them, either way, takes a draw in [by/2, by] more than its delay
// (order kept, nothing held).
func (n *Network) Slow(host string, by time.Duration, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.slow[host] = slowLink{until: until, by: by}
}

// slowBy is the extra delay of a write on link id in direction dir at
// instant now, between hosts a and b: a pure function of the seed and
// these (0 with neither host slow).
func (n *Network) slowBy(a, b string, id uint64, dir int, now time.Time) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	by := time.Duration(0)
	for _, h := range [2]string{a, b} {
		if s, ok := n.slow[h]; ok && now.Before(s.until) {
			by = max(by, s.by)
		}
	}
	if by <= 0 {
		return 0
	}
	h := mix(n.seed, id, uint64(dir), uint64(now.UnixNano()), 0x510e)
	// Even, so that the delay stays odd (delayFor).
	return (by/2 + time.Duration(h%uint64(by/2+1))) &^ 1
}

// ofHost returns the links and the listeners of host.
func (n *Network) ofHost(host string) ([]*link, []*Listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var doomed []*link
	for _, lk := range n.links {
		if lk.hosts[0] == host || lk.hosts[1] == host {
			doomed = append(doomed, lk)
		}
	}
	var ls []*Listener
	for _, l := range n.listeners {
		if l.addr.IP.String() == host {
			ls = append(ls, l)
		}
	}
	return doomed, ls
}

// HalfOpen crashes host without a word on the wire: its listeners close
// and its ends of every connection die (their reads and writes fail
// there), but the far ends hear nothing, no FIN, no reset; what they
// send is lost. It returns the function that resets those connections
// at last (the far end's next write reaches the host up again, which
// answers with a reset, or a keepalive fails).
func (n *Network) HalfOpen(host string) (reset func()) {
	doomed, ls := n.ofHost(host)
	for _, lk := range doomed {
		for side := range 2 {
			if lk.hosts[side] != host {
				continue
			}
			// This end is gone: shut, so that it never sends its FIN,
			// and its reads end, as its process's.
			lk.mu.Lock()
			lk.shut[side] = true
			lk.mu.Unlock()
			lk.reads[side].Close()
		}
	}
	for _, l := range ls {
		l.Close()
	}
	return func() {
		for _, lk := range doomed {
			lk.reset()
		}
	}
}

// Reset breaks every connection of host at once, without delivering what
// is in flight (the host's process died), and closes its listeners.
func (n *Network) Reset(host string) {
	doomed, ls := n.ofHost(host)
	for _, lk := range doomed {
		lk.reset()
	}
	for _, l := range ls {
		l.Close()
	}
}

// Settle waits up to d of virtual time for every link to close at both
// ends and deliver what it carried, then breaks the links still open and
// returns how many there were: connections that nobody closed.
func (n *Network) Settle(d time.Duration) int {
	end := time.Now().Add(d)
	for n.Open() > 0 && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	n.mu.Lock()
	left := slices.Clone(n.links)
	n.mu.Unlock()
	for _, lk := range left {
		lk.reset()
	}
	for _, lk := range left {
		<-lk.pipes[0].done
		<-lk.pipes[1].done
	}
	return len(left)
}

// Peak is the most bytes that ever waited in one direction of a link.
func (n *Network) Peak() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.peak
}

// Open is the number of links not yet closed at both ends.
func (n *Network) Open() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.links)
}

// delayFor is the one-way delay of a write on link id in direction dir by
// host at instant now: a pure function of the seed and these.
func (n *Network) delayFor(host string, id uint64, dir int, now time.Time) time.Duration {
	n.mu.Lock()
	r, ok := n.delays[host]
	n.mu.Unlock()
	if !ok {
		r = [2]time.Duration{50 * time.Microsecond, 500 * time.Microsecond}
	}
	h := mix(n.seed, id, uint64(dir), uint64(now.UnixNano()))
	// An odd number of nanoseconds: a delivery never falls on the round
	// instants that tickers and timers of round durations fire at.
	return r[0] + time.Duration(h%uint64(r[1]-r[0]+1)) | 1
}

// blockedUntil is when bytes from host a to host b may flow again.
func (n *Network) blockedUntil(a, b string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	u := n.cut[a]
	for _, t := range [3]time.Time{n.cut[b], n.holdOut[a], n.holdIn[b]} {
		if t.After(u) {
			u = t
		}
	}
	return u
}

func (n *Network) newLink(id uint64, a, b *net.TCPAddr) *link {
	lk := &link{n: n, id: id, hosts: [2]string{a.IP.String(), b.IP.String()}, dead: make(chan struct{})}
	for dir := range 2 {
		r, w := net.Pipe()
		lk.pipes[dir] = &pipe{lk: lk, dir: dir, w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
		lk.reads[1-dir] = r // what dir carries is read at the far end
	}
	lk.ends[0] = &endpoint{lk: lk, side: 0, local: a, remote: b}
	lk.ends[1] = &endpoint{lk: lk, side: 1, local: b, remote: a}
	n.mu.Lock()
	n.links = append(n.links, lk)
	n.mu.Unlock()
	for _, p := range lk.pipes {
		go p.run()
	}
	return lk
}

func (n *Network) unlink(lk *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, x := range n.links {
		if x == lk {
			n.links = append(n.links[:i], n.links[i+1:]...)
			return
		}
	}
}

func (n *Network) notePeak(b int) {
	n.mu.Lock()
	n.peak = max(n.peak, b)
	n.mu.Unlock()
}

// hashString is FNV-1a of s.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(s) {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix hashes its words (splitmix64 rounds).
func mix(ws ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, w := range ws {
		h ^= w
		h += 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// Listener is a simulated listener: it accepts the connections dialled to
// its address.
type Listener struct {
	n      *Network
	addr   *net.TCPAddr
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops the listener; the address is free again.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.n.mu.Lock()
		if l.n.listeners[l.addr.String()] == l {
			delete(l.n.listeners, l.addr.String())
		}
		l.n.mu.Unlock()
		for {
			select {
			case c := <-l.conns:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr is the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// link is one connection: two endpoints, and a pipe each way.
type link struct {
	n     *Network
	id    uint64
	hosts [2]string
	ends  [2]*endpoint
	pipes [2]*pipe      // pipes[d] carries what ends[d] writes
	reads [2]net.Conn   // reads[d] is where ends[d] reads
	once  sync.Once     // reset
	dead  chan struct{} // closed by reset
	mu    sync.Mutex
	shut  [2]bool // ends closed
}

// reset breaks the link at once, both ends.
func (lk *link) reset() {
	lk.once.Do(func() {
		close(lk.dead)
		for d := range 2 {
			lk.reads[d].Close()
			lk.pipes[d].w.Close()
		}
		lk.n.unlink(lk)
	})
}

// pipe is one direction of a link: bytes written wait their delivery time
// in q, then go through the net.Pipe to the far end's reads.
type pipe struct {
	lk    *link
	dir   int
	w     net.Conn // net.Pipe's writing end
	mu    sync.Mutex
	q     []chunk
	size  int
	last  time.Time // delivery time of the latest chunk: order is kept
	wrote time.Time // when the latest chunk was written
	eof   bool      // the writer closed: deliver what is queued, then EOF
	wake  chan struct{}
	done  chan struct{} // closed when run returns
}

type chunk struct {
	due  time.Time
	data []byte
}

func (p *pipe) put(b []byte) error {
	now := time.Now()
	d := p.lk.n.delayFor(p.lk.hosts[p.dir], p.lk.id, p.dir, now)
	d += p.lk.n.slowBy(p.lk.hosts[0], p.lk.hosts[1], p.lk.id, p.dir, now)
	p.mu.Lock()
	if p.eof {
		p.mu.Unlock()
		return net.ErrClosed
	}
	// Bytes written at one instant arrive at one instant, however the
	// writer split them; bytes written later arrive strictly later, even
	// when they catch up with earlier ones, so that two writes never
	// reach the reader at one instant, where goroutines would race.
	due := now.Add(d)
	switch {
	case now.Equal(p.wrote):
		due = p.last
	case !due.After(p.last):
		due = p.last.Add(time.Nanosecond)
	}
	p.last, p.wrote = due, now
	p.q = append(p.q, chunk{due: due, data: append([]byte(nil), b...)})
	p.size += len(b)
	size := p.size
	p.mu.Unlock()
	p.lk.n.notePeak(size)
	p.signal()
	return nil
}

func (p *pipe) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run delivers the queued chunks in order, each at its time, holding them
// while either host is partitioned. Chunks a partition held arrive as it
// heals, each an instant (a nanosecond) after the one before unless they
// were written at one instant: they would otherwise all reach the reader
// at one instant, and the goroutines race (seed 610713: a frozen worker's
// results, written at moments apart, came at the instant it thawed, and
// the master's loop took them in one turn or in several, as the reader
// and the loop ran).
func (p *pipe) run() {
	defer close(p.done)
	var prev, prevDue time.Time // the last chunk's delivery and due times
	for {
		p.mu.Lock()
		if len(p.q) == 0 {
			eof := p.eof
			p.mu.Unlock()
			if eof {
				p.w.Close()
				return
			}
			select {
			case <-p.wake:
				continue
			case <-p.lk.dead:
				return
			}
		}
		c := p.q[0]
		p.mu.Unlock()
		for {
			at := c.due
			if cut := p.lk.n.blockedUntil(p.lk.hosts[p.dir], p.lk.hosts[1-p.dir]); cut.After(at) {
				at = cut
			}
			if !c.due.Equal(prevDue) && !at.After(prev) {
				at = prev.Add(time.Nanosecond)
			}
			wait := time.Until(at)
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.lk.dead:
				t.Stop()
				return
			}
		}
		if _, err := p.w.Write(c.data); err != nil {
			return // the far end closed: what is left is lost with it
		}
		prev, prevDue = time.Now(), c.due
		p.mu.Lock()
		p.q[0] = chunk{}
		p.q = p.q[1:]
		p.size -= len(c.data)
		p.mu.Unlock()
	}
}

// endpoint is one end of a link: a net.Conn.
type endpoint struct {
	lk            *link
	side          int
	local, remote *net.TCPAddr
}

func (e *endpoint) Read(b []byte) (int, error) {
	n, err := e.lk.reads[e.side].Read(b)
	if err != nil && errors.Is(err, io.ErrClosedPipe) {
		select {
		case <-e.lk.dead:
			err = errReset
		default:
		}
	}
	return n, err
}

var (
	errReset = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer (simulated)")}
)

func (e *endpoint) Write(b []byte) (int, error) {
	select {
	case <-e.lk.dead:
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: errors.New("connection reset by peer (simulated)")}
	default:
	}
	e.lk.mu.Lock()
	shut := e.lk.shut[e.side]
	e.lk.mu.Unlock()
	if shut {
		return 0, net.ErrClosed
	}
	if err := e.lk.pipes[e.side].put(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close closes this end: what it wrote is still delivered, then the far
// end reads EOF; what comes to it from now on is lost.
func (e *endpoint) Close() error {
	e.lk.mu.Lock()
	if e.lk.shut[e.side] {
		e.lk.mu.Unlock()
		return nil
	}
	e.lk.shut[e.side] = true
	both := e.lk.shut[0] && e.lk.shut[1]
	e.lk.mu.Unlock()
	p := e.lk.pipes[e.side]
	p.mu.Lock()
	p.eof = true
	p.mu.Unlock()
	p.signal()
	e.lk.reads[e.side].Close()
	if both {
		// Both ends are closed: once both pipes have delivered or given
		// up, the link is gone.
		go func() {
			<-e.lk.pipes[0].done
			<-e.lk.pipes[1].done
			e.lk.n.unlink(e.lk)
		}()
	}
	return nil
}

func (e *endpoint) LocalAddr() net.Addr  { return e.local }
func (e *endpoint) RemoteAddr() net.Addr { return e.remote }
func (e *endpoint) SetDeadline(t time.Time) error {
	return e.SetReadDeadline(t)
}

// SetReadDeadline fails only once this end is closed, as a socket's
// does: net.Pipe's fails once the far end has closed too, and a peer
// that closes as this end sets a deadline would fail it or not by which
// goroutine ran first (a read then returns what came, then EOF, as
// TCP's does after a FIN).
func (e *endpoint) SetReadDeadline(t time.Time) error {
	e.lk.mu.Lock()
	shut := e.lk.shut[e.side]
	e.lk.mu.Unlock()
	if shut {
		return net.ErrClosed
	}
	e.lk.reads[e.side].SetReadDeadline(t)
	return nil
}

// SetWriteDeadline is accepted and has no effect: writes never block.
func (e *endpoint) SetWriteDeadline(time.Time) error { return nil }
