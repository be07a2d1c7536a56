package main

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag is bounded, and NaN, ±Inf, huge, negative and
// out-of-range values are refused with exit status 2 and one line,
// before any work.
func TestFlagBounds(t *testing.T) {
	flagxtest.Check(t, []flagxtest.Command{{
		Name:  "esrun",
		Flags: func() *flag.FlagSet { return newFlagSet(&options{}) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return run(ctx, args, stdout, stderr)
		},
	}})
}
