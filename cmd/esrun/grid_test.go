package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// lockedBuffer is an io.Writer that a test may read while esrun writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// await waits until re matches what was written, and returns the match.
func (l *lockedBuffer) await(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(l.String()); m != nil {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %q in esrun's output:\n%s", re, l.String())
	return nil
}

// esrunAsync starts esrun in the background; wait returns its exit status.
func esrunAsync(ctx context.Context, args ...string) (stdout, stderr *lockedBuffer, wait func() int) {
	stdout, stderr = new(lockedBuffer), new(lockedBuffer)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	return stdout, stderr, func() int { return <-done }
}

var listeningLine = regexp.MustCompile(`(?m)^esrun: listening data=(\S+):(\d+) gossip=(\S+):(\d+)$`)

// checkListening checks that stderr has exactly one listening line, with
// the ports the system chose, and returns the gossip address.
func checkListening(t *testing.T, stderr string) string {
	t.Helper()
	all := listeningLine.FindAllStringSubmatch(stderr, -1)
	if len(all) != 1 {
		t.Fatalf("%d listening lines in stderr:\n%s", len(all), stderr)
	}
	m := all[0]
	if m[1] != "127.0.0.1" || m[3] != "127.0.0.1" || m[2] == "0" || m[4] == "0" {
		t.Errorf("listening line %q: want loopback and the bound ports", m[0])
	}
	return net.JoinHostPort(m[3], m[4])
}

// sameTrajectory compares two -report files generation by generation and
// the final best individual, bit for bit.
func sameTrajectory(t *testing.T, got, want reportFile) {
	t.Helper()
	if len(got.Generations) != len(want.Generations) || len(got.Generations) == 0 {
		t.Fatalf("%d generations, want %d", len(got.Generations), len(want.Generations))
	}
	for i, w := range want.Generations {
		g := got.Generations[i]
		if g.Gen != w.Gen || g.Evals != w.Evals || *g.Best != *w.Best || *g.Mean != *w.Mean {
			t.Errorf("generation %d: best %v mean %v, want %v %v", w.Gen, *g.Best, *g.Mean, *w.Best, *w.Mean)
		}
	}
	if *got.Best.F != *want.Best.F || len(got.Best.X) != len(want.Best.X) {
		t.Fatalf("final best %v, want %v", *got.Best.F, *want.Best.F)
	}
	for i := range want.Best.X {
		if got.Best.X[i] != want.Best.X[i] {
			t.Errorf("final best x[%d] = %v, want %v", i, got.Best.X[i], want.Best.X[i])
		}
	}
}

// small is a run short enough for tests, with a load that makes tasks
// last long enough for replicas and cancels to happen.
var small = []string{"-problem", "rastrigin", "-dim", "6", "-mu", "5", "-lambda", "24", "-gens", "5", "-seed", "9", "-lu", "30", "-quiet"}

func reference(t *testing.T) reportFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inprocess.json")
	if code, _, stderr := esrun(t.Context(), append(small, "-inprocess", "-slots", "3", "-report", path)...); code != 0 {
		t.Fatalf("in-process run: exit %d: %s", code, stderr)
	}
	return readReport(t, path)
}

// The one invariant: on the local grid, whatever the policy, the run is
// the in-process run.
func TestLocalGridEqualsInProcess(t *testing.T) {
	leaktest.Check(t)
	want := reference(t)
	if want.Schedule != nil {
		t.Errorf("in-process report has a schedule")
	}
	type run struct {
		policy   string
		adaptive bool
	}
	var runs []run
	for _, policy := range sched.Names {
		runs = append(runs, run{policy, false})
	}
	// Remote queues sized from measurements change where and when tasks
	// run, never the run.
	runs = append(runs, run{"rwq", true}, run{"r3q", true})
	for _, r := range runs {
		name, args := r.policy, append(small, "-policy", r.policy)
		if r.adaptive {
			name, args = name+"-adaptive", append(args, "-adaptive")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "grid.json")
			// Workers of one and two slots, so that a generation has
			// replicas on some policies.
			code, _, stderr := esrun(t.Context(), append(args, "-local", "3", "-slots", "2", "-report", path)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			checkListening(t, stderr)
			got := readReport(t, path)
			sameTrajectory(t, got, want)
			if got.Config.Grid == nil || got.Config.Grid.Adaptive != r.adaptive {
				t.Errorf("grid config %+v, want adaptive %v", got.Config.Grid, r.adaptive)
			}
			// Every task counts one original, however often it was
			// sent again (withdrawn from a late worker, overdue, lost).
			s := got.Schedule
			if s == nil || s.Policy != r.policy || s.Workers != 3 || s.Originals != got.Evals || len(s.Generations) != 6 {
				t.Fatalf("schedule: %+v", s)
			}
		})
	}
}

// A grid of one local agent and one remote worker, which joins with the
// address and key file that esrun prints, runs the in-process
// trajectory; at the end the remote worker is told the run is over. The
// key esrun made for the run is in a file of mode 0600, never on stderr,
// and the file is gone when the run ends.
func TestRemoteWorkerJoins(t *testing.T) {
	leaktest.Check(t)
	want := reference(t)
	path := filepath.Join(t.TempDir(), "grid.json")
	t.Setenv(grid.KeyEnv, "")
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	t.Setenv("HOME", config)
	_, stderr, wait := esrunAsync(t.Context(), append(small, "-local", "1", "-min-workers", "2",
		"-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-report", path)...)
	m := stderr.await(t, regexp.MustCompile(`esrun: waiting for workers: [01]/2 joined; start esworker -join (\S+) -key-file (\S+)\n`))
	gossip := checkListening(t, stderr.String())
	if m[1] != gossip {
		t.Errorf("join address %s, but gossip listens on %s", m[1], gossip)
	}
	keyFile := m[2]
	if !strings.Contains(stderr.String(), "made one for this run in "+keyFile+" ") {
		t.Errorf("esrun does not say where the key it made is:\n%s", stderr)
	}
	if !strings.HasPrefix(keyFile, config) {
		t.Errorf("key file %s, want it in the user's configuration directory %s", keyFile, config)
	}
	secret, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(secret)); s == "" || strings.Contains(stderr.String(), s) {
		t.Errorf("the generated key is printed:\n%s", stderr)
	}
	key, err := grid.LoadKey("", keyFile, false) // mode 0600, or it is refused
	if err != nil {
		t.Fatal(err)
	}
	agent, err := worker.New(worker.Config{
		Join: []string{m[1]}, GossipBind: "127.0.0.1:0", Key: key, Name: "remote", Slots: 2, Slowdown: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	agentErr := make(chan error, 1)
	go func() { agentErr <- agent.Run(ctx) }()

	if code := wait(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := <-agentErr; !errors.Is(err, worker.ErrShutdown) {
		t.Errorf("remote worker ended with %v, want the master's shutdown", err)
	}
	got := readReport(t, path)
	sameTrajectory(t, got, want)
	if got.Schedule == nil || got.Schedule.Workers != 2 {
		t.Errorf("schedule: %+v", got.Schedule)
	}
	if strings.Contains(stderr.String(), strings.TrimSpace(string(secret))) {
		t.Errorf("the generated key is printed:\n%s", stderr)
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's key file outlives the run: %v", err)
	}
}

// Waiting for workers that never come ends cleanly on Ctrl-C.
func TestMinWorkersInterrupted(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr, wait := esrunAsync(ctx, append(small, "-local", "0", "-min-workers", "3",
		"-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-key", testSecret)...)
	stderr.await(t, regexp.MustCompile(`esrun: waiting for workers: 0/3 joined; start esworker -join 127\.0\.0\.1:\d+ with the same key`))
	cancel()
	code := wait()
	if code != 1 || !strings.HasSuffix(stderr.String(), "esrun: interrupted while waiting for workers (0/3 joined): context canceled\n") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	checkListening(t, stderr.String())
	if strings.Contains(stderr.String(), "made one") {
		t.Errorf("a key was made although one was given:\n%s", stderr)
	}
	if stdout.String() != "" {
		t.Errorf("stdout: %q", stdout)
	}
}

// An address already in use is one clear line and exit status 1.
func TestAddressInUse(t *testing.T) {
	leaktest.Check(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	for _, flag := range []string{"-listen", "-gossip"} {
		t.Run(flag, func(t *testing.T) {
			args := append(small, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", flag, busy)
			code, stdout, stderr := esrun(t.Context(), args...)
			want := fmt.Sprintf("esrun: %s %s: cannot listen: bind: address already in use\n", flag, busy)
			if code != 1 || stderr != want || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want 1 and %q", code, stderr, stdout, want)
			}
		})
	}
}

// Without remote workers in view, nothing listens beyond loopback and no
// key is printed; when they are expected, the master takes the usual
// ports on every interface.
func TestDefaultAddresses(t *testing.T) {
	tests := []struct {
		args           []string
		listen, gossip string
		want, slots    int
	}{
		{nil, localListen, localGossip, runtime.NumCPU(), 1},
		{[]string{"-local", "1"}, localListen, localGossip, 1, runtime.NumCPU()},
		{[]string{"-local", "3", "-min-workers", "2"}, localListen, localGossip, 2, 1},
		{[]string{"-local", "0"}, "0.0.0.0:7947", "0.0.0.0:7946", 1, runtime.NumCPU()},
		{[]string{"-local", "2", "-min-workers", "5", "-slots", "3"}, "0.0.0.0:7947", "0.0.0.0:7946", 5, 3},
		{[]string{"-local", "0", "-gossip", "127.0.0.1:0"}, "0.0.0.0:7947", "127.0.0.1:0", 1, runtime.NumCPU()},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o, err := parseOptions(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if o.listen != tt.listen || o.gossip != tt.gossip || o.wantWorkers() != tt.want || o.localSlots() != tt.slots {
				t.Errorf("listen %s gossip %s, waits for %d, %d slots each; want %s %s %d %d",
					o.listen, o.gossip, o.wantWorkers(), o.localSlots(), tt.listen, tt.gossip, tt.want, tt.slots)
			}
		})
	}
}

// A key file that others may read is refused before the run starts, in
// one line that says how to fix it; -key-file-insecure accepts it.
func TestKeyFileOpenToOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "K")
	if err := os.WriteFile(path, []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(small, "-local", "1", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-key-file", path)
	code, _, stderr := esrun(t.Context(), args...)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "chmod 600 "+path) || strings.Contains(stderr, testSecret) {
		t.Errorf("exit %d, stderr %q; want 2 and one line saying chmod 600 %s", code, stderr, path)
	}
	if code, _, stderr := esrun(t.Context(), append(args, "-"+grid.InsecureKeyFileFlag)...); code != 0 {
		t.Errorf("with -%s: exit %d: %s", grid.InsecureKeyFileFlag, code, stderr)
	}
}
