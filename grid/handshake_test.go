package grid

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// syncBuffer is a log sink safe for the two sides' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mustKey(t *testing.T, secret string) *Key {
	t.Helper()
	k, err := NewKey(testSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type handshakeOutcome struct {
	conn  *Conn
	hello *Hello
	err   error
}

// runHandshake runs Accept on one end of a loopback pair and Dial on the
// other, with logs captured per side.
func runHandshake(t *testing.T, masterKey, workerKey *Key) (m handshakeOutcome, w handshakeOutcome, welcome *Welcome, mlog, wlog *syncBuffer) {
	t.Helper()
	mlog, wlog = new(syncBuffer), new(syncBuffer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	done := make(chan handshakeOutcome, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- handshakeOutcome{err: err}
			return
		}
		c, h, err := Accept(ctx, nc, AcceptConfig{
			Key:     masterKey,
			Timeout: 5 * time.Second,
			Welcome: func(h *Hello) (int32, ProblemSpec, error) {
				if h.Name == "unwelcome" {
					return 0, ProblemSpec{}, errors.New("no room for unwelcome")
				}
				return 7, ProblemSpec{Name: "ridge", Dim: 30, LoadN: 100}, nil
			},
			Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(mlog, nil))},
		})
		done <- handshakeOutcome{c, h, err}
	}()
	wc, welcome, werr := Dial(ctx, ln.Addr().String(), DialConfig{
		Key: workerKey, Name: "lab-1", Slots: 4, Problems: []string{"ridge"},
		Timeout: 5 * time.Second,
		Conn:    ConnConfig{Logger: slog.New(slog.NewTextHandler(wlog, nil))},
	})
	return <-done, handshakeOutcome{conn: wc, err: werr}, welcome, mlog, wlog
}

func TestHandshakeSameKey(t *testing.T) {
	leaktest.Check(t)
	k := mustKey(t, "s3cret")
	m, w, welcome, _, _ := runHandshake(t, k, mustKey(t, "s3cret"))
	if m.err != nil || w.err != nil {
		t.Fatalf("master %v, worker %v", m.err, w.err)
	}
	if m.hello.Name != "lab-1" || m.hello.Slots != 4 || len(m.hello.Problems) != 1 || m.hello.Version != ProtocolVersion {
		t.Errorf("hello %+v", m.hello)
	}
	if welcome.Worker != 7 || welcome.Problem != (ProblemSpec{Name: "ridge", Dim: 30, LoadN: 100}) {
		t.Errorf("welcome %+v", welcome)
	}
	// The connection works, and frames sent right after the Welcome (that
	// the handshake may have buffered) are not lost.
	m.conn.Send(&Tasks{Gen: 1, Items: []Task{{ID: 3}}})
	r := newCollector()
	w.conn.Start(r.handle)
	m.conn.Start(func(Message) {})
	if ts := r.wait(t, 1)[0].(*Tasks); ts.Items[0].ID != 3 {
		t.Errorf("got %+v", ts)
	}
	m.conn.Close()
	w.conn.Close()
	<-m.conn.Done()
	<-w.conn.Done()
}

func TestHandshakeRefusals(t *testing.T) {
	cases := []struct {
		name                 string
		masterKey, workerKey *Key
		masterErr            error
		reason               string // in the worker's RejectError and both logs
	}{
		{"wrong key", mustKey(t, "right"), mustKey(t, "wrong"), ErrAuthFailed, "wrong cluster key"},
		{"worker without key", mustKey(t, "right"), nil, ErrAuthFailed, "worker has no cluster key"},
		{"master without key", nil, mustKey(t, "right"), ErrAuthFailed, "master has no cluster key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			leaktest.Check(t)
			m, w, _, mlog, wlog := runHandshake(t, c.masterKey, c.workerKey)
			if !errors.Is(m.err, c.masterErr) || m.conn != nil {
				t.Errorf("master: %v, want %v", m.err, c.masterErr)
			}
			var re *RejectError
			if !errors.As(w.err, &re) || !strings.Contains(re.Reason, c.reason) || w.conn != nil {
				t.Errorf("worker: %v, want a rejection for %q", w.err, c.reason)
			}
			// The master logs the refusal; the worker returns it (its
			// caller, the agent, says it once per attempt at most).
			if s := mlog.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, c.reason) {
				t.Errorf("master log lacks a warning naming %q:\n%s", c.reason, s)
			}
			if s := wlog.String(); strings.Contains(s, "level=WARN msg=\"peer refused") {
				t.Errorf("worker logged the refusal itself:\n%s", s)
			}
		})
	}
}

func TestHandshakeWelcomeCallbackRefuses(t *testing.T) {
	leaktest.Check(t)
	mlog := new(syncBuffer)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		Accept(context.Background(), nc, AcceptConfig{
			Key:     mustKey(t, "k"),
			Welcome: func(*Hello) (int32, ProblemSpec, error) { return 0, ProblemSpec{}, errors.New("no free worker ids") },
			Conn:    ConnConfig{Logger: slog.New(slog.NewTextHandler(mlog, nil))},
		})
	}()
	_, _, err := Dial(context.Background(), ln.Addr().String(), DialConfig{Key: mustKey(t, "k"), Conn: quietConfig()})
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != "no free worker ids" {
		t.Errorf("Dial = %v", err)
	}
}

// fakePeer speaks raw frames on one end of a pair.
type fakePeer struct {
	t  *testing.T
	nc net.Conn
	fr *FrameReader
}

func newFakePeer(t *testing.T, nc net.Conn) *fakePeer {
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &fakePeer{t: t, nc: nc, fr: NewFrameReader(nc, 0)}
}

func (p *fakePeer) send(m Message) {
	b, err := AppendFrame(nil, m, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	p.nc.Write(b)
}

func (p *fakePeer) receive() Message {
	m, err := p.fr.Next()
	if err != nil {
		p.t.Fatalf("fake peer: %v", err)
	}
	return m
}

func TestHandshakeVersionMismatch(t *testing.T) {
	t.Run("worker from the future", func(t *testing.T) {
		leaktest.Check(t)
		a, b := tcpPair(t)
		defer b.Close()
		log := new(syncBuffer)
		errc := make(chan error, 1)
		go func() {
			_, _, err := Accept(context.Background(), a, AcceptConfig{
				Key:     mustKey(t, "k"),
				Welcome: func(*Hello) (int32, ProblemSpec, error) { return 1, ProblemSpec{}, nil },
				Conn:    ConnConfig{Logger: slog.New(slog.NewTextHandler(log, nil))},
			})
			errc <- err
		}()
		w := newFakePeer(t, b)
		ch := w.receive().(*Challenge)
		w.send(&Hello{Version: ProtocolVersion + 1, Name: "new", Nonce: make([]byte, 32), MAC: []byte{1}})
		r, ok := w.receive().(*Reject)
		if !ok || !strings.Contains(r.Reason, "version mismatch") {
			t.Errorf("worker got %#v", r)
		}
		if err := <-errc; !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("Accept = %v", err)
		}
		if !strings.Contains(log.String(), "version mismatch") || ch.Version != ProtocolVersion {
			t.Errorf("master log: %s", log.String())
		}
	})
	t.Run("master from the future", func(t *testing.T) {
		leaktest.Check(t)
		a, b := tcpPair(t)
		defer b.Close()
		log := new(syncBuffer)
		errc := make(chan error, 1)
		go func() {
			_, _, err := ClientHandshake(context.Background(), a, DialConfig{
				Key: mustKey(t, "k"), Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(log, nil))},
			})
			errc <- err
		}()
		m := newFakePeer(t, b)
		m.send(&Challenge{Version: ProtocolVersion + 1, Nonce: make([]byte, 32)})
		r, ok := m.receive().(*Reject)
		if !ok || !strings.Contains(r.Reason, "version mismatch") {
			t.Errorf("master got %#v", r)
		}
		if err := <-errc; !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("ClientHandshake = %v", err)
		}
		if !strings.Contains(log.String(), "version mismatch") {
			t.Errorf("worker log: %s", log.String())
		}
	})
}

// A master that does not hold the key cannot make the worker accept its
// Welcome, even when it accepts the worker's Hello blindly.
func TestHandshakeWorkerChecksMaster(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close()
	errc := make(chan error, 1)
	go func() {
		_, _, err := ClientHandshake(context.Background(), a, DialConfig{Key: mustKey(t, "k"), Conn: quietConfig()})
		errc <- err
	}()
	m := newFakePeer(t, b)
	m.send(&Challenge{Version: ProtocolVersion, Nonce: make([]byte, 32)})
	h := m.receive().(*Hello)
	forged := &Welcome{Version: ProtocolVersion, Worker: 1, Problem: ProblemSpec{Name: "ridge", Dim: 2}}
	forged.MAC = welcomeMAC(mustKey(t, "not k"), make([]byte, 32), h.Nonce, forged)
	m.send(forged)
	if r, ok := m.receive().(*Reject); !ok || !strings.Contains(r.Reason, "master failed authentication") {
		t.Errorf("impostor got %#v", r)
	}
	if err := <-errc; !errors.Is(err, ErrAuthFailed) {
		t.Errorf("ClientHandshake = %v", err)
	}
}

// A Hello recorded from one handshake is useless in another: the master's
// nonce differs.
func TestHandshakeReplayedHelloRefused(t *testing.T) {
	k := mustKey(t, "k")
	nonce1 := bytes.Repeat([]byte{1}, 32)
	h := &Hello{Version: ProtocolVersion, Name: "w", Slots: 2, Nonce: bytes.Repeat([]byte{2}, 32)}
	h.MAC = helloMAC(k, nonce1, h)
	if bytes.Equal(h.MAC, helloMAC(k, bytes.Repeat([]byte{3}, 32), h)) {
		t.Error("MAC does not depend on the master's nonce")
	}
	h2 := *h
	h2.Slots = 64
	if bytes.Equal(h.MAC, helloMAC(k, nonce1, &h2)) {
		t.Error("MAC does not cover the slots")
	}
}

func TestHandshakeTimesOut(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close() // says nothing
	_, _, err := Accept(context.Background(), a, AcceptConfig{
		Key: mustKey(t, "k"), Timeout: 100 * time.Millisecond,
		Welcome: func(*Hello) (int32, ProblemSpec, error) { return 1, ProblemSpec{}, nil },
		Conn:    quietConfig(),
	})
	if !errors.Is(err, ErrHandshake) {
		t.Errorf("Accept against a silent peer = %v", err)
	}
}

func TestHandshakeContextCancel(t *testing.T) {
	leaktest.Check(t)
	a, b := tcpPair(t)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := ClientHandshake(ctx, a, DialConfig{Key: mustKey(t, "k"), Timeout: time.Minute, Conn: quietConfig()})
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Error("handshake succeeded after cancel")
		}
	case <-time.After(time.Minute):
		t.Fatal("cancel did not stop the handshake")
	}
}

func TestKeyDerivation(t *testing.T) {
	a, b := mustKey(t, "alpha"), mustKey(t, "alpha")
	if !bytes.Equal(a.GossipKey(), b.GossipKey()) || a.mac != b.mac {
		t.Error("same secret, different keys")
	}
	if bytes.Equal(a.GossipKey(), a.mac[:]) {
		t.Error("gossip and MAC keys are the same")
	}
	if len(a.GossipKey()) != 32 {
		t.Errorf("gossip key of %d bytes", len(a.GossipKey()))
	}
	if c := mustKey(t, "alphb"); bytes.Equal(a.GossipKey(), c.GossipKey()) || a.mac == c.mac {
		t.Error("different secrets, same keys")
	}
	g := a.GossipKey()
	g[0] ^= 0xff
	if bytes.Equal(g, a.GossipKey()) {
		t.Error("GossipKey exposes the key's own bytes")
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	os.WriteFile(file, []byte("  "+testSecret("from-file")+"\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	same := func(k *Key, secret string) bool { return k != nil && k.mac == mustKey(t, secret).mac }

	t.Setenv(KeyEnv, testSecret("from-env"))
	cases := []struct {
		flag, file, want string
		err              error
	}{
		{testSecret("from-flag"), file, "from-flag", nil},
		{"", file, "from-file", nil},
		{"", "", "from-env", nil},
		{"", empty, "", ErrNoKey},
		{"", filepath.Join(dir, "missing"), "", os.ErrNotExist},
	}
	for _, c := range cases {
		k, err := LoadKey(c.flag, c.file, false)
		if !errors.Is(err, c.err) || (c.err == nil && !same(k, c.want)) {
			t.Errorf("LoadKey(%q, %q) = %v, %v; want %q, %v", c.flag, c.file, k, err, c.want, c.err)
		}
	}
	t.Setenv(KeyEnv, "")
	if _, err := LoadKey("", "", false); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key anywhere: %v", err)
	}
}

// TestHandshakeReplayRefused replays, in a second handshake, a message
// recorded from a first one that succeeded: each side's fresh nonce makes
// the other side's MAC single-use, so an eavesdropper without the key can
// neither pose as a worker nor as the master.
func TestHandshakeReplayRefused(t *testing.T) {
	k := mustKey(t, "k")
	welcome := func(*Hello) (int32, ProblemSpec, error) { return 1, ProblemSpec{Name: "ridge", Dim: 2}, nil }

	t.Run("hello", func(t *testing.T) {
		leaktest.Check(t)
		var recorded *Hello
		for i, wantOK := range []bool{true, false} {
			a, b := tcpPair(t)
			errc := make(chan error, 1)
			go func() {
				c, _, err := Accept(context.Background(), a, AcceptConfig{Key: k, Welcome: welcome, Conn: quietConfig()})
				if c != nil {
					c.Close()
				}
				errc <- err
			}()
			w := newFakePeer(t, b)
			ch := w.receive().(*Challenge)
			if recorded == nil {
				// The first time the worker holds the key.
				recorded = &Hello{Version: ProtocolVersion, Name: "w", Slots: 1, Nonce: bytes.Repeat([]byte{7}, nonceSize)}
				recorded.MAC = helloMAC(k, ch.Nonce, recorded)
			}
			w.send(recorded)
			reply := w.receive()
			err := <-errc
			b.Close()
			if _, ok := reply.(*Welcome); ok != wantOK || (err == nil) != wantOK {
				t.Errorf("handshake %d: reply %T, Accept error %v; want success %v", i, reply, err, wantOK)
			}
			if !wantOK && !errors.Is(err, ErrAuthFailed) {
				t.Errorf("replayed hello: %v, want ErrAuthFailed", err)
			}
		}
	})

	t.Run("welcome", func(t *testing.T) {
		leaktest.Check(t)
		masterNonce := bytes.Repeat([]byte{9}, nonceSize) // the impostor reuses it
		var recorded *Welcome
		for i, wantOK := range []bool{true, false} {
			a, b := tcpPair(t)
			errc := make(chan error, 1)
			go func() {
				c, _, err := ClientHandshake(context.Background(), a, DialConfig{Key: k, Name: "w", Slots: 1, Conn: quietConfig()})
				if c != nil {
					c.Close()
				}
				errc <- err
			}()
			m := newFakePeer(t, b)
			m.send(&Challenge{Version: ProtocolVersion, Nonce: masterNonce})
			h := m.receive().(*Hello)
			if recorded == nil {
				// The first time the master holds the key.
				recorded = &Welcome{Version: ProtocolVersion, Worker: 1, Problem: ProblemSpec{Name: "ridge", Dim: 2}}
				recorded.MAC = welcomeMAC(k, masterNonce, h.Nonce, recorded)
			}
			m.send(recorded)
			err := <-errc
			b.Close()
			if (err == nil) != wantOK {
				t.Errorf("handshake %d: %v; want success %v", i, err, wantOK)
			}
			if !wantOK && !errors.Is(err, ErrAuthFailed) {
				t.Errorf("replayed welcome: %v, want ErrAuthFailed", err)
			}
		}
	})
}

// A connection that breaks before its Hello is read is closed with one
// warning naming the peer and why; a handshake cut short by the master
// shutting down is not worth one.
func TestAcceptLogsBrokenHello(t *testing.T) {
	tests := []struct {
		name   string
		peer   func(c net.Conn) // after the challenge has arrived
		cancel bool             // the master's context ends instead
		want   string           // in the warning; "" for none
	}{
		{"garbage", func(c net.Conn) {
			c.Write([]byte{0, 0, 0, 5, byte(MsgHello), 0xc1, 0xc1, 0xc1, 0xc1})
		}, false, "malformed"},
		{"oversized length", func(c net.Conn) {
			c.Write([]byte{0x7f, 0xff, 0xff, 0xff})
		}, false, "frame too large"},
		{"stream cut", func(c net.Conn) {
			c.Write([]byte{0, 0, 0, 100, byte(MsgHello), 1, 2, 3})
			c.Close()
		}, false, "the stream was cut inside a frame"},
		{"closed", func(c net.Conn) { c.Close() }, false, "the peer closed the connection"},
		{"silent", func(net.Conn) {}, false, "timed out: handshake not done within 200ms"},
		{"shutting down", func(net.Conn) {}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			client, server := tcpPair(t)
			defer client.Close()
			logs := new(syncBuffer)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Only the silent peer meets the timeout; for the others it
			// is a minute, so that a loaded machine cannot turn their
			// warnings into a timeout's.
			timeout := time.Minute
			if tt.name == "silent" {
				timeout = 200 * time.Millisecond
			}
			errc := make(chan error, 1)
			go func() {
				_, _, err := Accept(ctx, server, AcceptConfig{
					Key: mustKey(t, "k"), Timeout: timeout,
					Welcome: func(*Hello) (int32, ProblemSpec, error) { return 1, ProblemSpec{}, nil },
					Conn:    ConnConfig{Logger: slog.New(slog.NewTextHandler(logs, nil))},
				})
				errc <- err
			}()
			if m, err := NewFrameReader(client, 0).Next(); err != nil {
				t.Fatalf("no challenge: %v", err)
			} else if _, ok := m.(*Challenge); !ok {
				t.Fatalf("first frame %v, want a challenge", m.Type())
			}
			tt.peer(client)
			if tt.cancel {
				cancel()
			}
			if err := <-errc; !errors.Is(err, ErrHandshake) {
				t.Errorf("Accept = %v, want ErrHandshake", err)
			}
			out := logs.String()
			warns := strings.Count(out, "level=WARN")
			switch {
			case tt.want == "" && warns != 0:
				t.Errorf("want no warning, log:\n%s", out)
			case tt.want != "" && (warns != 1 || strings.Count(out, "\n") != 1):
				t.Errorf("want exactly one line, a warning; log:\n%s", out)
			case tt.want != "" && (!strings.Contains(out, "peer="+client.LocalAddr().String()) || !strings.Contains(out, tt.want)):
				t.Errorf("warning lacks the peer %s or %q:\n%s", client.LocalAddr(), tt.want, out)
			}
		})
	}
}
