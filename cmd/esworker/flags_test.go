package main

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx/flagxtest"
)

// Every numeric flag is bounded, and NaN, ±Inf, huge, negative and
// out-of-range values are refused with exit status 78 (a bad
// configuration, which the systemd unit does not restart) and one line,
// before any work.
func TestFlagBounds(t *testing.T) {
	flagxtest.Check(t, []flagxtest.Command{{
		Name:  "esworker",
		Flags: func() *flag.FlagSet { return newFlagSet(&options{}) },
		Run: func(args []string, stdout, stderr *bytes.Buffer) int {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return run(ctx, args, nil, stdout, stderr)
		},
		Status: exitConfig,
	}})
}
