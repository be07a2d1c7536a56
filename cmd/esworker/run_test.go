package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, nil, &out, &errb); code != 0 {
		t.Errorf("-h exits %d", code)
	}
	for _, want := range []string{"Usage: esworker", "-join", "-master", "-slowdown", "ESGRID_KEY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	t.Setenv(grid.KeyEnv, "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "bogus"},
		{[]string{}, "-join"},
		{[]string{"-join", "h", "-slots", "-1"}, "-slots"},
		{[]string{"-join", "h", "-slowdown", "0.5"}, "-slowdown"},
		{[]string{"-join", "h", "-slowdown", "NaN"}, "-slowdown"},
		{[]string{"-join", "h", "-delay", "-1s"}, "-delay"},
		{[]string{"-join", "h", "-delay", "soon"}, "delay"},
		{[]string{"-join", "h", "-key", "k", "-key-file", "f"}, "-key and -key-file both give the key"},
		{[]string{"-master", "nohost"}, "-master"},
		{[]string{"-join", "h", "stray"}, "stray"},
		{[]string{"-join", "h"}, "no cluster key"},
		{[]string{"-join", "h", "-key-file", "/does/not/exist"}, "key file"},
		{[]string{"-join", "h", "-metrics-linger", "1s"}, "-metrics-linger needs -metrics"},
		{[]string{"-join", "h", "-metrics", ":0", "-metrics-linger", "-1s"}, "-metrics-linger"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, nil, &out, &errb)
		msg := errb.String()
		if code != exitConfig || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exitConfig (78) and one line naming %q", c.args, code, msg, c.want)
		}
	}
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// startRun runs esworker with args until ctx ends or drain is closed (its
// first signal), and returns drain, the channel its exit status comes on,
// and its standard error.
func startRun(ctx context.Context, args ...string) (drain chan struct{}, code chan int, stderr *syncBuffer) {
	drain, code, stderr = make(chan struct{}), make(chan int, 1), new(syncBuffer)
	go func() { code <- run(ctx, args, drain, new(bytes.Buffer), stderr) }()
	return drain, code, stderr
}

// listenLoopback is a listener on 127.0.0.1, a port of the system's
// choosing, for a test that plays the master; it closes when the test
// ends.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// acceptWorker plays the master for the next connection to ln: its
// handshake with the test key, welcomed to spec. The connection closes
// when the test ends.
func acceptWorker(ctx context.Context, t *testing.T, ln net.Listener, spec grid.ProblemSpec) (*grid.Conn, *grid.Hello) {
	t.Helper()
	key, _ := grid.NewKey(testSecret)
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, h, err := grid.Accept(ctx, nc, grid.AcceptConfig{
		Key:     key,
		Welcome: func(*grid.Hello) (int32, grid.ProblemSpec, error) { return 1, spec, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-c.Done() })
	return c, h
}

// esworker against a master on loopback: it evaluates a registered
// problem, and drains on the first signal.
func TestEvaluatesAndDrains(t *testing.T) {
	ln := listenLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain, code, _ := startRun(ctx, "-master", ln.Addr().String(), "-key", testSecret, "-slots", "1", "-name", "lab-9")
	c, h := acceptWorker(ctx, t, ln, grid.ProblemSpec{Name: "sphere", Dim: 2})
	if h.Name != "lab-9" || h.Slots != 1 {
		t.Errorf("hello %+v", h)
	}
	msgs := make(chan grid.Message, 10)
	c.Start(func(m grid.Message) { msgs <- m })
	c.Send(&grid.Tasks{Gen: 0, Items: []grid.Task{{ID: 0, X: []float64{3, 4}}}})
	next := func() grid.Message {
		select {
		case m := <-msgs:
			return m
		case <-time.After(time.Minute):
			t.Fatal("no message from esworker")
			return nil
		}
	}
	if rs, ok := next().(*grid.Results); !ok || rs.Items[0].F != 25 {
		t.Fatalf("sphere(3,4): %+v", rs)
	}
	close(drain)
	if d, ok := next().(*grid.Drain); !ok || len(d.Returned) != 0 {
		t.Errorf("drain: %+v", d)
	}
	select {
	case got := <-code:
		if got != 0 {
			t.Errorf("exit %d after drain", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("esworker did not exit after draining")
	}
}

// A key file that others may read is refused in one line that says how
// to fix it; -key-file-insecure, on the command line or in the -config
// file, accepts it.
func TestKeyFileOpenToOthers(t *testing.T) {
	t.Setenv(grid.KeyEnv, "")
	dir := t.TempDir()
	secret, err := grid.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key := writeFile(t, dir, "key", secret+"\n", 0o644)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-join", "h", "-key-file", key}, nil, &out, &errb)
	if msg := errb.String(); code != exitConfig || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "chmod 600 "+key) ||
		!strings.Contains(msg, "-"+grid.InsecureKeyFileFlag) || strings.Contains(msg, secret) {
		t.Errorf("exit %d, stderr %q; want %d and one line saying chmod 600 %s", code, msg, exitConfig, key)
	}
	for _, args := range [][]string{
		{"-join", "h", "-key-file", key, "-" + grid.InsecureKeyFileFlag},
		{"-config", writeFile(t, dir, "w.json", `{"join": "h", "key_file": "key", "key_file_insecure": true}`, 0o600)},
	} {
		o, err := parseOptions(args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := grid.LoadKey(o.key, o.keyFile, o.keyAny); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// Under -log-json a refusal after the flags are read is one JSON record,
// as every other line on stderr.
func TestRefusalUnderLogJSON(t *testing.T) {
	t.Setenv(grid.KeyEnv, "")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-log-json", "-join", "h"}, nil, &out, &errb)
	var r map[string]any
	if err := json.Unmarshal(errb.Bytes(), &r); code != exitConfig || err != nil || r["level"] != "ERROR" || !strings.Contains(fmt.Sprint(r["err"]), "no cluster key") {
		t.Errorf("exit %d, stderr %q; want exitConfig and one JSON record naming the missing key", code, errb.String())
	}
}
