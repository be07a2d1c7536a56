package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// startDescendants is the helper plugin's start of two children that
// sleep: one that calls setsid (a daemon: out of the plugin's process
// group), and one left in its group. At depth > 1 the one that called
// setsid does the same, one level down. The pids go to file.DEPTH.
func startDescendants(file string, depth int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var pids []string
	for _, setsid := range []bool{true, false} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "ESGRID_TEST_PLUGIN=sleep", "ESGRID_TEST_DESCENDANTS=", "ESGRID_TEST_DEPTH=")
		if setsid && depth > 1 {
			cmd.Env = append(cmd.Env, "ESGRID_TEST_DESCENDANTS="+file, "ESGRID_TEST_DEPTH="+strconv.Itoa(depth-1))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
		if err := cmd.Start(); err != nil {
			return err
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	name := fmt.Sprintf("%s.%d", file, depth)
	if err := os.WriteFile(name+".tmp", []byte(strings.Join(pids, " ")), 0o600); err != nil {
		return err
	}
	return os.Rename(name+".tmp", name)
}

// descendants waits for the pids that the helper plugin's descendants
// (ESGRID_TEST_DESCENDANTS=file, ESGRID_TEST_DEPTH=depth) wrote, and
// kills them all when the test ends, should the host have left them.
func descendants(t *testing.T, file string, depth int) []int {
	t.Helper()
	var pids []int
	for d := depth; d >= 1; d-- {
		var b []byte
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			var err error
			if b, err = os.ReadFile(fmt.Sprintf("%s.%d", file, d)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the plugin's descendants at depth %d never wrote their pids: %v", d, err)
			}
		}
		for _, w := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(w)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pids
}

// gone waits until every pid is gone and reaped: kill(pid, 0) fails with
// ESRCH (a zombie still answers). It fails the test with what, and what
// is left, if that does not happen within a minute (on a loaded machine,
// a kill and a reap take milliseconds).
func gone(t *testing.T, what string, pids []int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var left []string
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				st, _ := readStat(pid)
				left = append(left, fmt.Sprintf("pid %d (kill 0: %v; state %c, parent %d, group %d, session %d)", pid, err, st.state, st.ppid, st.pgid, st.sid))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, strings.Join(left, "; "))
		}
	}
}

// A plugin's descendants die with it and are reaped, whether the worker
// kills it for a task's deadline or stops it as it drains (Close): those
// left in its process group (which the kill reaches) and, with Subreap,
// those that called setsid and so left it, which the kill of its group
// missed, as well as theirs in turn.
func TestDescendantsDieWithThePlugin(t *testing.T) {
	if err := Subreap(t.Context()); err != nil {
		t.Skip(err)
	}
	for _, how := range []string{"deadline", "close"} {
		t.Run(how, func(t *testing.T) {
			leaktest.Check(t)
			file := filepath.Join(t.TempDir(), "pids")
			p, sink := open(t, Config{Path: helperPlugin(t, "serve-nocancel", "ESGRID_TEST_DESCENDANTS="+file, "ESGRID_TEST_DEPTH=2")})
			pids := descendants(t, file, 2)
			if how == "deadline" {
				// As a task's deadline does: the plugin ignores cancels,
				// so it is killed, with its group.
				ctx, cancel := context.WithCancel(context.Background())
				cancelWhenRunning(sink, 1, cancel, nil)
				if _, err := p.Eval(ctx, []float64{xHang}); !errors.Is(err, context.Canceled) {
					t.Fatalf("Eval = %v, want Canceled", err)
				}
				if s := p.Stats(); s.Kills != 1 {
					t.Fatalf("stats %+v, want 1 kill", s)
				}
			} else {
				// As a draining worker does: the plugin exits at the end
				// of its input, its group is killed.
				mustEval(t, p, 1)
				p.Close()
			}
			gone(t, "the plugin's descendants outlived it", pids)
		})
	}
}

// A plugin process that runs on, whose evaluations leave orphans that
// exit at once (a shell's "cmd &", Python's os.system("cmd &")), leaves
// no zombie behind: each is reaped as it exits, not once a plugin
// process ends. A zombie holds a pid, and counts in a unit's TasksMax.
func TestZombiesOfARunningPluginAreReaped(t *testing.T) {
	if err := Subreap(t.Context()); err != nil {
		t.Skip(err)
	}
	leaktest.Check(t)
	file := filepath.Join(t.TempDir(), "orphans")
	p, _ := open(t, Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_ORPHANS="+file)})
	const n = 20
	for range n {
		mustEval(t, p, xOrphan)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, w := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(w)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != n {
		t.Fatalf("%d orphans' pids, want %d", len(pids), n)
	}
	gone(t, fmt.Sprintf("zombies left by %d evaluations of a plugin still running", n), pids)
	if s := p.Stats(); s.Starts != 1 || s.Crashes != 0 || s.Kills != 0 {
		t.Fatalf("stats %+v: the plugin process did not run throughout", s)
	}
}

// A helper daemon that a running plugin process started (setsid in a
// shell that exits: an orphan at once) outlives the end of another
// plugin process (another slot's deadline kill, a crash, another
// Problem's Close): an orphan cannot be traced to its plugin, so none is
// killed while a plugin process runs. It dies once the last has ended.
func TestRunningPluginsDaemonOutlivesAnotherPluginsEnd(t *testing.T) {
	if err := Subreap(t.Context()); err != nil {
		t.Skip(err)
	}
	leaktest.Check(t)
	file := filepath.Join(t.TempDir(), "daemon")
	p1, _ := open(t, Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_DAEMON="+file)})
	var pid int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(file)
		if err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's daemon never wrote its pid: %v", err)
		}
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if st, err := readStat(pid); err == nil && st.ppid == os.Getpid() {
			break // adopted: its shell has exited
		}
		if time.Now().After(deadline) {
			t.Fatal("the plugin's daemon was never adopted")
		}
	}
	p2, _ := open(t, Config{Name: "other", Path: helperPlugin(t, "serve", "ESGRID_TEST_NAME=other")})
	mustEval(t, p2, 1)
	p2.Close()
	// As p2's process's waiter does (it may not have yet): reapMu makes
	// the two one after the other, and either leaves the daemon.
	reapOrphans()
	if st, err := readStat(pid); err != nil || st.state == 'Z' {
		t.Fatalf("the daemon of plugin 1, still running, was killed when plugin 2 ended (stat %+v, %v)", st, err)
	}
	mustEval(t, p1, 2)
	p1.Close()
	gone(t, "the daemon outlived the last plugin process", []int{pid})
}

// BenchmarkReapNothing is what every end of a plugin process costs a
// program that calls Subreap when nothing is to be reaped: a look at
// its threads' children under the start lock.
func BenchmarkReapNothing(b *testing.B) {
	if err := Subreap(b.Context()); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		reapOrphans()
	}
}
