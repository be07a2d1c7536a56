package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every numeric flag with a hostile value is a usage error: exit status exitConfig (78),
// one line on stderr, before the agent starts, and never a Go panic.
// -slots beyond what gossip metadata carries is refused here, not by the
// master.
func TestHostileFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-slots", "100000"}, "-slots must be ≤ 65536, got 100000"},
		{[]string{"-slots", "9223372036854775807"}, "-slots must be ≤ 65536"},
		{[]string{"-slots", "1e9"}, `invalid value "1e9" for flag -slots`},
		{[]string{"-slots", "-1"}, "-slots must be ≥ 0"},
		{[]string{"-slowdown", "NaN"}, "-slowdown must be in [1, 1e6]"},
		{[]string{"-slowdown", "Inf"}, "-slowdown must be in [1, 1e6]"},
		{[]string{"-slowdown", "-Inf"}, "-slowdown must be in [1, 1e6]"},
		{[]string{"-slowdown", "1e7"}, "-slowdown must be in [1, 1e6]"},
		{[]string{"-slowdown", "0"}, "-slowdown must be in [1, 1e6]"},
		{[]string{"-delay", "-1ns"}, "-delay must be ≥ 0"},
		{[]string{"-delay", "1h"}, "-delay must be ≤ 10s, got 1h0m0s"},
		{[]string{"-delay", "2562048h"}, `invalid value "2562048h" for flag -delay`},
		{[]string{"-gossip", "0.0.0.0:99999"}, `port "99999" is not a number in [0, 65535]`},
		{[]string{"-gossip", "0.0.0.0:-1"}, "is not a number in [0, 65535]"},
		{[]string{"-gossip", "localhost:0"}, "the host must be an IP address"},
		{[]string{"-master", "127.0.0.1:0"}, `port "0" is not a number in [1, 65535]`},
		{[]string{"-master", "127.0.0.1:65536"}, "is not a number in [1, 65535]"},
		{[]string{"-join", "127.0.0.1:70000"}, `-join "127.0.0.1:70000": port "70000"`},
		{[]string{"-join", ","}, `-join "," names no address`},
		{[]string{"-key-file", "/dev/zero"}, "larger than 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := tt.args
			if args[0] != "-join" {
				args = append([]string{"-join", "127.0.0.1:1"}, args...)
			}
			if !strings.HasPrefix(args[len(args)-2], "-key") {
				args = append(args, "-key", testSecret)
			}
			var out, errb bytes.Buffer
			code := run(context.Background(), args, nil, &out, &errb)
			stderr := errb.String()
			if code != exitConfig || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q; want exitConfig (78) and nothing", code, out.String())
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "esworker: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.want)
			}
			for _, bad := range []string{"goroutine", "panic"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr has %q", bad)
				}
			}
		})
	}
}
