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
