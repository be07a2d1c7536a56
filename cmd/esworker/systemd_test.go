package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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

// The systemd unit shipped in deploy/ supervises esworker as the README
// says: restart on failure (not on a configuration error), a dedicated
// user, the settings in a -config file that esworker accepts.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for key, want := range map[string]string{
		"Restart": "on-failure", "User": "esgrid", "RestartPreventExitStatus": "2",
		"KillSignal": "SIGTERM", "KillMode": "control-group",
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
