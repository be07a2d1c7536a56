package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"regexp"
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

// A run's id is random and its name defaults to the problem and the
// id's first 8 hex digits; -run-name replaces the name only.
func TestRunIdentity(t *testing.T) {
	a, b := newMonitor(&options{metrics: "127.0.0.1:0", sched: "wq"}, "ridge"), newMonitor(&options{metrics: "127.0.0.1:0", sched: "wq"}, "ridge")
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(a.ID) || a.ID == b.ID {
		t.Errorf("run ids %q and %q: want 16 hex digits, each run its own", a.ID, b.ID)
	}
	if a.Name != "ridge-"+a.ID[:8] {
		t.Errorf("default run name %q for id %s", a.Name, a.ID)
	}
	if c := newMonitor(&options{metrics: "127.0.0.1:0", sched: "wq", runName: "lab-7"}, "ridge"); c.Name != "lab-7" || len(c.ID) != 16 {
		t.Errorf("-run-name lab-7: name %q, id %q", c.Name, c.ID)
	}
}
