package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRealPrometheus runs a real Prometheus (Debian's package; CI
// installs it) on a loopback port, scraping esrun (the master, with one
// local worker) and one esworker process every second, and checks
// through Prometheus's HTTP query API that the sync wait, comm and tasks
// series exist and agree with the run's JSON report, within what the run
// accumulated in one scrape interval. Everything it starts, it stops.
func TestRealPrometheus(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no prometheus binary in CI: .ci/run should have installed Debian's prometheus package")
		}
		t.Skip("no prometheus binary on PATH: install Debian's prometheus package (apt-get install prometheus) to run this test")
	}
	if testing.Short() {
		t.Skip("starts Prometheus and a grid of processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	dir := t.TempDir()

	// The binaries, as a user runs them.
	bin := map[string]string{}
	for _, cmd := range []string{"esrun", "esworker"} {
		bin[cmd] = filepath.Join(dir, cmd)
		b := exec.CommandContext(ctx, "go", "build", "-o", bin[cmd], "github.com/esgrid/esgrid/cmd/"+cmd)
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}

	const scrape = time.Second
	masterAddr, workerAddr, promAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: esgrid-master
    static_configs:
      - targets: ["%[2]s"]
  - job_name: esgrid-workers
    static_configs:
      - targets: ["%[3]s"]
`, scrape, masterAddr, workerAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promLog := &lockedBuf{}
	p := start(t, ctx, promLog, prom, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	api := "http://" + promAddr
	waitFor(t, ctx, "Prometheus ready", func() bool {
		resp, err := http.Get(api + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, promLog)

	// The master waits for two workers: its local one and the esworker.
	report := filepath.Join(dir, "run.json")
	runLog := &lockedBuf{}
	const key = "cHJvbWV0aGV1cy10ZXN0LWtleS0wMTIzNDU2Nzg5YWI="
	esrun := start(t, ctx, runLog, bin["esrun"], "-gens", "40", "-load-ms", "4", "-local", "1", "-slots", "1", "-min-workers", "2",
		"-key", key, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-metrics", masterAddr, "-metrics-linger", (3 * scrape).String(), "-report", report, "-quiet")
	var gossip string
	waitFor(t, ctx, "esrun listening", func() bool {
		if esrun.exited() {
			t.Fatalf("esrun exited: %v\n%s", esrun.err, runLog)
		}
		m := regexp.MustCompile(`esrun: listening data=\S+ gossip=(\S+)`).FindStringSubmatch(runLog.String())
		if m != nil {
			gossip = m[1]
		}
		return m != nil
	}, runLog)
	workerLog := &lockedBuf{}
	esworker := start(t, ctx, workerLog, bin["esworker"], "-join", gossip, "-key", key, "-name", "remote-1",
		"-slots", "1", "-once", "-metrics", workerAddr)
	if err := wait(ctx, esrun); err != nil {
		t.Fatalf("esrun: %v\n%s", err, runLog)
	}
	if err := wait(ctx, esworker); err != nil {
		t.Fatalf("esworker: %v\n%s", err, workerLog)
	}

	var rep struct {
		Schedule struct {
			SyncWait    float64 `json:"sync_wait"`
			Originals   int     `json:"originals"`
			Replicas    int     `json:"replicas"`
			Generations []struct {
				End      float64 `json:"end"`
				SyncWait float64 `json:"sync_wait"`
				Comm     float64 `json:"comm"`
				Tasks    int     `json:"tasks"`
				Orig     int     `json:"originals"`
				Replicas int     `json:"replicas"`
			} `json:"generations"`
		} `json:"schedule"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, runLog)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	gens := rep.Schedule.Generations
	if len(gens) != 41 {
		t.Fatalf("%d generations in the report, want 41", len(gens))
	}
	// What the run accumulated in its last scrape interval: the most the
	// last scrape may lack.
	lastEnd := gens[len(gens)-1].End
	var sync, comm, tasks, syncTol, commTol, tasksTol float64
	for _, g := range gens {
		sync += g.SyncWait
		comm += g.Comm
		n := float64(g.Orig + g.Replicas)
		tasks += n
		if g.End >= lastEnd-scrape.Seconds() {
			syncTol += g.SyncWait
			commTol += g.Comm
			tasksTol += n
		}
	}
	if math.Abs(sync-rep.Schedule.SyncWait) > 1e-6 || int(tasks) != rep.Schedule.Originals+rep.Schedule.Replicas {
		t.Fatalf("the report's generations add up to sync %v, tasks %v; its totals are %v and %d", sync, tasks, rep.Schedule.SyncWait, rep.Schedule.Originals+rep.Schedule.Replicas)
	}

	// Let Prometheus write what it scraped, then ask it. The targets are
	// gone: max_over_time reads past their staleness markers.
	for _, c := range []struct {
		query      string
		want, tol  float64
		allowAbove bool
	}{
		{`max_over_time(esgrid_sync_wait_seconds_total{job="esgrid-master"}[5m])`, sync, syncTol, false},
		{`max_over_time(esgrid_comm_seconds_total{job="esgrid-master"}[5m])`, comm, commTol, false},
		{`sum(max_over_time(esgrid_tasks_sent_total{job="esgrid-master"}[5m]))`, tasks, tasksTol, false},
		{`max_over_time(esgrid_generation_sync_wait_seconds_count[5m])`, float64(len(gens)), float64(len(gens)), false},
		// The esworker's own series, and the master's view of it.
		{`max_over_time(esgrid_worker_tasks_total{job="esgrid-workers",worker="remote-1",outcome="finished"}[5m])`, 1, 0, true},
		{`max_over_time(esgrid_workers{job="esgrid-master"}[5m])`, 2, 0, false},
		{`max_over_time(esgrid_master_worker_slots{worker="remote-1"}[5m])`, 1, 0, false},
	} {
		got, err := queryScalar(ctx, api, c.query)
		if err != nil {
			t.Errorf("%s: %v", c.query, err)
			if names, err := queryLabels(ctx, api, "worker"); err == nil {
				t.Logf("worker label values Prometheus has: %v; esworker's log:\n%s", names, workerLog)
			}
			if resp, err := http.Get(api + "/api/v1/targets"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("targets: %s\nPrometheus's log:\n%s", b, promLog)
			}
			continue
		}
		if c.allowAbove && got >= c.want {
			continue
		}
		if got > c.want+1e-6 || got < c.want-c.tol-1e-6 {
			t.Errorf("%s = %v; the report says %v (a scrape interval's worth: %v)", c.query, got, c.want, c.tol)
		}
	}
	stop(t, p)
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a process the test started.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited; err is then its status
	err  error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start starts a process (in a process group of its own) whose output
// goes to out; the test kills the group at the latest when it ends.
func start(t *testing.T, ctx context.Context, out io.Writer, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// wait waits for p to exit, and kills it when ctx ends first.
func wait(ctx context.Context, p *proc) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return ctx.Err()
	}
}

// stop ends a process gracefully (SIGTERM), or kills it after 10 s.
func stop(t *testing.T, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wait(ctx, p); err != nil && ctx.Err() != nil {
		t.Errorf("%s did not stop on SIGTERM", p.cmd.Path)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool, log fmt.Stringer) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s\n%s", what, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// queryLabels returns the values Prometheus has for label.
func queryLabels(ctx context.Context, api, label string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", api+"/api/v1/label/"+label+"/values", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data []string `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&r)
	return r.Data, err
}

// queryScalar runs an instant PromQL query and returns its single value.
func queryScalar(ctx context.Context, api, query string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", api+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query failed: %s", r.Error)
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series, want 1", len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}
