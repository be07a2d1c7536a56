package grid

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// A key holder cannot hold more connections than MaxWorkers under new
// names: one past it is refused with the reason, and a place freed is
// taken again.
func TestMasterMaxWorkersRefusesWithReason(t *testing.T) {
	m := startMaster(t, "wq", func(c *MasterConfig) { c.MaxWorkers = 3 })
	lo := net.IPv4(127, 0, 0, 1)
	var cs []*Conn
	for i := range 3 {
		c, err := dialFrom(t.Context(), lo, m.Addr(), fmt.Sprintf("w%d", i), m.cfg.Key)
		if err != nil {
			t.Fatal(err)
		}
		c.Start(func(Message) {})
		t.Cleanup(func() { c.Close(); <-c.Done() })
		cs = append(cs, c)
	}
	eventually(t, "three workers to join", func() bool { return m.Workers() == 3 })
	c, err := dialFrom(t.Context(), lo, m.Addr(), "w3", m.cfg.Key)
	var rej *RejectError
	if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "master full") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a fourth connection: %v, want refused as full (%d workers)", err, m.Workers())
	}
	cs[0].Close()
	// Its place is given back when its connection is done, apart from
	// the loop's own count.
	eventually(t, "the first worker to leave", func() bool { return m.Workers() == 2 && m.connected.Load() == 2 })
	c, err = dialFrom(t.Context(), lo, m.Addr(), "w3", m.cfg.Key)
	if err != nil {
		t.Fatalf("once a place is free: %v", err)
	}
	c.Start(func(Message) {})
	defer func() { c.Close(); <-c.Done() }()
	eventually(t, "the fourth worker to join", func() bool { return m.Workers() == 3 })
	if n := m.connected.Load(); n != 3 {
		t.Errorf("%d connections counted, want 3", n)
	}
}
