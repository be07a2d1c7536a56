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
		{[]string{"-slots", "100000"}, "-slots 100000: must be an integer between 0 and 65536"},
		{[]string{"-slots", "9223372036854775807"}, "-slots 9223372036854775807: must be an integer between 0 and 65536"},
		{[]string{"-slots", "1e9"}, "-slots 1e9: must be an integer between 0 and 65536"},
		{[]string{"-slots", "-1"}, "-slots -1: must be an integer between 0 and 65536"},
		{[]string{"-slowdown", "NaN"}, "-slowdown NaN: must be a number between 1 and 1000000"},
		{[]string{"-slowdown", "Inf"}, "-slowdown Inf: must be a number between 1 and 1000000"},
		{[]string{"-slowdown", "-Inf"}, "-slowdown -Inf: must be a number between 1 and 1000000"},
		{[]string{"-slowdown", "1e7"}, "-slowdown 1e7: must be a number between 1 and 1000000"},
		{[]string{"-slowdown", "0"}, "-slowdown 0: must be a number between 1 and 1000000"},
		{[]string{"-delay", "-1ns"}, "-delay -1ns: must be a duration between 0s and 10s"},
		{[]string{"-delay", "1h"}, "-delay 1h: must be a duration between 0s and 10s"},
		{[]string{"-delay", "2562048h"}, "-delay 2562048h: must be a duration between 0s and 10s"},
		{[]string{"-gossip", "0.0.0.0:99999"}, `port "99999" is not a number in [0, 65535]`},
		{[]string{"-gossip", "0.0.0.0:-1"}, "is not a number in [0, 65535]"},
		{[]string{"-gossip", "localhost:0"}, "the host must be an IP address"},
		{[]string{"-master", "127.0.0.1:0"}, `port "0" is not a number in [1, 65535]`},
		{[]string{"-master", "127.0.0.1:65536"}, "is not a number in [1, 65535]"},
		{[]string{"-join", "127.0.0.1:70000"}, `-join "127.0.0.1:70000": port "70000"`},
		{[]string{"-join", ","}, `-join "," names no address`},
		{[]string{"-key-file", "/dev/zero"}, "larger than 4096 bytes"},
		{[]string{"-mem-share", "0"}, "-mem-share 0: must be a number between 0.01 and 0.9"},
		{[]string{"-mem-share", "0.95"}, "-mem-share 0.95: must be a number between 0.01 and 0.9"},
		{[]string{"-mem-share", "NaN"}, "-mem-share NaN: must be a number between 0.01 and 0.9"},
		{[]string{"-mem-share", "-Inf"}, "-mem-share -Inf: must be a number between 0.01 and 0.9"},
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
