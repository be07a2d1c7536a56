package grid

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid/member"
	"github.com/hashicorp/memberlist"
)

// DefaultGossipPort is the port commands bind gossip to unless told
// otherwise (memberlist's usual port; UDP and TCP).
const DefaultGossipPort = 7946

// maxPendingEvents bounds the queue between memberlist's goroutines and
// the event callback; past it the oldest events are dropped with a warning.
const maxPendingEvents = 4096

// ErrNoMaster is returned when no live member gossips the master role.
var ErrNoMaster = errors.New("grid: no master in the cluster")

// MembershipConfig configures a gossip member. The zero value of every
// field but SecretKey and Meta means its documented default.
type MembershipConfig struct {
	// Name is this node's name, unique in the cluster; a worker uses the
	// same name in its Hello, so that the master can match a gossip
	// failure to a data connection. Default: hostname-role-<8 random hex>.
	Name string
	// BindAddr is the address gossip binds to (UDP and TCP).
	// Default "0.0.0.0". On a loopback address, the members of this
	// machine that advertise an address of the other family (a master on
	// 0.0.0.0 whose machine's private address is IPv6) are reached over
	// loopback (grid/member).
	BindAddr string
	// BindPort is the gossip port; 0 lets the OS choose (read it back with
	// Port). Commands pass DefaultGossipPort.
	BindPort int
	// AdvertiseAddr and AdvertisePort are what peers are told to reach
	// this node at (behind NAT). Default: the bound address and port.
	AdvertiseAddr string
	AdvertisePort int
	// SecretKey is the cluster key for gossip encryption (AES-GCM): 16, 24
	// or 32 bytes. Required: a node with another key or none can neither
	// join nor be joined.
	SecretKey []byte
	// Meta is what this node gossips about itself.
	Meta NodeMeta
	// OnEvent, if set, receives join, update, leave and failure events of
	// the other members, in order, on one goroutine of the membership's
	// own (never on memberlist's). It should return promptly: Close waits
	// for a call in progress.
	OnEvent func(MemberEvent)
	// LeaveTimeout bounds how long Close waits for the leave broadcast.
	// Default 2 s.
	LeaveTimeout time.Duration
	// Tune, if set, adjusts the gossip configuration after the defaults
	// are applied (tests shorten the intervals). The defaults are
	// memberlist's LAN profile: probe every 1 s, a suspect is declared
	// dead only after 4·log(n+1) probe intervals or more; a suspect is
	// never reported as gone.
	Tune func(*memberlist.Config)
	// Logger receives memberlist's log lines and the membership's own.
	// Default slog.Default().
	Logger *slog.Logger
}

// MemberEventKind says what happened to a member.
type MemberEventKind uint8

// The member events. Suspicion is not an event: only a member that gossip
// declares dead (MemberFailed) or that leaves on purpose (MemberLeft) is gone.
const (
	MemberJoined  MemberEventKind = iota + 1 // a member appeared (or came back)
	MemberUpdated                            // a member's metadata changed
	MemberLeft                               // a member left gracefully
	MemberFailed                             // gossip declared a member dead
)

// String returns the kind's name.
func (k MemberEventKind) String() string {
	switch k {
	case MemberJoined:
		return "joined"
	case MemberUpdated:
		return "updated"
	case MemberLeft:
		return "left"
	case MemberFailed:
		return "failed"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// MemberEvent is one change in the cluster as seen by this node.
type MemberEvent struct {
	Kind   MemberEventKind
	Member Member
}

// Member is a node of the cluster.
type Member struct {
	// Name is the node's unique name.
	Name string
	// Addr is the node's gossip host:port.
	Addr string
	// Meta is the node's metadata; zero when MetaErr is set.
	Meta NodeMeta
	// MetaErr says why the node's metadata could not be read (another
	// protocol version, malformed); such a member must not be used.
	MetaErr error
}

// DataAddr returns the host:port at which the member accepts data
// connections: Meta.DataAddr, with an unspecified host replaced by the
// member's gossip host. It is "" when the member has none.
func (m Member) DataAddr() string {
	if m.Meta.DataAddr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(m.Meta.DataAddr)
	if err != nil {
		return m.Meta.DataAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		gossipHost, _, gerr := net.SplitHostPort(m.Addr)
		if gerr == nil {
			return net.JoinHostPort(gossipHost, port)
		}
	}
	return m.Meta.DataAddr
}

// Membership is this node's place in the gossip cluster: it publishes the
// node's metadata, reports the other members' comings and goings, and
// finds the master.
type Membership struct {
	ml   *memberlist.Memberlist
	cfg  MembershipConfig
	log  *slog.Logger
	name string
	// transport is gossip's network, with bounds (grid/member); tally
	// counts what it and memberlist refuse, and logs a summary.
	transport *member.Transport
	tally     *member.Tally
	// quickLeave bounds CloseQuickly's wait for its leave: one gossip
	// round and a margin.
	quickLeave time.Duration

	metaMu sync.Mutex
	meta   []byte // encoded, size-checked metadata served to memberlist

	evMu     sync.Mutex
	self     Member            // this node, as gossip last reported it
	members  map[string]Member // the other live members
	pending  []MemberEvent
	dropped  int
	wake     chan struct{} // capacity 1: the dispatcher has work
	changed  chan struct{} // closed and replaced on every event
	leaving  chan struct{} // closed when Close starts
	closing  chan struct{} // closed when gossip has shut down
	closeErr error

	closeOnce sync.Once
	wg        sync.WaitGroup
}

// JoinMembership creates this node's gossip member and, if seeds are
// given, joins the cluster through them (host:port of any members). The
// member leaves and shuts down when ctx is done or Close is called.
func JoinMembership(ctx context.Context, cfg MembershipConfig, seeds ...string) (*Membership, error) {
	switch len(cfg.SecretKey) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("grid: membership: the cluster key must be 16, 24 or 32 bytes, got %d", len(cfg.SecretKey))
	}
	meta, err := cfg.Meta.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("grid: membership: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "0.0.0.0"
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = 2 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = defaultNodeName(cfg.Meta.Role)
	}
	m := &Membership{
		cfg:     cfg,
		name:    cfg.Name,
		log:     cfg.Logger.With("node", cfg.Name),
		meta:    meta,
		members: make(map[string]Member),
		wake:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		leaving: make(chan struct{}),
		closing: make(chan struct{}),
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	if cfg.AdvertisePort == 0 {
		mc.AdvertisePort = cfg.BindPort
	}
	mc.SecretKey = slices.Clone(cfg.SecretKey)
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	mc.Delegate = (*metaDelegate)(m)
	mc.Events = (*eventDelegate)(m)
	m.tally = member.NewTally(m.log, slog.LevelWarn,
		"membership: gossip rejected (summary): from a peer with another cluster key or none, junk, or over the limits", 0)
	mc.Logger = log.New(&memberlistLog{log: m.log, closing: m.leaving, tally: m.tally}, "", 0)
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	// Gossip's network, with bounds on what a peer without the key can
	// make this node read (grid/member).
	m.transport, err = member.NewTransport(member.TransportConfig{
		BindAddr: mc.BindAddr, BindPort: mc.BindPort, Logger: mc.Logger, Tally: m.tally,
	})
	if err != nil {
		m.tally.Close()
		return nil, fmt.Errorf("grid: membership: %w", err)
	}
	mc.Transport = m.transport
	mc.BindPort = m.transport.Port()
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = mc.BindPort
	}

	m.quickLeave = min(cfg.LeaveTimeout, mc.GossipInterval+mc.GossipInterval/4)
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.transport.Shutdown()
		m.tally.Close()
		return nil, fmt.Errorf("grid: membership: %w", err)
	}
	m.ml = ml
	m.transport.SetNodes(ml.NumMembers)
	m.wg.Add(2)
	go m.dispatch()
	go func() {
		defer m.wg.Done()
		select {
		case <-ctx.Done():
			m.shutdown()
		case <-m.closing:
		}
	}()
	if len(seeds) > 0 {
		if err := m.Join(seeds...); err != nil {
			m.Close()
			return nil, err
		}
	}
	m.log.Debug("membership: started", "gossip", m.Addr(), "role", cfg.Meta.Role)
	return m, nil
}

func defaultNodeName(r Role) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + r.String() + "-" + hex.EncodeToString(b[:])
}

// Join contacts the given members (host:port) and merges their view of
// the cluster. It fails when none could be reached, which is also what a
// node with the wrong cluster key sees.
func (m *Membership) Join(seeds ...string) error {
	_, err := m.ml.Join(seeds)
	if err != nil {
		hint := " (is a member listening there?)"
		if strings.Contains(err.Error(), "decrypt") || strings.Contains(err.Error(), "encrypt") {
			hint = " (a different cluster key: is it the same on every node?)"
		}
		// The caller logs it (an agent retrying every few seconds must
		// not write two lines per attempt).
		return fmt.Errorf("grid: join %v%s: %w", seeds, hint, err)
	}
	return nil
}

// Name returns this node's name.
func (m *Membership) Name() string { return m.name }

// Refused counts, by kind, the gossip traffic refused or dropped so far:
// streams over the transport's limits (grid/member's Refused* kinds),
// junk datagrams, and what memberlist itself refused (GossipWrongKey,
// GossipBadInput).
func (m *Membership) Refused() map[string]int64 { return m.tally.Totals() }

// TransportStats returns the gossip transport's counters.
func (m *Membership) TransportStats() member.TransportStats { return m.transport.Stats() }

// Kinds of gossip traffic that memberlist refuses, as Refused counts them.
const (
	GossipWrongKey = "wrong_key" // could not be decrypted with the cluster key, or not encrypted
	GossipBadInput = "bad_input" // malformed, or refused by memberlist's own limits
)

// GossipRefusedKinds returns every kind Membership.Refused counts, so
// that their counters can start at 0.
func GossipRefusedKinds() []string {
	return []string{member.RefusedBusy, member.RefusedPerSource, member.RefusedRate, member.RefusedTooLarge,
		member.RefusedSlow, member.RefusedEmpty, member.CutTooLarge, member.JunkDatagram, GossipWrongKey, GossipBadInput}
}

// Addr returns this node's gossip host:port as advertised to peers.
func (m *Membership) Addr() string {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	return m.self.Addr
}

// Port returns the gossip port (the one the OS chose when BindPort was 0).
func (m *Membership) Port() int {
	_, port, err := net.SplitHostPort(m.Addr())
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(port)
	return p
}

// Members returns the live members, this node included, sorted by name.
//
// The table is kept from memberlist's event callbacks, which run under
// memberlist's node lock: memberlist.Members returns pointers into state
// that its goroutines keep rewriting, and reading them races.
func (m *Membership) Members() []Member {
	m.evMu.Lock()
	out := make([]Member, 0, len(m.members)+1)
	out = append(out, m.self)
	for _, mem := range m.members {
		out = append(out, mem)
	}
	m.evMu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Master returns the live member that gossips the master role. When
// several do (a restarted master while the old one is still suspected),
// the first by name is returned; Members lists them all.
func (m *Membership) Master() (Member, error) {
	ms := m.Masters()
	if len(ms) == 0 {
		return Member{}, ErrNoMaster
	}
	return ms[0], nil
}

// Masters returns every live member that gossips the master role with a
// data address and is not leaving, sorted by name. There are several
// while a crashed master is not yet declared dead and its successor has
// joined: a worker that cannot reach one should try the next.
func (m *Membership) Masters() []Member {
	var out []Member
	for _, mem := range m.Members() {
		if mem.MetaErr == nil && mem.Meta.Role == RoleMaster && !mem.Meta.Leaving && mem.DataAddr() != "" {
			out = append(out, mem)
		}
	}
	return out
}

// WaitMaster blocks until a master is known or ctx is done, and returns it.
func (m *Membership) WaitMaster(ctx context.Context) (Member, error) {
	for {
		m.evMu.Lock()
		changed := m.changed
		m.evMu.Unlock()
		select {
		case <-m.closing:
			return Member{}, fmt.Errorf("grid: waiting for a master: membership closed")
		default:
		}
		if mem, err := m.Master(); err == nil {
			return mem, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Member{}, fmt.Errorf("grid: waiting for a master: %w", ctx.Err())
		case <-m.closing:
		}
	}
}

// UpdateMeta replaces this node's metadata and gossips it. It is refused
// (and the old metadata kept) if it does not fit memberlist.MetaMaxSize.
func (m *Membership) UpdateMeta(meta NodeMeta) error {
	b, err := meta.MarshalBinary()
	if err != nil {
		return fmt.Errorf("grid: membership: %w", err)
	}
	m.metaMu.Lock()
	m.meta = b
	m.metaMu.Unlock()
	if err := m.ml.UpdateNode(m.cfg.LeaveTimeout); err != nil {
		return fmt.Errorf("grid: membership: update metadata: %w", err)
	}
	return nil
}

// Close leaves the cluster (waiting up to LeaveTimeout for the leave to
// be gossiped), shuts gossip down and stops the event dispatcher. It is
// safe to call more than once.
func (m *Membership) Close() error {
	m.shutdown()
	m.wg.Wait()
	return m.closeErr
}

// CloseQuickly is Close for a node whose cluster ends with it, such as a
// worker whose master has ended the run and is going away too: nobody
// has work to reschedule, so it does not announce that it is leaving
// (peers may report it failed rather than left) and waits for its leave
// to be gossiped only about one gossip round (250 ms by default) rather
// than up to LeaveTimeout, twice. Close, CloseQuickly and the end of the
// membership's context after either do nothing more.
func (m *Membership) CloseQuickly() error {
	m.shutdownWith(true)
	m.wg.Wait()
	return m.closeErr
}

func (m *Membership) shutdown() { m.shutdownWith(false) }

// shutdownWith leaves and shuts gossip down, once; quick is CloseQuickly.
func (m *Membership) shutdownWith(quick bool) {
	m.closeOnce.Do(func() {
		close(m.leaving)
		var errs []error
		// Say "leaving" first, so that peers report a leave, not a failure.
		m.metaMu.Lock()
		meta, err := ParseNodeMeta(m.meta)
		m.metaMu.Unlock()
		if err == nil && !quick {
			meta.Leaving = true
			if b, err := meta.MarshalBinary(); err == nil {
				m.metaMu.Lock()
				m.meta = b
				m.metaMu.Unlock()
				if err := m.ml.UpdateNode(m.cfg.LeaveTimeout); err != nil {
					m.log.Debug("membership: leaving flag not gossiped", "err", err)
				}
			}
		}
		switch {
		case !quick:
			if err := m.ml.Leave(m.cfg.LeaveTimeout); err != nil {
				errs = append(errs, fmt.Errorf("leave: %w", err))
			}
		default:
			// One round has sent the leave to some peers, which pass it
			// on; waiting for all its retransmissions is what is skipped.
			if err := m.ml.Leave(m.quickLeave); err != nil {
				m.log.Debug("membership: leave gossiped for one round only", "err", err)
			}
		}
		if err := m.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
		m.tally.Close()
		if err := errors.Join(errs...); err != nil {
			m.closeErr = fmt.Errorf("grid: membership close: %w", err)
		}
		close(m.closing)
	})
}

// enqueue is called on memberlist's goroutines (with its node lock held):
// it only appends and signals, never blocks.
func (m *Membership) enqueue(kind MemberEventKind, n *memberlist.Node) {
	ev := MemberEvent{Kind: kind, Member: toMember(n)}
	m.evMu.Lock()
	if n.Name == m.name {
		m.self = ev.Member
		m.evMu.Unlock()
		return
	}
	if kind == MemberJoined || kind == MemberUpdated {
		m.members[n.Name] = ev.Member
	} else {
		delete(m.members, n.Name)
	}
	if len(m.pending) >= maxPendingEvents {
		m.pending = m.pending[1:]
		m.dropped++
	}
	m.pending = append(m.pending, ev)
	close(m.changed)
	m.changed = make(chan struct{})
	m.evMu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// dispatch delivers queued events to OnEvent, in order, off memberlist's
// goroutines.
func (m *Membership) dispatch() {
	defer m.wg.Done()
	var batch []MemberEvent
	for {
		select {
		case <-m.closing:
			return
		case <-m.wake:
		}
		m.evMu.Lock()
		batch, m.pending = m.pending, batch[:0]
		dropped := m.dropped
		m.dropped = 0
		m.evMu.Unlock()
		if dropped > 0 {
			m.log.Warn("membership: event queue full, oldest events dropped", "dropped", dropped)
		}
		for _, ev := range batch {
			m.logEvent(ev)
			if m.cfg.OnEvent != nil {
				m.cfg.OnEvent(ev)
			}
		}
		clear(batch)
	}
}

func (m *Membership) logEvent(ev MemberEvent) {
	mem := ev.Member
	if mem.MetaErr != nil {
		m.log.Warn("membership: member with unreadable metadata ignored",
			"event", ev.Kind, "member", mem.Name, "addr", mem.Addr, "err", mem.MetaErr)
		return
	}
	// Debug: the master logs each worker's join and leave once, from its
	// data connection; every member logging every other would make N²
	// lines.
	m.log.Debug("membership: member "+ev.Kind.String(), "member", mem.Name, "addr", mem.Addr,
		"role", mem.Meta.Role, "slots", mem.Meta.Slots)
}

func toMember(n *memberlist.Node) Member {
	mem := Member{Name: n.Name, Addr: n.Address()}
	mem.Meta, mem.MetaErr = ParseNodeMeta(n.Meta)
	return mem
}

// metaDelegate serves this node's metadata to memberlist; the rest of the
// Delegate interface is unused.
type metaDelegate Membership

func (d *metaDelegate) NodeMeta(limit int) []byte {
	d.metaMu.Lock()
	defer d.metaMu.Unlock()
	if len(d.meta) > limit {
		// Cannot happen (MarshalBinary checks MetaMaxSize), but
		// memberlist would panic on it.
		return nil
	}
	return slices.Clone(d.meta)
}
func (d *metaDelegate) NotifyMsg([]byte)                           {}
func (d *metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *metaDelegate) LocalState(join bool) []byte                { return nil }
func (d *metaDelegate) MergeRemoteState(buf []byte, join bool)     {}

// eventDelegate turns memberlist's callbacks into queued MemberEvents.
type eventDelegate Membership

func (d *eventDelegate) NotifyJoin(n *memberlist.Node) {
	(*Membership)(d).enqueue(MemberJoined, n)
}
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	(*Membership)(d).enqueue(MemberUpdated, n)
}

// NotifyLeave cannot use n.State (memberlist v0.7.0 never sets it): a
// member that announced Leaving in its metadata left, any other failed.
func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	kind := MemberFailed
	if meta, err := ParseNodeMeta(n.Meta); err == nil && meta.Leaving {
		kind = MemberLeft
	}
	(*Membership)(d).enqueue(kind, n)
}

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records. Once the member is closing, memberlist's complaints about
// closed sockets are expected and logged at debug level only.
type memberlistLog struct {
	log     *slog.Logger
	closing <-chan struct{}
	tally   *member.Tally
}

// Lines of memberlist's about traffic that anyone who reaches the gossip
// port can send: counted and summarised by the tally, never logged one by
// one.
var (
	wrongKeyLines = []string{"decrypt", "not encrypted", "encryption is configured but"}
	badInputLines = []string{"failed to receive", "Failed to read remote state", "invalid msgType", "label",
		"missing message type", "not supported", "Failed to decode", "invalid checksum", "Too many pending",
		"Remote node state size", "Failed to send error", "Failed to decompress", "Failed to receive user message",
		"truncated messages", "Got ping for unexpected node", "packet too short"}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (w *memberlistLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for _, l := range []struct {
		tag   string
		level slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}} {
		if rest, ok := strings.CutPrefix(line, l.tag); ok {
			level, line = l.level, strings.TrimSpace(rest)
			break
		}
	}
	if level >= slog.LevelWarn {
		switch {
		case containsAny(line, wrongKeyLines):
			w.tally.Add(GossipWrongKey, line)
			return len(p), nil
		case containsAny(line, badInputLines):
			w.tally.Add(GossipBadInput, line)
			return len(p), nil
		}
	}
	select {
	case <-w.closing:
		level = min(level, slog.LevelDebug)
	default:
	}
	w.log.Log(context.Background(), level, line, "component", "memberlist")
	return len(p), nil
}
