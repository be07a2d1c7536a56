package grid

import "time"

// Gossip's verdict that a member is gone (declared dead, or left) is an
// opinion, not a fact about the data link: memberlist believes a "dead"
// message, and an "alive" message that sets a member's metadata (its
// Leaving flag), from any node that holds the gossip key, and a machine
// whose CPU its evaluations saturate can miss gossip's probes while its
// link is fine. So the master asks the link itself before it drops a
// worker, or a relay and every worker behind it: it sends a Heartbeat with
// Echo set, which the peer's Conn answers at once, keeps the link as soon
// as a frame comes in on it, and drops it if none has within
// gossipProbeWait.

// gossipProbeWait is how long a link gossip says is gone has to answer
// the master's echo request. The peer's Conn answers from its reader, at
// once: 2 s covers a loaded machine's scheduling and a WAN round trip many
// times over, and a worker that is really gone costs 2 s (at most one
// deadline check more) on top of gossip's own detection, which takes
// seconds.
var gossipProbeWait = 2 * time.Second // a variable for tests only

// linkProbe is the master's question to one link that gossip says is
// gone: asked at at, when in frames had come in on it.
type linkProbe struct {
	asked bool
	left  bool // gossip said it left, not that it failed
	at    time.Duration
	in    int64
}

// ask sends the echo request on c; false if c is closing (nothing to ask).
func (p *linkProbe) ask(c *Conn, left bool, now time.Duration) bool {
	in := c.Stats().FramesIn // before the request: its answer counts
	if c.Send(Heartbeat{Echo: true}) != nil {
		return false
	}
	*p = linkProbe{asked: true, left: left, at: now, in: in}
	return true
}

// due reports whether the probe has waited gossipProbeWait.
func (p *linkProbe) due(now time.Duration) bool { return now-p.at >= gossipProbeWait }

// answered reports whether a frame came in on c since the probe was asked.
func (p *linkProbe) answered(c *Conn) bool { return c.Stats().FramesIn > p.in }

// relayProbe is a probe of a relay's link.
type relayProbe struct {
	x *relayMux
	linkProbe
}

// memberGone takes gossip's word that the member named name failed (or
// left, as its metadata said): the worker of that name, and the relay,
// are probed, not dropped (see the top of this file).
func (m *Master) memberGone(name string, left, worker bool) {
	now := m.now()
	if x := m.relayNamed(name); x != nil && !m.relayProbed(x) {
		p := relayProbe{x: x}
		if p.ask(x.conn, left, now) {
			m.relayProbes = append(m.relayProbes, p)
		} else {
			m.dropRelay(x)
		}
	}
	if !worker {
		return
	}
	if w := m.byName[name]; w != nil && !w.left && !w.probe.asked && !w.probe.ask(w.conn, left, now) {
		m.dropGone(w, left)
	}
}

// checkProbes keeps each probed link that has answered, at once, and
// drops each that has not once gossipProbeWait has passed since it was
// asked. The deadline tick calls it.
func (m *Master) checkProbes() {
	now := m.now()
	for _, w := range m.order {
		switch {
		case w.left || !w.probe.asked:
		case w.probe.answered(w.conn):
			w.probe.asked = false
			m.counts.GossipKept++
			m.glog.Info(gossipSaid(w.probe.left)+", but its connection answers; kept", "worker", w.name, "worker_id", w.id)
		case w.probe.due(now):
			w.probe.asked = false
			m.dropGone(w, w.probe.left)
		}
	}
	kept := m.relayProbes[:0]
	for _, p := range m.relayProbes {
		switch {
		case p.answered(p.x.conn):
			m.counts.GossipKept++
			m.glog.Info(gossipSaid(p.left)+", but its connection answers; kept", "relay", p.x.name)
		case p.due(now):
			m.dropRelay(p.x)
		default:
			kept = append(kept, p)
		}
	}
	clear(m.relayProbes[len(kept):])
	m.relayProbes = kept
}

// gossipSaid is what gossip said of a member, for the log.
func gossipSaid(left bool) string {
	if left {
		return "gossip says the worker left the cluster"
	}
	return "gossip declared worker dead"
}

// dropGone drops w as gossip said: its tasks go back to the queue.
func (m *Master) dropGone(w *mworker, left bool) {
	what, lost := "gossip declared worker dead", &m.counts.Lost.Dead
	if left {
		what, lost = "worker left the cluster", &m.counts.Lost.Left
	}
	*lost++
	m.log.Warn(what+"; dropping its connection, its tasks go back to the queue", "worker", w.name, "worker_id", w.id)
	m.workerLeft(w)
	w.conn.Close()
}

// relayProbed reports whether x's link is being probed already.
func (m *Master) relayProbed(x *relayMux) bool {
	for _, p := range m.relayProbes {
		if p.x == x {
			return true
		}
	}
	return false
}
