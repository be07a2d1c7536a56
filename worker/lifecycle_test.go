package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// cannotBuild is a Build that always fails, as a plugin that never starts.
func cannotBuild(grid.ProblemSpec) (problems.Problem, error) {
	return nil, errors.New("plugin sim (slot 1): plugin failed to start")
}

// drainConns takes every connection the fake master accepts until ctx ends.
func drainConns(ctx context.Context, fm *fakeMaster) {
	for {
		select {
		case <-fm.conns:
		case <-fm.errs:
		case <-ctx.Done():
			return
		}
	}
}

// A session refused at once (the problem does not build) does not reset
// the backoff: the agent redials a master it cannot serve on the backoff
// schedule (1, 2, 4, 8, 16, 16 ms …), not every MinBackoff, and says so
// in one line, not one a session, though the reason's figures change (a
// plugin's back-off counting down).
func TestRefusedSessionsBackOff(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "sim", Dim: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := new(logBuffer)
	var builds atomic.Int64
	backingOff := func(grid.ProblemSpec) (problems.Problem, error) {
		n := builds.Add(1)
		return nil, fmt.Errorf("plugin sim (slot 1): not restarted for another %dms after %d failed start(s)", 1000-n, n)
	}
	_, wait := startAgent(t, ctx, Config{
		Master: fm.addr(), Key: key, Name: "w", Slots: 1, Build: backingOff,
		MinBackoff: time.Millisecond, MaxBackoff: 16 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	const sessions = 8
	for range sessions {
		mc := fm.next()
		<-mc.c.Done()
		var rej *grid.RejectError
		if !errors.As(mc.c.Err(), &rej) || !strings.Contains(rej.Reason, "cannot build problem") {
			t.Fatalf("the master's connection ended with %v, want the worker's refusal", mc.c.Err())
		}
	}
	cancel()
	wait()
	var got []string
	for _, m := range regexp.MustCompile(`msg="next connection attempt" worker=w retry_in=(\S+)`).FindAllStringSubmatch(log.String(), -1) {
		got = append(got, m[1])
	}
	want := []string{"1ms", "2ms", "4ms", "8ms", "16ms", "16ms", "16ms"}
	if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("waits between refused sessions %v, want %v first", got, want)
	}
	if n := strings.Count(log.String(), `msg="refusing the master's problem"`); n != 1 {
		t.Errorf("%d lines for %d identical refusals, want 1; log:\n%s", n, sessions, log)
	}
}

// -idle-timeout counts time without a working session: an agent that
// reaches its master again and again but cannot build the problem exits
// with ErrIdle.
func TestIdleTimeoutCountsRefusedSessions(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "sim", Dim: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		drainConns(ctx, fm)
	}()
	err := Run(ctx, Config{
		Master: fm.addr(), Key: key, Name: "w", Slots: 1, Build: cannotBuild,
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, IdleTimeout: 200 * time.Millisecond,
		Logger: logger(new(logBuffer)),
	})
	cancel()
	<-drained
	if !errors.Is(err, ErrIdle) {
		t.Errorf("Run = %v, want ErrIdle", err)
	}
}

// Every start of a plugin in a session waits the start timeout given to
// PluginBuild (esworker's -plugin-start-timeout, as its start-up check),
// and a plugin that fails to start is not started again at each session
// while its back-off lasts: the sessions are refused at once.
func TestPluginBuildStartTimeoutAndBackOff(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	mute := filepath.Join(dir, "mute")
	if err := os.WriteFile(mute, []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(dir, "starts")
	dies := filepath.Join(dir, "dies")
	if err := os.WriteFile(dies, []byte("#!/bin/sh\necho start >> '"+starts+"'\necho 'no licence' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := plugin.NewCatalog(plugin.Entry{Name: "mute", Path: mute}, plugin.Entry{Name: "dies", Path: dies})
	if err != nil {
		t.Fatal(err)
	}
	build := PluginBuild(cat, PluginOptions{Slots: 1, StartTimeout: 300 * time.Millisecond, RetryMin: time.Hour, Logger: logger(io.Discard)})
	if _, err := build(grid.ProblemSpec{Name: "mute", Dim: 2}); err == nil || !strings.Contains(err.Error(), "no hello within 300ms") {
		t.Errorf("Build(mute) = %v, want no hello within 300ms", err)
	}
	for i := range 5 {
		_, err := build(grid.ProblemSpec{Name: "dies", Dim: 2})
		if !errors.Is(err, plugin.ErrStart) || (i > 0) != errors.Is(err, plugin.ErrBackingOff) {
			t.Errorf("session %d: Build = %v, want ErrStart (backing off after the first)", i+1, err)
		}
	}
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "start") != 1 {
		t.Errorf("%d starts for 5 sessions within the back-off, want 1", strings.Count(string(b), "start"))
	}
}
