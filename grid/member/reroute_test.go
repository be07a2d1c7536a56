package member

import (
	"net/netip"
	"testing"
)

// A transport bound to loopback sends to its own loopback what it could
// not send at all (an address of this machine in the other family), and
// leaves every other address alone.
func TestReroute(t *testing.T) {
	local := map[netip.Addr]bool{netip.MustParseAddr("fd00::2"): true, netip.MustParseAddr("192.0.2.2"): true}
	for _, tt := range []struct {
		bind, addr, want string
	}{
		{"127.0.0.1", "[fd00::2]:7946", "127.0.0.1:7946"},         // the master of esrun -gossip 0.0.0.0:7946
		{"127.0.0.1", "[::1]:7946", "127.0.0.1:7946"},             // loopback is always this machine
		{"127.0.0.1", "192.0.2.2:7946", "192.0.2.2:7946"},         // same family: reachable as is
		{"127.0.0.1", "127.0.0.1:7946", "127.0.0.1:7946"},         // same family
		{"127.0.0.1", "[2001:db8::9]:7946", "[2001:db8::9]:7946"}, // another machine
		{"::1", "192.0.2.2:7946", "[::1]:7946"},
		{"::1", "[::ffff:192.0.2.2]:7946", "[::1]:7946"},
		{"::1", "[fd00::2]:7946", "[fd00::2]:7946"},
		{"0.0.0.0", "[fd00::2]:7946", "[fd00::2]:7946"}, // not bound to loopback: reaches every address
		{"192.0.2.2", "[::1]:7946", "[::1]:7946"},
		{"127.0.0.1", "not an address", "not an address"},
	} {
		tr := &Transport{}
		if lo, _ := loopbackAndLocal(tt.bind); lo.IsValid() {
			tr.loopback, tr.local = lo, local
		}
		if got := tr.reroute(tt.addr); got != tt.want {
			t.Errorf("bound to %s: %s goes to %s, want %s", tt.bind, tt.addr, got, tt.want)
		}
	}
}
