package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag is bounded, and NaN, ±Inf, huge, negative and
// out-of-range values are refused with exit status 2 and one line,
// before any work.
func TestFlagBounds(t *testing.T) {
	flagxtest.Check(t, []flagxtest.Command{{
		Name:  "esbench",
		Flags: func() *flag.FlagSet { var a, b string; return newFlagSet(&options{}, &a, &b) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return run(ctx, args, stdout, stderr)
		},
	}})
}

// -collapse follows one run: one -problem and one -dim, which default to
// the 30-D sphere; the table's default is the seven functions in 10 and 30
// dimensions, seeds -seed, -seed+1, ….
func TestProblemAndDimLists(t *testing.T) {
	o, err := parseOptions([]string{"-collapse"})
	if err != nil || o.problem != "sphere" || o.dim != 30 {
		t.Fatalf("-collapse: %+v, %v", o, err)
	}
	o, err = parseOptions([]string{"-seed", "5", "-trials", "3"})
	if err != nil || len(o.problems) != 7 || len(o.dims) != 2 || o.seed != 5 || o.seeds != 3 {
		t.Fatalf("the table: %+v, %v", o, err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-collapse", "-problem", "sphere,ellipsoid"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "give one -problem and one -dim") {
		t.Errorf("-collapse with two problems: exit %d, stderr %q", code, stderr.String())
	}
}
