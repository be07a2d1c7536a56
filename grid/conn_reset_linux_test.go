package grid

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/internal/sockq"
)

// A master ended the run while its worker was stopped (SIGSTOP): it sent
// its Shutdown, then its FIN, and closed. When the worker goes on, a write
// draws the master's reset and the next one fails (EPIPE), while the
// Shutdown still waits in the worker's receive queue, unread. Closing the
// socket at that failed write destroyed it: the worker took the master for
// lost, not the run for over. The worker's reader is held here in its
// handler by a first frame, as a stopped process holds it, until the write
// has failed.
func TestConnReadsWhatCameBeforeAReset(t *testing.T) {
	leaktest.Check(t)
	master, w := tcpPair(t)
	cw := NewConn(context.Background(), w, quietConfig())
	r := newCollector()
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	cw.Start(func(m Message) {
		r.handle(m)
		if first {
			first = false
			close(held)
			<-release
		}
	})
	frame := func(m Message) []byte {
		b, err := AppendFrame(nil, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := master.Write(frame(&Tasks{Gen: 1})); err != nil {
		t.Fatal(err)
	}
	<-held // the worker's reader has taken the first frame, and no more
	bye := frame(&Shutdown{Reason: "run over"})
	if _, err := master.Write(bye); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the Shutdown in the worker's receive queue", func() bool { return unread(t, w) >= len(bye) })
	master.Close() // nothing unread at the master's end: a FIN, no reset
	// The worker writes until a write fails: the first one draws the reset.
	waitUntil(t, "a write to fail", func() bool { return cw.Send(Heartbeat{}) != nil })
	if err := cw.Err(); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Err = %v, want a write that found the connection reset", err)
	}
	close(release)
	<-cw.Done()
	msgs := r.wait(t, 1)
	if len(msgs) != 2 {
		var types []MsgType
		for _, m := range msgs {
			types = append(types, m.Type())
		}
		t.Fatalf("the worker's handler had %v, want the Tasks and the Shutdown (Err %v)", types, cw.Err())
	}
	if sd, ok := msgs[1].(*Shutdown); !ok || sd.Reason != "run over" {
		t.Fatalf("second message %#v, want the Shutdown", msgs[1])
	}
}

// unread is the number of bytes waiting in nc's receive queue.
func unread(t *testing.T, nc net.Conn) int {
	t.Helper()
	n, err := sockq.Unread(nc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond until it holds, failing t after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
