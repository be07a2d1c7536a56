package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/esgrid/esgrid/problems/plugin"
)

// The test binary doubles as a plugin: run with ESWORKER_TEST_PLUGIN set,
// it serves the gated problem instead of running tests (gatedPlugin).
func TestMain(m *testing.M) {
	if os.Getenv("ESWORKER_TEST_PLUGIN") == "gated" {
		plugin.Main(gated{events: os.Getenv("ESWORKER_TEST_EVENTS"), gate: os.Getenv("ESWORKER_TEST_GATE")}, plugin.Dims(1, 0))
	}
	os.Exit(m.Run())
}

// gated is the sphere, whose evaluations say that they run (a line in
// the events file) and then wait until the gate file exists: a test
// decides when a running evaluation ends. It ignores cancels.
type gated struct{ events, gate string }

func (gated) Name() string                   { return "gated" }
func (gated) Bounds() (lower, upper float64) { return -1, 1 }

func (g gated) Eval(_ context.Context, x []float64) (float64, error) {
	if f, err := os.OpenFile(g.events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintf(f, "evaluating %d\n", os.Getpid())
		f.Close()
	}
	for {
		if _, err := os.Stat(g.gate); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var s float64
	for _, v := range x {
		s += v * v
	}
	return s, nil
}

// gatedPlugin writes a plugin "gated" into a directory of its own: a
// script that leaves a child in its process group (a sleep, as a
// simulator's helper would be) and one that leaves it by setsid (as a
// daemonising library does; where there is a setsid command), and
// becomes the test binary serving the gated problem. It returns the script, the events file and the gate.
func gatedPlugin(t *testing.T) (path, events, gate string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	events, gate = filepath.Join(dir, "events"), filepath.Join(dir, "gate")
	return writeGated(t, dir, self, events, gate), events, gate
}

// writeGated writes the gated plugin's script into dir: it runs exe (this
// test binary) with the events file and the gate given.
func writeGated(t *testing.T, dir, exe, events, gate string) string {
	return writeFile(t, dir, "gated", fmt.Sprintf(`#!/bin/sh
sleep 3600 </dev/null >/dev/null 2>&1 &
if command -v setsid >/dev/null; then setsid sleep 3601 </dev/null >/dev/null 2>&1 & fi
export ESWORKER_TEST_PLUGIN=gated ESWORKER_TEST_EVENTS='%s' ESWORKER_TEST_GATE='%s'
exec '%s'
`, events, gate, exe), 0o755)
}
