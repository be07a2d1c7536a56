package simgrid

import (
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
