package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

var realSystemd = flag.Bool("systemd", false, "run deploy/esworker.service under a real systemd, booted in a sandbox (needs root, unshare, overlayfs and /lib/systemd/systemd)")

// sandbox is a systemd booted as PID 1 of its own PID and mount
// namespaces, on an overlay of the machine's root whose changes go to a
// tmpfs: its boot (which cleans /tmp, among others) changes nothing
// outside. It shares the network, so a unit in it reaches a test's
// listener on loopback. dir is mounted at /srv/esgrid-test in it.
type sandbox struct {
	t      *testing.T
	cmd    *exec.Cmd
	pid    int // systemd's, in the test's PID namespace
	output syncBuffer
}

// sandboxDir is where the sandbox sees the test's directory.
const sandboxDir = "/srv/esgrid-test"

// sandboxInit runs as the new namespaces' PID 1, with $1 the test's
// directory: it makes the overlay root, moves into it and becomes systemd.
const sandboxInit = `set -e
mount --make-rprivate /
ov="$1/.sandbox"
mkdir "$ov"
mount -t tmpfs tmpfs "$ov"
mkdir "$ov/upper" "$ov/work" "$ov/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$ov/upper,workdir=$ov/work" "$ov/root"
R="$ov/root"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
mount -t proc proc "$R/proc"
mount -t tmpfs tmpfs "$R/run"
mkdir -p "$R` + sandboxDir + `"
mount --bind "$1" "$R` + sandboxDir + `"
cd "$R"
mkdir -p oldroot
pivot_root . oldroot
umount -l /oldroot
exec /lib/systemd/systemd --system --log-target=journal --log-level=notice
`

func startSandbox(t *testing.T, ctx context.Context, dir string) *sandbox {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("-systemd: needs root, to boot systemd in namespaces of its own")
	}
	for _, tool := range []string{"unshare", "nsenter", "useradd", "/lib/systemd/systemd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("-systemd: %v", err)
		}
	}
	sb := &sandbox{t: t}
	sb.cmd = exec.Command("unshare", "--fork", "--pid", "--mount", "sh", "-c", sandboxInit, "sh", dir)
	sb.cmd.Stdout, sb.cmd.Stderr = &sb.output, &sb.output
	if err := sb.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		sb.cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// PID 1 of a namespace takes its every process with it.
		if sb.pid > 0 {
			syscall.Kill(sb.pid, syscall.SIGKILL)
		}
		sb.cmd.Process.Kill()
		<-exited
	})
	// unshare's child becomes systemd.
	children := fmt.Sprintf("/proc/%d/task/%d/children", sb.cmd.Process.Pid, sb.cmd.Process.Pid)
	waitFor(t, ctx, sb.output.text, "systemd started in the sandbox", func() bool {
		b, _ := os.ReadFile(children)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return false
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		sb.pid = pid
		return strings.TrimSpace(string(comm)) == "systemd"
	})
	// Booted ("running", or "degraded" where a unit of the machine's own
	// does not start in a sandbox).
	waitFor(t, ctx, sb.output.text, "systemd booted", func() bool {
		out, _ := sb.exec(ctx, "systemctl", "is-system-running")
		state := strings.TrimSpace(out)
		return state == "running" || state == "degraded"
	})
	return sb
}

// exec runs a command in the sandbox.
func (sb *sandbox) exec(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(sb.pid), "-m", "-p", "--"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs a command in the sandbox, and fails the test if it fails.
func (sb *sandbox) must(ctx context.Context, args ...string) string {
	sb.t.Helper()
	out, err := sb.exec(ctx, args...)
	if err != nil {
		sb.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}

// show returns the unit's properties.
func (sb *sandbox) show(ctx context.Context, unit string) map[string]string {
	out, _ := sb.exec(ctx, "systemctl", "show", unit, "-p", "ActiveState", "-p", "SubState", "-p", "Result",
		"-p", "ExecMainStatus", "-p", "NRestarts", "-p", "ExecMainPID")
	props := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props
}

// journal is the unit's log.
func (sb *sandbox) journal(ctx context.Context, unit string) string {
	out, _ := sb.exec(ctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat")
	return out
}

// deploy/esworker.service under a real systemd: the unit file as shipped
// (esworker in /usr/local/bin, its settings in /etc/esgrid/esworker.json,
// the user esgrid), with a drop-in that gives it the cluster key, a
// writable directory for the test plugin's events and RestartSec=1s (the
// rules under test are whether systemd restarts, not when). Each case is
// a unit of its own (esworker-CASE.service) in one booted sandbox.
//
//	go test ./cmd/esworker -run TestRealSystemd -systemd
func TestRealSystemd(t *testing.T) {
	if !*realSystemd {
		t.Skip("give -systemd to run the unit under a real systemd (as root)")
	}
	bin := buildEsworker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	// Each case gets its own bound, so that one that fails leaves the
	// others time.
	caseCtx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	dir := t.TempDir()
	ioDir := filepath.Join(dir, "io")
	for _, d := range []string{dir, ioDir} {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	os.Chmod(ioDir, 0o777) // the plugin, as esgrid, writes its events there
	copyFile(t, bin, filepath.Join(dir, "esworker"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, filepath.Join(dir, "esworker.test"))
	writeGated(t, dir, sandboxDir+"/esworker.test", sandboxDir+"/io/events", sandboxDir+"/io/gate")
	unitText, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "esworker.service", string(unitText), 0o644)

	sb := startSandbox(t, ctx, dir)
	sb.must(ctx, "useradd", "--system", "--home-dir", "/var/lib/esgrid", "--shell", "/usr/sbin/nologin", "esgrid")
	sb.must(ctx, "install", "-m", "755", sandboxDir+"/esworker", "/usr/local/bin/esworker")
	sb.must(ctx, "install", "-d", "-m", "755", "/etc/esgrid")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// install sets up the unit esworker-NAME with config as its settings
	// and returns its name and the marker in its processes' environment.
	install := func(name string, config map[string]any) (unit, marker string) {
		t.Helper()
		unit = "esworker-" + name + ".service"
		marker = "ESWORKER_TEST_UNIT=systemd-" + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		b, _ := json.Marshal(config)
		writeFile(t, dir, "esworker.json", string(b), 0o644)
		writeFile(t, dir, "dropin.conf", fmt.Sprintf("[Service]\nEnvironment=\"%s=%s\" %s\nReadWritePaths=%s/io\nRestartSec=1s\n",
			grid.KeyEnv, testSecret, marker, sandboxDir), 0o644)
		sb.must(ctx, "install", "-m", "644", sandboxDir+"/esworker.json", "/etc/esgrid/esworker.json")
		sb.must(ctx, "install", "-m", "644", sandboxDir+"/esworker.service", "/etc/systemd/system/"+unit)
		sb.must(ctx, "install", "-D", "-m", "644", sandboxDir+"/dropin.conf", "/etc/systemd/system/"+unit+".d/test.conf")
		sb.must(ctx, "systemctl", "daemon-reload")
		return unit, marker
	}
	// settled waits until the unit is inactive or failed, not restarting.
	settled := func(ctx context.Context, unit string) map[string]string {
		t.Helper()
		var props map[string]string
		waitFor(t, ctx, func() string { return fmt.Sprintf("%v\n%s", props, sb.journal(ctx, unit)) }, unit+" stopped for good", func() bool {
			props = sb.show(ctx, unit)
			return props["ActiveState"] == "inactive" || props["ActiveState"] == "failed"
		})
		return props
	}

	t.Run("stop drains", func(t *testing.T) {
		ctx := caseCtx(t)
		unit, marker := install("drain", map[string]any{
			"master": ln.Addr().String(), "name": "lab-sd", "slots": 1, "plugins": map[string]string{"gated": sandboxDir + "/gated"},
		})
		sb.must(ctx, "systemctl", "start", unit)
		journal := func() string { return sb.journal(ctx, unit) }
		conn, msgs := serveGated(t, ctx, ln, 2) // task 0 runs, task 1 is held
		waitFor(t, ctx, journal, "an evaluation running on the plugin", running(filepath.Join(ioDir, "events")))
		stopped := make(chan string, 1)
		go func() {
			out, err := sb.exec(ctx, "systemctl", "stop", unit)
			stopped <- fmt.Sprint(out, err)
		}()
		var returned []int32
		waitFor(t, ctx, journal, "the held task given back", func() bool {
			for len(msgs) > 0 {
				if m, ok := (<-msgs).(*grid.Drain); ok {
					returned = append(returned, m.Returned...)
				}
			}
			return len(returned) > 0
		})
		if err := os.WriteFile(filepath.Join(ioDir, "gate"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if out := <-stopped; out != "<nil>" {
			t.Errorf("systemctl stop: %s", out)
		}
		<-conn.Done()
		var results []grid.Result
		for len(msgs) > 0 {
			if m, ok := (<-msgs).(*grid.Results); ok {
				results = append(results, m.Items...)
			}
		}
		if len(results) != 1 || results[0].ID != 0 || results[0].Err != "" || results[0].Cancelled || results[0].F != 1 {
			t.Errorf("results %+v, want task 0's value 1; the journal:\n%s", results, journal())
		}
		if !slices.Equal(returned, []int32{1}) {
			t.Errorf("given back %v, want task 1", returned)
		}
		if p := sb.show(ctx, unit); p["Result"] != "success" || p["ExecMainStatus"] != strconv.Itoa(exitOK) {
			t.Errorf("after the stop: %v, want Result=success ExecMainStatus=%d", p, exitOK)
		}
		if left := leftBehind(ctx, marker); len(left) > 0 {
			t.Errorf("processes of the unit left: %v", left)
		}
		// esworker stopped all its plugins started, the child that left
		// its plugin's group by setsid included: nothing was left to the
		// unit's final SIGKILL.
		if j := journal(); strings.Contains(j, "Killing process") || strings.Contains(j, "may outlive it") {
			t.Errorf("esworker left processes to systemd, or could not adopt them; the journal:\n%s", j)
		}
	})

	t.Run("a crash is restarted", func(t *testing.T) {
		ctx := caseCtx(t)
		unit, _ := install("crash", map[string]any{"master": "127.0.0.1:1", "name": "lab-crash"})
		sb.must(ctx, "systemctl", "start", unit)
		journal := func() string { return sb.journal(ctx, unit) }
		waitFor(t, ctx, journal, "esworker running", func() bool {
			return strings.Contains(journal(), "esworker starting")
		})
		// SIGQUIT: the Go runtime dumps its goroutines and exits with
		// status 2, as on a panic or a fatal error.
		sb.must(ctx, "systemctl", "kill", "--kill-whom=main", "-s", "SIGQUIT", unit)
		waitFor(t, ctx, journal, "a restart", func() bool {
			p := sb.show(ctx, unit)
			return p["NRestarts"] == "1" && p["ActiveState"] == "active"
		})
		// systemd's own lines in the unit's journal give the status.
		if want := "Main process exited, code=exited, status=2/"; !strings.Contains(journal(), want) {
			t.Errorf("the journal lacks %q:\n%s", want, journal())
		}
		sb.must(ctx, "systemctl", "stop", unit)
	})

	for _, c := range []struct {
		name       string
		config     map[string]any
		wantResult string
		wantStatus int
	}{
		{"an idle timeout is not restarted", map[string]any{"master": "127.0.0.1:1", "idle_timeout": "1s"}, "success", exitOK},
		{"a bad configuration is not restarted", map[string]any{"join": "master.lab", "slots": -2}, "exit-code", exitConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := caseCtx(t)
			unit, _ := install(strings.Fields(c.name)[1], c.config)
			sb.must(ctx, "systemctl", "start", unit)
			p := settled(ctx, unit)
			if p["Result"] != c.wantResult || p["ExecMainStatus"] != strconv.Itoa(c.wantStatus) || p["NRestarts"] != "0" {
				t.Errorf("%v, want Result=%s ExecMainStatus=%d NRestarts=0; the journal:\n%s",
					p, c.wantResult, c.wantStatus, sb.journal(ctx, unit))
			}
		})
	}
}

// copyFile copies an executable.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
