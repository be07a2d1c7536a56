package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSmallSweep(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "out.csv")
	pngPath := filepath.Join(dir, "out.png")
	code, out, errs := runCmd(t, "-gens", "3", "-trials", "2", "-grain", "100,500ms", "-delay", "0,50",
		"-csv", csvPath, "-png", pngPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"machines lan: 7 machines", "effLB", "effOpt", "effNom", " r3q ", " cyclic ", " eft ", "paper's shape", "tasks/s", "opt: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*2*6 || rows[0][0] != "machines" || rows[1][4] != "wq" || rows[1][2] != "100" || rows[20][3] != "50" {
		t.Fatalf("csv: %d rows, first %v", len(rows), rows[:2])
	}
	png, err := os.ReadFile(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 5000 {
		t.Fatalf("png: %d bytes", len(png))
	}
}

// -adaptive reaches the policies: at 100 ms tasks and 50 ms delay the
// remote queues grow and r3q's run differs from the fixed-depth one.
func TestAdaptiveFlag(t *testing.T) {
	args := []string{"-policy", "r3q", "-grain", "100", "-delay", "50", "-gens", "5", "-trials", "1"}
	code, fixed, errs := runCmd(t, append([]string{"-quiet"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, out, errs := runCmd(t, append([]string{"-adaptive"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "adaptive depth") {
		t.Errorf("header does not say adaptive:\n%s", out)
	}
	row := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, " r3q ") {
				return l
			}
		}
		return ""
	}
	if row(fixed) == "" || row(fixed) == row(out) {
		t.Errorf("adaptive row %q, fixed %q", row(out), row(fixed))
	}
}

func TestSingleSettingBag(t *testing.T) {
	code, out, errs := runCmd(t, "-quiet", "-policy", "r3q", "-grain", "50", "-delay", "10", "-trials", "1",
		"-workload", "bag", "-tasks", "96", "-shape", "mandelbrot", "-machines", "wan", "-slowdown", "W1@1s*5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	n := 0
	for _, l := range lines {
		if strings.Contains(l, " r3q ") {
			n++
		}
	}
	if n != 1 || strings.Contains(out, " wq ") {
		t.Fatalf("want one r3q row:\n%s", out)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-nope"},
		{"-policy", "fifo"},
		{"-grain", "fast"},
		{"-grain", "0"},
		{"-delay", "-5ms"},
		{"-trials", "0"},
		{"-workload", "stream"},
		{"-machines", "/no/such/file"},
		{"-slowdown", "L1"},
		{"-slowdown", "Z9@1s*2"},
		{"-seed", "x"},
		{"-recv-cost", "soon"},
		{"extra"},
	} {
		code, out, errs := runCmd(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "essim: ") {
			t.Errorf("%v: want one line on stderr, got stdout %q stderr %q", args, out, errs)
		}
	}
}

func TestHelpAndShow(t *testing.T) {
	code, out, _ := runCmd(t, "-h")
	if code != 0 || !strings.Contains(out, "Usage:") || !strings.Contains(out, "-machines") || !strings.Contains(out, "via=NAME") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "-show-machines", "-machines", "wan")
	if code != 0 || !strings.Contains(out, "machine W1 via=R1") {
		t.Fatalf("show wan: exit %d\n%s", code, out)
	}
	p := filepath.Join(t.TempDir(), "set.txt")
	if err := os.WriteFile(p, []byte("machine A speed=1\nmachine B via=A delay=2ms speed=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCmd(t, "-show-machines", "-machines", p, "-grain", "100")
	if code != 0 || !strings.Contains(out, "B        cpus=1 path=2ms roundtrip=4ms t100ms=50ms") {
		t.Fatalf("show file: exit %d\n%s", code, out)
	}
}
