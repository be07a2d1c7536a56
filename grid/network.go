package grid

import (
	"context"
	"net"
	"time"
)

// keepAlive is the TCP keep-alive period of data connections.
const keepAlive = 15 * time.Second

// Network opens the connections and listeners of a worker and of the
// child masters it may become: transports are given, not opened, so that
// the same code runs over TCP and over a simulated network in tests.
type Network interface {
	// Dial connects to addr ("host:port").
	Dial(ctx context.Context, addr string) (net.Conn, error)
	// Listen listens at addr ("host:port"; port 0: any free port).
	Listen(addr string) (net.Listener, error)
}

// TCP is the Network of a real machine.
var TCP Network = tcpNetwork{}

// TCPFrom is TCP dialling from the local address ip: a multi-homed
// machine's chosen address or, for tests on one machine, a loopback
// address 127.0.0.x (Linux routes all of 127/8 to lo), so that workers
// come from distinct hosts, as verification counts them (verify.go).
func TCPFrom(ip string) Network { return tcpNetwork{from: net.ParseIP(ip)} }

type tcpNetwork struct{ from net.IP }

func (n tcpNetwork) Dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: DefaultHandshakeTimeout, KeepAlive: keepAlive}
	if n.from != nil {
		d.LocalAddr = &net.TCPAddr{IP: n.from}
	}
	return d.DialContext(ctx, "tcp", addr)
}

func (tcpNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
