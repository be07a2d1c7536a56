package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsOutsideEphemeralRange(t *testing.T) {
	low, high := ephemeral()
	ps := Ports(t, 50)
	seen := map[int]bool{}
	for _, p := range ps {
		if p >= low && p <= high {
			t.Errorf("port %d inside the ephemeral range %d-%d", p, low, high)
		}
		if p < lowest || p > 65535 {
			t.Errorf("port %d outside [%d, 65535]", p, lowest)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not free: %v", p, err)
			continue
		}
		ln.Close()
	}
}

func TestCandidate(t *testing.T) {
	for range 1000 {
		p := candidate(20000, 60000)
		if p < lowest || (p >= 20000 && p <= 60000) || p > 65535 {
			t.Fatalf("candidate(20000, 60000) = %d", p)
		}
	}
	if p := candidate(lowest, 65535); p != 0 {
		t.Errorf("candidate with no room = %d, want 0", p)
	}
	// A range reaching below lowest leaves only the ports above it.
	for range 100 {
		if p := candidate(1024, 65000); p <= 65000 {
			t.Fatalf("candidate(1024, 65000) = %d", p)
		}
	}
}

func TestPortInUseSkipped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if free(ln.Addr().(*net.TCPAddr).Port) {
		t.Error("a listened port is reported free")
	}
}
