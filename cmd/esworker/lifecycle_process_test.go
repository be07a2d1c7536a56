package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/testplugin"
)

// A plugin that passes esworker's start-up check and then fails at every
// start: the worker refuses each session with the plugin's reason, the
// master's run fails with it (each worker's reason, not a wait for
// ever), the plugin is started on its back-off schedule only (at least
// 1 s, 2 s, 4 s … apart, whatever the sessions in between), the worker
// logs the failure once, and exits at its -idle-timeout having had no
// working session, with status 0: not a failure, which a service restarts.
func TestProcessPluginThatNeverStarts(t *testing.T) {
	bin := buildEsworker(t)
	dir := t.TempDir()
	good := testplugin.MustBuild(t, dir)
	starts := filepath.Join(dir, "starts")
	flaky := writeFile(t, dir, "flaky", `#!/bin/sh
date +%s.%N >> '`+starts+`'
if [ "$(wc -l < '`+starts+`')" -le 1 ]; then exec '`+good+`'; fi
echo 'ImportError: no module named simulator' >&2
exit 1
`, 0o755)
	key, _ := grid.NewKey(testSecret)
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Problem: grid.ProblemSpec{Name: "rastrigin-go", Dim: 3},
		FirstDeadline: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-master", m.Addr(), "-name", "lab-7", "-slots", "1", "-once", "-idle-timeout", "3s",
		"-plugin", "rastrigin-go="+flaky)
	cmd.Env = append(os.Environ(), grid.KeyEnv+"="+testSecret)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	_, err = m.Evaluate(ctx, 0, [][]float64{{1, 2, 3}})
	if !errors.Is(err, grid.ErrNoWorkerCan) || !strings.Contains(err.Error(), "lab-7: worker: cannot build problem") ||
		!strings.Contains(err.Error(), "ImportError") {
		t.Errorf("Evaluate = %v, want ErrNoWorkerCan with the worker's reason", err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("esworker exited with %v, want status 0 (an idle timeout is no failure)", err)
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		<-exited
		t.Fatalf("esworker did not exit at its -idle-timeout; its log:\n%s", stderr.String())
	}
	log := stderr.String()
	if !strings.Contains(log, "no working session with a master for the idle timeout") {
		t.Errorf("esworker did not say why it exited; its log:\n%s", log)
	}
	// Start 1 is the check; 2 fails first; then each waits twice as
	// long as the one before, from 1 s.
	b, _ := os.ReadFile(starts)
	var at []float64
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatal(err)
		}
		at = append(at, v)
	}
	for k := 2; k < len(at); k++ {
		if gap, want := at[k]-at[k-1], float64(int(1)<<(k-2)); gap < want {
			t.Errorf("plugin start %d came %.3fs after the one before, want at least %vs (starts at %v)", k+1, gap, want, at)
		}
	}
	if len(at) < 2 {
		t.Errorf("the plugin was started %d times, want the check and at least one session's", len(at))
	}
	for _, line := range []string{`msg="refusing the master's problem"`, `msg="plugin failed to start; further starts back off"`} {
		if n := strings.Count(log, line); n != 1 {
			t.Errorf("%d lines %s, want 1; the log:\n%s", n, line, log)
		}
	}
}
