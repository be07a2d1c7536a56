package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testTimeout bounds a tiny soak: two runs of a (≤4+6)-ES over 4
// generations, each with its own bound (a few minutes at most).
const testTimeout = 10 * time.Minute

// tiny makes the scenarios small: seeds 18 and 19 draw an r3q run on two
// workers whose master is killed and resumed, and a cyclic run on two
// workers without faults (see drawScenario).
func tiny(bin, keep string, seed uint64, runs int) Config {
	return Config{Duration: time.Hour, Runs: runs, Seed: seed, Bin: bin, Keep: keep, Slack: 2, MaxRSS: 256,
		Limits: Limits{Workers: 2, Gens: 4, Lambda: 6, Silent: DefaultLimits.Silent},
		Replay: func(seed uint64) string { return fmt.Sprintf("essoak -seed %d -runs 1 -max-workers 2", seed) }}
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testBin builds esrun, esworker and soakplugin once for the tests.
func testBin(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool to build the binaries")
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "essoak-test-"); binErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		binErr = build(ctx, binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

var (
	summaryLine = regexp.MustCompile(`(?m)^essoak summary: runs (\d+) in `)
	defectsLine = regexp.MustCompile(`(?m)^defects: (\d+) in (\d+) of the runs`)
	defectEntry = regexp.MustCompile(`(?m)^  run (\d+) seed (\d+): ([^:]+(?:: [^:]+)?): .*\n    replay: (.*)\n    logs: (.*)$`)
)

// TestTinySoak runs two runs of real processes and reads the summary: it
// counts both runs, and every defect it lists (the master may have
// known bugs) comes with a command that replays its run and kept logs.
func TestTinySoak(t *testing.T) {
	bin, keep := testBin(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	passed, err := Run(ctx, tiny(bin, keep, 18, 2), &out)
	t.Logf("passed %v\n%s", passed, out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	m := summaryLine.FindStringSubmatch(s)
	if m == nil || m[1] != "2" {
		t.Fatalf("summary: %v, want 2 runs", m)
	}
	for i, seed := range []string{"18", "19"} {
		if !strings.Contains(s, "\nrun "+strconv.Itoa(i)+" seed "+seed+": ") {
			t.Errorf("no progress line for run %d", i)
		}
	}
	d := defectsLine.FindStringSubmatch(s)
	if d == nil {
		t.Fatal("no defects line")
	}
	n, _ := strconv.Atoi(d[1])
	entries := defectEntry.FindAllStringSubmatch(s, -1)
	if len(entries) != n || (n == 0) != passed {
		t.Fatalf("%d defects counted, %d listed, passed %v", n, len(entries), passed)
	}
	for _, e := range entries {
		if e[3] == kindHarness || e[3] == kindReference {
			t.Errorf("the soak itself failed: %s", e[0])
		}
		if want := "essoak -seed " + e[2] + " -runs 1 -max-workers 2"; e[4] != want {
			t.Errorf("replay %q, want %q", e[4], want)
		}
		if _, err := os.Stat(filepath.Join(e[5], "defects.txt")); err != nil {
			t.Errorf("logs not kept: %v", err)
		}
	}
	assertNoProcessLeft(t)
}

// TestTinySoakSplitsAndRelays runs one run whose master may split,
// with a relay: seed 46 of these limits draws an rr run on six workers,
// one behind a relay that only relays, the relay killed at generation 1
// and a promoted worker at 2. The soak starts the relay and its workers
// behind it, and lists no defect of its own; a defect of the master's
// comes with its replay.
func TestTinySoakSplitsAndRelays(t *testing.T) {
	bin, keep := testBin(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	cfg := tiny(bin, keep, 46, 1)
	cfg.Limits.Split, cfg.Limits.Relay = 1, 1
	passed, err := Run(ctx, cfg, &out)
	t.Logf("passed %v\n%s", passed, out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !regexp.MustCompile(`(?m)^run 0 seed 46: .*relayed 1.*; rr \(4\+28\)-ES .* relay relay \(relay only\); split paper`).MatchString(s) ||
		!strings.Contains(s, "runs with -split: 1, ") {
		t.Errorf("no run with a relay and splits")
	}
	for _, e := range defectEntry.FindAllStringSubmatch(s, -1) {
		if e[3] == kindHarness || e[3] == kindReference {
			t.Errorf("the soak itself failed: %s", e[0])
		}
	}
	assertNoProcessLeft(t)
}

// TestSoakFlagsAWrongTrajectory checks a run against a reference whose
// last generation is one ulp off: the run is a trajectory defect, its
// logs are kept, and the soak does not pass.
func TestSoakFlagsAWrongTrajectory(t *testing.T) {
	bin, keep := testBin(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	cfg := tiny(bin, keep, 19, 1)
	cfg.mangle = func(o *outcome) {
		g := &o.rep.Generations[len(o.rep.Generations)-1]
		g.Mean = num(nextUp(float64(g.Mean)))
	}
	passed, err := Run(ctx, cfg, &out)
	s := out.String()
	if err != nil || passed || !regexp.MustCompile(`(?m)^  run 0 seed 19: trajectory: generation 4: `).MatchString(s) {
		t.Fatalf("passed %v (%v), want a trajectory defect at generation 4:\n%s", passed, err, s)
	}
	b, err := os.ReadFile(filepath.Join(keep, "run0-seed19", "defects.txt"))
	if err != nil || !strings.Contains(string(b), "replay: essoak -seed 19 -runs 1") {
		t.Errorf("kept note: %v\n%s", err, b)
	}
	for _, name := range []string{"esrun-1.out", "esrun-1.err", "w0.err", "w1.err", "report.json"} {
		if _, err := os.Stat(filepath.Join(keep, "run0-seed19", name)); err != nil {
			t.Errorf("kept logs: %v", err)
		}
	}
	assertNoProcessLeft(t)
}

// assertNoProcessLeft fails t if a process this test started lives on.
func assertNoProcessLeft(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Field 4, after the command in parentheses, is the parent.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			if err := syscall.Kill(pid, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d (%s) still runs", pid, strings.Fields(string(b))[1])
			}
		}
	}
}

// TestSoakTakesExhaustedRetriesAsDesigned runs a scenario whose every
// evaluation fails by injection (esworker -fail-every 1 on every worker):
// esrun must fail with its max-retries error, and the soak takes that as
// the designed end, not a defect: the workers wait for the run to be
// resumed and drain on SIGTERM, and the report esrun left says why. (The
// crash of a soak plugin cannot be made certain to fail one task 4
// times; TestExhaustedOnlyByInjectedFailures reads its error text.)
func TestSoakTakesExhaustedRetriesAsDesigned(t *testing.T) {
	bin := testBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	cfg := tiny(bin, t.TempDir(), 18, 1)
	cfg.alter = func(sc *scenario) {
		sc.Faults, sc.KillMaster = nil, 0
		for i := range sc.Workers {
			w := &sc.Workers[i]
			*w = workerSpec{Name: w.Name, Slots: w.Slots, Slowdown: 1, FailEvery: 1}
		}
	}
	passed, err := Run(ctx, cfg, &out)
	s := out.String()
	if err != nil || !passed {
		t.Fatalf("passed %v, err %v\n%s", passed, err, s)
	}
	if !regexp.MustCompile(`(?m)^run 0 seed 18: ok, failed as designed \(generation 0, task \d+ failed 4 times, each failure injected\)`).MatchString(s) ||
		!strings.Contains(s, "\nfailed as designed: 1 runs") {
		t.Errorf("the run is not reported as failed by design:\n%s", s)
	}
	assertNoProcessLeft(t)
}
