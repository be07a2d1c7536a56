package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// An old name works, and its notice is a warning record under -log-json,
// like every other line on stderr.
func TestOldNameNotice(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-sched", "wq", "-log-json", "-version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	var rec map[string]any
	if err := json.Unmarshal(stderr.Bytes(), &rec); err != nil || rec["level"] != "WARN" || rec["notice"] != "-sched is deprecated, use -policy" {
		t.Errorf("stderr %q (%v): want one JSON warning with the notice", stderr.String(), err)
	}
	o, err := parseOptions([]string{"-sched", "wq"})
	if err != nil || o.sched != "wq" || !o.set["policy"] {
		t.Errorf("-sched wq: %+v, %v", o, err)
	}
}
