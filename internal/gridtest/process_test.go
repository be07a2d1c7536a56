package gridtest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched"
)

// These tests run the commands as a user would: one esrun master and
// several esworker processes on 127.0.0.1, each run checked against
// esrun -inprocess with the same seed, bit for bit.

// esFlags is the ES of every run here, whatever evaluates it. The LU load
// (-lu) makes a task take long enough for the schedule to matter; it does
// not change the fitness, so it is not part of the trajectory.
var esFlags = []string{"-problem", "rastrigin", "-dim", "8", "-mu", "5", "-lambda", "20", "-gens", "8", "-seed", "11", "-lu", "40"}

// wantGens is the number of generations of that ES: 0 to 8.
const wantGens = 9

const clusterSecret = "process test cluster key 0123456789"

// keyEnv gives a process the cluster key through the environment.
var keyEnv = []string{grid.KeyEnv + "=" + clusterSecret}

// runTimeout bounds one run, from starting the master to its exit: a
// hang's bound, not a speed (a run with a silent worker waits out
// deadlines of up to 30 s, and a loaded machine is slow).
const runTimeout = 3 * time.Minute

// listening is the line esrun prints on stderr once both its addresses
// are bound.
var listening = regexp.MustCompile(`(?m)^esrun: listening data=(\S+) gossip=(\S+)$`)

// runReport is the part of esrun's -report that must not depend on how
// the run was evaluated. Every float64 goes through JSON exactly.
type runReport struct {
	Stop        string `json:"stop"`
	Error       string `json:"error"`
	Evals       int    `json:"evals"`
	NaNs        int    `json:"nans"`
	Generations []struct {
		Gen      int     `json:"gen"`
		Evals    int     `json:"evals"`
		Best     float64 `json:"best"`
		Mean     float64 `json:"mean"`
		BestEver float64 `json:"best_ever"`
		NaNs     int     `json:"nans"`
	} `json:"generations"`
	Best struct {
		F float64   `json:"f"`
		X []float64 `json:"x"`
	} `json:"best"`
	// Schedule is the grid's account of the run (none in process). It
	// depends on the run's timing and is checked on its own.
	Schedule *schedule `json:"schedule"`
}

// schedule is the part of the grid's account in a report that the tests
// check.
type schedule struct {
	Policy    string `json:"policy"`
	Workers   int    `json:"workers"`   // workers that joined during the run
	Originals int    `json:"originals"` // one a task
	Resends   int    `json:"resends"`   // tasks sent again from Q (a lost worker's)
	Replicas  int    `json:"replicas"`  // further instances sent as replicas
}

// outcome is what a finished run leaves: its report and its last
// checkpoint (the ES state only: config, generation, counts, parents and
// best; no timings).
type outcome struct {
	rep  runReport
	ckpt []byte
}

func readOutcome(reportPath, ckptPath string) (outcome, error) {
	var o outcome
	b, err := os.ReadFile(reportPath)
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o.rep); err != nil {
		return o, fmt.Errorf("report %s: %w", reportPath, err)
	}
	if o.ckpt, err = os.ReadFile(ckptPath); err != nil {
		return o, err
	}
	return o, nil
}

var (
	refOnce sync.Once
	ref     outcome
	refErr  error
)

// reference is the run evaluated by esrun's in-process goroutine pool,
// computed once per test binary.
func reference(t *testing.T) outcome {
	t.Helper()
	esrun, _ := binaries(t)
	refOnce.Do(func() {
		dir := filepath.Join(binDir, "reference")
		if refErr = os.Mkdir(dir, 0o755); refErr != nil {
			return
		}
		ref, refErr = runInProcess(esrun, dir, esFlags)
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	if len(ref.rep.Generations) != wantGens || ref.rep.Stop == "" {
		t.Fatalf("reference run: %d generations, stop %q", len(ref.rep.Generations), ref.rep.Stop)
	}
	return ref
}

// runInProcess runs esrun -inprocess with flags, its report and
// checkpoint in dir, and returns its outcome.
func runInProcess(esrun, dir string, flags []string) (outcome, error) {
	rep, ckpt := filepath.Join(dir, "report.json"), filepath.Join(dir, "state.ckpt")
	args := append([]string{"-inprocess", "-quiet", "-report", rep, "-checkpoint", ckpt}, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, esrun, args...).CombinedOutput(); err != nil {
		return outcome{}, fmt.Errorf("esrun %v: %w\n%s", args, err, out)
	}
	return readOutcome(rep, ckpt)
}

// master is a running esrun that evaluates on remote workers only.
type master struct {
	*proc
	data, gossip       string // the addresses it printed
	reportPath, ckPath string
}

// startMaster starts esrun with policy, waiting for minWorkers before
// generation 0, and waits until it listens.
func startMaster(t *testing.T, policy string, minWorkers int) *master {
	t.Helper()
	return startMasterWith(t, policy, minWorkers, esFlags)
}

// startMasterWith is startMaster running the ES of flags.
func startMasterWith(t *testing.T, policy string, minWorkers int, flags []string) *master {
	t.Helper()
	esrun, _ := binaries(t)
	dir := t.TempDir()
	m := &master{reportPath: filepath.Join(dir, "report.json"), ckPath: filepath.Join(dir, "state.ckpt")}
	args := append([]string{
		"-v", "-policy", policy, "-local", "0", "-min-workers", strconv.Itoa(minWorkers),
		"-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-report", m.reportPath, "-checkpoint", m.ckPath,
	}, flags...)
	m.proc = start(t, "esrun", esrun, keyEnv, args...)
	sub, err := m.waitStderr(withTimeout(t, runTimeout), listening)
	if err != nil {
		t.Fatalf("esrun: %v", err)
	}
	m.data, m.gossip = sub[1], sub[2]
	return m
}

// startWorker starts an esworker process named name.
func startWorker(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	_, esworker := binaries(t)
	// -once: each test is one run, and its workers exit with it.
	return start(t, name, esworker, env, append([]string{"-name", name, "-gossip", "127.0.0.1:0", "-once"}, args...)...)
}

// finish waits for the master to end the run and returns its outcome.
func (m *master) finish(t *testing.T) outcome {
	t.Helper()
	code, err := m.wait(withTimeout(t, runTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("esrun exited with status %d", code)
	}
	o, err := readOutcome(m.reportPath, m.ckPath)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// sameRun fails t unless got is the reference run, bit for bit, and
// returns got's schedule.
func sameRun(t *testing.T, got, want outcome) schedule {
	t.Helper()
	g, w := got.rep, want.rep
	if g.Schedule == nil {
		t.Fatal("the report has no schedule")
	}
	if g.Error != "" || g.Stop != w.Stop || g.Evals != w.Evals || g.NaNs != w.NaNs {
		t.Errorf("run: stop %q, error %q, %d evaluations, %d NaN; in process: stop %q, %d evaluations, %d NaN",
			g.Stop, g.Error, g.Evals, g.NaNs, w.Stop, w.Evals, w.NaNs)
	}
	if len(g.Generations) != len(w.Generations) {
		t.Fatalf("%d generations over the grid, %d in process", len(g.Generations), len(w.Generations))
	}
	for i := range w.Generations {
		if g.Generations[i] != w.Generations[i] {
			t.Errorf("generation %d: grid %+v, in process %+v", i, g.Generations[i], w.Generations[i])
		}
	}
	if g.Best.F != w.Best.F || !slices.Equal(g.Best.X, w.Best.X) {
		t.Errorf("final best: grid %v at %v, in process %v at %v", g.Best.F, g.Best.X, w.Best.F, w.Best.X)
	}
	if d := sameBytes(got.ckpt, want.ckpt); d != "" {
		t.Errorf("final checkpoint differs from the in-process one: %s", d)
	}
	return *g.Schedule
}

// exitedCleanly fails t unless every worker ends with status 0, as it
// does when the master tells it the run is over.
func exitedCleanly(t *testing.T, workers ...*proc) {
	t.Helper()
	ctx := withTimeout(t, runTimeout)
	for _, w := range workers {
		code, err := w.wait(ctx)
		if err != nil {
			t.Error(err)
		} else if code != 0 {
			t.Errorf("%s exited with status %d, want 0", w.name, code)
		}
	}
}

// TestProcessesTrajectoryEqualsInProcess runs every policy over four
// esworker processes of different speeds, found through gossip.
func TestProcessesTrajectoryEqualsInProcess(t *testing.T) {
	want := reference(t)
	if len(sched.Names) != 6 {
		t.Fatalf("policies %v, want six (the paper's five and eft)", sched.Names)
	}
	for _, policy := range sched.Names {
		t.Run(policy, func(t *testing.T) {
			m := startMaster(t, policy, 4)
			var ws []*proc
			for i, slow := range []string{"1", "1", "2", "4"} {
				ws = append(ws, startWorker(t, fmt.Sprintf("w%d", i), keyEnv,
					"-join", m.gossip, "-slowdown", slow, "-slots", strconv.Itoa(1+i%2)))
			}
			s := sameRun(t, m.finish(t), want)
			if s.Policy != policy || s.Workers != 4 {
				t.Errorf("schedule: %s on %d workers, want %s on 4", s.Policy, s.Workers, policy)
			}
			exitedCleanly(t, ws...)
		})
	}
}

// TestProcessesWorkerKilled kills -9 one worker while it holds a task.
// With WQ the run can only finish if the master sends the lost worker's
// tasks again; with R3Q replicas may win first; EFT plans them again
// (sched/eft.go).
//
// The victim holds its task, and the run is not over, when the kill
// lands, however late the test acts: the victim evaluates behind a gate
// that holds its second evaluation and every later one (every policy
// sends each slot a task at the start, and it has two), the others
// behind one that holds theirs after their first ten (fewer than they
// can make while the victim holds at most six tasks), so that no policy
// finishes the run without it. Both open once the master has lost it.
func TestProcessesWorkerKilled(t *testing.T) {
	esrun, _ := binaries(t)
	// The gate's problem, the same for every run: each has its own gate.
	flags := slices.Concat(esFlags, gateAfter(t, 1).problem())
	want, err := runInProcess(esrun, t.TempDir(), flags)
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"wq", "r3q", "eft"} {
		t.Run(policy, func(t *testing.T) {
			g, others := gateAfter(t, 1), gateAfter(t, 10)
			m := startMasterWith(t, policy, 4, flags)
			// Link delays make each generation last a few round trips
			// whatever the policy (R3Q's replicas would otherwise finish
			// the run in milliseconds).
			worker := func(name string, g *gate, args ...string) *proc {
				return startWorker(t, name, slices.Concat(keyEnv, g.env()), slices.Concat([]string{"-join", m.gossip}, args, g.workerArgs())...)
			}
			ws := []*proc{
				worker("w0", others, "-slots", "2", "-delay", "20ms"),
				worker("w1", others, "-slots", "1", "-delay", "20ms"),
				worker("w2", others, "-slots", "2", "-delay", "20ms", "-slowdown", "2"),
			}
			victim := worker("victim", g, "-slots", "2", "-delay", "100ms")
			ctx := withTimeout(t, runTimeout)
			for _, g := range []*gate{g, others} {
				if err := g.held(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			lost := regexp.MustCompile(`(worker lost|gossip declared worker dead)[^\n]*worker=victim\b`)
			if _, err := m.waitStderr(ctx, lost); err != nil {
				t.Errorf("the master did not report the lost worker: %v", err)
			}
			g.open(t) // the victim's plugins, should they outlive it, end
			others.open(t)
			s := sameRun(t, m.finish(t), want)
			if s.Originals != want.rep.Evals || policy == "wq" && s.Resends == 0 {
				t.Errorf("%d originals and %d resends for %d evaluations: want one original a task, and the victim's tasks sent again", s.Originals, s.Resends, want.rep.Evals)
			}
			exitedCleanly(t, ws...)
			<-victim.done
			if !victim.killedBySignal(syscall.SIGKILL) {
				t.Errorf("victim: %v, want killed by SIGKILL", victim.err)
			}
		})
	}
}

// TestProcessesWrongKeyRejected starts two workers with another key, one
// through gossip and one straight to the data address, before any worker
// with the right key: both are refused with a clear line on both sides,
// never get a task, and keep trying while the run completes without them.
func TestProcessesWrongKeyRejected(t *testing.T) {
	want := reference(t)
	m := startMaster(t, "rr", 2)
	const wrong = "not the cluster key 0123456789"
	viaGossip := startWorker(t, "intruder-gossip", nil, "-join", m.gossip, "-key", wrong, "-slots", "2")
	viaData := startWorker(t, "intruder-data", nil, "-master", m.data, "-key", wrong, "-slots", "2")

	ctx := withTimeout(t, runTimeout)
	for _, c := range []struct {
		p    *proc
		line string
	}{
		// The handshake: each side names the reason.
		{m.proc, `refusing connection[^\n]*intruder-data[^\n]*wrong cluster key`},
		{viaData, `cannot reach the master[^\n]*wrong cluster key`},
		// Gossip: encrypted with the cluster key, so the master can only
		// tell that someone with another key knocked.
		{m.proc, `gossip rejected[^\n]*another cluster key`},
		{viaGossip, `cannot reach the master[^\n]*different cluster key`},
	} {
		if _, err := c.p.waitStderr(ctx, regexp.MustCompile(c.line)); err != nil {
			t.Errorf("%s: no line /%s/: %v", c.p.name, c.line, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(clusterSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	members := []*proc{
		startWorker(t, "member-file", nil, "-join", m.gossip, "-key-file", keyFile, "-slots", "2"),
		startWorker(t, "member-env", keyEnv, "-join", m.gossip, "-slots", "1", "-slowdown", "2"),
	}
	if s := sameRun(t, m.finish(t), want); s.Workers != 2 {
		t.Errorf("%d workers joined, want the 2 with the key", s.Workers)
	}
	exitedCleanly(t, members...)

	for _, p := range []*proc{viaGossip, viaData} {
		if !p.running() {
			t.Errorf("%s exited (%v); it should keep trying", p.name, p.err)
		}
		if s := p.stderr.String(); regexp.MustCompile(`connected to the master`).MatchString(s) {
			t.Errorf("%s got connected to the master", p.name)
		}
	}
	if regexp.MustCompile(`worker joined[^\n]*intruder`).MatchString(m.stderr.String()) {
		t.Error("the master let an intruder join")
	}
}

// An attack is a byte stream sent to the master's data address.
type attack struct {
	name    string
	payload []byte
	// cut half-closes the connection after the payload, so the master
	// sees the stream end inside a frame.
	cut bool
}

// frameHeader returns a length prefix claiming n bytes.
func frameHeader(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// badFrames are the attacks on a connection, built around valid: the
// message expected next (a Hello before the handshake, Results after it).
func badFrames(t *testing.T, valid grid.Message) []attack {
	frame, err := grid.AppendFrame(nil, valid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) < 12 {
		t.Fatalf("frame of %d bytes is too short to cut", len(frame))
	}
	// The body cut short, with a length prefix that says so: a complete
	// frame whose msgpack ends too soon.
	short := slices.Clone(frame[:len(frame)/2])
	binary.BigEndian.PutUint32(short, uint32(len(short)-4))
	return []attack{
		{name: "garbage text", payload: []byte("GET / HTTP/1.1\r\nHost: esgrid\r\n\r\n")},
		{name: "unknown type", payload: append(frameHeader(4), 0xee, 1, 2, 3)},
		{name: "empty frame", payload: frameHeader(0)},
		{name: "oversized", payload: append(frameHeader(grid.DefaultMaxFrame+1), make([]byte, 1024)...)},
		{name: "length 2³²−1", payload: append(frameHeader(^uint32(0)), 1, 2, 3, 4)},
		{name: "truncated stream", payload: frame[:len(frame)/2], cut: true},
		{name: "truncated body", payload: short},
	}
}

// send writes a's payload on nc, half-closing if a says so.
func (a attack) send(nc net.Conn) error {
	if _, err := nc.Write(a.payload); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if a.cut {
		if err := nc.(*net.TCPConn).CloseWrite(); err != nil {
			return fmt.Errorf("half-close: %w", err)
		}
	}
	return nil
}

// closedByPeer reads nc until the master closes it: EOF or a reset.
func closedByPeer(nc net.Conn, within time.Duration) error {
	nc.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, nc)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return fmt.Errorf("the master did not close the connection: %w", err)
}

// unauthenticated dials the master and sends a before any Hello.
func unauthenticated(ctx context.Context, addr string, a attack) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := grid.NewFrameReader(nc, 0).Next()
	if err != nil {
		return fmt.Errorf("reading the challenge: %w", err)
	}
	if _, ok := m.(*grid.Challenge); !ok {
		return fmt.Errorf("first frame %v, want a challenge", m.Type())
	}
	if err := a.send(nc); err != nil {
		return err
	}
	return closedByPeer(nc, 10*time.Second)
}

// authenticated joins the run as a worker with the right key, waits for
// the master to send it tasks, and then sends a instead of results: the
// master must drop this worker and give its tasks to the others.
func authenticated(ctx context.Context, addr, name string, key *grid.Key, a attack) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	conn, _, err := grid.ClientHandshake(ctx, nc, grid.DialConfig{
		Key: key, Name: name, Slots: 1, Conn: grid.ConnConfig{Logger: quiet},
	})
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	defer conn.Close()
	gotTasks := make(chan struct{}, 1)
	conn.Start(func(m grid.Message) {
		if _, ok := m.(*grid.Tasks); ok {
			select {
			case gotTasks <- struct{}{}:
			default:
			}
		}
	})
	select {
	case <-gotTasks:
	case <-conn.Done():
		return fmt.Errorf("closed before any task: %w", conn.Err())
	case <-ctx.Done():
		return fmt.Errorf("no task: %w", ctx.Err())
	}
	// The Conn's reader owns the reading side; the attack goes straight
	// to the socket, as a broken or hostile peer's would.
	if err := a.send(nc); err != nil {
		return err
	}
	select {
	case <-conn.Done():
		return nil
	case <-time.After(time.Minute):
		return errors.New("the master did not close the connection")
	}
}

// TestProcessesBadFramesCloseOneConnection sends malformed and oversized
// frames to a running master, each on its own connection, before and after
// the handshake. Each closes only that connection; the run goes on with
// the same trajectory.
func TestProcessesBadFramesCloseOneConnection(t *testing.T) {
	want := reference(t)
	key, err := grid.NewKey(clusterSecret)
	if err != nil {
		t.Fatal(err)
	}
	// WQ never replicates: a task held by a dropped connection is done
	// only if the master requeues it.
	m := startMaster(t, "wq", 2)
	good := []*proc{
		startWorker(t, "good0", keyEnv, "-join", m.gossip, "-slots", "2"),
		// The delay holds each generation back for a few hundred
		// milliseconds, so that the attacks land while the run goes on.
		startWorker(t, "good1", keyEnv, "-join", m.gossip, "-slots", "1", "-delay", "100ms"),
	}
	ctx := withTimeout(t, runTimeout)
	if _, err := m.waitStdout(ctx, regexp.MustCompile(`(?m)^gen\s+1[/\s]`)); err != nil {
		t.Fatal(err)
	}

	type attackResult struct {
		name string
		err  error
	}
	var fakes []string
	results := make(chan attackResult)
	n := 0
	hello := &grid.Hello{Version: grid.ProtocolVersion, Name: "x", Slots: 1, Nonce: make([]byte, 32), MAC: make([]byte, 32)}
	for _, a := range badFrames(t, hello) {
		n++
		go func() { results <- attackResult{"before the handshake: " + a.name, unauthenticated(ctx, m.data, a)} }()
	}
	res := &grid.Results{Items: []grid.Result{{Gen: 2, ID: 3, F: 1.5}}, Queued: 1}
	for i, a := range badFrames(t, res) {
		n++
		name := fmt.Sprintf("fake%d", i)
		fakes = append(fakes, name)
		go func() {
			results <- attackResult{"after the handshake: " + a.name, authenticated(ctx, m.data, name, key, a)}
		}()
	}
	for range n {
		r := <-results
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
	}

	s := sameRun(t, m.finish(t), want)
	if s.Workers != len(good)+len(fakes) {
		t.Errorf("%d workers joined, want %d", s.Workers, len(good)+len(fakes))
	}
	// Each dropped connection held at least one task, and WQ has no
	// replica to stand in for it: it was sent again, a resend (each task
	// counts one original).
	if s.Originals != want.rep.Evals || s.Resends < len(fakes) {
		t.Errorf("%d originals and %d resends for %d evaluations: the tasks of the %d dropped connections were not all sent again",
			s.Originals, s.Resends, want.rep.Evals, len(fakes))
	}
	exitedCleanly(t, good...)
	log := m.stderr.String()
	for _, name := range fakes {
		if !regexp.MustCompile(`worker lost[^\n]*worker=` + name + `\b`).MatchString(log) {
			t.Errorf("the master did not report dropping %s", name)
		}
	}
	if regexp.MustCompile(`worker lost[^\n]*worker=good`).MatchString(log) {
		t.Error("the master lost a well-behaved worker")
	}
}
