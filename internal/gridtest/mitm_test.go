package gridtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/worker"
)

// mitm is a man in the middle on loopback: a TCP proxy between a worker
// and the master's data port that reads the frames going each way and,
// on the first connection only, tampers with one sealed frame (after the
// handshake's clear ones: the Challenge and the Welcome from the master,
// the Hello from the worker).
type mitm struct {
	ln     net.Listener
	target string
	mode   string // "flip" a bit, "replay" the frame, "drop" it
	toward string // "worker" (master → worker frames) or "master"
	nth    int    // which sealed frame in that direction, from 0

	conns    atomic.Int64
	tampered atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	open     []net.Conn
}

func newMITM(t *testing.T, target, mode, toward string, nth int) *mitm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &mitm{ln: ln, target: target, mode: mode, toward: toward, nth: nth}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *mitm) addr() string { return p.ln.Addr().String() }

func (p *mitm) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *mitm) track(c net.Conn) {
	p.mu.Lock()
	p.open = append(p.open, c)
	p.mu.Unlock()
}

func (p *mitm) accept() {
	defer p.wg.Done()
	for {
		w, err := p.ln.Accept()
		if err != nil {
			return
		}
		m, err := net.Dial("tcp", p.target)
		if err != nil {
			w.Close()
			continue
		}
		p.track(w)
		p.track(m)
		first := p.conns.Add(1) == 1
		p.wg.Add(2)
		go p.pipe(m, w, first && p.toward == "worker", 2) // master → worker: Challenge, Welcome in clear
		go p.pipe(w, m, first && p.toward == "master", 1) // worker → master: Hello in clear
	}
}

// pipe copies frames from src to dst; with tamper it alters the nth
// sealed frame (the clear frames come first).
func (p *mitm) pipe(src, dst net.Conn, tamper bool, clear int) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	var hdr [4]byte
	for i := 0; ; i++ {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 64<<20 {
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, hdr[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return
		}
		out := [][]byte{frame}
		if tamper && i == clear+p.nth {
			p.tampered.Store(true)
			switch p.mode {
			case "flip":
				frame[4+n/2] ^= 0x01
			case "replay":
				out = append(out, frame)
			case "drop":
				out = nil
			}
		}
		for _, f := range out {
			if _, err := dst.Write(f); err != nil {
				return
			}
		}
	}
}

// A man in the middle who flips one bit of a frame, replays one or drops
// one, either way, gets the connection closed; the worker reconnects, and
// the run's trajectory is the in-process one, bit for bit.
func TestMITMTamperingClosesConnection(t *testing.T) {
	want := inProcess(t)
	for _, mode := range []string{"flip", "replay", "drop"} {
		for _, toward := range []string{"worker", "master"} {
			t.Run(mode+" toward "+toward, func(t *testing.T) {
				leaktest.Check(t)
				c := newCluster(t, "rwq")
				p := newMITM(t, c.master.Addr(), mode, toward, 1)
				a, err := worker.New(worker.Config{
					Master: p.addr(), Key: c.key, Name: "proxied", Slots: 2, Logger: quiet,
					MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
					// A dropped frame shows when the next one arrives:
					// heartbeats and status reports come often.
					Conn: gridConnQuick(),
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				r := &agentRun{name: "proxied", stop: cancel, done: make(chan struct{})}
				go func() {
					r.err = a.Run(ctx)
					close(r.done)
				}()
				c.agents = append(c.agents, r)
				c.addWorker(t, "direct", 1, 2, c.key)
				wctx, wcancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer wcancel()
				if err := c.master.WaitWorkers(wctx, 2); err != nil {
					t.Fatal(err)
				}
				got := trajectory(t, c.master, nil)
				compare(t, got, want)
				if !p.tampered.Load() {
					t.Fatal("the proxy never tampered with a frame: nothing was tested")
				}
				// The tampered connection closed, and the worker came back.
				eventuallyT(t, fmt.Sprintf("the worker to reconnect (%d connections)", p.conns.Load()),
					func() bool { return p.conns.Load() >= 2 })
			})
		}
	}
}

// gridConnQuick is a worker's connection that hears from the master at
// least every second or so (heartbeats) and gives up after 3 s of silence.
func gridConnQuick() grid.ConnConfig {
	return grid.ConnConfig{IdleTimeout: 3 * time.Second, Heartbeat: 300 * time.Millisecond}
}

// eventuallyT waits for cond, up to a minute (patience for a loaded
// machine: cond is the event).
func eventuallyT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
