package grid

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid/member"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/hashicorp/memberlist"
)

// hasLoopback2 skips a test where 127.0.0.2 cannot be used.
func hasLoopback2(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	ln.Close()
}

// gossipFlood opens streams to addr from 127.0.0.2 that claim an
// encrypted push/pull of claim bytes and then send as much as the node
// reads, n at a time, reopening each one that closes, until stop. It
// needs no key: this is what anyone on the network can do.
func gossipFlood(addr string, n int, claim uint32, stop <-chan struct{}, opened, sent *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	junk := make([]byte, 32<<10)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				nc, err := d.Dial("tcp", addr)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				opened.Add(1)
				hdr := []byte{10, 0, 0, 0, 0}
				binary.BigEndian.PutUint32(hdr[1:], claim)
				nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if _, err := nc.Write(hdr); err == nil {
					for {
						select {
						case <-stop:
						default:
							k, err := nc.Write(junk)
							sent.Add(int64(k))
							if err == nil {
								continue
							}
						}
						break
					}
				}
				nc.Close()
			}
		}()
	}
	return &wg
}

// The attack on gossip: 24 streams at once, each claiming 20 MB
// and sending what it can, from an address without the key. The node
// buffers none of it (each stream is refused on its header), its heap
// stays where it was, a worker with the key still joins while the attack
// goes on, and the refusals make a summary line, not a line each.
func TestGossipFloodBounded(t *testing.T) {
	hasLoopback2(t)
	leaktest.Check(t)
	logs := &countingHandler{}
	key := testClusterKey(t, "gossip flood")
	fast := func(c *memberlist.Config) {
		c.PushPullInterval = 200 * time.Millisecond
		c.GossipInterval = 50 * time.Millisecond
	}
	master, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta: NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"}, Logger: slog.New(logs), Tune: fast,
		LeaveTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	idle := ms.HeapInuse
	stop := make(chan struct{})
	var opened, sent atomic.Int64
	wg := gossipFlood(master.Addr(), 24, 20<<20, stop, &opened, &sent)
	var peak atomic.Uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	eventually(t, "the flood to get going", func() bool { return opened.Load() >= 100 })

	// A worker with the key joins while the flood goes on.
	w, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "worker", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta: NodeMeta{Role: RoleWorker, Slots: 1}, Logger: slog.New(slog.DiscardHandler), Tune: fast,
		LeaveTimeout: 100 * time.Millisecond,
	}, master.Addr())
	if err != nil {
		close(stop)
		wg.Wait()
		<-sampled
		t.Fatalf("a worker with the key could not join under the flood: %v", err)
	}
	defer w.Close()
	eventually(t, "the master to see the worker", func() bool { return len(master.Members()) == 2 })
	time.Sleep(500 * time.Millisecond) // the flood goes on a little longer
	close(stop)
	wg.Wait()
	<-sampled

	st := master.TransportStats()
	refused := master.Refused()
	t.Logf("flood: %d streams opened, %d bytes written by the attacker; heap in use %d → peak %d KiB; refused %v; largest push/pull admitted %d bytes, cap %d",
		opened.Load(), sent.Load(), idle>>10, peak.Load()>>10, refused, st.Largest, st.MaxBytes)
	if refused[member.RefusedTooLarge] == 0 {
		t.Errorf("no stream refused for its size: %v", refused)
	}
	if grow := int64(peak.Load()) - int64(idle); grow > 8<<20 {
		t.Errorf("heap in use grew by %d KiB under the flood", grow>>10)
	}
	// Each summary line counts the refusals of its interval by kind (which
	// kinds depends on what the interval saw: the first may hold only
	// per-source refusals).
	for _, l := range logs.lines {
		if !strings.Contains(l, "summary") {
			continue
		}
		if !strings.Contains(l, "count=") || !strings.Contains(l, "refused_") {
			t.Errorf("summary line without the refusals' counts: %s", l)
		}
	}
	if n := logs.count(); n > 4 {
		t.Errorf("%d warning lines for %d streams:\n%s", n, opened.Load(), strings.Join(logs.lines, "\n"))
	}
}

// A stream that claims a size within the cap but sends more, one that
// sends its header too slowly, junk datagrams, and too many streams from
// one address: each is refused or cut, and counted.
func TestGossipTransportLimits(t *testing.T) {
	leaktest.Check(t)
	tally := member.NewTally(slog.New(slog.DiscardHandler), slog.LevelWarn, "test", time.Hour)
	tr, err := member.NewTransport(member.TransportConfig{
		BindAddr: "127.0.0.1", Tally: tally, HeaderTimeout: 200 * time.Millisecond,
		StreamBase: 1 << 10, PerNode: 1, MinNodes: 1, StreamBurst: 5, StreamRate: 0.001, MaxStreamsPerSource: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	addr := fmt.Sprintf("127.0.0.1:%d", tr.Port())
	limit := tr.MaxStreamBytes()

	// Memberlist's side: take what the transport hands over and read it.
	var got sync.WaitGroup
	read := make(chan int64, 16)
	quit := make(chan struct{})
	consumer := make(chan struct{})
	defer func() { close(quit); <-consumer }()
	go func() {
		defer close(consumer)
		for {
			var c net.Conn
			select {
			case c = <-tr.StreamCh():
			case <-quit:
				return
			}
			got.Add(1)
			go func() {
				defer got.Done()
				buf := make([]byte, 4096)
				var n int64
				for {
					k, err := c.Read(buf)
					n += int64(k)
					if err != nil {
						break
					}
				}
				c.Close()
				read <- n
			}()
		}
	}()

	// Claims limit-100 bytes, sends twice the cap: cut at the cap.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hdr := []byte{10, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], uint32(limit-100))
	nc.Write(hdr)
	nc.Write(make([]byte, 2*limit))
	if n := <-read; n > int64(limit)+5 {
		t.Errorf("memberlist read %d bytes of a stream, cap %d", n, limit)
	}
	nc.Close()

	// Too slow with its header.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	slow.Write([]byte{10, 0})
	eventually(t, "the slow header to be refused", func() bool { return tally.Totals()[member.RefusedSlow] == 1 })
	slow.Close()

	// Over the per-source rate (a burst of 5, no refill to speak of).
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	eventually(t, "the rate to be applied", func() bool { return tally.Totals()[member.RefusedRate] > 0 })

	// Junk datagrams.
	u, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range [][]byte{{1}, []byte("hello, memberlist"), append([]byte{9}, make([]byte, 64)...)} {
		u.Write(d)
	}
	u.Close()
	eventually(t, "junk datagrams to be counted", func() bool { return tally.Totals()[member.JunkDatagram] == 3 })
	got.Wait()
}

// loopbackSources returns n source addresses 127.0.0.2, 127.0.0.3, ...,
// skipping the test where they cannot be used.
func loopbackSources(t *testing.T, n int) []net.IP {
	t.Helper()
	var ips []net.IP
	for i := range n {
		ip := net.IPv4(127, 0, 0, byte(2+i))
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			t.Skipf("no %v here: %v", ip, err)
		}
		ln.Close()
		ips = append(ips, ip)
	}
	return ips
}

// gossipSlowloris opens perSource streams to addr from each of srcs, each
// sending a valid encrypted-stream header (claiming claim bytes, within
// the cap) and then one byte per tick, and reopens each stream soon
// after the node closes it, until stop. It needs no key.
func gossipSlowloris(addr string, srcs []net.IP, perSource int, claim uint32, tick time.Duration, stop <-chan struct{}, opened *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	hdr := []byte{10, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], claim)
	stream := func(d *net.Dialer) {
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer nc.Close()
		opened.Add(1)
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := nc.Write(hdr); err != nil {
			return
		}
		var b [1]byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Wait a tick for the node to close the stream; if it does
			// not, send it one more byte.
			nc.SetReadDeadline(time.Now().Add(tick))
			if _, err := nc.Read(b[:]); !isTimeout(err) {
				return
			}
			if _, err := nc.Write([]byte{0}); err != nil {
				return
			}
		}
	}
	for _, ip := range srcs {
		for range perSource {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					stream(d)
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond): // reopen
					}
				}
			}()
		}
	}
	return &wg
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The lockout, from 20 addresses rather than 2, in the order
// that takes the most places: first 2 addresses fill every place not
// kept for new addresses (8 each, as the attack), then 18 more
// take one reserved place each. Each opens more streams than its share,
// sends a valid encrypted-stream header and then a byte a second, and
// reopens every stream the master closes. They hold 34 places at most,
// and a worker with the key, from an address with none open, joins while
// they go on.
func TestGossipSlowlorisManySources(t *testing.T) {
	const nSources = 20
	srcs := loopbackSources(t, nSources)
	leaktest.Check(t)
	key := testClusterKey(t, "gossip slowloris")
	fast := func(c *memberlist.Config) {
		c.PushPullInterval = 200 * time.Millisecond
		c.GossipInterval = 50 * time.Millisecond
	}
	master, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta: NodeMeta{Role: RoleMaster, DataAddr: "127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler), Tune: fast,
		LeaveTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	st := master.TransportStats()
	if st.Lockout <= nSources {
		t.Fatalf("%d addresses can hold every gossip stream place; the attack below would be a lockout", st.Lockout)
	}

	stop := make(chan struct{})
	var opened atomic.Int64
	var waits []*sync.WaitGroup
	halt := func() {
		if stop != nil {
			close(stop)
			stop = nil
			for _, wg := range waits {
				wg.Wait()
			}
		}
	}
	defer halt()
	attack := func(srcs []net.IP) {
		waits = append(waits, gossipSlowloris(master.Addr(), srcs, member.DefaultMaxStreamsPerSource+2, 1<<10, time.Second, stop, &opened))
	}
	unreserved := member.DefaultMaxStreams - member.DefaultReservedStreams
	heavy := (unreserved + member.DefaultMaxStreamsPerSource - 1) / member.DefaultMaxStreamsPerSource
	attack(srcs[:heavy])
	eventually(t, "the first addresses to fill every place not kept for new ones", func() bool {
		return master.TransportStats().Open >= unreserved
	})
	attack(srcs[heavy:])
	// The attack holds all it can: an address that has a place is refused
	// the reserved ones.
	busy := func() bool {
		st := master.TransportStats()
		return st.Open >= unreserved && st.Refused[member.RefusedBusy] > 0
	}
	eventually(t, "the other addresses to take reserved places", busy)

	w, err := JoinMembership(t.Context(), MembershipConfig{
		Name: "worker", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta: NodeMeta{Role: RoleWorker, Slots: 1}, Logger: slog.New(slog.DiscardHandler), Tune: fast,
		LeaveTimeout: 100 * time.Millisecond,
	}, master.Addr())
	during := master.TransportStats()
	if err != nil {
		t.Fatalf("a worker with the key could not join during the attack: %v (transport: %+v)", err, during)
	}
	defer w.Close()
	eventually(t, "the master to see the worker", func() bool { return len(master.Members()) == 2 })
	before := master.Refused()[member.RefusedBusy]
	eventually(t, "the attack to go on after the join", func() bool {
		return busy() && master.Refused()[member.RefusedBusy] > before
	})
	halt()
	t.Logf("%d addresses, %d slowloris streams opened; they held %d of %d places as the worker joined (a lockout needs %d addresses); refused %v",
		nSources, opened.Load(), during.Open, member.DefaultMaxStreams, during.Lockout, master.TransportStats().Refused)
}
