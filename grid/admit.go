package grid

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid/member"
)

// Admission to the handshake. Anyone who reaches the data port can open
// connections, and each one the master accepts holds a handshake slot
// until its Hello arrives or its time runs out. So that a flood of idle
// connections from one address (a slowloris) cannot keep real workers
// out, the gate admits a connection to its handshake only if
//
//   - fewer than MaxHandshakes handshakes are in progress;
//   - fewer than MaxHandshakesPerSource are in progress from its address;
//   - its address has none in progress, or more than three quarters of
//     the slots are free: the last three quarters are kept for addresses
//     that have nothing pending.
//
// These are grid/member's Slots, which the gossip transport uses too: a
// new address finds room whenever fewer than Slots.Lockout() other
// addresses hold handshakes (49 with the defaults: 48 + ⌈16/16⌉). A
// machine's local agents still run up to MaxHandshakesPerSource
// handshakes at once while fewer than a quarter of the slots are taken.
//
// The master sends every connection it refuses a Reject saying why (a
// worker logs it), closes it, and counts it in its refusals tally, which
// logs a summary line per interval rather than a line per connection.
// Together with the short wait for the Hello (AcceptConfig.HelloTimeout),
// a source that opens connections and sends nothing holds at most its
// share of slots for at most a few seconds each.

// MaxWorkerName bounds the name a worker gives itself in its Hello.
const MaxWorkerName = 255

// DefaultMaxHandshakesPerSource bounds the handshakes in progress from one
// address: a quarter of the default 64, room for a machine's worth of
// local agents connecting at once.
const DefaultMaxHandshakesPerSource = 16

// Kinds of refused data connections, as MasterStats.Refused and the
// master's summary line count them.
const (
	RefusedBusy      = "busy"       // every handshake slot taken
	RefusedPerSource = "per_source" // the address's share of slots taken
	RefusedTimeout   = "timeout"    // no Hello in time, or the handshake too slow
	RefusedClosed    = "closed"     // the peer hung up during the handshake
	RefusedBadFrame  = "bad_frame"  // not the protocol
	RefusedWrongKey  = "wrong_key"  // could not prove it holds the cluster key
	RefusedVersion   = "version"    // another protocol version
	RefusedExcluded  = "excluded"   // a worker excluded from this run (-verify)
	RefusedOther     = "other"      // the master's other reasons (no name, no such problem, ...)
	refuseWriteLimit = 100 * time.Millisecond
)

// RefusedKinds returns every kind of refused data connection, so that
// their counters can start at 0.
func RefusedKinds() []string {
	return []string{RefusedBusy, RefusedPerSource, RefusedTimeout, RefusedClosed, RefusedBadFrame,
		RefusedWrongKey, RefusedVersion, RefusedExcluded, RefusedOther}
}

// gate counts the handshakes in progress, in all and per source address.
type gate struct {
	mu    sync.Mutex
	slots *member.Slots
}

func newGate(max, perSource int) *gate {
	return &gate{slots: member.NewSlots(max, perSource, max*3/4)}
}

// enter admits a connection from ip to its handshake, or says why not
// (kind and words).
func (g *gate) enter(ip string) (kind, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.slots.Take(ip) {
	case member.SlotsFull:
		return RefusedBusy, fmt.Sprintf("master busy: %d handshakes in progress; try again", g.slots.Held())
	case member.SlotsPerSource:
		return RefusedPerSource, fmt.Sprintf("master busy: %d handshakes in progress from your address; try again", g.slots.HeldBy(ip))
	case member.SlotsReserved:
		return RefusedBusy, "master busy: its last handshake slots are kept for new addresses; try again"
	}
	return "", ""
}

// leave ends a handshake that enter admitted.
func (g *gate) leave(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slots.Give(ip)
}

// sourceIP is the address a connection comes from, without the port.
func sourceIP(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case relayAddr:
		return a.source()
	case nil:
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refuseConn tells a connection the gate refused why, briefly, and
// closes it.
func (m *Master) refuseConn(nc net.Conn, kind, reason string) {
	m.refusals.Add(kind, nc.RemoteAddr().String()+": "+reason)
	if b, err := AppendFrame(nil, &Reject{Reason: reason}, handshakeMaxFrame); err == nil {
		nc.SetWriteDeadline(time.Now().Add(refuseWriteLimit))
		nc.Write(b)
	}
	nc.Close()
}

// refusedKind classifies a handshake's failure, in Accept's words.
func refusedKind(reason string) string {
	switch {
	case strings.Contains(reason, "timed out"):
		return RefusedTimeout
	case strings.Contains(reason, "closed the connection"), strings.Contains(reason, "cut inside"):
		return RefusedClosed
	case strings.Contains(reason, "cluster key"):
		return RefusedWrongKey
	case strings.Contains(reason, "version mismatch"):
		return RefusedVersion
	case strings.Contains(reason, "excluded"):
		return RefusedExcluded
	case strings.Contains(reason, "malformed"), strings.Contains(reason, "expected hello"),
		strings.Contains(reason, "unknown message"), strings.Contains(reason, "too large"):
		return RefusedBadFrame
	}
	return RefusedOther
}

// Refused counts, by kind (the Refused* constants), the data connections
// refused or whose handshake failed so far.
func (m *Master) Refused() map[string]int64 { return m.refusals.Totals() }
