package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag is bounded, and NaN, ±Inf, huge, negative and
// out-of-range values are refused with exit status 2 and one line,
// before any work.
func TestFlagBounds(t *testing.T) {
	flagxtest.Check(t, []flagxtest.Command{{
		Name:  "esbag",
		Flags: func() *flag.FlagSet { return newFlagSet(&options{}) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return run(ctx, args, stdout, stderr)
		},
	}})
}

// The spellings, and files: a grid run's -report is not its
// -reference.
func TestRefusedCommandLines(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.json")
	if err := os.WriteFile(ref, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-inprocess", "-reference", ref, "-size", "1e9"}, "-size 1e9: must be an integer between 1 and 4800"},
		{[]string{"-inprocess", "-reference", ref, "-maxiter", "1000000000"}, "-maxiter 1000000000: must be an integer between 1 and 300000"},
		{[]string{"-inprocess", "-reference", ref, "-size", "4800", "-maxiter", "300000"}, "more work than the paper's"},
		{[]string{"-reference", ref, "-report", ref}, "-reference " + ref + " and -report " + ref + " are the same file"},
		{[]string{"-reference", ref, "-report", filepath.Join(dir, ".", "ref.json")}, "are the same file"},
		{[]string{"-reference", ref, "-key", "k", "-key-file", "f"}, "-key and -key-file both give the key"},
	} {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		code := run(ctx, tt.args, &stdout, &stderr)
		if code != 2 || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}

// A grid run without a key is a bad command line (status 2, as in the
// other commands), and the flags the error names are esbag's own.
func TestNoKeyIsUsage(t *testing.T) {
	t.Setenv("ESGRID_KEY", "")
	ref := filepath.Join(t.TempDir(), "ref.json")
	if err := os.WriteFile(ref, []byte(`{"name":"mandel-1-10000-480","strips":1,"values":[1],"seconds":1,"ns_per_iter":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-strips", "1", "-reference", ref, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0"}, &stdout, &stderr)
	if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "use -key, -key-file or ESGRID_KEY") {
		t.Fatalf("exit %d, stderr %q; want 2 and one line naming -key", code, stderr.String())
	}
	fs := newFlagSet(&options{})
	for _, name := range []string{"key", "key-file", "key-file-insecure", "policy"} {
		if fs.Lookup(name) == nil {
			t.Errorf("esbag has no -%s", name)
		}
	}
}
