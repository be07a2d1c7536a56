package flagx

import (
	"strings"
	"testing"
)

// Addresses: a bare host gets the default port, a port is checked
// against its bounds, and loopback means localhost or a loopback IP.
func TestAddrs(t *testing.T) {
	got := HostPorts("a, b:1,[::1],", 7946)
	want := []string{"a:7946", "b:1", "[::1]:7946"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("HostPorts = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		addr string
		min  int
		ok   bool
	}{{":0", 0, true}, {"h:0", 1, false}, {"h:65535", 1, true}, {"h:65536", 0, false}, {"h:x", 0, false}, {"h", 0, false}} {
		if err := CheckHostPort(tt.addr, tt.min); (err == nil) != tt.ok {
			t.Errorf("CheckHostPort(%q, %d): %v", tt.addr, tt.min, err)
		}
	}
	if err := CheckHostPort("h:0", 1); err == nil || err.Error() != `port "0" is not a number in [1, 65535]` {
		t.Errorf("%v", err)
	}
	if !AllLoopback([]string{"localhost:1", " 127.0.0.2:5", "", "[::1]:3"}) || AllLoopback([]string{"127.0.0.1:1", "10.0.0.1:1"}) || AllLoopback([]string{"nohost"}) {
		t.Error("AllLoopback")
	}
}
