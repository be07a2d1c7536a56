package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag of essim and essim masters is bounded, and NaN,
// ±Inf, huge, negative and out-of-range values are refused with exit
// status 2 and one line, before any work.
func TestFlagBounds(t *testing.T) {
	cancelled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	flagxtest.Check(t, []flagxtest.Command{{
		Name:  "essim",
		Flags: func() *flag.FlagSet { return newFlagSet(&options{}, &costFlags{}) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return run(cancelled(), args, stdout, stderr)
		},
	}, {
		Name:  "essim masters",
		Flags: func() *flag.FlagSet { return newMastersFlagSet(&mastersOptions{}) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			return runMasters(cancelled(), args, stdout, stderr)
		},
	}})
}

// The spellings, and files: no file essim writes is another it
// writes or reads.
func TestRefusedCommandLines(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set.txt")
	if err := os.WriteFile(set, []byte("machine M1 speed=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"masters", "-noise", "NaN"}, "essim masters: -noise NaN: must be a number between 0 and 2"},
		{[]string{"-noise", "NaN"}, "essim: -noise NaN: must be a number between 0 and 2"},
		{[]string{"-csv", filepath.Join(dir, "t"), "-png", filepath.Join(dir, "t")}, "are the same file"},
		{[]string{"-machines", set, "-csv", set}, "-csv " + set + " and -machines " + set + " are the same file"},
		// A -png directory that is a file: the old code said so with
		// status 1, a failed run, not a bad command line.
		{[]string{"masters", "-png", set}, "essim masters: -png " + set + ": mkdir " + set + ": not a directory"},
	} {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var code int
		if tt.args[0] == "masters" {
			code = runMasters(ctx, tt.args[1:], &stdout, &stderr)
		} else {
			code = run(ctx, tt.args, &stdout, &stderr)
		}
		if code != 2 || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
	if b, err := os.ReadFile(set); err != nil || string(b) != "machine M1 speed=1\n" {
		t.Errorf("the machine set now holds %q (%v)", b, err)
	}
}

// -slowdown takes M*F (from the start) as well as M@T*F, and the old
// names -gran and -q still work, each with a notice.
func TestSlowdownFormsAndOldNames(t *testing.T) {
	var out bytes.Buffer
	o, err := parseFlags([]string{"-slowdown", "L1*4,L2@60s*2", "-gran", "100", "-q"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.slowdowns) != 2 || o.slowdowns[0].Machine != "L1" || o.slowdowns[0].At != 0 || o.slowdowns[0].Factor != 4 || o.slowdowns[1].At != time.Minute {
		t.Errorf("slowdowns %+v", o.slowdowns)
	}
	if len(o.grains) != 1 || o.grains[0] != 100*time.Millisecond || !o.quiet {
		t.Errorf("-gran 100 -q: grains %v, quiet %v", o.grains, o.quiet)
	}
	if want := []string{"-gran is deprecated, use -grain", "-q is deprecated, use -quiet"}; strings.Join(o.deprecated, "|") != strings.Join(want, "|") {
		t.Errorf("notices %q, want %q", o.deprecated, want)
	}
}
