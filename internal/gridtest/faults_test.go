package gridtest

import (
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/internal/freeport"
	"github.com/esgrid/esgrid/internal/longtest"
	"github.com/esgrid/esgrid/sched"
)

// Misbehaving machines, emulated by real esworker processes beside a
// healthy one: a worker that accepts tasks and never answers (-silent), one
// whose fitness function sometimes hangs deaf to cancels (-hang-every),
// and one whose evaluations sometimes fail (-fail-every). Under every
// policy the run completes with the in-process trajectory, bit for bit: a
// silent worker or a hung evaluation costs deadlines, a failure a retry.
// By default each fault runs under a policy that pays its deadline (wq)
// and the silent worker under two that replicate; every policy with every
// fault runs under the long build tag (see internal/longtest).
func TestProcessesFaultyWorkers(t *testing.T) {
	want := reference(t)
	type fault struct {
		name string
		args []string
		// line is what the master logs about it.
		line string
		// short are the policies it runs under by default.
		short []string
	}
	faults := []fault{
		{"silent", []string{"-silent"}, `worker is late`, []string{"wq", "rr", "eft"}},
		{"hang", []string{"-hang-every", "9"}, `worker is late`, []string{"wq"}},
	}
	// The runs are independent clusters (their own ports, their own
	// gossip), mostly waiting out deadlines: two at a time (-parallel).
	for _, f := range faults {
		for _, policy := range longtest.Pick(f.short, sched.Names) {
			t.Run(policy+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				runWithFaultyWorker(t, policy, f.args, f.line, want)
			})
		}
	}
	for _, policy := range []string{"wq", "r3q"} {
		t.Run(policy+"/fail", func(t *testing.T) {
			t.Parallel()
			runWithFaultyWorker(t, policy, []string{"-fail-every", "4"}, `evaluation failed; retrying`, want)
		})
	}
}

// runWithFaultyWorker runs the ES on a healthy worker and one started
// with faultArgs, and checks the run against want. line must show in the
// master's log when the fault bit (replication can spare rr, r3q and eft
// a deadline, so there it is not required).
func runWithFaultyWorker(t *testing.T, policy string, faultArgs []string, line string, want outcome) {
	t.Helper()
	m := startMaster(t, policy, 2)
	start := time.Now()
	good := startWorker(t, "good", keyEnv, "-join", m.gossip, "-slots", "2")
	bad := startWorker(t, "faulty", keyEnv, append([]string{"-join", m.gossip, "-slots", "2"}, faultArgs...)...)
	sameRun(t, m.finish(t), want)
	t.Logf("%s with %v: %v", policy, faultArgs, time.Since(start).Round(time.Millisecond))
	replicates := policy == "rr" || policy == "r3q" || policy == "eft"
	if s := m.stderr.String(); !regexp.MustCompile(line).MatchString(s) && !replicates {
		t.Errorf("the master never logged /%s/:\n%s", line, m.stderr.tail(20))
	}
	exitedCleanly(t, good, bad)
}

// Ctrl-C on esrun tells the workers the master will be back: they wait
// for it (without -once they would anyway), and -resume finds them and
// finishes the run, equal to the in-process one.
//
// The first run is given no end it could reach before the signal lands
// (-gens firstGens), however late the test acts: the resumed run is told
// to end a few generations after its checkpoint, and compared with an
// in-process run of that length (-gens only says when the run stops; it
// changes nothing before).
func TestProcessesInterruptAndResume(t *testing.T) {
	esrun, _ := binaries(t)
	dir := t.TempDir()
	report, ckpt := filepath.Join(dir, "report.json"), filepath.Join(dir, "state.ckpt")
	gossip := freeGossipAddr(t)
	masterArgs := func(extra ...string) []string {
		return append([]string{"-v", "-policy", "r3q", "-local", "0", "-min-workers", "2",
			"-listen", "127.0.0.1:0", "-gossip", gossip}, extra...)
	}
	// Slow tasks, so that the interrupt comes mid-run.
	const firstGens = "1000000"
	slowFlags := append(append([]string(nil), esFlags...), "-lu", "300", "-gens", firstGens)
	first := start(t, "esrun-1", esrun, keyEnv, masterArgs(append([]string{"-checkpoint", ckpt}, slowFlags...)...)...)
	ws := []*proc{
		startWorker(t, "w1", keyEnv, "-join", gossip, "-slots", "1"),
		startWorker(t, "w2", keyEnv, "-join", gossip, "-slots", "1"),
	}
	ctx := withTimeout(t, runTimeout)
	if _, err := first.waitStdout(ctx, regexp.MustCompile(`(?m)^gen +2[/ ]`)); err != nil {
		t.Fatalf("first run: no generation 2: %v\n%s", err, first.stderr.tail(20))
	}
	if err := first.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code, err := first.wait(ctx); err != nil || code != 1 {
		t.Fatalf("interrupted esrun: status %d, %v; want 1", code, err)
	}
	for _, w := range ws {
		if _, err := w.waitStderr(ctx, regexp.MustCompile(`the master was interrupted; waiting for it to come back`)); err != nil {
			t.Fatalf("%s: %v\n%s", w.name, err, w.stderr.tail(10))
		}
	}
	saved, err := es.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatalf("no checkpoint to resume: %v", err)
	}
	// The resumed run: generations from saved.Gen(), the next to run,
	// to last.
	from, last := saved.Gen(), saved.Gen()+2
	t.Logf("interrupted before generation %d: resuming it to %d", from, last)
	gens := strconv.Itoa(last)
	want, err := runInProcess(esrun, t.TempDir(), append(append([]string(nil), esFlags...), "-gens", gens))
	if err != nil {
		t.Fatal(err)
	}
	second := start(t, "esrun-2", esrun, keyEnv, masterArgs("-resume", ckpt, "-report", report, "-lu", "300", "-gens", gens)...)
	if code, err := second.wait(ctx); err != nil || code != 0 {
		t.Fatalf("resumed esrun: status %d, %v\n%s", code, err, second.stderr.tail(20))
	}
	got, err := readOutcome(report, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	// The resumed report starts where the checkpoint was: compare those
	// generations, the end and the final state.
	g := got.rep.Generations
	if len(g) != last-from+1 || g[0].Gen != from || g[len(g)-1].Gen != last {
		t.Fatalf("resumed run: %d generations, want %d to %d", len(g), from, last)
	}
	for _, r := range g {
		if r != want.rep.Generations[r.Gen] {
			t.Errorf("generation %d: resumed %+v, in process %+v", r.Gen, r, want.rep.Generations[r.Gen])
		}
	}
	if got.rep.Best.F != want.rep.Best.F || sameBytes(got.ckpt, want.ckpt) != "" {
		t.Errorf("resumed run ends at %v (%s), in process %v", got.rep.Best.F, sameBytes(got.ckpt, want.ckpt), want.rep.Best.F)
	}
	if got.rep.Schedule == nil || got.rep.Schedule.Workers != 2 {
		t.Errorf("the resumed run's schedule: %+v, want the same 2 workers", got.rep.Schedule)
	}
	exitedCleanly(t, ws...)
}

// freeGossipAddr is a loopback address whose port is free (TCP and UDP)
// now, for a master that must be found again at the same address after a
// restart. It lies outside the kernel's ephemeral range (freeport): one
// found by listening on port 0 was handed out again as the master's own
// data port (-listen 127.0.0.1:0), and esrun failed with "-gossip
// 127.0.0.1:33353: cannot listen: bind: address already in use".
func freeGossipAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}
