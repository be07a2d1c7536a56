package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// buildEsworker compiles the command once per test binary.
func buildEsworker(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the esworker binary")
	}
	bin := filepath.Join(t.TempDir(), "esworker")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A real esworker process, signalled as a user or a service manager would.
func TestProcessSignals(t *testing.T) {
	bin := buildEsworker(t)
	for _, c := range []struct {
		name     string
		signals  int
		slowdown string // long enough that the drain cannot finish between two signals
		wantCode int
	}{
		{"one SIGTERM drains", 1, "20", 0},
		{"a second signal exits at once", 2, "100000", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cmd := exec.Command(bin, "-master", ln.Addr().String(), "-slots", "1", "-slowdown", c.slowdown, "-metrics", "127.0.0.1:0", "-metrics-linger", "0")
			cmd.Env = append(os.Environ(), grid.KeyEnv+"="+testSecret)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			conn, _ := acceptWorker(ctx, t, ln, grid.ProblemSpec{Name: "sphere", Dim: 30, LoadN: 200})
			msgs := make(chan grid.Message, 100)
			conn.Start(func(m grid.Message) { msgs <- m })
			const n = 4
			ts := &grid.Tasks{Gen: 2}
			for i := range n {
				ts.Items = append(ts.Items, grid.Task{ID: int32(i), X: make([]float64, 30)})
			}
			conn.Send(ts)
			// The signal comes once the worker has the tasks (its metrics
			// count one held, running or done): one that came before they
			// arrived would find nothing to drain, and leave them unread.
			waitTasks(t, ctx, &stderr)
			for i := range c.signals {
				cmd.Process.Signal(syscall.SIGTERM)
				if i+1 < c.signals {
					// Two signals sent before the process takes the first
					// are one (the kernel does not queue them): the next
					// goes once the first has started the drain.
					for !strings.Contains(stderr.text(), "signal: draining") {
						select {
						case <-ctx.Done():
							t.Fatalf("no drain after a SIGTERM; stderr:\n%s", stderr.text())
						case <-time.After(5 * time.Millisecond):
						}
					}
				}
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			var code int
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("esworker did not exit")
			}
			if code != c.wantCode {
				t.Errorf("exit status %d, want %d", code, c.wantCode)
			}
			if c.signals > 1 {
				return
			}
			// Drained: every task came back exactly once, as a result or
			// as a held task given back.
			<-conn.Done()
			var seen []int32
			for len(msgs) > 0 {
				switch m := (<-msgs).(type) {
				case *grid.Results:
					for _, r := range m.Items {
						if r.Cancelled || r.Err != "" {
							t.Errorf("result %+v", r)
						}
						seen = append(seen, r.ID)
					}
				case *grid.Drain:
					seen = append(seen, m.Returned...)
				}
			}
			slices.Sort(seen)
			if !slices.Equal(seen, []int32{0, 1, 2, 3}) {
				t.Errorf("tasks accounted for: %v, want each of 0..3 once", seen)
			}
		})
	}
}

// waitTasks waits until the esworker whose log is stderr serves metrics
// that count a task held, running or done.
func waitTasks(t *testing.T, ctx context.Context, stderr *syncBuffer) {
	t.Helper()
	serving := regexp.MustCompile(`msg="serving metrics" url=(\S+)`)
	busy := regexp.MustCompile(`(?m)^esgrid_worker_(busy_slots|held_tasks|tasks_total)(\{[^}]*\})? [1-9]`)
	for {
		if m := serving.FindStringSubmatch(stderr.text()); m != nil {
			if resp, err := http.Get(m[1]); err == nil {
				page, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if busy.Match(page) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("esworker never had a task; its log:\n%s", stderr.text())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
