package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid"
)

// esrun -genkey FILE writes a fresh key readable by its owner only, says
// so, and never replaces a file; with any other flag it is a usage error.
func TestGenkey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "K")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-genkey", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), path) {
		t.Errorf("stdout %q does not name the file", out.String())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := grid.LoadKey("", path, false); err != nil {
		t.Errorf("the key written does not load: %v", err)
	}
	before, _ := os.ReadFile(path)
	errb.Reset()
	if code := run(context.Background(), []string{"-genkey", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "exists") {
		t.Errorf("second -genkey: exit %d, %q", code, errb.String())
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the key file was replaced")
	}
	for _, args := range [][]string{
		{"-genkey", filepath.Join(t.TempDir(), "K"), "-gens", "3"},
		{"-verify", "1.5"},
		{"-inprocess", "-verify", "0.5"},
	} {
		errb.Reset()
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

// A weak key is refused before anything starts, saying how to make one.
func TestWeakKeyRefused(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-key", "s3cret", "-gens", "1"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "at least 24") || !strings.Contains(errb.String(), "-genkey") {
		t.Errorf("exit %d, %q", code, errb.String())
	}
}
