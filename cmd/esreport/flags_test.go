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
		Name:   "esreport",
		Flags:  func() *flag.FlagSet { return newFlagSet(&options{}) },
		Prefix: []string{"run.json"},
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return run(ctx, args, stdout, stderr)
		},
	}})
}

// A picture is never drawn over the report it is drawn from, nor over
// the other picture.
func TestPictureIsNotTheReport(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "run.json")
	if err := os.WriteFile(rep, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.png")
	if err := os.Symlink(rep, link); err != nil {
		t.Skip(err)
	}
	for _, flag := range []string{"-png", "-svg"} {
		for _, pic := range []string{rep, filepath.Join(dir, "x", "..", "run.json"), link} {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{rep, flag, pic}, &stdout, &stderr)
			if code != 2 || stdout.Len() > 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "are the same file") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 2 and one line", flag, pic, code, stdout.String(), stderr.String())
			}
		}
	}
	// Nor are the two pictures one file.
	var stdout, stderr bytes.Buffer
	pic := filepath.Join(dir, "run.pic")
	if code := run(context.Background(), []string{rep, "-png", pic, "-svg", pic}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "are the same file") {
		t.Errorf("-png and -svg %s: exit %d, stderr %q; want 2", pic, code, stderr.String())
	}
	if b, _ := os.ReadFile(rep); string(b) != "{}" {
		t.Errorf("the report now holds %q", b)
	}
}
