package grid

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/internal/logx"
)

// The handshake, on every data connection, before anything else:
//
//	master → worker  Challenge{Version, master nonce}
//	worker → master  Hello{Version, name, slots, problems, worker nonce,
//	                       MAC("hello", both nonces, the fields)}
//	master → worker  Welcome{Version, worker id, problem,
//	                         MAC("welcome", both nonces, the fields)}
//
// MACs are HMAC-SHA256 under the data-connection key derived from the
// cluster key. The worker proves it holds the key before it is told
// anything; the master proves it too, so a worker never computes for an
// impostor. Fresh nonces on both sides make every MAC single-use. Whoever
// finds a problem (wrong or missing key, version mismatch, unexpected
// message) sends Reject{Reason}, logs it and closes; the other side logs the
// reason it received.
//
// After the Welcome, every frame in both directions is sealed (grid/wire's
// seal.go: AES-256-GCM, the frame's sequence number as the nonce) with
// keys derived by HKDF from the cluster key and both nonces, one key per
// direction, fresh for every connection: nobody without the key reads a
// vector or a fitness value, nor alters, injects, replays, reorders or
// drops a frame unnoticed.

// DefaultHandshakeTimeout bounds a whole handshake.
const DefaultHandshakeTimeout = 10 * time.Second

// DefaultHelloTimeout bounds, on the master's side, the wait for a
// worker's Hello after the Challenge is out: a real worker answers at
// once, and a peer that sends nothing (or a byte now and then) is cut
// off early, so that it holds a handshake slot for little time.
const DefaultHelloTimeout = 3 * time.Second

// maxNameLog bounds a name a peer gave itself, in logs.
const maxNameLog = 64

// handshakeMaxFrame caps frames from a peer not yet authenticated.
const handshakeMaxFrame = 16 << 10

// nonceSize is the length of each side's nonce.
const nonceSize = 32

// Handshake errors (a refusal received from the peer is a *RejectError).
var (
	// ErrAuthFailed means the peer could not prove it holds the cluster key.
	ErrAuthFailed = errors.New("grid: authentication failed")
	// ErrVersionMismatch means the peers speak different protocol versions.
	ErrVersionMismatch = errors.New("grid: protocol version mismatch")
	// ErrHandshake is a handshake broken in any other way.
	ErrHandshake = errors.New("grid: handshake failed")
)

// AcceptConfig configures the master's side of the handshake.
type AcceptConfig struct {
	// Key is the cluster key. Without one every worker is rejected.
	Key *Key
	// Timeout bounds the handshake. Default DefaultHandshakeTimeout.
	Timeout time.Duration
	// HelloTimeout bounds the wait for the worker's Hello once the
	// Challenge is sent. Default DefaultHelloTimeout (at most Timeout).
	HelloTimeout time.Duration
	// Refused, if set, is told of every handshake that fails (peer and
	// reason in words) instead of a warning per connection in the log:
	// the master counts them and logs a summary, so that a flood of
	// connections cannot flood the log. Each is still logged at debug
	// level.
	Refused func(peer net.Addr, reason string)
	// Welcome is called once the worker has proved it holds the key. It
	// returns the worker's id and the run's problem; an error rejects the
	// worker with the error's text as the reason. Required.
	Welcome func(h *Hello) (worker int32, problem ProblemSpec, err error)
	// Conn configures the connection after the handshake.
	Conn ConnConfig
}

// Accept runs the master's side of the handshake on a freshly accepted nc
// and returns the authenticated connection, not yet started (call Start),
// and the worker's Hello. On any failure it has sent Reject where it could,
// logged the reason, and closed nc. Cancelling ctx aborts the handshake and
// later closes the returned Conn.
func Accept(ctx context.Context, nc net.Conn, cfg AcceptConfig) (*Conn, *Hello, error) {
	log := logger(cfg.Conn).With("peer", nc.RemoteAddr().String())
	hs, stop := startHandshake(ctx, nc, cfg.Timeout)
	defer stop()
	if cfg.Refused != nil {
		peer := nc.RemoteAddr()
		hs.refused = func(reason string) { cfg.Refused(peer, reason) }
	}
	if cfg.Welcome == nil {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: master has no Welcome callback", ErrHandshake), "master misconfigured")
	}

	mNonce, err := newNonce()
	if err != nil {
		return nil, nil, hs.abort(ctx, log, "challenge", err)
	}
	if err := hs.send(&Challenge{Version: ProtocolVersion, Nonce: mNonce}); err != nil {
		return nil, nil, hs.abort(ctx, log, "challenge", err)
	}
	helloWait := cfg.HelloTimeout
	if helloWait <= 0 {
		helloWait = DefaultHelloTimeout
	}
	if helloWait < hs.timeout {
		hs.stepTimeout = helloWait
		hs.setReadDeadline(ctx, time.Now().Add(helloWait))
	}
	m, err := hs.receive(log)
	if err != nil {
		return nil, nil, hs.abort(ctx, log, "hello", err)
	}
	hs.stepTimeout = 0
	hs.setReadDeadline(ctx, hs.deadline)
	h, ok := m.(*Hello)
	if !ok {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: expected hello, got %v", ErrHandshake, m.Type()), "expected hello")
	}
	log = log.With("worker", logx.Cut(h.Name, maxNameLog))
	if h.Version != ProtocolVersion {
		reason := fmt.Sprintf("protocol version mismatch: master speaks %d, worker %d", ProtocolVersion, h.Version)
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %s", ErrVersionMismatch, reason), reason)
	}
	if cfg.Key == nil {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %w", ErrAuthFailed, ErrNoKey), "master has no cluster key")
	}
	if len(h.MAC) == 0 {
		reason := "worker has no cluster key (use -key, -key-file or " + KeyEnv + ")"
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %s", ErrAuthFailed, reason), reason)
	}
	if len(h.Nonce) != nonceSize || !hmac.Equal(h.MAC, helloMAC(cfg.Key, mNonce, h)) {
		reason := "authentication failed: wrong cluster key"
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %s", ErrAuthFailed, reason), reason)
	}
	keys, err := connectionKeys(cfg.Key, mNonce, h.Nonce, true)
	if err != nil {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %w", ErrHandshake, err), "master cannot derive the connection's keys")
	}
	id, problem, err := cfg.Welcome(h)
	if err != nil {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %w", ErrHandshake, err), err.Error())
	}
	w := &Welcome{Version: ProtocolVersion, Worker: id, Problem: problem, MaxFrame: cfg.Conn.withDefaults().MaxFrame}
	w.MAC = welcomeMAC(cfg.Key, mNonce, h.Nonce, w)
	if a, ok := nc.(interface{ authenticated() }); ok {
		a.authenticated() // a relay's stream holds more from now on (relay.go)
	}
	if err := hs.send(w); err != nil {
		return nil, nil, hs.abort(ctx, log, "welcome", err)
	}
	if err := hs.finish(); err != nil {
		return nil, nil, hs.abort(ctx, log, "welcome", err)
	}
	return newConn(ctx, nc, hs.rest(), cfg.Conn, keys), h, nil
}

// connectionKeys derives a connection's sealing keys: the master seals
// with the master-to-worker key and opens with the other, the worker the
// other way round.
func connectionKeys(k *Key, masterNonce, workerNonce []byte, master bool) (*connKeys, error) {
	toWorker, toMaster, err := k.sessionKeys(masterNonce, workerNonce)
	if err != nil {
		return nil, err
	}
	send, recv := toWorker, toMaster
	if !master {
		send, recv = toMaster, toWorker
	}
	seal, err := wire.NewSealer(send)
	if err != nil {
		return nil, err
	}
	open, err := wire.NewOpener(recv)
	if err != nil {
		return nil, err
	}
	return &connKeys{seal: seal, open: open}, nil
}

// DialConfig configures the worker's side of the handshake.
type DialConfig struct {
	// Key is the cluster key. Without one the worker still connects (so the
	// master logs who was refused) and is rejected.
	Key *Key
	// Name, Slots and Problems describe the worker in its Hello.
	Name     string
	Slots    int
	Problems []string
	// Timeout bounds connecting plus the handshake. Default
	// DefaultHandshakeTimeout.
	Timeout time.Duration
	// Conn configures the connection after the handshake.
	Conn ConnConfig
	// Dial opens the connection to the master's address (transports are
	// given, not opened: a simulated network in tests). Default: TCP,
	// with Timeout.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Dial connects to the master's data address and runs the worker's side of
// the handshake. It returns the connection, not yet started (call Start),
// and the master's Welcome. A refusal by the master is a *RejectError.
// Cancelling ctx aborts the dial and later closes the returned Conn.
func Dial(ctx context.Context, addr string, cfg DialConfig) (*Conn, *Welcome, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	dial := cfg.Dial
	if dial == nil {
		d := net.Dialer{Timeout: timeout, KeepAlive: keepAlive}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dial(ctx, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("grid: dial master %s: %w", addr, err)
	}
	return ClientHandshake(ctx, nc, cfg)
}

// ClientHandshake runs the worker's side of the handshake on nc, an open
// connection to the master. On failure it closes nc. See Dial.
func ClientHandshake(ctx context.Context, nc net.Conn, cfg DialConfig) (*Conn, *Welcome, error) {
	log := logger(cfg.Conn).With("master", nc.RemoteAddr().String())
	hs, stop := startHandshake(ctx, nc, cfg.Timeout)
	defer stop()

	m, err := hs.receive(log)
	if err != nil {
		return nil, nil, hs.fail(err)
	}
	ch, ok := m.(*Challenge)
	if !ok {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: expected challenge, got %v", ErrHandshake, m.Type()), "expected challenge")
	}
	if ch.Version != ProtocolVersion {
		reason := fmt.Sprintf("protocol version mismatch: worker speaks %d, master %d", ProtocolVersion, ch.Version)
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %s", ErrVersionMismatch, reason), reason)
	}
	if len(ch.Nonce) != nonceSize {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: challenge nonce of %d bytes", ErrHandshake, len(ch.Nonce)), "bad challenge")
	}
	wNonce, err := newNonce()
	if err != nil {
		return nil, nil, hs.fail(err)
	}
	h := &Hello{Version: ProtocolVersion, Name: cfg.Name, Slots: cfg.Slots, Problems: cfg.Problems, Nonce: wNonce}
	if cfg.Key != nil {
		h.MAC = helloMAC(cfg.Key, ch.Nonce, h)
	} else {
		log.Warn("connecting without a cluster key: the master will refuse this worker")
	}
	if err := hs.send(h); err != nil {
		return nil, nil, hs.fail(err)
	}
	m, err = hs.receive(log)
	if err != nil {
		return nil, nil, hs.fail(err)
	}
	w, ok := m.(*Welcome)
	if !ok {
		return nil, nil, hs.reject(log, fmt.Errorf("%w: expected welcome, got %v", ErrHandshake, m.Type()), "expected welcome")
	}
	if cfg.Key == nil || !hmac.Equal(w.MAC, welcomeMAC(cfg.Key, ch.Nonce, wNonce, w)) {
		reason := "master failed authentication: wrong cluster key"
		return nil, nil, hs.reject(log, fmt.Errorf("%w: %s", ErrAuthFailed, reason), reason)
	}
	keys, err := connectionKeys(cfg.Key, ch.Nonce, wNonce, false)
	if err != nil {
		return nil, nil, hs.fail(err)
	}
	if err := hs.finish(); err != nil {
		return nil, nil, err
	}
	// The master's tasks may be larger than this worker's own cap allows:
	// take the authenticated master's cap, within MaxFrameLimit.
	cc := cfg.Conn.withDefaults()
	cc.MaxFrame = max(cc.MaxFrame, min(w.MaxFrame, MaxFrameLimit))
	cc.MaxQueued = max(cc.MaxQueued, 4*cc.MaxFrame)
	return newConn(ctx, nc, hs.rest(), cc, keys), w, nil
}

// handshake holds one connection during its handshake.
type handshake struct {
	nc       net.Conn
	br       *bufio.Reader
	fr       *FrameReader
	timeout  time.Duration
	deadline time.Time // the whole handshake's
	// stepTimeout, when set, is the shorter deadline of the step under way
	// (the master waiting for the Hello), for the reason a timeout gives.
	stepTimeout time.Duration
	// refused, when set, takes the reason of a failure instead of a
	// warning in the log (AcceptConfig.Refused).
	refused func(reason string)
}

// startHandshake puts a deadline on nc and makes ctx cut it short.
func startHandshake(ctx context.Context, nc net.Conn, timeout time.Duration) (*handshake, func()) {
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	deadline := time.Now().Add(timeout)
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	// Small: a handshake's frames are small, and a master may hold many
	// handshakes of peers that never finish one.
	br := bufio.NewReaderSize(nc, 4<<10)
	return &handshake{nc: nc, br: br, fr: NewFrameReader(br, handshakeMaxFrame), timeout: timeout, deadline: deadline}, func() { stop() }
}

// setReadDeadline moves the read deadline to t, unless ctx is done: then
// the past deadline that ctx's end set (startHandshake) must stay, or a
// shutdown that came just before would wait for t.
func (hs *handshake) setReadDeadline(ctx context.Context, t time.Time) {
	hs.nc.SetReadDeadline(t)
	if ctx.Err() != nil {
		hs.nc.SetDeadline(time.Unix(1, 0))
	}
}

func (hs *handshake) send(m Message) error {
	b, err := AppendFrame(nil, m, handshakeMaxFrame)
	if err != nil {
		return err
	}
	if _, err := hs.nc.Write(b); err != nil {
		return fmt.Errorf("%w: send %v: %w", ErrHandshake, m.Type(), err)
	}
	return nil
}

// receive reads the next frame; a Reject from the peer is logged and
// becomes a *RejectError.
func (hs *handshake) receive(log *slog.Logger) (Message, error) {
	m, err := hs.fr.Next()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	if r, ok := m.(*Reject); ok {
		// Returned, not logged: the caller says it once.
		log.Debug("peer refused the connection", "reason", logx.Cut(r.Reason, logx.MaxErrText))
		return nil, &RejectError{Reason: logx.Cut(r.Reason, logx.MaxErrText)}
	}
	return m, nil
}

// reject tells the peer why, logs it (or reports it, see refused),
// closes and returns err.
func (hs *handshake) reject(log *slog.Logger, err error, reason string) error {
	if hs.refused != nil {
		log.Debug("refusing connection", "reason", reason)
		hs.refused(reason)
	} else {
		log.Warn("refusing connection", "reason", reason)
	}
	hs.send(&Reject{Reason: reason})
	hs.nc.Close()
	return err
}

// abort closes the connection after a failure that no Reject can explain
// to the peer (its bytes were unreadable, the stream was cut, the time ran
// out, a write failed) and logs why, in one line: at debug level when ctx
// ended the handshake (shutting down), not at all when it was the peer's
// Reject (receive has logged it). step names the message being exchanged.
func (hs *handshake) abort(ctx context.Context, log *slog.Logger, step string, err error) error {
	var rej *RejectError
	switch {
	case errors.As(err, &rej):
	case ctx.Err() != nil:
		log.Debug("handshake aborted: shutting down", "step", step, "err", err)
	default:
		reason := hs.reason(err)
		if hs.refused != nil {
			log.Debug("handshake failed; connection closed", "step", step, "reason", reason)
			hs.refused(reason)
		} else {
			log.Warn("handshake failed; connection closed", "step", step, "reason", reason)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			// Say why, should the peer be a real worker on a bad link.
			hs.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			hs.send(&Reject{Reason: reason})
		}
	}
	return hs.fail(err)
}

// reason says in words why a handshake broke.
func (hs *handshake) reason(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout() && hs.stepTimeout > 0:
		return fmt.Sprintf("timed out: no hello within %v of the challenge", hs.stepTimeout)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("timed out: handshake not done within %v", hs.timeout)
	case errors.Is(err, io.EOF):
		return "the peer closed the connection"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the stream was cut inside a frame"
	}
	return err.Error()
}

// rest is the reader for the connection once the handshake is done: the
// connection's own, large one (nil: newConn makes it), after whatever the
// handshake's small buffer read ahead.
func (hs *handshake) rest() *bufio.Reader {
	n := hs.br.Buffered()
	if n == 0 {
		return nil
	}
	ahead, _ := hs.br.Peek(n)
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), hs.nc), 64<<10)
}

// fail closes the connection and returns err.
func (hs *handshake) fail(err error) error {
	hs.nc.Close()
	return err
}

// finish clears the handshake's deadline for the Conn to set its own.
func (hs *handshake) finish() error {
	if err := hs.nc.SetDeadline(time.Time{}); err != nil {
		return hs.fail(fmt.Errorf("%w: %w", ErrHandshake, err))
	}
	return nil
}

func newNonce() ([]byte, error) {
	b := make([]byte, nonceSize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("grid: nonce: %w", err)
	}
	return b, nil
}

// macWriter feeds length-prefixed fields to an HMAC, so that no two
// different field lists hash the same bytes.
type macWriter struct{ h hash.Hash }

func newMAC(k *Key, label string) macWriter {
	w := macWriter{hmac.New(sha256.New, k.mac[:])}
	w.bytes([]byte(label))
	return w
}

func (w macWriter) bytes(b []byte) {
	w.int(int64(len(b)))
	w.h.Write(b)
}

func (w macWriter) int(n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	w.h.Write(b[:])
}

func (w macWriter) bool(b bool) {
	if b {
		w.int(1)
	} else {
		w.int(0)
	}
}

func (w macWriter) sum() []byte { return w.h.Sum(nil) }

func helloMAC(k *Key, masterNonce []byte, h *Hello) []byte {
	w := newMAC(k, "esgrid hello")
	w.bytes(masterNonce)
	w.bytes(h.Nonce)
	w.int(int64(h.Version))
	w.bytes([]byte(h.Name))
	w.int(int64(h.Slots))
	w.int(int64(len(h.Problems)))
	for _, p := range h.Problems {
		w.bytes([]byte(p))
	}
	return w.sum()
}

func welcomeMAC(k *Key, masterNonce, workerNonce []byte, m *Welcome) []byte {
	w := newMAC(k, "esgrid welcome")
	w.bytes(masterNonce)
	w.bytes(workerNonce)
	w.int(int64(m.Version))
	w.int(int64(m.Worker))
	w.bytes([]byte(m.Problem.Name))
	w.int(int64(m.Problem.Dim))
	w.int(int64(m.Problem.LoadN))
	w.bool(m.Problem.NonFinite)
	w.int(int64(m.MaxFrame))
	return w.sum()
}

func logger(c ConnConfig) *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
