package gridtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the esrun and esworker binaries built for this test binary;
// TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchMasterEnv); spec != "" {
		os.Exit(benchMaster(spec)) // BenchmarkMasterAgents's master process
	}
	if spec := os.Getenv(floorServerEnv); spec != "" {
		os.Exit(floorServerMain(spec)) // BenchmarkMasterFloor's server process
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// binaries builds cmd/esrun and cmd/esworker, once per test binary, and
// returns their paths. It skips the test under -short.
func binaries(t *testing.T) (esrun, esworker string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds esrun and esworker and runs them as processes")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "esgrid-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		for _, name := range []string{"esrun", "esworker"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/esgrid/esgrid/cmd/"+name)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %w\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "esrun"), filepath.Join(binDir, "esworker")
}

// output collects what a process writes to one stream and lets a test
// wait for a pattern in it.
type output struct {
	mu      sync.Mutex
	b       []byte
	changed chan struct{} // closed and replaced on every write
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, p...)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

// String is everything written so far.
func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.b)
}

// waitFor waits until re matches the output and returns the submatches.
// It gives up when ctx is done or when exited closes (the process is gone
// and will write nothing more).
func (o *output) waitFor(ctx context.Context, re *regexp.Regexp, exited <-chan struct{}) ([]string, error) {
	for {
		o.mu.Lock()
		m := re.FindStringSubmatch(string(o.b))
		changed := o.changed
		o.mu.Unlock()
		if m != nil {
			return m, nil
		}
		select {
		case <-changed:
		case <-exited:
			// The process may have written its last bytes just now.
			if m := re.FindStringSubmatch(o.String()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("process exited without writing /%v/", re)
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for /%v/: %w", re, ctx.Err())
		}
	}
}

// tail is the last n lines of the output.
func (o *output) tail(n int) string {
	lines := strings.Split(strings.TrimRight(o.String(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines ...]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// proc is one esrun or esworker process started by a test.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{} // closed once the process has exited
	err            error         // cmd.Wait's result, once done
}

// start runs bin with args and env (added to this process's environment,
// without any ESGRID_KEY of its own). The process is killed, if still
// running, when the test ends; if the test failed, the tails of its
// outputs are logged.
func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ESGRID_KEY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	p := &proc{name: name, cmd: cmd, stdout: newOutput(), stderr: newOutput(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s %s\n--- stdout:\n%s\n--- stderr:\n%s", name, strings.Join(args, " "),
				p.stdout.tail(15), p.stderr.tail(40))
		}
	})
	return p
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit and returns its exit status (-1 when
// a signal ended it).
func (p *proc) wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("%s did not exit: %w", p.name, ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0, nil
	case errors.As(p.err, &ee):
		return ee.ExitCode(), nil
	}
	return 0, fmt.Errorf("%s: %w", p.name, p.err)
}

// killedBySignal reports whether the exited process was ended by sig.
func (p *proc) killedBySignal(sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// waitStderr waits for re on the process's stderr.
func (p *proc) waitStderr(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return p.stderr.waitFor(ctx, re, p.done)
}

// waitStdout waits for re on the process's stdout.
func (p *proc) waitStdout(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	return p.stdout.waitFor(ctx, re, p.done)
}

// sameBytes describes the first difference between two byte strings, or
// returns "" when they are equal.
func sameBytes(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d bytes vs %d, first difference at byte %d", len(got), len(want), i)
}

// withTimeout is a context for one step of a test, bounded by d.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
