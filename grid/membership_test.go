package grid

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// fastGossip shortens memberlist's intervals so that tests converge in
// well under a second.
func fastGossip(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 200 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.PushPullInterval = 0
	c.TCPTimeout = time.Second
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// eventLog collects a member's events for assertions.
type eventLog struct {
	mu  sync.Mutex
	evs []MemberEvent
}

func (l *eventLog) add(ev MemberEvent) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

func (l *eventLog) has(kind MemberEventKind, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.evs {
		if ev.Kind == kind && ev.Member.Name == name {
			return true
		}
	}
	return false
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testWriter sends log output to t.Log, so it shows only on failure.
// It goes quiet when the test ends: memberlist's probe goroutines may
// outlive Shutdown for up to a probe timeout.
type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func newTestWriter(t testing.TB) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func startMember(t *testing.T, name string, key []byte, meta NodeMeta, ev *eventLog, seeds ...string) (*Membership, error) {
	t.Helper()
	cfg := MembershipConfig{
		Name:      name,
		BindAddr:  "127.0.0.1",
		SecretKey: key,
		Meta:      meta,
		Tune:      fastGossip,
		Logger:    testLogger(t),
	}
	if ev != nil {
		cfg.OnEvent = ev.add
	}
	m, err := JoinMembership(t.Context(), cfg, seeds...)
	if err == nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, err
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // patience for a loaded machine; cond is the event
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMembershipThreeNodes(t *testing.T) {
	key := testKey(7)
	var masterEvents eventLog
	master, err := startMember(t, "m", key, NodeMeta{Role: RoleMaster, DataAddr: "0.0.0.0:4242"}, &masterEvents)
	if err != nil {
		t.Fatal(err)
	}
	if master.Port() == 0 {
		t.Fatal("gossip port not read back")
	}
	w1, err := startMember(t, "w1", key, NodeMeta{Role: RoleWorker, Slots: 4, Problems: []string{"ridge", "sphere"}}, nil, master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	w2, err := startMember(t, "w2", key, NodeMeta{Role: RoleWorker, Slots: 2}, nil, w1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Membership{master, w1, w2} {
		eventually(t, m.Name()+" to see 3 members", func() bool { return len(m.Members()) == 3 })
	}
	eventually(t, "join events at the master", func() bool {
		return masterEvents.has(MemberJoined, "w1") && masterEvents.has(MemberJoined, "w2")
	})
	if masterEvents.has(MemberJoined, "m") {
		t.Error("a node reported its own join")
	}

	mems := w2.Members()
	want := map[string]NodeMeta{
		"m":  {Version: MetaVersion, Role: RoleMaster, DataAddr: "0.0.0.0:4242"},
		"w1": {Version: MetaVersion, Role: RoleWorker, Slots: 4, Problems: []string{"ridge", "sphere"}},
		"w2": {Version: MetaVersion, Role: RoleWorker, Slots: 2},
	}
	for _, mem := range mems {
		if mem.MetaErr != nil {
			t.Fatalf("%s: %v", mem.Name, mem.MetaErr)
		}
		w := want[mem.Name]
		if mem.Meta.Role != w.Role || mem.Meta.Slots != w.Slots || mem.Meta.DataAddr != w.DataAddr ||
			mem.Meta.Version != w.Version || strings.Join(mem.Meta.Problems, ",") != strings.Join(w.Problems, ",") {
			t.Errorf("%s: meta %+v, want %+v", mem.Name, mem.Meta, w)
		}
	}

	// Workers find the master's data address, with the unspecified host
	// replaced by the master's gossip host.
	got, err := w2.WaitMaster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "m" || got.DataAddr() != "127.0.0.1:4242" {
		t.Errorf("master %q at %q, want m at 127.0.0.1:4242", got.Name, got.DataAddr())
	}

	// A metadata update reaches the others as an update event.
	if err := w1.UpdateMeta(NodeMeta{Role: RoleWorker, Slots: 8}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "update event", func() bool { return masterEvents.has(MemberUpdated, "w1") })
	eventually(t, "updated slots", func() bool {
		for _, mem := range master.Members() {
			if mem.Name == "w1" {
				return mem.Meta.Slots == 8
			}
		}
		return false
	})
}

// pingAcks is a memberlist.PingDelegate that reports the members whose
// direct UDP ping was acknowledged.
type pingAcks chan string

func (p pingAcks) AckPayload() []byte { return nil }
func (p pingAcks) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	select {
	case p <- other.Name:
	default: // one is enough
	}
}

// A master on every interface advertises its machine's private address,
// which may be IPv6 while a worker on the same machine joined it at
// 127.0.0.1 and binds its gossip there ("esrun -gossip 0.0.0.0:7946" and
// "esworker -join 127.0.0.1:7946"): the worker's IPv4 socket cannot send
// to it, so every probe failed over UDP and memberlist warned on each.
// Here the master advertises ::1, the other family on any machine; the
// worker's packets go to the master over 127.0.0.1 instead, and UDP
// probes succeed both ways.
func TestMembershipLoopbackWorkerReachesWildcardMaster(t *testing.T) {
	key := testKey(9)
	masterAcks, workerAcks := make(pingAcks, 1), make(pingAcks, 1)
	tune := func(acks pingAcks) func(*memberlist.Config) {
		return func(c *memberlist.Config) { fastGossip(c); c.Ping = acks }
	}
	master, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "m", BindAddr: "0.0.0.0", AdvertiseAddr: "::1", SecretKey: key,
		Meta: NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:4242"}, Tune: tune(masterAcks), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	if host, _, _ := net.SplitHostPort(master.Addr()); host != "::1" {
		t.Fatalf("master advertises %s, want [::1]:port", master.Addr())
	}
	worker, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "w", BindAddr: "127.0.0.1", SecretKey: key,
		Meta: NodeMeta{Role: RoleWorker, Slots: 1}, Tune: tune(workerAcks), Logger: testLogger(t),
	}, net.JoinHostPort("127.0.0.1", strconv.Itoa(master.Port())))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // patience for a loaded machine
	defer cancel()
	for _, w := range []struct {
		acks      pingAcks
		who, whom string
	}{{workerAcks, "the worker", "m"}, {masterAcks, "the master", "w"}} {
		select {
		case got := <-w.acks:
			if got != w.whom {
				t.Errorf("%s's ping of %s acknowledged, want of %s", w.who, got, w.whom)
			}
		case <-ctx.Done():
			t.Fatalf("%s: no UDP ping of %s acknowledged", w.who, w.whom)
		}
	}
}

func TestMembershipWrongKeyCannotJoin(t *testing.T) {
	var ev eventLog
	master, err := startMember(t, "m", testKey(1), NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"}, &ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{testKey(2), testKey(1)[:16]} {
		_, err = startMember(t, "intruder", key, NodeMeta{Role: RoleWorker, Slots: 1}, nil, master.Addr())
		if err == nil {
			t.Fatalf("a node with a %d-byte wrong key joined", len(key))
		}
	}
	// Give gossip a moment to misbehave, then check nothing got in.
	time.Sleep(200 * time.Millisecond)
	if n := len(master.Members()); n != 1 || ev.has(MemberJoined, "intruder") {
		t.Errorf("master sees %d members (intruder joined: %v)", n, ev.has(MemberJoined, "intruder"))
	}
}

func TestMembershipRequiresKey(t *testing.T) {
	for _, key := range [][]byte{nil, make([]byte, 15), make([]byte, 33)} {
		if _, err := startMember(t, "x", key, NodeMeta{Role: RoleWorker}, nil); err == nil {
			t.Errorf("%d-byte key accepted", len(key))
		}
	}
}

func TestMembershipLeaveEvent(t *testing.T) {
	key := testKey(3)
	var ev eventLog
	master, err := startMember(t, "m", key, NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"}, &ev)
	if err != nil {
		t.Fatal(err)
	}
	w, err := startMember(t, "w", key, NodeMeta{Role: RoleWorker, Slots: 1}, nil, master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "join", func() bool { return ev.has(MemberJoined, "w") })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "leave event", func() bool { return ev.has(MemberLeft, "w") })
	if ev.has(MemberFailed, "w") {
		t.Error("a graceful leave was reported as a failure")
	}
	if n := len(master.Members()); n != 1 {
		t.Errorf("master still sees %d members", n)
	}
}

// Close announces the leave (peers see "leaving", then a leave);
// CloseQuickly skips the announcement but still sends the leave itself:
// the observer here never probes, so it can only learn that the member
// is gone from that message.
func TestMembershipCloseQuickly(t *testing.T) {
	for _, quick := range []bool{false, true} {
		t.Run(map[bool]string{false: "Close", true: "CloseQuickly"}[quick], func(t *testing.T) {
			key := testKey(5)
			var ev eventLog
			observer, err := JoinMembership(t.Context(), MembershipConfig{
				Name: "m", BindAddr: "127.0.0.1", SecretKey: key, Meta: NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"},
				OnEvent: ev.add, Logger: testLogger(t),
				Tune: func(c *memberlist.Config) {
					fastGossip(c)
					// Close's leave must be heard, so no failure detection
					// stands in for it. CloseQuickly's, gossiped for one
					// round only, may be lost on a loaded machine: then
					// failure detection tells, as it does in a run.
					if !quick {
						c.ProbeInterval = time.Hour
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer observer.Close()
			w, err := startMember(t, "w", key, NodeMeta{Role: RoleWorker, Slots: 1}, nil, observer.Addr())
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "join", func() bool { return ev.has(MemberJoined, "w") })
			leave := w.Close
			if quick {
				leave = w.CloseQuickly
			}
			if err := leave(); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the leave", func() bool { return ev.has(MemberLeft, "w") || ev.has(MemberFailed, "w") })
			if announced := ev.has(MemberUpdated, "w"); announced == quick {
				t.Errorf("leaving announced: %v", announced)
			}
			if n := len(observer.Members()); n != 1 {
				t.Errorf("observer still sees %d members", n)
			}
			if err := w.Close(); err != nil {
				t.Errorf("Close after closing: %v", err)
			}
		})
	}
}

func TestMembershipContextStops(t *testing.T) {
	key := testKey(4)
	var ev eventLog
	master, err := startMember(t, "m", key, NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"}, &ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w, err := JoinMembership(ctx, MembershipConfig{
		Name: "w", BindAddr: "127.0.0.1", SecretKey: key, Meta: NodeMeta{Role: RoleWorker, Slots: 1},
		Tune: fastGossip, Logger: testLogger(t),
	}, master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "join", func() bool { return ev.has(MemberJoined, "w") })
	cancel()
	eventually(t, "leave after cancel", func() bool { return ev.has(MemberLeft, "w") })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Waiting for a master on a closed membership returns at once.
	if _, err := w.WaitMaster(t.Context()); err == nil {
		t.Error("WaitMaster on a closed membership succeeded")
	}
}

func TestMembershipNoMaster(t *testing.T) {
	w, err := startMember(t, "w", testKey(5), NodeMeta{Role: RoleWorker, Slots: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Master(); !errors.Is(err, ErrNoMaster) {
		t.Errorf("Master() = %v, want ErrNoMaster", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.WaitMaster(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitMaster() = %v, want deadline exceeded", err)
	}
}

func TestMembershipOversizeMetaIsError(t *testing.T) {
	big := NodeMeta{Role: RoleWorker, Slots: 1, DataAddr: strings.Repeat("x", memberlist.MetaMaxSize)}
	if _, err := startMember(t, "big", testKey(6), big, nil); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("start with oversize metadata: %v, want ErrMetaTooLarge", err)
	}
	w, err := startMember(t, "w", testKey(6), NodeMeta{Role: RoleWorker, Slots: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.UpdateMeta(big); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("UpdateMeta with oversize metadata: %v, want ErrMetaTooLarge", err)
	}
	// The old metadata is still served.
	if m := w.Members()[0].Meta; m.Slots != 1 || m.DataAddr != "" {
		t.Errorf("metadata after refused update: %+v", m)
	}
}

func TestNodeMetaRoundTrip(t *testing.T) {
	tests := []NodeMeta{
		{Role: RoleMaster, DataAddr: "10.0.0.1:7000"},
		{Role: RoleWorker, Slots: 64, Problems: []string{"ridge", "sphere", "rastrigin"}},
		{Role: RoleWorker, Slots: MaxMetaSlots, Leaving: true},
	}
	for _, m := range tests {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseNodeMeta(b)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got.Version != MetaVersion || got.Role != m.Role || got.DataAddr != m.DataAddr ||
			got.Slots != m.Slots || got.Leaving != m.Leaving || strings.Join(got.Problems, "|") != strings.Join(m.Problems, "|") {
			t.Errorf("round trip %+v -> %+v", m, got)
		}
	}
}

func TestNodeMetaBuildRefuses(t *testing.T) {
	tests := []struct {
		name string
		m    NodeMeta
		want error
	}{
		{"no role", NodeMeta{}, ErrBadMeta},
		{"negative slots", NodeMeta{Role: RoleWorker, Slots: -1}, ErrBadMeta},
		{"too many slots", NodeMeta{Role: RoleWorker, Slots: MaxMetaSlots + 1}, ErrBadMeta},
		{"too many problems", NodeMeta{Role: RoleWorker, Problems: make([]string, MaxMetaProblems+1)}, ErrMetaTooLarge},
		{"long problem names", NodeMeta{Role: RoleWorker, Problems: []string{strings.Repeat("p", 300), strings.Repeat("q", 300)}}, ErrMetaTooLarge},
	}
	for _, tt := range tests {
		if _, err := tt.m.MarshalBinary(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestParseNodeMetaHostile(t *testing.T) {
	valid, err := NodeMeta{Role: RoleWorker, Slots: 2, Problems: []string{"ridge"}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrBadMeta},
		{"too long", make([]byte, memberlist.MetaMaxSize+1), ErrMetaTooLarge},
		{"not an array", []byte{0xc0}, ErrBadMeta},
		{"empty array", []byte{0x90}, ErrBadMeta},
		{"other version", []byte{0x96, 0x63, 0x01, 0xa0, 0x00, 0x90, 0xc2}, ErrMetaVersion},
		{"too few fields", []byte{0x92, 0x01, 0x01}, ErrBadMeta},
		{"too many fields", []byte{0x97, 0x01, 0x01, 0xa0, 0x00, 0x90, 0xc2, 0x00}, ErrBadMeta},
		{"unknown role", []byte{0x96, 0x01, 0x09, 0xa0, 0x00, 0x90, 0xc2}, ErrBadMeta},
		{"negative slots", []byte{0x96, 0x01, 0x01, 0xa0, 0xff, 0x90, 0xc2}, ErrBadMeta},
		// str32 claiming 4 GiB.
		{"huge string", []byte{0x96, 0x01, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 0x00, 0x90, 0xc2}, ErrBadMeta},
		// array32 claiming 4 G problems.
		{"huge problem count", []byte{0x96, 0x01, 0x01, 0xa0, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff}, ErrBadMeta},
		// array16 claiming 20 problems with no bytes for them.
		{"problem count beyond input", []byte{0x96, 0x01, 0x01, 0xa0, 0x00, 0xdc, 0x00, 0x14}, ErrBadMeta},
		{"truncated", valid[:len(valid)-2], ErrBadMeta},
		{"trailing bytes", append(append([]byte{}, valid...), 0x00), ErrBadMeta},
		{"leaving not a bool", []byte{0x96, 0x01, 0x01, 0xa0, 0x00, 0x90, 0x01}, ErrBadMeta},
		{"problem not a string", []byte{0x96, 0x01, 0x01, 0xa0, 0x00, 0x91, 0x90, 0xc2}, ErrBadMeta},
	}
	for _, tt := range tests {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ParseNodeMeta(tt.in)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
			t.Errorf("%s: decoding allocated %d bytes", tt.name, alloc)
		}
	}
}

func FuzzParseNodeMeta(f *testing.F) {
	for _, m := range []NodeMeta{
		{Role: RoleMaster, DataAddr: "127.0.0.1:9"},
		{Role: RoleWorker, Slots: 3, Problems: []string{"a", "bb"}},
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x96, 0x01, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseNodeMeta(in)
		if err != nil {
			return
		}
		// Whatever parses must re-encode within the limits.
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed %+v does not re-encode: %v", m, err)
		}
		if _, err := ParseNodeMeta(b); err != nil {
			t.Fatalf("re-encoded %+v does not parse: %v", m, err)
		}
	})
}
