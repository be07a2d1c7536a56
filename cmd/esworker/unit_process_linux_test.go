package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// These tests stop a real esworker, with real plugin processes, as
// systemd stops deploy/esworker.service (KillMode=mixed): SIGTERM and
// SIGCONT to esworker alone; SIGKILL to every process left in the unit
// once esworker has exited, or at TimeoutStopSec. A unit's processes are
// those that carry a marker in their environment, which esworker passes
// on to its plugins and they to theirs, as a unit's control group holds
// whatever its processes start. (No systemd runs the test: PID 1 is not
// systemd here, and a systemd of its own would clean the machine's /tmp
// at boot.)

// unit is an esworker process under an emulated service manager.
type unit struct {
	t      *testing.T
	cmd    *exec.Cmd
	marker string // NAME=VALUE in the environment of the unit's processes
	stderr syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startUnit starts esworker with args as a unit's main process.
func startUnit(t *testing.T, bin string, args ...string) *unit {
	u := &unit{t: t, marker: fmt.Sprintf("ESWORKER_TEST_UNIT=%s-%d", t.Name(), time.Now().UnixNano()), exited: make(chan struct{})}
	u.cmd = exec.Command(bin, args...)
	u.cmd.Env = append(os.Environ(), grid.KeyEnv+"="+testSecret, u.marker)
	u.cmd.Stderr = &u.stderr
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		u.err = u.cmd.Wait()
		close(u.exited)
	}()
	t.Cleanup(func() {
		u.cmd.Process.Kill()
		<-u.exited
		u.killAll()
	})
	return u
}

// stop is systemctl stop's first stage: KillSignal (SIGTERM) and SIGCONT
// to the main process only under the unit's KillMode=mixed, to all its
// processes under KillMode=control-group.
func (u *unit) stop() {
	pids := []int{u.cmd.Process.Pid}
	switch mode := unitValue(u.t, "KillMode"); mode {
	case "mixed":
	case "control-group":
		pids = u.procs()
	default:
		u.t.Fatalf("KillMode=%s: not emulated", mode)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
		syscall.Kill(pid, syscall.SIGCONT)
	}
}

// wait waits up to timeout (the unit's TimeoutStopSec) for esworker to
// exit, and returns its exit status; past it, it kills every process of
// the unit as systemd would, and fails the test.
func (u *unit) wait(timeout time.Duration) int {
	select {
	case <-u.exited:
	case <-time.After(timeout):
		u.killAll()
		<-u.exited
		u.t.Fatalf("esworker did not exit within TimeoutStopSec (%v); killed; its log:\n%s", timeout, u.stderr.text())
	}
	var ee *exec.ExitError
	switch {
	case u.err == nil:
		return 0
	case errors.As(u.err, &ee):
		return ee.ExitCode()
	}
	u.t.Fatal(u.err)
	return -1
}

// procs lists the unit's live processes.
func (u *unit) procs() []int { return markedProcs(u.marker) }

// killAll is the last stage of a stop: SIGKILL to the unit's remaining
// processes. It returns those it killed.
func (u *unit) killAll() []int {
	pids := u.procs()
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}

// leftBehind waits until esworker's own kills have taken effect — none
// of the unit's processes is left — within a generous bound, then kills
// what is still there, as systemd would, and returns it: esworker should
// have stopped them itself.
func (u *unit) leftBehind(ctx context.Context) []string { return leftBehind(ctx, u.marker) }

// markedProcs lists the live processes with marker (NAME=VALUE) in their
// environment (a zombie's environment is gone).
func markedProcs(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == marker }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leftBehind waits until no process carries marker, within ctx; then it
// kills those still there and returns what each was.
func leftBehind(ctx context.Context, marker string) []string {
	for len(markedProcs(marker)) > 0 {
		select {
		case <-ctx.Done():
			var left []string
			for _, pid := range markedProcs(marker) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return left
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// unitValue is the unit's one value of key.
func unitValue(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	v := unitValues(string(b), key)
	if len(v) != 1 {
		t.Fatalf("%s=%v in the unit, want one value", key, v)
	}
	return v[0]
}

// unitStopTimeout is the unit's TimeoutStopSec.
func unitStopTimeout(t *testing.T) time.Duration {
	d, err := time.ParseDuration(unitValue(t, "TimeoutStopSec"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serveGated accepts one esworker on ln, welcomes it to the gated
// plugin's problem, sends it n tasks of generation 1 and returns the
// connection and what esworker sends.
func serveGated(t *testing.T, ctx context.Context, ln net.Listener, n int) (*grid.Conn, chan grid.Message) {
	t.Helper()
	conn, _ := acceptWorker(ctx, t, ln, grid.ProblemSpec{Name: "gated", Dim: 2})
	msgs := make(chan grid.Message, 100)
	conn.Start(func(m grid.Message) { msgs <- m })
	ts := &grid.Tasks{Gen: 1}
	for i := range n {
		ts.Items = append(ts.Items, grid.Task{ID: int32(i), X: []float64{float64(i), 1}})
	}
	conn.Send(ts)
	return conn, msgs
}

// waitFor waits until cond holds, or fails the test with what and the
// log.
func waitFor(t *testing.T, ctx context.Context, log func() string, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never; esworker's log:\n%s", what, log())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// running reports whether the gated plugin has an evaluation running.
func running(events string) func() bool {
	return func() bool {
		b, _ := os.ReadFile(events)
		return bytes.Contains(b, []byte("evaluating"))
	}
}

// systemctl stop drains: the evaluation running on a plugin when the
// stop comes finishes and its result reaches the master, the held task
// is given back, esworker stops its plugins' processes (a child each
// left in its group included, and one that left it by setsid) and exits with status 0 within
// TimeoutStopSec, and the final SIGKILL finds nothing left.
func TestUnitStopDrainsPlugins(t *testing.T) {
	bin := buildEsworker(t)
	plug, events, gate := gatedPlugin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	u := startUnit(t, bin, "-master", ln.Addr().String(), "-name", "lab-1", "-slots", "1", "-plugin", "gated="+plug)
	conn, msgs := serveGated(t, ctx, ln, 2) // task 0 runs, task 1 is held
	waitFor(t, ctx, u.stderr.text, "an evaluation running on the plugin", running(events))

	u.stop()
	var returned []int32
	waitFor(t, ctx, u.stderr.text, "the held task given back", func() bool {
		for len(msgs) > 0 {
			switch m := (<-msgs).(type) {
			case *grid.Drain:
				returned = append(returned, m.Returned...)
			case *grid.Results:
				if len(m.Items) > 0 {
					t.Fatalf("results %+v before the running evaluation was let finish", m.Items)
				}
			}
		}
		return len(returned) > 0
	})
	if !slices.Equal(returned, []int32{1}) {
		t.Errorf("given back %v, want the held task 1", returned)
	}
	// The plugin still runs its evaluation: the stop reached esworker
	// alone. Let it finish.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := u.wait(unitStopTimeout(t)); code != exitOK {
		t.Errorf("exit status %d, want %d (exitOK); its log:\n%s", code, exitOK, u.stderr.text())
	}
	<-conn.Done()
	var results []grid.Result
	for len(msgs) > 0 {
		if m, ok := (<-msgs).(*grid.Results); ok {
			results = append(results, m.Items...)
		}
	}
	if len(results) != 1 || results[0].ID != 0 || results[0].Err != "" || results[0].Cancelled || results[0].F != 1 {
		t.Errorf("results %+v, want task 0's value 1", results)
	}
	if left := u.leftBehind(ctx); len(left) > 0 {
		t.Errorf("esworker exited and left its plugins' processes to the final SIGKILL: %v", left)
	}
}

// A second signal (a user's second Ctrl-C, systemctl kill) exits at once,
// with status 1, and kills each plugin's process group first: no process
// that esworker started, nor one that its plugin started (one that left
// its group by setsid included), outlives it, though its evaluation never
// ends.
func TestUnitSecondSignalKillsPluginGroups(t *testing.T) {
	bin := buildEsworker(t)
	plug, events, _ := gatedPlugin(t) // the gate never opens
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	u := startUnit(t, bin, "-master", ln.Addr().String(), "-name", "lab-2", "-slots", "1", "-plugin", "gated="+plug)
	serveGated(t, ctx, ln, 1)
	waitFor(t, ctx, u.stderr.text, "an evaluation running on the plugin", running(events))
	if n := len(u.procs()); n < 3 {
		t.Fatalf("%d processes in the unit, want esworker, its plugin and the plugin's child", n)
	}

	u.stop()
	// Two signals sent before esworker takes the first are one.
	waitFor(t, ctx, u.stderr.text, "a drain", func() bool { return strings.Contains(u.stderr.text(), "signal: draining") })
	u.cmd.Process.Signal(syscall.SIGTERM)
	if code := u.wait(unitStopTimeout(t)); code != exitFailure {
		t.Errorf("exit status %d, want %d (exitFailure); its log:\n%s", code, exitFailure, u.stderr.text())
	}
	if !strings.Contains(u.stderr.text(), "second signal: killed 1 plugin process group(s)") {
		t.Errorf("esworker did not say what it killed; its log:\n%s", u.stderr.text())
	}
	if left := u.leftBehind(ctx); len(left) > 0 {
		t.Errorf("esworker's plugins outlived it: %v", left)
	}
}
