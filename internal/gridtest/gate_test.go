package gridtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/testplugin"
)

// gate holds a run at a point until the test opens it, so that what the
// test does there lands in the run however late the test acts: the
// workers evaluate the plugin "gate" (Rastrigin, bit for bit;
// internal/testplugin/gate), given the gate's directory.
type gate struct {
	dir  string
	path string // the plugin's executable
	hold string // the environment variable that says what it holds
}

var (
	gateOnce sync.Once
	gatePath string
	gateErr  error
)

// gateAfter is a closed gate that holds every evaluation after the
// first n of the run.
func gateAfter(t *testing.T, n int) *gate {
	return newGate(t, "ESGRID_TEST_GATE_AFTER="+strconv.Itoa(n))
}

// gateAgain is a closed gate that holds every evaluation of a one-slot
// worker's later sessions: once it has been moved to another master (or
// reconnected), it evaluates nothing.
func gateAgain(t *testing.T) *gate { return newGate(t, "ESGRID_TEST_GATE_AGAIN=1") }

// newGate returns a closed gate that holds what hold says; it opens when
// the test ends, so that no plugin process is left waiting.
func newGate(t *testing.T, hold string) *gate {
	t.Helper()
	binaries(t) // makes binDir, and skips under -short
	gateOnce.Do(func() { gatePath, gateErr = testplugin.BuildPkg(binDir, testplugin.Gate) })
	if errors.Is(gateErr, testplugin.ErrNoGoTool) {
		t.Skip(gateErr)
	}
	if gateErr != nil {
		t.Fatal(gateErr)
	}
	g := &gate{dir: t.TempDir(), path: gatePath, hold: hold}
	t.Cleanup(func() { g.open(t) })
	return g
}

// problem are esrun's flags for the problem the gate holds.
func (g *gate) problem() []string { return []string{"-problem", "gate", "-plugin", "gate=" + g.path} }

// workerArgs are the flags of a worker that evaluates behind the gate.
func (g *gate) workerArgs() []string { return []string{"-plugin", "gate=" + g.path} }

// env is the environment of a worker whose evaluations the gate holds.
func (g *gate) env() []string { return []string{"ESGRID_TEST_GATE=" + g.dir, g.hold} }

// held waits until an evaluation waits at the gate: the run can go no
// further until the gate opens.
func (g *gate) held(ctx context.Context) error {
	for {
		if _, err := os.Stat(filepath.Join(g.dir, "held")); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no evaluation held at the gate: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// open lets the held evaluations, and all later ones, go on.
func (g *gate) open(t *testing.T) {
	if err := os.WriteFile(filepath.Join(g.dir, "open"), nil, 0o644); err != nil {
		t.Errorf("opening the gate: %v", err)
	}
}
