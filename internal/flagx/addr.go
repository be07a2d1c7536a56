package flagx

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// CheckHostPort accepts HOST:PORT with a numeric port of at least
// minPort (1 where the port is dialled, 0 where 0 means any free port);
// the host may be empty (every interface).
func CheckHostPort(addr string, minPort int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		return fmt.Errorf("port %q is not a number in [%d, 65535]", port, minPort)
	}
	return nil
}

// AllLoopback says whether every address of addrs (HOST:PORT, or empty)
// is on this machine: localhost or a loopback IP.
func AllLoopback(addrs []string) bool {
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return false
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// HostPorts splits a comma-separated list of addresses (as -join takes
// them) and gives a bare host the port defPort.
func HostPorts(s string, defPort int) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(strings.Trim(a, "[]"), strconv.Itoa(defPort))
		}
		out = append(out, a)
	}
	return out
}
