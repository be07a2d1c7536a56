// Package freeport hands tests loopback ports for programs that must be
// told their port before they start, such as a Prometheus scrape target
// or a worker's -child-port.
//
// A port found by listening on port 0 and closing is taken from the
// kernel's ephemeral range, and the kernel may hand it out again, as the
// source port of any outgoing connection, before the program binds it: a
// test that does so fails now and then with "address already in use".
// The ports given here lie outside the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range on Linux), where the kernel
// never picks a port by itself; each is chosen at random and checked free
// for TCP and UDP on 127.0.0.1, and none is given twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Default ephemeral range when the kernel's cannot be read: Linux's
// default, which also covers the IANA range's lower part.
const (
	defaultLow  = 32768
	defaultHigh = 60999
	lowest      = 10000 // below it lie many well-known services' ports
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Ports returns n distinct loopback ports, free for TCP and UDP a moment
// ago and outside the kernel's ephemeral range. It fails t if none can
// be found.
func Ports(t testing.TB, n int) []int {
	t.Helper()
	low, high := ephemeral()
	ports, err := ports(n, low, high)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Addr returns "127.0.0.1:port" for one port from Ports.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Ports(t, 1)[0]))
}

func ports(n int, low, high int) ([]int, error) {
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries == 10000 {
			return nil, fmt.Errorf("freeport: no free loopback port outside the ephemeral range %d-%d", low, high)
		}
		p := candidate(low, high)
		if p == 0 || given[p] || !free(p) {
			continue
		}
		given[p] = true
		out = append(out, p)
	}
	return out, nil
}

// candidate draws a port from [lowest, 65535] outside [low, high], or 0
// if that set is empty.
func candidate(low, high int) int {
	var ranges [][2]int
	if low > lowest {
		ranges = append(ranges, [2]int{lowest, min(low-1, 65535)})
	}
	if high < 65535 {
		ranges = append(ranges, [2]int{max(high+1, lowest), 65535})
	}
	total := 0
	for _, r := range ranges {
		total += r[1] - r[0] + 1
	}
	if total <= 0 {
		return 0
	}
	k := rand.IntN(total)
	for _, r := range ranges {
		if size := r[1] - r[0] + 1; k < size {
			return r[0] + k
		} else {
			k -= size
		}
	}
	return 0
}

// free reports whether port can be bound on 127.0.0.1 for TCP and UDP.
func free(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// ephemeral returns the kernel's ephemeral port range.
func ephemeral() (low, high int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultLow, defaultHigh
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return defaultLow, defaultHigh
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return defaultLow, defaultHigh
	}
	return l, h
}
