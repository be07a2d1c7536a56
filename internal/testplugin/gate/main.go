// Command gate is a test plugin whose evaluations a test can hold: the
// built-in Rastrigin function served as the plugin "gate" for any
// dimension, its values equal to the built-in's, bit for bit. The
// environment, which a worker passes on to its plugins, sets the gate:
//
//	ESGRID_TEST_GATE=DIR      the gate: an evaluation it holds creates
//	                          DIR/held and waits, until DIR/open exists
//	                          or it is cancelled
//	ESGRID_TEST_GATE_AFTER=N  hold every evaluation after the first N
//	                          made by all the processes given DIR
//	                          (counted in DIR/evals, a byte each)
//	ESGRID_TEST_GATE_AGAIN=1  hold every evaluation of a process whose
//	                          worker (its parent) had another process
//	                          evaluate before: a one-slot worker's later
//	                          session, once moved to another master or
//	                          reconnected
//
// So a run cannot get past the point the gate holds until the test, told
// by DIR/held that the run is held there, has done what it must and
// opened the gate. Without ESGRID_TEST_GATE nothing is held.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// Name is the problem's name.
const Name = "gate"

func main() {
	p, err := plugin.PerDim(Name, 1, func(dim int) (problems.Problem, error) {
		return problems.New("rastrigin", dim)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gate:", err)
		os.Exit(1)
	}
	g := &gated{Problem: p, dir: os.Getenv("ESGRID_TEST_GATE"), again: os.Getenv("ESGRID_TEST_GATE_AGAIN") == "1"}
	if after := os.Getenv("ESGRID_TEST_GATE_AFTER"); after != "" {
		if g.after, err = strconv.ParseInt(after, 10, 64); err != nil {
			fmt.Fprintln(os.Stderr, "gate: ESGRID_TEST_GATE_AFTER:", err)
			os.Exit(1)
		}
	}
	plugin.Main(g, plugin.Dims(1, 0))
}

// gated is the problem behind the gate in dir.
type gated struct {
	problems.Problem
	dir   string
	after int64 // 0: no count
	again bool

	once  sync.Once
	later bool // this process's worker had another evaluate before it
}

func (g *gated) Eval(ctx context.Context, x []float64) (float64, error) {
	if g.dir != "" {
		if err := g.pass(ctx); err != nil {
			return 0, err
		}
	}
	return g.Problem.Eval(ctx, x)
}

// pass holds this evaluation, if the gate says so, until it opens.
func (g *gated) pass(ctx context.Context) error {
	hold := false
	if g.after > 0 {
		k, err := g.count()
		if err != nil {
			return err
		}
		hold = k > g.after
	}
	if g.again {
		g.once.Do(func() { g.later = g.evaluatedBefore() })
		hold = hold || g.later
	}
	if !hold {
		return nil
	}
	open := filepath.Join(g.dir, "open")
	if err := os.WriteFile(filepath.Join(g.dir, "held"), nil, 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(open); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if _, err := os.Stat(g.dir); err != nil {
			return fmt.Errorf("the gate is gone: %w", err) // the test is over
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// count appends this evaluation's byte to DIR/evals and returns its
// place among all the evaluations counted there: an append is atomic, and
// leaves the file's offset just past its own byte.
func (g *gated) count() (int64, error) {
	f, err := os.OpenFile(filepath.Join(g.dir, "evals"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write([]byte{1}); err != nil {
		return 0, err
	}
	return f.Seek(0, io.SeekCurrent)
}

// evaluatedBefore says whether another process of this one's worker
// evaluated before: DIR/worker-PPID names the first that did.
func (g *gated) evaluatedBefore() bool {
	mark := filepath.Join(g.dir, fmt.Sprintf("worker-%d", os.Getppid()))
	f, err := os.OpenFile(mark, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return errors.Is(err, os.ErrExist)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	f.Close()
	return false
}
