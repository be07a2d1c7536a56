package grid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// A key holder who answers for tasks it has not been given — all the
// batch's ids, at once, with a value that would win every selection —
// decides nothing: no result without the token the master put in that
// instance for that worker is believed, or counted but as unsolicited.
func TestMasterBelievesOnlyTokens(t *testing.T) {
	m := startMaster(t, "r3q")
	liar := newTestWorker("liar", 2, 200*time.Microsecond)
	liar.forge = func(ts *Tasks) []Result {
		var rs []Result
		for id := range int32(20) {
			rs = append(rs, Result{Gen: ts.Gen, ID: id, F: -1e300, Exec: 1, Token: rand.Uint64()})
			rs = append(rs, Result{Gen: ts.Gen, ID: id, F: -1e300, Exec: 1}) // no token at all
			rs = append(rs, Result{Gen: ts.Gen, ID: id, Err: "forged failure", Token: rand.Uint64()})
		}
		return rs
	}
	startWorkers(t, m, liar, newTestWorker("honest", 2, 200*time.Microsecond))
	before := m.Stats()
	evalAndCheck(t, m, 4, 20) // every value is sphere's: nothing forged got in
	st := m.Stats()
	if st.Unsolicited == 0 {
		t.Fatal("no forged result was noticed: nothing was tested")
	}
	if st.Failed != 0 {
		t.Errorf("%d forged failures counted", st.Failed)
	}
	// Results counts only results with a valid token: at most one per
	// instance sent, duplicates included.
	if got, sent := st.Results-before.Results, st.TasksSent-before.TasksSent; got > sent {
		t.Errorf("%d results counted for %d instances sent", got, sent)
	}
}

// A worker that echoes a wrong token for its own tasks is not believed
// either: its tasks go overdue and to another worker, and the run's
// values are right.
func TestMasterWrongTokenNotBelieved(t *testing.T) {
	m := startMaster(t, "wq", quickDeadlines)
	liar := newTestWorker("liar", 1, 0)
	liar.onTasks = func(w *testWorker, _ net.Conn) bool { return false }
	liar.forge = func(ts *Tasks) []Result {
		rs := make([]Result, len(ts.Items))
		for i, it := range ts.Items {
			rs[i] = Result{Gen: ts.Gen, ID: it.ID, F: -1, Exec: 1, Token: it.Token + 1}
		}
		return rs
	}
	liar.freeze = true
	startWorkers(t, m, liar, newTestWorker("honest", 1, 0))
	evalAndCheck(t, m, 2, 10)
	if m.Stats().Unsolicited == 0 {
		t.Error("the wrong tokens were not noticed")
	}
}

// Without ProblemSpec.NonFinite, a NaN or ±Inf from a worker is an
// evaluation error: retried on another worker, and a task that gives one
// everywhere fails the run with a message that names the flag.
func TestMasterNonFiniteIsAnErrorUnlessDeclared(t *testing.T) {
	t.Run("one worker", func(t *testing.T) {
		m := startMaster(t, "wq")
		bad := newTestWorker("nan", 1, 0)
		bad.fitness = func([]float64) float64 { return math.NaN() }
		startWorkers(t, m, bad, newTestWorker("good", 1, 100*time.Microsecond))
		evalAndCheck(t, m, 2, 10)
		if st := m.Stats(); st.Failed == 0 || st.Retried == 0 {
			t.Errorf("failed %d, retried %d: the NaNs were taken for values", st.Failed, st.Retried)
		}
	})
	t.Run("everywhere", func(t *testing.T) {
		m := startMaster(t, "wq", func(c *MasterConfig) { c.MaxRetries = 1 })
		a, b := newTestWorker("a", 1, 0), newTestWorker("b", 1, 0)
		a.fitness = func([]float64) float64 { return math.Inf(1) }
		b.fitness = a.fitness
		startWorkers(t, m, a, b)
		_, err := m.Evaluate(t.Context(), 0, randomBatch(rand.New(rand.NewPCG(1, 1)), 4, 3))
		if err == nil || !strings.Contains(err.Error(), "non-finite") || !strings.Contains(err.Error(), "-nonfinite") {
			t.Errorf("err = %v, want a non-finite failure naming -nonfinite", err)
		}
	})
}

// liarFitness is sphere, off by one ulp on the tasks lie picks.
func liarFitness(lie func(x []float64) bool) func([]float64) float64 {
	return func(x []float64) float64 {
		f := sphere(x)
		if lie(x) {
			return math.Nextafter(f, math.Inf(1))
		}
		return f
	}
}

// With Verify, a worker whose values differ from the others' (here by one
// ulp, on some tasks only) is caught, excluded, told why, and refused if
// it comes back; its accepted values are evaluated again, so that every
// value the master returns is the honest one.
func TestMasterVerifyExcludesLiar(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy string
		verify float64
		lie    func(x []float64) bool
	}{
		{"always, verify all, r3q", "r3q", 1, func([]float64) bool { return true }},
		{"sometimes, verify all, wq", "wq", 1, func(x []float64) bool { return x[0] > 0 }},
		{"always, verify half, rwq", "rwq", 0.5, func([]float64) bool { return true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := startMaster(t, c.policy, func(cfg *MasterConfig) { cfg.Verify = c.verify })
			liar := newTestWorker("liar", 2, 100*time.Microsecond)
			liar.fitness = liarFitness(c.lie)
			liar.from = "127.0.0.2"
			ws := []*testWorker{liar}
			for i, name := range []string{"h1", "h2", "h3"} {
				h := newTestWorker(name, 1, 200*time.Microsecond)
				h.from = fmt.Sprintf("127.0.0.%d", 3+i) // hosts vote: each honest worker on a host of its own
				ws = append(ws, h)
			}
			startWorkers(t, m, ws...)
			evalAndCheck(t, m, 6, 30) // every value is sphere's, bit for bit
			st := m.Stats()
			if st.Excluded != 1 || st.Mismatches == 0 || st.Verified == 0 {
				t.Fatalf("excluded %d, mismatches %d, verified %d; want the liar excluded", st.Excluded, st.Mismatches, st.Verified)
			}
			if x := m.Excluded(); len(x) != 1 || x[0].Host != liar.from || !strings.Contains(x[0].Why, "differs from the value") {
				t.Errorf("Excluded() = %v, want the liar's host and why", x)
			}
			<-liar.conn.Done()
			var rej *RejectError
			if err := liar.conn.Err(); !errors.As(err, &rej) || !strings.Contains(rej.Reason, "excluded") {
				t.Errorf("the liar was told %v, want a reason saying it is excluded", err)
			}
			// Refused when it comes back, under its name or another: its
			// host is excluded.
			for _, name := range []string{"liar", "a new name"} {
				again := newTestWorker(name, 1, 0)
				again.from = liar.from
				err := again.start(t, m.Addr(), m.cfg.Key)
				if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "excluded") || !strings.Contains(rej.Reason, liar.from) {
					t.Errorf("the liar came back as %q: %v", name, err)
				}
			}
		})
	}
}

// Without Verify the same liar's values get through: the test above
// tests something.
func TestMasterWithoutVerifyLiarGetsThrough(t *testing.T) {
	m := startMaster(t, "wq")
	liar := newTestWorker("liar", 1, 0)
	liar.fitness = liarFitness(func([]float64) bool { return true })
	startWorkers(t, m, liar)
	xs := randomBatch(rand.New(rand.NewPCG(5, 6)), 10, 3)
	f, err := m.Evaluate(t.Context(), 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	if f[0] == sphere(xs[0]) {
		t.Fatal("the liar's value is the honest one: nothing was tested")
	}
}

// With a single worker nothing can be verified: once checks have waited
// a first deadline for a second worker, the run goes on, and the checks
// given up are counted.
func TestMasterVerifyAloneGoesOn(t *testing.T) {
	m := startMaster(t, "r3q", func(cfg *MasterConfig) { cfg.Verify = 1; cfg.FirstDeadline = 200 * time.Millisecond })
	startWorkers(t, m, newTestWorker("alone", 2, 0))
	evalAndCheck(t, m, 2, 10)
	if st := m.Stats(); st.Unverified == 0 || st.Verified != 0 {
		t.Errorf("unverified %d, verified %d", st.Unverified, st.Verified)
	}
}

// Verification with honest workers changes nothing but the work done.
func TestMasterVerifyHonestWorkers(t *testing.T) {
	m := startMaster(t, "r3q", func(cfg *MasterConfig) { cfg.Verify = 1 })
	a, b, c := newTestWorker("a", 2, 100*time.Microsecond), newTestWorker("b", 1, 200*time.Microsecond), newTestWorker("c", 1, 0)
	a.from, b.from, c.from = "127.0.0.2", "127.0.0.3", "127.0.0.4"
	startWorkers(t, m, a, b, c)
	evalAndCheck(t, m, 3, 20)
	st := m.Stats()
	if st.Verified != 60 || st.Excluded != 0 || st.Mismatches != 0 {
		t.Errorf("verified %d of 60, excluded %d, mismatches %d", st.Verified, st.Excluded, st.Mismatches)
	}
}

// Several workers on one host are one voter: none can check another, so
// once checks have waited a first deadline for a second host, the values
// stand unverified, as a lone worker's do.
func TestMasterVerifyOneHostIsOneVote(t *testing.T) {
	m := startMaster(t, "r3q", func(cfg *MasterConfig) { cfg.Verify = 1; cfg.FirstDeadline = 200 * time.Millisecond })
	startWorkers(t, m, newTestWorker("a", 2, 0), newTestWorker("b", 1, 0), newTestWorker("c", 1, 0))
	evalAndCheck(t, m, 2, 10)
	if st := m.Stats(); st.Unverified != 20 || st.Verified != 0 {
		t.Errorf("unverified %d of 20, verified %d", st.Unverified, st.Verified)
	}
}

// countingHandler counts records at or above Warn and keeps them.
type countingHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lines)
}

// slowloris holds n idle connections to addr from each of srcs, and
// reopens each one the master closes, until stop is closed. It counts
// the connections it opened.
func slowloris(addr string, srcs []net.IP, n int, stop <-chan struct{}, opened *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n * len(srcs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: srcs[i%len(srcs)]}, Timeout: time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				nc, err := d.Dial("tcp", addr)
				if err != nil {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				opened.Add(1)
				done := make(chan struct{})
				go func() {
					io.Copy(io.Discard, nc) // until the master closes it
					close(done)
				}()
				select {
				case <-done:
				case <-stop:
				}
				nc.Close()
				<-done
			}
		}()
	}
	return &wg
}

// dialFrom runs a worker's handshake from the local address ip.
func dialFrom(ctx context.Context, ip net.IP, addr, name string, key *Key) (*Conn, error) {
	// A minute's patience, as eventually's: under a flood of hundreds of
	// connections, with the race detector, on a machine loaded by other
	// work, 5 s was once too short for an honest worker's handshake
	// through a relay (TestRelayFloodOtherSourceJoins: "i/o timeout").
	// What these tests check is that it is let in, not how fast.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: time.Minute}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c, _, err := ClientHandshake(ctx, nc, DialConfig{Key: key, Name: name, Slots: 1, Timeout: time.Minute,
		Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	return c, err
}

// Under a maintained slowloris of 300 connections from 127.0.0.1, a
// worker from another address (127.0.0.2) joins, a worker from the
// attacker's address is told why it is refused, and the refusals make a
// summary line or two, not a line each.
func TestMasterSlowlorisOtherSourceJoins(t *testing.T) {
	probe, err := net.Dial("tcp", "127.0.0.1:1")
	if err == nil {
		probe.Close()
	}
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	} else {
		ln.Close()
	}
	logs := &countingHandler{}
	m := startMaster(t, "wq", func(c *MasterConfig) { c.Logger = slog.New(logs) })
	stop := make(chan struct{})
	var opened atomic.Int64
	wg := slowloris(m.Addr(), []net.IP{net.IPv4(127, 0, 0, 1)}, 300, stop, &opened)
	defer func() { close(stop); wg.Wait() }()
	eventually(t, "the slowloris to fill its share", func() bool { return opened.Load() >= 300 })

	start := time.Now()
	c, err := dialFrom(t.Context(), net.IPv4(127, 0, 0, 2), m.Addr(), "from-two", m.cfg.Key)
	if err != nil {
		t.Fatalf("worker from 127.0.0.2 refused under the attack: %v", err)
	}
	defer func() { c.Close(); <-c.Done() }()
	eventually(t, "the worker to join", func() bool { return m.Workers() == 1 })
	t.Logf("worker from 127.0.0.2 joined in %v under a slowloris of 300 connections (%d opened so far)",
		time.Since(start).Round(time.Millisecond), opened.Load())

	// From the attacker's own address: refused, and told why.
	refusedFromAttacker(t, m.Addr(), m.cfg.Key, "busy")
	if m.Refused()[RefusedPerSource] == 0 {
		t.Errorf("refusals %v: none per source", m.Refused())
	}
	// (A worker from 127.0.0.1 let in, in a gap of the attack, and gone
	// again is a line of its own, not a refusal's.)
	if n := logs.matching("refused"); n > 3 {
		t.Errorf("%d warning lines for %d refused connections, want a summary:\n%s", n, m.Stats().Refused,
			strings.Join(logs.lines, "\n"))
	}
}

// Frames after the handshake are sealed: a vector or a value never shows
// on the wire.
func TestConnectionsAreSealed(t *testing.T) {
	m := startMaster(t, "wq")
	var tap tapConn
	w := newTestWorker("w", 1, 0)
	nc, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tap.Conn = nc
	w.log = testLogger(t)
	w.ctx, w.cancel = context.WithCancel(t.Context())
	w.wake = make(chan struct{}, 1)
	w.running = map[[2]int32]context.CancelFunc{}
	w.fitness = sphere
	w.shutdownCh = make(chan struct{})
	conn, _, err := ClientHandshake(w.ctx, &tap, DialConfig{Key: m.cfg.Key, Name: "w", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !conn.Sealed() {
		t.Error("connection from the handshake not sealed")
	}
	w.conn = conn
	t.Cleanup(w.stop)
	go w.slot()
	conn.Start(w.handle)
	x := []float64{1.2345678901234567, 2.5, 3.75}
	f, err := m.Evaluate(t.Context(), 0, [][]float64{x})
	if err != nil || f[0] != sphere(x) {
		t.Fatalf("Evaluate = %v, %v", f, err)
	}
	var needle [8]byte
	for _, v := range []float64{x[0], f[0]} {
		bits := math.Float64bits(v)
		for i := range needle {
			needle[i] = byte(bits >> (56 - 8*i))
		}
		if tap.saw(needle[:]) {
			t.Errorf("%v seen in clear on the wire", v)
		}
	}
}

// tapConn records what crosses a connection both ways.
type tapConn struct {
	net.Conn
	mu  sync.Mutex
	all bytes.Buffer
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.all.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.all.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tapConn) saw(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Contains(c.all.Bytes(), b)
}

// Idle connections from 20 addresses, each holding as many as the master
// lets it and reopening every one it closes, in the order that takes the
// most slots (first one address fills every slot not kept for new
// addresses, then 19 more take one reserved slot each), hold 35 slots at
// most: a worker from another address joins while they go on.
func TestMasterSlowlorisManySources(t *testing.T) {
	const nSources = 20
	srcs := loopbackSources(t, nSources)
	m := startMaster(t, "wq")
	held := func() int {
		m.gate.mu.Lock()
		defer m.gate.mu.Unlock()
		return m.gate.slots.Held()
	}
	if lock := m.gate.slots.Lockout(); lock <= nSources {
		t.Fatalf("%d addresses can hold every handshake slot; the attack below would be a lockout", lock)
	}
	stop := make(chan struct{})
	var opened atomic.Int64
	var waits []*sync.WaitGroup
	defer func() {
		close(stop)
		for _, wg := range waits {
			wg.Wait()
		}
	}()
	per := DefaultMaxHandshakesPerSource
	unreserved := m.cfg.MaxHandshakes - m.cfg.MaxHandshakes*3/4
	heavy := (unreserved + per - 1) / per
	waits = append(waits, slowloris(m.Addr(), srcs[:heavy], per+2, stop, &opened))
	eventually(t, "the first addresses to fill every slot not kept for new ones", func() bool { return held() >= unreserved })
	waits = append(waits, slowloris(m.Addr(), srcs[heavy:], per+2, stop, &opened))
	busy := func() bool { return held() >= unreserved && m.Refused()[RefusedBusy] > 0 }
	eventually(t, "the other addresses to take reserved slots", busy)

	c, err := dialFrom(t.Context(), net.IPv4(127, 0, 0, 1), m.Addr(), "honest", m.cfg.Key)
	if err != nil {
		t.Fatalf("worker refused under the attack: %v (refused %v)", err, m.Refused())
	}
	defer func() { c.Close(); <-c.Done() }()
	eventually(t, "the worker to join", func() bool { return m.Workers() == 1 })
	before := m.Refused()[RefusedBusy]
	eventually(t, "the attack to go on after the join", func() bool { return m.Refused()[RefusedBusy] > before })
	t.Logf("%d addresses, %d idle connections opened; refused %v", nSources, opened.Load(), m.Refused())
}

// A relay's downstream port needs no key: anyone who reaches it opens
// streams to the master's handshake. Under a maintained slowloris of 300
// idle connections to the relay from 127.0.0.1, a worker from 127.0.0.2
// joins through the same relay (the master's gate counts a relayed
// stream by the address the relay saw, not as the relay's alone), and
// one from the attacker's address is told why it is refused.
func TestRelaySlowlorisOtherSourceJoins(t *testing.T) {
	src := loopbackSources(t, 1)[0]
	m := startMaster(t, "wq")
	r := runRelay(t, m, ConnConfig{})
	eventually(t, "the relay to connect", func() bool { return m.Relays() == 1 })
	stop := make(chan struct{})
	var opened atomic.Int64
	wg := slowloris(r.Addr(), []net.IP{net.IPv4(127, 0, 0, 1)}, 300, stop, &opened)
	defer func() { close(stop); wg.Wait() }()
	eventually(t, "the slowloris to fill its share", func() bool {
		return opened.Load() >= 300 && m.Refused()[RefusedPerSource] > 0
	})

	otherSourceJoins(t, m, r, src, "from your address")
}

// An address that opens more connections to a relay's port than the
// relay carries (MaxRelayStreams), and holds each until the relay has
// closed it, keeps only its share: a worker from another address is let
// in through the relay, and one from the attacker's is told why not.
func TestRelayFloodOtherSourceJoins(t *testing.T) {
	src := loopbackSources(t, 1)[0]
	m := startMaster(t, "wq")
	r := runRelay(t, m, ConnConfig{})
	eventually(t, "the relay to connect", func() bool { return m.Relays() == 1 })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range MaxRelayStreams + 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: time.Second}
			for {
				nc, err := d.Dial("tcp", r.Addr())
				if err == nil {
					opened.Add(1)
					done := make(chan struct{})
					go func() {
						io.Copy(io.Discard, nc) // the relay's half-close, or its close
						close(done)
					}()
					select {
					case <-done:
					case <-stop:
					}
					// Held past the relay's half-close for as long as it
					// waits for a hang-up.
					select {
					case <-time.After(relayLinger):
					case <-stop:
					}
					nc.Close()
					<-done
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	eventually(t, "the flood to fill the relay", func() bool { return opened.Load() >= MaxRelayStreams+100 })

	otherSourceJoins(t, m, r, src, "your address")
}

// otherSourceJoins checks, while an attack from 127.0.0.1 lasts, that a
// worker from src joins m through relay r, and that one from the
// attacker's address is refused with a reason that says so (containing
// why).
func otherSourceJoins(t *testing.T, m *Master, r *Relay, src net.IP, why string) {
	t.Helper()
	c, err := dialFrom(t.Context(), src, r.Addr(), "from-two", m.cfg.Key)
	if err != nil {
		t.Fatalf("worker from %v refused through the relay under the attack: %v (refused %v, relay %+v)", src, err, m.Refused(), r.Stats())
	}
	defer func() { c.Close(); <-c.Done() }()
	eventually(t, "the worker to join", func() bool { return m.Workers() == 1 })
	refusedFromAttacker(t, r.Addr(), m.cfg.Key, why)
}

// refusedFromAttacker checks that a worker dialling addr from the
// attacker's address, 127.0.0.1, is refused with a reason containing
// why. The attack holds its places only most of the time: between a
// place freed and taken again (the master's handshake timeout, the
// relay's hang-up), a worker may be let in, rightly, on a loaded
// machine more often. So it tries again, for a minute as eventually
// does, until refused; a refusal that does not say why, or another
// error, fails at once.
func refusedFromAttacker(t *testing.T, addr string, key *Key, why string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		c, err := dialFrom(t.Context(), net.IPv4(127, 0, 0, 1), addr, fmt.Sprintf("from-one-%d", i), key)
		var rej *RejectError
		switch {
		case errors.As(err, &rej) && strings.Contains(rej.Reason, why):
			return
		case err != nil:
			t.Fatalf("worker from the attacker's address: %v, want a refusal saying %q", err, why)
		}
		c.Close() // let in, in a gap of the attack
		<-c.Done()
		if time.Now().After(deadline) {
			t.Fatalf("a worker from the attacker's address let in %d times in a minute, never refused", i+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A key holder posing as a relay's master cannot flood the relay's log:
// 1,000 frames a master never sends a relay make a few lines.
func TestRelayFakeUpstreamOddFramesLogFewLines(t *testing.T) {
	leaktest.Check(t)
	logs := &countingHandler{}
	r, up := relayUnderFakeMaster(t, RelayConfig{Name: "relay", Logger: slog.New(logs)})
	opened := make(chan uint32, 1)
	up.Start(func(m Message) {
		if f, ok := m.(*RelayFrame); ok && f.Op == RelayOpen {
			opened <- f.S
		}
	})
	eventually(t, "the relay to take downstream connections", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.up != nil
	})
	w, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var s uint32
	select {
	case s = <-opened:
	case <-t.Context().Done():
		t.Fatal("no stream opened")
	}
	for range 1000 {
		if err := up.Send(&Results{}); err != nil {
			t.Fatal(err)
		}
	}
	// Frames are handled in order: once this byte is down, so are they.
	if err := up.Send(&RelayFrame{S: s, Op: RelayData, D: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(w, b); err != nil {
		t.Fatal(err)
	}
	if n := logs.count(); n > 12 {
		t.Errorf("%d warning lines for 1,000 odd frames from upstream, want a few", n)
	}
}
