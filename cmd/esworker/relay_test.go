package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
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

// esworker -relay-only drains on the first signal as any esworker does:
// it stops the relay and exits with status 0, logging no error. (It
// exited 1, "the relay stopped" err="context canceled": the soak's relay
// run without -once, stopped with SIGTERM at the run's end.)
func TestRelayOnlyDrainsWithStatus0(t *testing.T) {
	// An upstream that never answers: the relay waits for it.
	ln := listenLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain, code, stderr := startRun(ctx, "-relay", "127.0.0.1:0", "-relay-only", "-master", ln.Addr().String(), "-key", testSecret, "-name", "r1")
	for !strings.Contains(stderr.String(), "relay listening") {
		select {
		case got := <-code:
			t.Fatalf("exit %d before the relay listened:\n%s", got, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(drain)
	select {
	case got := <-code:
		if got != 0 || strings.Contains(stderr.String(), "level=ERROR") {
			t.Errorf("exit %d after drain, want 0 and no error:\n%s", got, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the relay did not exit after draining")
	}
}

// String is what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// -relay-max-buffered sets the relay's byte budget (RelayConfig.MaxBuffered)
// in MiB, 256 by default as the library's; it needs -relay, and a value
// out of its range is a usage error that says the range.
func TestRelayMaxBufferedFlag(t *testing.T) {
	o, err := parseOptions([]string{"-relay", "127.0.0.1:0", "-master", "127.0.0.1:7947", "-relay-max-buffered", "32"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.relayConfig(nil, nil).MaxBuffered; got != 32<<20 {
		t.Errorf("-relay-max-buffered 32: MaxBuffered %d, want %d", got, 32<<20)
	}
	o, err = parseOptions([]string{"-relay", "127.0.0.1:0", "-master", "127.0.0.1:7947"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.relayConfig(nil, nil).MaxBuffered; got != grid.DefaultRelayBuffered {
		t.Errorf("default: MaxBuffered %d, want %d", got, grid.DefaultRelayBuffered)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-master", "127.0.0.1:7947", "-relay-max-buffered", "32"}, "-relay-max-buffered needs -relay HOST:PORT"},
		{[]string{"-relay", "127.0.0.1:0", "-master", "127.0.0.1:7947", "-relay-max-buffered", "0"}, "must be an integer between 1 and 65536"},
		{[]string{"-relay", "127.0.0.1:0", "-master", "127.0.0.1:7947", "-relay-max-buffered", "256MiB"}, "must be an integer between 1 and 65536"},
	} {
		_, err := parseOptions(tc.args)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

// A working relay with -once whose master ends the run before its own
// agent's handshake has gone through ends that agent too: esworker exits
// 0, the run over. (The agent looked for its relay, gone, for ever: the
// soak, seed 94000044, a relay restarted at its address that heard the
// end at once.)
func TestRelayRunOverEndsItsAgent(t *testing.T) {
	ln := listenLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, code, stderr := startRun(ctx, "-relay", "127.0.0.1:0", "-once", "-master", ln.Addr().String(), "-key", testSecret, "-name", "r1", "-slots", "1")
	// The relay's link; the agent's streams on it go unanswered.
	up, _ := acceptWorker(ctx, t, ln, grid.ProblemSpec{Name: "sphere", Dim: 2})
	up.Start(func(grid.Message) {})
	up.SendAndClose(&grid.Shutdown{Reason: "run over"})
	select {
	case got := <-code:
		if got != 0 || !strings.Contains(stderr.String(), "the run is over") {
			t.Errorf("exit %d, want 0 and the run over:\n%s", got, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("esworker still running a minute after its relay heard the end:\n%s", stderr.String())
	}
}
