package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/bag"
)

// -inprocess writes the reference a grid run reads.
func TestInProcessWritesReference(t *testing.T) {
	ref := filepath.Join(t.TempDir(), "ref.json")
	var out bytes.Buffer
	code := run(context.Background(), []string{"-inprocess", "-strips", "12", "-size", "48", "-maxiter", "200", "-reference", ref}, &out, &out)
	if code != 0 || !strings.Contains(out.String(), "mandel-12-200-48: 12 strips") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if _, err := bag.ReadReference(ref, bag.Name(12, 200, 48), 12); err != nil {
		t.Fatal(err)
	}
}

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-strips", "40"}, &out, &out); code != 2 || !strings.Contains(out.String(), "-reference") {
		t.Errorf("no reference: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"-plugins", "-strips", "40,120"}, &out, &out); code != 0 || !strings.Contains(out.String(), "-plugin mandel-40-10000-480=") {
		t.Errorf("-plugins: exit %d, %q", code, out.String())
	}
}
