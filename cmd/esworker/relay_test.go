package main

import (
	"errors"
	"testing"
)

func TestRelayFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-master", "127.0.0.1:7947"}, true},
		{[]string{"-master", "10.0.0.1:7948,127.0.0.1:7947"}, true},
		{[]string{"-master", "10.0.0.1:7948,nope"}, false},
		{[]string{"-master", ","}, false},
		{[]string{"-relay", "0.0.0.0:7948", "-join", "127.0.0.1"}, true},
		{[]string{"-relay", "127.0.0.1:0", "-relay-only", "-master", "127.0.0.1:7947"}, true},
		{[]string{"-relay", "127.0.0.1", "-master", "127.0.0.1:7947"}, false},
		{[]string{"-relay-only", "-master", "127.0.0.1:7947"}, false},
	} {
		_, err := parseOptions(tc.args)
		var ue *usageError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case !tc.ok && !errors.As(err, &ue):
			t.Errorf("%q: %v, want a usage error", tc.args, err)
		}
	}
}
