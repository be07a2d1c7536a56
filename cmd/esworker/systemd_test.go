package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/docstest"
)

const unitPath = "../../deploy/esworker.service"

// unitValues returns the values of key in the unit file, in order.
func unitValues(unit, key string) []string {
	var out []string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// The systemd unit shipped in deploy/ supervises esworker as docs/install.md
// says: restart on failure (not on a configuration error), a dedicated
// user, the settings in a -config file that esworker accepts.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for key, want := range map[string]string{
		"Restart": "on-failure", "User": "esgrid",
		// SIGTERM to esworker alone: its plugins finish the running
		// evaluations, and esworker stops them.
		"KillSignal": "SIGTERM", "KillMode": "mixed",
	} {
		if got := unitValues(unit, key); len(got) != 1 || got[0] != want {
			t.Errorf("%s=%v, want %s", key, got, want)
		}
	}
	exec1 := unitValues(unit, "ExecStart")
	if len(exec1) != 1 {
		t.Fatalf("ExecStart %v", exec1)
	}
	args := strings.Fields(exec1[0])
	if len(args) < 3 || !filepath.IsAbs(args[0]) || args[1] != "-config" {
		t.Fatalf("ExecStart %q: want /path/esworker -config FILE", exec1[0])
	}
	// esworker accepts the unit's command line (with a config of ours).
	cfg := writeFile(t, t.TempDir(), "esworker.json", `{"join": "master.lab", "key_file": "/etc/esgrid/key"}`, 0o640)
	args[2] = cfg
	if _, err := parseOptions(args[1:]); err != nil {
		t.Errorf("esworker refuses the unit's flags: %v", err)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found: the unit's syntax is not verified here (it is where systemd is installed)")
	}
	// verify checks that ExecStart's program exists: point it at an
	// executable that does (this test binary), in a copy of the unit.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "esworker.service")
	if err := os.WriteFile(copyPath, []byte(strings.Replace(unit, args[0], self, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	var complaints []string
	for _, line := range strings.Split(string(out), "\n") {
		// Only what concerns our unit: a container may make verify
		// grumble about the system's own units.
		if strings.Contains(line, "esworker.service") {
			complaints = append(complaints, line)
		}
	}
	if err != nil || len(complaints) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, strings.Join(complaints, "\n"))
	}
}

// The unit's restart rules and esworker's exit statuses (exit.go) agree:
// Restart=on-failure restarts every status but 0 (and SuccessExitStatus)
// and RestartPreventExitStatus; a bad configuration must be the one
// status not restarted, a crash and a curable failure must be restarted,
// and an idle timeout, a drain, a run's end must not. Its stop timeout
// leaves running evaluations time beyond the drain's own tail.
func TestSystemdUnitExitStatuses(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	codes := func(key string) map[int]bool {
		set := map[int]bool{}
		for _, v := range unitValues(unit, key) {
			for _, f := range strings.Fields(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("%s=%s: %q is not an exit status", key, v, f)
				}
				set[n] = true
			}
		}
		return set
	}
	prevent, success := codes("RestartPreventExitStatus"), codes("SuccessExitStatus")
	restarted := func(code int) bool { return code != 0 && !success[code] && !prevent[code] }
	for _, c := range []struct {
		what string
		code int
		want bool
	}{
		{"a drain, a run's end, an idle timeout (exitOK)", exitOK, false},
		{"a curable failure (exitFailure)", exitFailure, true},
		{"a Go panic or fatal error (exitCrash)", exitCrash, true},
		{"a bad configuration (exitConfig)", exitConfig, false},
	} {
		if got := restarted(c.code); got != c.want {
			t.Errorf("status %d, %s: restarted %v, want %v", c.code, c.what, got, c.want)
		}
	}
	if !prevent[exitConfig] || len(prevent) != 1 {
		t.Errorf("RestartPreventExitStatus=%v, want %d alone", prevent, exitConfig)
	}
	// The tables in the unit's comments, -h and docs/install.md name
	// each status, and docs/install.md says whether it is restarted.
	doc := []byte(docstest.Section(t, "docs/install.md", "### Exit status"))
	for _, code := range []int{exitOK, exitFailure, exitCrash, exitConfig} {
		for where, text := range map[string]string{"the unit": unit, "esworker -h": exitTable} {
			if !regexp.MustCompile(`(?m)^#?\s+` + strconv.Itoa(code) + `\s`).MatchString(text) {
				t.Errorf("%s's exit table lacks status %d", where, code)
			}
		}
		restart := "yes"
		if !restarted(code) {
			restart = "no"
		}
		if !regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(code) + ` \|.*\| ` + restart + `\b`).Match(doc) {
			t.Errorf("docs/install.md's exit table lacks status %d, restarted: %s", code, restart)
		}
	}
	stop := unitValues(unit, "TimeoutStopSec")
	if len(stop) != 1 {
		t.Fatalf("TimeoutStopSec=%v", stop)
	}
	d, err := time.ParseDuration(stop[0])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: %v", stop[0], err)
	}
	if d < drainTail+time.Minute {
		t.Errorf("TimeoutStopSec=%v leaves running evaluations less than a minute beyond the drain's tail (%v)", d, drainTail)
	}
}

// The Go runtime exits with exitCrash on a panic and on a fatal error,
// which the unit restarts: checked on this test binary, made to do both.
func TestCrashExitStatus(t *testing.T) {
	if mode := os.Getenv("ESWORKER_TEST_CRASH"); mode != "" {
		crash(mode)
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"panic", "fatal"} {
		cmd := exec.Command(self, "-test.run=^TestCrashExitStatus$")
		cmd.Env = append(os.Environ(), "ESWORKER_TEST_CRASH="+mode)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitCrash {
			t.Errorf("%s: %v, want exit status %d; output:\n%.500s", mode, err, exitCrash, out)
		}
	}
}

// crash panics, or makes the runtime fail fatally (a stack overflow),
// on a goroutine of its own as a bug in esworker would. It never
// returns: the runtime ends the process. (A deferred close of a channel
// it waited on ran as the panic unwound, and the test could return and
// the binary exit 0, "PASS", before the runtime's exit.)
func crash(mode string) {
	go func() {
		if mode == "panic" {
			panic("esworker test: a bug")
		}
		debug.SetMaxStack(1 << 16)
		var recurse func(int) int
		recurse = func(n int) int { return recurse(n+1) + 1 }
		recurse(0)
	}()
	select {}
}
