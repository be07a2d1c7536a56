package grid

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/internal/logx"
)

// ConnConfig tunes a Conn. The zero value is usable: every zero field takes
// the default named in its comment.
type ConnConfig struct {
	// MaxFrame caps a frame's length in both directions. Default
	// DefaultMaxFrame; at most MaxFrameLimit. A worker takes the master's
	// cap when it is larger (Welcome.MaxFrame).
	MaxFrame int
	// IdleTimeout closes the connection when nothing (not even a heartbeat)
	// arrives for this long. Default 30s.
	IdleTimeout time.Duration
	// WriteTimeout bounds one write to the socket: a write that does not
	// end within it (within half of it at the least) fails. Default 10s.
	WriteTimeout time.Duration
	// Heartbeat is how long the writer stays silent before it sends a
	// Heartbeat. Default IdleTimeout/3.
	Heartbeat time.Duration
	// Delay, when > 0, delivers every outgoing frame Delay after Send
	// (in order, without blocking the sender): a WAN link emulated on a LAN.
	Delay time.Duration
	// MaxQueued caps the bytes queued and not yet written. A peer that stops
	// reading makes the queue grow; past the cap the connection is closed
	// with ErrSendQueueFull rather than let memory grow. Default 64 MiB, and
	// at least 4 × MaxFrame.
	MaxQueued int
	// Logger receives the reason a connection closed. Default slog.Default().
	Logger *slog.Logger
}

func (c ConnConfig) withDefaults() ConnConfig {
	if c.MaxFrame <= 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	c.MaxFrame = min(c.MaxFrame, MaxFrameLimit)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.IdleTimeout / 3
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = max(64<<20, 4*c.MaxFrame)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// defaultIdleTimeout is a connection's IdleTimeout by default, a
// master's and a worker's alike.
const defaultIdleTimeout = 30 * time.Second

// MaxFrameLimit is the largest frame cap a connection accepts, whatever
// its configuration or the master's Welcome says.
const MaxFrameLimit = 256 << 20

// TaskFrameSize is an upper bound on the bytes one task of dimension dim
// takes in a frame: a batch is sent only if its tasks fit the frame cap.
func TaskFrameSize(dim int) int { return 64 + 9*dim }

// Connection errors.
var (
	// ErrClosed is Err after a local Close, and what Send returns once the
	// connection is closing.
	ErrClosed = errors.New("grid: connection closed")
	// ErrSendQueueFull closes a connection whose peer stopped reading.
	ErrSendQueueFull = errors.New("grid: send queue full (peer not reading)")
	// ErrIdleTimeout closes a connection on which nothing arrived for
	// IdleTimeout.
	ErrIdleTimeout = errors.New("grid: idle timeout")
	// ErrPeerClosed is Err when the peer closed the connection.
	ErrPeerClosed = errors.New("grid: peer closed the connection")
)

// RejectError is the Err of a connection the peer refused with a Reject
// message (wrong key, version mismatch, bad frame), and the error of a
// handshake that was refused.
type RejectError struct {
	// Reason is the peer's explanation, as sent.
	Reason string
}

// Error implements error.
func (e *RejectError) Error() string { return "grid: rejected by peer: " + e.Reason }

// Handler receives every message that arrives on a Conn, in order, on the
// connection's reader goroutine. Heartbeats are absorbed by the Conn (one
// with Echo set is answered with a plain one), but for one that says its
// peer starts (Heartbeat.Starting), and a Reject closes it, so neither
// reaches the handler. The message is the handler's to keep.
//
// A handler must never wait on its own connection: it may Send (which never
// blocks) or hand the message to another goroutine; while it runs, the
// connection reads nothing more, which is TCP back-pressure on the peer.
type Handler func(m Message)

// ConnStats counts what went over a connection.
type ConnStats struct {
	FramesIn, FramesOut int64
	BytesIn, BytesOut   int64 // on the wire, length prefixes included
	Writes              int64 // socket writes; FramesOut/Writes is the coalescing factor
}

// Conn is one authenticated connection between master and worker. It owns
// exactly two goroutines: a reader that decodes frames and calls the
// Handler, and a writer that drains the send queue. Send only enqueues
// (docs/papers.md §3: a handler never writes inline, so nothing can deadlock);
// frames queued while the writer was busy go out in one write.
//
// Any error (peer gone, idle timeout, malformed or oversized frame, write
// failure, context cancelled) closes the connection; Err says why and Done
// is closed once both goroutines have returned. A write that finds the
// connection reset by the peer first lets the reader take what had
// arrived (writeFailed): the peer's last frames are not lost to it.
type Conn struct {
	nc  net.Conn
	br  *bufio.Reader
	cfg ConnConfig
	log *slog.Logger

	mu          sync.Mutex
	fe          *frameEncoder // pending frames, encoded, not yet written
	marks       []mark        // with Delay: where each pending frame ends and when it is due
	closed      bool          // closing has started
	echoEnd     int           // > 0: an echo is queued, its frame ends there in fe.buf
	flushClose  bool          // close once the queue is written (SendAndClose)
	started     bool          // Start was called
	readerDone  chan struct{} // closed when the reader returns
	live        int           // goroutines still running
	err         error
	closing     chan struct{} // closed when closing starts
	done        chan struct{} // closed when closed and both goroutines returned
	wake        chan struct{} // nudges the writer; capacity 1
	stopContext func() bool

	open     *wire.Opener // opens incoming frames; nil on an unsealed Conn (NewConn)
	sealed   bool         // outgoing frames are sealed (the encoder does it)
	sawEOF   atomic.Bool  // the reader saw the peer hang up
	reset    atomic.Bool  // a write found the connection reset: the reader takes what is left
	lastRead atomic.Int64 // unix nanos of the last deadline set for reads
	stats    struct {
		framesIn, framesOut, bytesIn, bytesOut, writes atomic.Int64
	}
}

// mark is the end offset of a pending frame in the queue and when it is due.
type mark struct {
	end int
	due time.Time
}

// NewConn wraps nc, whose peer is already trusted (the handshake in
// Accept and Dial calls it; tests may call it directly). The writer starts
// now, so Send works at once; the reader starts with Start. Cancelling ctx
// closes the connection.
//
// Frames on a NewConn are not sealed: Accept and Dial return Conns whose
// frames are (see grid/wire's seal.go), keyed by the handshake.
func NewConn(ctx context.Context, nc net.Conn, cfg ConnConfig) *Conn {
	return newConn(ctx, nc, nil, cfg, nil)
}

// connKeys seal a connection's frames, one key per direction.
type connKeys struct {
	seal *wire.Sealer
	open *wire.Opener
}

// newConn is NewConn with a reader that may already hold bytes read past
// the handshake, and the keys that seal the frames (nil: not sealed).
func newConn(ctx context.Context, nc net.Conn, br *bufio.Reader, cfg ConnConfig, keys *connKeys) *Conn {
	cfg = cfg.withDefaults()
	if br == nil {
		br = bufio.NewReaderSize(nc, 64<<10)
	}
	c := &Conn{
		nc:      nc,
		br:      br,
		cfg:     cfg,
		log:     cfg.Logger.With("peer", nc.RemoteAddr().String()),
		fe:      newFrameEncoder(cfg.MaxFrame),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
		live:    1,

		readerDone: make(chan struct{}),
	}
	if keys != nil {
		c.fe.enc.Seal(keys.seal)
		c.open, c.sealed = keys.open, true
	}
	// Hold mu so that a ctx already done cannot run closeWithError before
	// stopContext is set.
	c.mu.Lock()
	c.stopContext = context.AfterFunc(ctx, func() {
		c.closeWithError(fmt.Errorf("grid: connection: %w", context.Cause(ctx)))
	})
	c.mu.Unlock()
	go c.writeLoop()
	return c
}

// Start runs the reader, which passes every incoming message to h. Call it
// once; later calls, and calls once the connection is closing, do nothing.
func (c *Conn) Start(h Handler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed || c.flushClose {
		return
	}
	c.started = true
	c.live++
	go c.readLoop(h)
}

// Send queues m for the writer and returns at once. It fails with ErrClosed
// once the connection is closing, and with ErrFrameTooLarge (without
// closing) when m does not fit in a frame. m is encoded before Send
// returns, so the caller may reuse it.
func (c *Conn) Send(m Message) error { return c.send(m, false) }

// send is Send; echo marks m as the answer to a Heartbeat with Echo set,
// of which one at a time is queued: a peer that floods echo requests while
// we cannot write gets one answer per write, not one per request.
func (c *Conn) send(m Message, echo bool) error {
	c.mu.Lock()
	if c.closed || c.flushClose {
		c.mu.Unlock()
		return ErrClosed
	}
	if echo && c.echoEnd > 0 {
		c.mu.Unlock()
		return nil
	}
	if err := c.fe.encode(m); err != nil {
		c.mu.Unlock()
		return err
	}
	if echo {
		c.echoEnd = c.fe.buf.Len()
	}
	if c.cfg.Delay > 0 {
		c.marks = append(c.marks, mark{end: c.fe.buf.Len(), due: time.Now().Add(c.cfg.Delay)})
	}
	full := c.fe.buf.Len() > c.cfg.MaxQueued
	c.mu.Unlock()
	if full {
		c.closeWithError(ErrSendQueueFull)
		return ErrSendQueueFull
	}
	c.nudge()
	return nil
}

// SendAndClose queues m (if not nil) as the last frame, and closes the
// connection once everything queued has been written (or WriteTimeout
// passed). Later Sends fail with ErrClosed. Use it for Reject, Shutdown and
// a worker's last results.
func (c *Conn) SendAndClose(m Message) {
	if m != nil {
		if err := c.Send(m); err != nil {
			c.closeWithError(err)
			return
		}
	}
	c.mu.Lock()
	c.flushClose = true
	c.mu.Unlock()
	c.nudge()
}

// Close closes the connection at once, dropping what is still queued. It is
// idempotent; Err becomes ErrClosed unless the connection had already
// failed.
func (c *Conn) Close() error {
	c.closeWithError(ErrClosed)
	return nil
}

// Config is the connection's configuration, defaults filled in.
func (c *Conn) Config() ConnConfig { return c.cfg }

// Done is closed once the connection is closed and its goroutines have
// returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is open, then why it closed (or is
// closing).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Sealed reports whether the connection's frames are sealed (encrypted
// and authenticated, in order): every Conn from Accept or Dial.
func (c *Conn) Sealed() bool { return c.sealed }

// RemoteAddr is the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is this end's network address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Stats returns the connection's counters so far.
func (c *Conn) Stats() ConnStats {
	return ConnStats{
		FramesIn:  c.stats.framesIn.Load(),
		FramesOut: c.stats.framesOut.Load(),
		BytesIn:   c.stats.bytesIn.Load(),
		BytesOut:  c.stats.bytesOut.Load(),
		Writes:    c.stats.writes.Load(),
	}
}

func (c *Conn) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// closeWithError starts closing with err as the cause, once.
func (c *Conn) closeWithError(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.err == nil { // keep a cause recorded while a Reject was flushed
		c.err = err
	}
	err = c.err
	close(c.closing)
	if c.live == 0 {
		close(c.done)
	}
	stop := c.stopContext
	c.mu.Unlock()
	stop()
	c.nc.Close()
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrPeerClosed), errors.Is(err, context.Canceled):
		c.log.Debug("connection closed", "cause", err)
	default:
		c.log.Warn("connection closed", "cause", err)
	}
}

// exit records that one of the two goroutines returned.
func (c *Conn) exit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live--
	if c.live == 0 && c.closed {
		close(c.done)
	}
}

func (c *Conn) readLoop(h Handler) {
	defer c.exit()
	defer close(c.readerDone)
	fr := NewFrameReader(c.br, c.cfg.MaxFrame)
	if c.open != nil {
		fr.fr.Open(c.open)
	}
	for {
		c.extendReadDeadline()
		m, err := fr.Next()
		c.stats.bytesIn.Store(fr.BytesRead())
		if err != nil {
			c.readFailed(err)
			return
		}
		c.stats.framesIn.Add(1)
		switch v := m.(type) {
		case *Heartbeat:
			if v.Echo {
				c.send(Heartbeat{}, true) // plain: the peer does not answer it
			}
			if v.Starting <= 0 {
				continue
			}
			// A worker's word that it starts: the master's to hear.
		case *Reject:
			c.closeWithError(&RejectError{Reason: logx.Cut(v.Reason, logx.MaxErrText)})
			return
		}
		h(m)
	}
}

// extendReadDeadline pushes the read deadline IdleTimeout ahead, but only
// when it has moved by a useful amount since last time: it is on the path
// of every frame.
func (c *Conn) extendReadDeadline() {
	if c.reset.Load() {
		return // what is left is read within the deadline set before
	}
	now := time.Now()
	if now.UnixNano()-c.lastRead.Load() < int64(c.cfg.IdleTimeout/16) {
		return
	}
	c.lastRead.Store(now.UnixNano())
	c.nc.SetReadDeadline(now.Add(c.cfg.IdleTimeout))
}

func (c *Conn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrMalformed):
		// Record the cause, then tell the peer why before hanging up; the
		// writer closes once the Reject is out.
		c.mu.Lock()
		if !c.closed && c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		c.SendAndClose(&Reject{Reason: err.Error()})
	case errors.Is(err, io.EOF):
		c.sawEOF.Store(true)
		c.closeWithError(ErrPeerClosed)
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		c.closeWithError(fmt.Errorf("%w: nothing received for %v", ErrIdleTimeout, c.cfg.IdleTimeout))
	default:
		c.closeWithError(fmt.Errorf("grid: read: %w", err))
	}
}

func (c *Conn) writeLoop() {
	defer c.exit()
	var out []byte
	// Timers are moved lazily, not at every write (two timer operations
	// a frame were a tenth of a busy master's CPU): the heartbeat timer,
	// when it fires, waits out what is left since the last write; the
	// write deadline is moved on once less than half of WriteTimeout is
	// left, so a write has between half of it and all of it.
	var lastWrite, deadline time.Time
	hb := time.NewTimer(c.cfg.Heartbeat)
	defer hb.Stop()
	var due *time.Timer // with Delay: fires when the next frame is due
	var dueC <-chan time.Time
	defer func() {
		if due != nil {
			due.Stop()
		}
	}()
	for {
		select {
		case <-c.closing:
			return
		case <-c.wake:
		case <-dueC:
		case <-hb.C:
			if quiet := time.Since(lastWrite); quiet < c.cfg.Heartbeat {
				hb.Reset(c.cfg.Heartbeat - quiet)
				continue
			}
			c.Send(Heartbeat{})
			hb.Reset(c.cfg.Heartbeat)
			continue
		}
		var frames int
		var next time.Time
		var closeNow bool
		out, frames, next, closeNow = c.takeDue(out[:0])
		if len(out) > 0 {
			now := time.Now()
			if deadline.Sub(now) < c.cfg.WriteTimeout/2 {
				deadline = now.Add(c.cfg.WriteTimeout)
				c.nc.SetWriteDeadline(deadline)
			}
			if _, err := c.nc.Write(out); err != nil {
				c.writeFailed(fmt.Errorf("grid: write: %w", err))
				return
			}
			lastWrite = time.Now()
			c.stats.writes.Add(1)
			c.stats.framesOut.Add(int64(frames))
			c.stats.bytesOut.Add(int64(len(out)))
		}
		if cap(out) > 1<<20 {
			out = nil // let a rare huge batch go
		}
		if closeNow {
			c.lingerClose()
			return
		}
		if !next.IsZero() {
			if due == nil {
				due = time.NewTimer(time.Until(next))
			} else {
				due.Reset(time.Until(next))
			}
			dueC = due.C
		}
	}
}

// writeFailed closes the connection after a failed write. When the peer
// reset it (EPIPE, ECONNRESET: it closed or exited, and our write drew
// its RST), what it sent before, a master's Shutdown and its FIN among
// it, may still wait unread in our receive queue, and closing the socket
// would destroy it: a worker stopped across the run's end would take the
// master for lost, not the run for over. So the reader first takes what
// is left, its reads ending at that EOF or error, since nothing more can
// come, and at the latest at the read deadline it already had (at most
// IdleTimeout away; it is no longer moved on). Sends fail meanwhile.
func (c *Conn) writeFailed(err error) {
	reset := errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
	c.mu.Lock()
	drain := reset && c.started && !c.closed
	if drain {
		if c.err == nil {
			c.err = err
		}
		c.flushClose = true // Send fails, Start does nothing
	}
	c.mu.Unlock()
	if drain {
		c.reset.Store(true)
		select {
		case <-c.readerDone:
		case <-c.closing:
		}
	}
	c.closeWithError(err)
}

// takeDue moves the frames that are due from the queue to out. It returns
// the next due time of what stays queued (zero if none) and whether the
// connection should now close (SendAndClose and nothing left).
func (c *Conn) takeDue(out []byte) ([]byte, int, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := c.fe.buf.Bytes()
	cut, frames := len(pending), 0
	var next time.Time
	if c.cfg.Delay > 0 {
		now := time.Now()
		k := 0
		for k < len(c.marks) && !c.marks[k].due.After(now) {
			k++
		}
		cut, frames = 0, k
		if k > 0 {
			cut = c.marks[k-1].end
		}
		rest := c.marks[:copy(c.marks, c.marks[k:])]
		for i := range rest {
			rest[i].end -= cut
		}
		c.marks = rest
		if len(rest) > 0 {
			next = rest[0].due
		}
	} else {
		frames = countFrames(pending)
	}
	out = append(out, pending[:cut]...)
	c.fe.buf.Next(cut)
	c.echoEnd = max(0, c.echoEnd-cut) // 0: the echo, if one was queued, is out
	return out, frames, next, c.flushClose && c.fe.buf.Len() == 0
}

// countFrames counts the frames in a run of whole frames.
func countFrames(b []byte) int {
	n := 0
	for len(b) >= 4 {
		l := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
		b = b[min(len(b), 4+l):]
		n++
	}
	return n
}

// lingerClose ends a SendAndClose: half-close so the peer reads our last
// frames and then EOF (a full close with unread input would reset the
// connection and could destroy them), give the peer a moment to hang up,
// then close.
func (c *Conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		c.mu.Lock()
		started := c.started
		c.mu.Unlock()
		wait := min(c.cfg.WriteTimeout, 2*time.Second)
		readerGone := !started
		if started {
			t := time.NewTimer(wait)
			select {
			case <-c.readerDone:
				readerGone = true
			case <-c.closing:
			case <-t.C:
			}
			t.Stop()
		}
		if readerGone && !c.sawEOF.Load() {
			// Nobody reads (never started, or stopped on a bad frame):
			// swallow what the peer still sends until it hangs up, bounded
			// in bytes and time.
			c.nc.SetReadDeadline(time.Now().Add(wait))
			io.CopyN(io.Discard, c.br, 1<<20)
		}
	}
	c.closeWithError(ErrClosed)
}
