package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPluginName(t *testing.T) {
	name := nameOf(40, 10000, 480)
	if name != "mandel-40-10000-480" {
		t.Fatalf("name %q", name)
	}
	m, err := parseName(name)
	if err != nil || m.Strips != 40 || m.MaxIter != 10000 || m.Width != 480 || m.Height != 480 || m.XMin != -0.6 {
		t.Fatalf("parse: %+v, %v", m, err)
	}
	for _, bad := range []string{"mandel-40-10000", "mandelbrot-1-2-3", "mandel-0-10-10", "mandel-20-10-10", "mandel-x-1-1"} {
		if _, err := parseName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestReferenceAndPrediction: the reference holds each strip's exact value
// (a tiny image, computed twice the same), and the prediction simulates
// the bag for measured workers.
func TestReferenceAndPrediction(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.json")
	var out bytes.Buffer
	code := run(context.Background(), []string{"-inprocess", "-strips", "12", "-size", "48", "-maxiter", "200", "-reference", ref}, &out, &out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	m := bagOf(12, 200, 48)
	for i, v := range r.Values {
		want, err := m.Strip(context.Background(), i)
		if err != nil || v != want {
			t.Fatalf("strip %d: %d, want %d (%v)", i, v, want, err)
		}
	}
	o := &options{strips: 12, maxIter: 200, size: 48, policy: "wq", noise: 0}
	// Two workers, one twice the other's speed: the bag of 12 takes about
	// the work over 3 (speed units), and the floor is below it.
	ws := []WorkerFigures{{Name: "a", Slots: 1, Speed: 1}, {Name: "b", Slots: 1, Speed: 2}}
	total, floor, err := predict(o, &r, ws)
	if err != nil {
		t.Fatal(err)
	}
	var work float64
	for i := range r.Values {
		work += r.grain(i).Seconds()
	}
	if !(floor > 0 && floor <= total && total >= work/3) {
		t.Errorf("predicted %v, floor %v, work %v", total, floor, work)
	}
}

func TestImbalance(t *testing.T) {
	ws := []WorkerFigures{{Slots: 1, Compute: 4}, {Slots: 2, Compute: 2}}
	// Per slot: 4, 1, 1 (mean 2): 4/2.
	if got := imbalance(ws); got != 2 {
		t.Errorf("imbalance %v, want 2", got)
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
