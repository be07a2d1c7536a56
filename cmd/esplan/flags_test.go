package main

import (
	"bytes"
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag of every subcommand is bounded, and NaN, ±Inf, huge,
// negative and out-of-range values are refused with exit status 2 and one
// line, before any work.
func TestFlagBounds(t *testing.T) {
	esplan := func(args []string, stdout, stderr *bytes.Buffer) int {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return run(ctx, args, stdout, stderr)
	}
	flagxtest.Check(t, []flagxtest.Command{
		{Name: "esplan calibrate", Prefix: []string{"calibrate"}, Run: esplan,
			Flags: func() *flag.FlagSet { return newCalibrateFlagSet(&calOptions{}) }},
		{Name: "esplan models", Prefix: []string{"models"}, Run: esplan,
			Flags: func() *flag.FlagSet { return newModelsFlagSet(&modelsOptions{}) }},
		{Name: "esplan plan", Prefix: []string{"plan"}, Run: esplan,
			Flags: func() *flag.FlagSet { return newPlanFlagSet(&planOptions{}) }},
	})
}

// The spellings, and files: the plan or calibration written is
// never a file read.
func TestRefusedCommandLines(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.json")
	if err := os.WriteFile(cal, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate", "-reps", "9223372036854775807", "-workers", "1", "-o", "x"}, "esplan: -reps 9223372036854775807: must be an integer between 1 and 1000"},
		{[]string{"calibrate", "-reps", "1e9"}, "-reps 1e9: must be an integer between 1 and 1000"},
		{[]string{"plan", "-tasks", "9223372036854775807", "-cal", cal, "-lu", "100"}, "esplan: -tasks 9223372036854775807: must be an integer between 1 and 1000000"},
		{[]string{"plan", "-tasks", "1000000000", "-cal", cal, "-lu", "100"}, "-tasks 1000000000: must be an integer between 1 and 1000000"},
		{[]string{"plan", "-cal", cal, "-lu", "100", "-o", cal}, "-o " + cal + " and -cal " + cal + " are the same file"},
		{[]string{"calibrate", "-o", cal, cal}, "-o " + cal + " and the report " + cal + " are the same file"},
		{[]string{"calibrate", "-workers", "1", "-o", "x", "-key", "k", "-key-file", "f"}, "-key and -key-file both give the key"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != 2 || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
	if b, _ := os.ReadFile(cal); string(b) != "{}" {
		t.Errorf("the calibration now holds %q", b)
	}
}

// esplan itself has -version, and each command's -h says what it does
// before its flags.
func TestVersionAndCommandHelp(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"version"}, {"plan", "-version"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "esplan ") || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	for cmd, want := range map[string]string{"calibrate": "Measures how long", "models": "Fits the execution-time models", "plan": "Searches the configurations"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{cmd, "-h"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "Usage: esplan "+cmd) || !strings.Contains(stdout.String(), want) {
			t.Errorf("esplan %s -h: exit %d, stdout %q", cmd, code, stdout.String())
		}
	}
	// The old names of plan's flags still work, and say they are old.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"plan", "-n", "100", "-task-ms", "5", "-cal", "x.json"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "give one of -lu N and -load-ms MS") ||
		!strings.Contains(stderr.String(), "esplan: -n is deprecated, use -lu\n") || !strings.Contains(stderr.String(), "esplan: -task-ms is deprecated, use -load-ms\n") {
		t.Errorf("-n and -task-ms: exit %d, stderr %q", code, stderr.String())
	}
}

// calibrate listens on loopback unless told otherwise: a one-machine test
// is not reachable from outside.
func TestCalibrateListensOnLoopback(t *testing.T) {
	o := &calOptions{}
	if err := newCalibrateFlagSet(o).Parse(nil); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{o.listen, o.gossip} {
		if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
			t.Errorf("default address %q is not loopback", addr)
		}
	}
}
