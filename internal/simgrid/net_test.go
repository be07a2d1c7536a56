package simgrid

import (
	"io"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The bytes a partition held arrive, as it heals, write by write: each
// at an instant of its own, in order. All at the instant it healed, the
// reader's goroutine and those it wakes raced: seed 610713's master took
// a thawed worker's frames in one turn of its loop or in several, as they
// ran. Bytes written at one instant still arrive at one instant.
func TestPartitionHeldWritesArriveApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		l, err := n.Listen("127.0.0.1:7947")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, err := n.Dial(t.Context(), "127.0.1.1", "127.0.0.1:7947")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		heal := time.Now().Add(time.Second)
		n.Partition("127.0.1.1", heal)
		for _, b := range []string{"a", "b", "c"} {
			if _, err := c.Write([]byte(b)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, b := range []string{"d", "e"} { // one instant
			if _, err := c.Write([]byte(b)); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		var at []time.Time
		buf := make([]byte, 16)
		for len(got) < 5 {
			k, err := s.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range buf[:k] {
				got, at = append(got, string(b)), append(at, time.Now())
			}
		}
		if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
		if at[0].Before(heal) {
			t.Errorf("the first write arrived %v before the partition healed", heal.Sub(at[0]))
		}
		for i := 1; i < 4; i++ {
			if !at[i].After(at[i-1]) {
				t.Errorf("write %q arrived at the instant of %q (%v after the heal), not after", got[i], got[i-1], at[i].Sub(heal))
			}
		}
		if !at[4].Equal(at[3]) {
			t.Errorf("two writes of one instant arrived %v apart", at[4].Sub(at[3]))
		}
	})
}

// pair is a connection on n from host 127.0.1.1 (c) to the master's
// address (s); done closes it and ends its links.
func pair(t *testing.T, n *Network) (c, s net.Conn, done func()) {
	t.Helper()
	l, err := n.Listen("127.0.0.1:7947")
	if err != nil {
		t.Fatal(err)
	}
	c, err = n.Dial(t.Context(), "127.0.1.1", "127.0.0.1:7947")
	if err != nil {
		t.Fatal(err)
	}
	s, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, s, func() {
		c.Close()
		s.Close()
		l.Close()
		n.Settle(0)
	}
}

// readAt reads one byte from c and says when it came.
func readAt(t *testing.T, c net.Conn) time.Time {
	t.Helper()
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// A one-way partition holds the bytes one way only, and dials fail.
func TestOneWayHoldsOneDirection(t *testing.T) {
	for _, out := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			n := NewNetwork(1)
			c, s, done := pair(t, n)
			defer done()
			heal := time.Now().Add(time.Minute)
			n.OneWay("127.0.1.1", out, heal)
			held, free := c, s // out: what 127.0.1.1 sends waits
			if !out {
				held, free = s, c
			}
			if _, err := n.Dial(t.Context(), "127.0.1.1", "127.0.0.1:7947"); err == nil {
				t.Errorf("out=%v: a dial across a one-way partition succeeded", out)
			}
			held.Write([]byte("h"))
			free.Write([]byte("f"))
			if far := readFrom(free, c, s); !readAt(t, far).Before(heal) {
				t.Errorf("out=%v: the free direction waited for the partition", out)
			}
			if far := readFrom(held, c, s); readAt(t, far).Before(heal) {
				t.Errorf("out=%v: the held direction delivered before the partition healed", out)
			}
		})
	}
}

// readFrom is the end that reads what w writes: the other of c and s.
func readFrom(w, c, s net.Conn) net.Conn {
	if w == c {
		return s
	}
	return c
}

// A slow link delivers each write late by up to its extra delay, in
// order, nothing held beyond it.
func TestSlowDelaysEachWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		c, s, done := pair(t, n)
		defer done()
		n.Slow("127.0.1.1", 4*time.Second, time.Now().Add(time.Minute))
		for _, w := range []net.Conn{c, s} {
			sent := time.Now()
			w.Write([]byte("x"))
			d := readAt(t, readFrom(w, c, s)).Sub(sent)
			if d < 2*time.Second || d > 4*time.Second+time.Millisecond {
				t.Errorf("a write on a link slow by up to 4s took %v", d)
			}
		}
		time.Sleep(time.Minute)
		sent := time.Now()
		c.Write([]byte("y"))
		if d := readAt(t, s).Sub(sent); d > time.Millisecond {
			t.Errorf("once the link is fast again a write took %v", d)
		}
	})
}

// A crash leaves the connection half-open: the crashed end's reads end,
// the far end hears nothing (no EOF, no reset) and its writes succeed,
// until the returned reset, which ends its read.
func TestHalfOpenHearsNothingUntilReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork(1)
		c, s, done := pair(t, n)
		defer done()
		reset := n.HalfOpen("127.0.1.1")
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("the crashed end read on")
		}
		c.Close() // its process's exit: no FIN goes out
		got := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 1))
			got <- err
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("the far end of a half-open connection read %v", err)
		default:
		}
		if _, err := s.Write([]byte("lost")); err != nil {
			t.Errorf("a write to a half-open connection failed: %v", err)
		}
		if _, err := n.Dial(t.Context(), "127.0.0.1", "127.0.1.1:7000"); err == nil {
			t.Error("a dial reached a listener of the crashed host")
		}
		reset()
		if err := <-got; err == nil {
			t.Error("after the reset the far end read on")
		}
	})
}
