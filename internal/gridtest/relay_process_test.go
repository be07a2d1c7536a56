package gridtest

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// relayListening is esworker's line once its relay listens.
var relayListening = regexp.MustCompile(`(?m)^esworker: relay listening (\S+)$`)

// startRelayProc starts esworker -relay with env and waits for its
// address.
func startRelayProc(t *testing.T, name string, env []string, args ...string) (*proc, string) {
	t.Helper()
	p := startWorker(t, name, env, append([]string{"-relay", "127.0.0.1:0"}, args...)...)
	sub, err := p.waitStderr(withTimeout(t, 20*time.Second), relayListening)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p, sub[1]
}

// genLine matches esrun's line for generation g.
func genLine(g int) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^gen\s+` + strconv.Itoa(g) + `[/\s]`)
}

// TestProcessesRelays: the paper's R1 in front of W1–W3, as processes.
// Relay r1 (relay only) finds the master through gossip; relay r2,
// which also works, is chained behind r1; two workers sit behind r1 and
// one behind r2, each given the master's address as another path; one
// worker joins directly. A worker behind r1 is killed, then r1 itself
// (taking r2's upstream with it): their tasks go back to the queue, the
// workers behind reconnect straight to the master (or wait, r2's own,
// which has no other path), and the trajectory is -inprocess's.
//
// The kills land mid-run however late the test acts: the workers
// evaluate behind a gate that holds the run after its first 85
// evaluations (of the 165 it needs at least: about generation 4), and
// opens only once the workers cut off with r1 are back on the master.
func TestProcessesRelays(t *testing.T) {
	esrun, _ := binaries(t)
	g := gateAfter(t, 85)
	flags := slices.Concat(esFlags, g.problem())
	want, err := runInProcess(esrun, t.TempDir(), flags)
	if err != nil {
		t.Fatal(err)
	}
	m := startMasterWith(t, "r3q", 5, flags)
	r1, r1addr := startRelayProc(t, "r1", keyEnv, "-relay-only", "-join", m.gossip)
	// Tasks of about 20 ms (-slowdown: a plugin's evaluation, a round
	// trip to its process, takes about 150 µs), so that the schedule
	// matters.
	slow := slices.Concat([]string{"-slots", "1", "-slowdown", "130"}, g.workerArgs())
	env := slices.Concat(keyEnv, g.env())
	worker := func(name string, args ...string) *proc {
		return startWorker(t, name, env, slices.Concat(args, slow)...)
	}
	_, r2addr := startRelayProc(t, "r2", env, slices.Concat([]string{"-master", r1addr}, slow)...)
	w1a := worker("w1a", "-master", r1addr+","+m.data)
	w1b := worker("w1b", "-master", r1addr+","+m.data)
	w2a := worker("w2a", "-master", r2addr+","+m.data)
	d0 := worker("d0", "-join", m.gossip)

	ctx := withTimeout(t, runTimeout)
	if err := g.held(ctx); err != nil {
		t.Fatal(err)
	}
	w1b.cmd.Process.Signal(syscall.SIGKILL) // a worker behind a relay dies
	if _, err := m.waitStderr(ctx, regexp.MustCompile(`worker lost[^\n]*worker=w1b\b`)); err != nil {
		t.Fatal(err)
	}
	r1.cmd.Process.Signal(syscall.SIGKILL) // the relay dies, and the chain behind it
	if _, err := m.waitStderr(ctx, regexp.MustCompile(`relay lost`)); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*proc{w1a, w2a} {
		if _, err := w.waitStderr(ctx, regexp.MustCompile(`connected to the master" worker=`+w.name+` addr=`+regexp.QuoteMeta(m.data))); err != nil {
			t.Fatalf("%s did not reconnect straight to the master after the relay died: %v", w.name, err)
		}
	}
	g.open(t)

	got := m.finish(t)
	sched := sameRun(t, got, want)
	t.Logf("schedule: %d workers joined, %d originals, %d replicas", sched.Workers, sched.Originals, sched.Replicas)
	log := m.stderr.String()
	for _, line := range []string{`msg="relay connected" component=master relay=r1`, `msg="relay connected" component=master relay=r2`, "relay lost"} {
		if !strings.Contains(log, line) {
			t.Errorf("the master's log has no %q", line)
		}
	}
	// The relayed workers were never gossip members: no peer declared
	// them dead.
	for _, name := range []string{"w1a", "w2a"} {
		if regexp.MustCompile(`gossip declared worker dead.*worker=` + name + `\b`).MatchString(log) {
			t.Errorf("gossip declared relayed worker %s dead", name)
		}
	}
	// Those with another path reconnected by it, and end with the run.
	exitedCleanly(t, w1a, w2a, d0)
	if !strings.Contains(w1a.stderr.String(), "connected to the master\" worker=w1a addr="+m.data) {
		t.Errorf("w1a did not reconnect straight to the master after the relay died")
	}
}
