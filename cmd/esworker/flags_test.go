package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid"
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

// The gossip address is loopback when the master is on this machine,
// every interface when it is on another (its gossip must reach this
// worker), and what -gossip says when given.
func TestGossipDefault(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-join", "127.0.0.1"}, "127.0.0.1:0"},
		{[]string{"-join", "localhost:7946,[::1]:7946"}, "127.0.0.1:0"},
		{[]string{"-master", "127.0.0.1:7947"}, "127.0.0.1:0"},
		{[]string{"-join", "127.0.0.1", "-master", "10.0.0.1:7947"}, "0.0.0.0:0"},
		{[]string{"-join", "master.lab"}, "0.0.0.0:0"},
		{[]string{"-join", "127.0.0.1", "-gossip", "0.0.0.0:7946"}, "0.0.0.0:7946"},
	} {
		o, err := parseOptions(tt.args)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
		} else if o.gossip != tt.want {
			t.Errorf("%v: gossip %s, want %s", tt.args, o.gossip, tt.want)
		}
	}
}

// A name longer than a master takes is refused at start, from the flag
// or the -config file: the old esworker started, and every connection was
// refused ("cannot reach the master ... rejected by peer: worker name of
// 300 bytes, at most 255") and retried for ever.
func TestNameTooLong(t *testing.T) {
	long := strings.Repeat("n", grid.MaxWorkerName+1)
	if _, err := parseOptions([]string{"-join", "127.0.0.1", "-name", long[:grid.MaxWorkerName]}); err != nil {
		t.Errorf("a name of %d bytes: %v", grid.MaxWorkerName, err)
	}
	config := filepath.Join(t.TempDir(), "worker.json")
	if err := os.WriteFile(config, []byte(`{"join": "127.0.0.1", "name": "`+long+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	want := "-name: 256 bytes, more than the 255 a master takes"
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a command line that is accepted runs no further
	for _, args := range [][]string{{"-join", "127.0.0.1", "-key", testSecret, "-name", long}, {"-config", config, "-key", testSecret}} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, nil, &stdout, &stderr)
		if code != exitConfig || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%.30q: exit %d, stderr %q; want %d and %q", args, code, stderr.String(), exitConfig, want)
		}
	}
}
