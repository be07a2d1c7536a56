package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/freeport"
)

// TestRealPrometheus runs a real Prometheus (Debian's package; CI
// installs it) on a loopback port, scraping esrun (the master, with one
// local worker) and an esworker process every second, and checks
// through Prometheus's HTTP query API that every series the table of
// docs/metrics.md, "Report and Prometheus", names holds, once the run is over, the very
// number of the run's JSON report. A second run on the same master
// address splits its masters (splitRun). Everything it starts, it stops.
//
// Nothing in it rests on timing: Prometheus starts scraping a few seconds
// after it is ready, and a loaded machine delays scrapes further, so the
// run starts only once Prometheus has seen the scraped esworker in the
// master's view (a second esworker completes -min-workers then), and the
// scraped esworker stays up after the run until Prometheus has its final
// count.
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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

	// esrun serves its final figures for 20 scrape intervals: on a loaded
	// machine a scrape can take longer than its 1 s timeout and be lost,
	// and one of them must succeed.
	const scrape, linger = time.Second, 20 * time.Second
	// Prometheus must be told its targets before they start: their ports
	// are fixed, outside the kernel's ephemeral range (see freeport).
	masterAddr, workerAddr, splitWorkerAddr, promAddr := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: esgrid-master
    static_configs:
      - targets: ["%[2]s"]
  - job_name: esgrid-workers
    static_configs:
      - targets: ["%[3]s", "%[4]s"]
`, scrape, masterAddr, workerAddr, splitWorkerAddr)
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

	// The master waits for four workers: its local one and three
	// esworkers, the second and third started only once Prometheus has
	// scraped the first in the master's view and on its own exporter,
	// and has seen a worker lost: a victim that joins and is killed.
	report := filepath.Join(dir, "run.json")
	runLog := &lockedBuf{}
	const key = "cHJvbWV0aGV1cy10ZXN0LWtleS0wMTIzNDU2Nzg5YWI="
	from := time.Now()
	esrun := start(t, ctx, runLog, bin["esrun"], "-run-name", "first", "-gens", "40", "-load-ms", "4", "-local", "1", "-slots", "1", "-min-workers", "4",
		"-key", key, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-metrics", masterAddr, "-metrics-linger", linger.String(), "-report", report, "-quiet")
	gossip := listening(t, ctx, esrun, runLog)
	workerLog := &lockedBuf{}
	esworker := start(t, ctx, workerLog, bin["esworker"], "-join", gossip, "-key", key, "-name", "remote-1",
		"-slots", "1", "-metrics", workerAddr)
	diagnose := func() string {
		var b strings.Builder
		if names, err := labelValues(ctx, api, "worker", `{worker!=""}`, from, time.Now()); err == nil {
			fmt.Fprintf(&b, "worker label values Prometheus has: %v\n", names)
		}
		if resp, err := http.Get(api + "/api/v1/targets"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Fprintf(&b, "targets: %s\n", body)
		}
		fmt.Fprintf(&b, "esrun's log:\n%s\nesworker's log:\n%s\nPrometheus's log:\n%s", runLog, workerLog, promLog)
		return b.String()
	}
	diag := stringer(diagnose)
	waitFor(t, ctx, "Prometheus to scrape remote-1 in the master's view", seen(ctx, api, `esgrid_master_worker_slots{job="esgrid-master",worker="remote-1"}`, 1), diag)
	waitFor(t, ctx, "Prometheus to scrape remote-1's exporter", seen(ctx, api, `esgrid_worker_slots{job="esgrid-workers",worker="remote-1"}`, 1), diag)
	victim := start(t, ctx, &lockedBuf{}, bin["esworker"], "-join", gossip, "-key", key, "-name", "victim", "-slots", "1")
	waitFor(t, ctx, "Prometheus to scrape the victim in the master's view", seen(ctx, api, `esgrid_master_worker_slots{job="esgrid-master",worker="victim"}`, 1), diag)
	syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL)
	waitFor(t, ctx, "Prometheus to scrape the victim lost", seen(ctx, api, `sum(esgrid_workers_lost_total{job="esgrid-master"})`, 1), diag)
	// remote-2's failures are retried elsewhere: the run's evolution is
	// the same, and the failure panels have something to show.
	second := start(t, ctx, &lockedBuf{}, bin["esworker"], "-join", gossip, "-key", key, "-name", "remote-2", "-slots", "1", "-once", "-fail-every", "7")
	third := start(t, ctx, &lockedBuf{}, bin["esworker"], "-join", gossip, "-key", key, "-name", "remote-3", "-slots", "1", "-once")
	awaitFinal(t, ctx, api, esrun, runLog, report, "first", linger, diag)
	for _, w := range []*proc{second, third} {
		if err := wait(ctx, w); err != nil {
			t.Fatalf("%s: %v", w.cmd.Args, err)
		}
	}
	// remote-1 waits for the next run: its count is final. Prometheus
	// must come to hold what its exporter says.
	finished := exported(t, ctx, "http://"+workerAddr+"/metrics", `esgrid_worker_tasks_total{outcome="finished",worker="remote-1"}`)
	if finished < 1 {
		t.Errorf("remote-1 exports %v finished tasks, want at least 1", finished)
	}
	waitFor(t, ctx, "Prometheus to scrape remote-1's final count", seen(ctx, api, `esgrid_worker_tasks_total{job="esgrid-workers",worker="remote-1",outcome="finished"}`, finished), diag)
	stop(t, esworker)

	rep := readReport(t, report)
	if gens := rep.generations(t); gens != 41 {
		t.Fatalf("%v generations in the report, want 41", gens)
	}
	checkSeries(t, ctx, api, "first", rep, diag)
	if got, err := queryScalar(ctx, api, `max_over_time(esgrid_workers{job="esgrid-master"}[1h])`); err != nil || got != 4 {
		t.Errorf("esgrid_workers at most %v (%v), want 4", got, err)
	}
	if got, err := queryScalar(ctx, api, `last_over_time(esgrid_failed_evaluations_total{job="esgrid-master"}[1h])`); err != nil || got < 1 {
		t.Errorf("esgrid_failed_evaluations_total = %v (%v), want remote-2's failures", got, err)
	}
	// Every query of the dashboard, on this run: none fails, none is
	// empty, the run's end included (Prometheus has seen esrun gone).
	waitFor(t, ctx, "Prometheus to see esrun gone", seen(ctx, api, `up{job="esgrid-master"}`, 0), diag)
	vars := map[string]string{"job": "esgrid-master", "run": "first", "instance": ".*", "worker": ".*"}
	checkDashboard(t, ctx, api, vars, from, time.Now(), noPlugins, diag)

	splitRun(t, ctx, api, bin, masterAddr, splitWorkerAddr, key, linger, diagnose)
	// The dashboard's run variable tells the two runs apart.
	runs, err := labelValues(ctx, api, "run", `esgrid_run_info{job="esgrid-master"}`, from, time.Now())
	if err != nil || !slices.Equal(runs, []string{"first", "split"}) {
		t.Errorf("the run variable's values: %v (%v), want [first split]", runs, err)
	}
	stop(t, p)
}

// splitRun is a second run on the same master address, whose masters
// split (see docs/topologies.md): eight one-slot workers with
// fine-grained tasks, one of them (sw0) scraped, the master made slow
// (-master-cost). The children's counts reach the root, so the report
// counts one original per evaluation, and Prometheus holds the report's
// every figure. Every query of the dashboard is checked on it as on the
// first; a worker lost may be empty, none being lost. sw0 runs with
// -once and -metrics-linger: it ends with the run, and serves its final
// counts until Prometheus has them.
func splitRun(t *testing.T, ctx context.Context, api string, bin map[string]string, masterAddr, workerAddr, key string, linger time.Duration, diagnose func() string) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "split.json")
	runLog := &lockedBuf{}
	from := time.Now()
	esrun := start(t, ctx, runLog, bin["esrun"], "-run-name", "split", "-sched", "rwq", "-local", "0", "-min-workers", "8",
		"-key", key, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-split", "paper", "-master-cost", "1ms",
		"-problem", "rastrigin", "-dim", "8", "-mu", "10", "-lambda", "300", "-gens", "3", "-seed", "5",
		"-metrics", masterAddr, "-metrics-linger", linger.String(), "-report", report, "-quiet")
	diag := stringer(func() string { return "split run's esrun log:\n" + runLog.String() + "\n" + diagnose() })
	gossip := listening(t, ctx, esrun, runLog)
	workerArgs := func(name string) []string {
		return []string{"-join", gossip, "-key", key, "-name", name, "-slots", "1", "-slowdown", "1000", "-once"}
	}
	sw0 := start(t, ctx, &lockedBuf{}, bin["esworker"], append(workerArgs("sw0"), "-metrics", workerAddr, "-metrics-linger", "1h")...)
	waitFor(t, ctx, "Prometheus to scrape sw0 in the split run's master's view", seen(ctx, api, `esgrid_master_worker_slots{run="split",worker="sw0"}`, 1), diag)
	waitFor(t, ctx, "Prometheus to scrape sw0's exporter", seen(ctx, api, `esgrid_worker_slots{job="esgrid-workers",worker="sw0"}`, 1), diag)
	var others []*proc
	for i := 1; i < 8; i++ {
		others = append(others, start(t, ctx, &lockedBuf{}, bin["esworker"], workerArgs(fmt.Sprintf("sw%d", i))...))
	}
	awaitFinal(t, ctx, api, esrun, runLog, report, "split", linger, diag)
	for _, w := range others {
		if err := wait(ctx, w); err != nil {
			t.Fatalf("%s: %v", w.cmd.Args, err)
		}
	}
	// sw0's run is over (-once): it serves its final count for its
	// linger, until Prometheus holds it.
	finished := exported(t, ctx, "http://"+workerAddr+"/metrics", `esgrid_worker_tasks_total{outcome="finished",worker="sw0"}`)
	waitFor(t, ctx, "Prometheus to scrape sw0's final count", seen(ctx, api, `esgrid_worker_tasks_total{job="esgrid-workers",worker="sw0",outcome="finished"}`, finished), diag)
	stop(t, sw0)
	if got, err := queryScalar(ctx, api, `last_over_time(esgrid_master_splits_total{run="split",outcome="made"}[1h])`); err != nil || got < 1 {
		t.Errorf("splits made in the split run: %v (%v), want at least 1\n%s", got, err, runLog)
	}

	rep := readReport(t, report)
	var masters struct {
		Splits       int `json:"splits"`
		FromChildren int `json:"from_children"`
	}
	if err := json.Unmarshal(rep.Schedule["masters"], &masters); err != nil {
		t.Fatalf("the split run's report's schedule.masters: %v", err)
	}
	if masters.Splits == 0 || masters.FromChildren == 0 {
		t.Fatalf("the split run's master never split (%+v): its checks prove nothing\n%s", masters, runLog)
	}
	// One original per evaluation, wherever it was sent; every instance
	// an original, a resend or a replica.
	if got := rep.field(t, "originals"); got != float64(rep.Evals) {
		t.Errorf("%v originals for %d evaluations (%d splits, %d results from child masters)", got, rep.Evals, masters.Splits, masters.FromChildren)
	}
	if sent, sum := rep.field(t, "tasks_sent"), rep.field(t, "originals")+rep.field(t, "resends")+rep.field(t, "replicas"); sent != sum {
		t.Errorf("%v instances sent, %v originals + resends + replicas", sent, sum)
	}
	t.Logf("split run: %d evaluations, %v originals, %v resends, %v replicas; %d splits, %d results from child masters",
		rep.Evals, rep.field(t, "originals"), rep.field(t, "resends"), rep.field(t, "replicas"), masters.Splits, masters.FromChildren)
	if gens := rep.generations(t); gens != 4 {
		t.Fatalf("%v generations in the split run's report, want 4", gens)
	}
	checkSeries(t, ctx, api, "split", rep, diag)

	waitFor(t, ctx, "Prometheus to see the split run's esrun gone", seen(ctx, api, `up{job="esgrid-master"}`, 0), diag)
	vars := map[string]string{"job": "esgrid-master", "run": "split", "instance": ".*", "worker": ".*"}
	checkDashboard(t, ctx, api, vars, from, time.Now(), map[string]bool{"annotation Worker lost": true, noPluginsPanel: true}, diag)
}

// listening waits for esrun's "listening" line and returns its gossip
// address, for esworker's -join.
func listening(t *testing.T, ctx context.Context, esrun *proc, runLog *lockedBuf) string {
	t.Helper()
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
	return gossip
}

// awaitFinal waits for esrun (the run named run) to write its report,
// for Prometheus to scrape its final figures, and for esrun to exit.
// esrun writes its report, then serves its final figures for the
// linger: a scrape that starts once the report is there reads final
// figures only. Two more samples than when the report appeared mean one
// such scrape.
func awaitFinal(t *testing.T, ctx context.Context, api string, esrun *proc, runLog *lockedBuf, report, run string, linger time.Duration, diag fmt.Stringer) {
	t.Helper()
	waitFor(t, ctx, "run "+run+"'s report", func() bool {
		if _, err := os.Stat(report); err == nil {
			return true
		}
		if esrun.exited() {
			t.Fatalf("esrun exited with no report: %v\n%s", esrun.err, runLog)
		}
		return false
	}, runLog)
	samples := `count_over_time(esgrid_generations_total{job="esgrid-master",run="` + run + `"}[1h])`
	n0, _ := queryScalar(ctx, api, samples)
	waitFor(t, ctx, "Prometheus to scrape run "+run+"'s final figures", func() bool {
		exited := esrun.exited()
		if n, err := queryScalar(ctx, api, samples); err == nil && n >= n0+2 {
			return true
		}
		if exited {
			t.Fatalf("esrun's %v linger ended before Prometheus scraped its final figures\n%s", linger, diag)
		}
		return false
	}, diag)
	if err := wait(ctx, esrun); err != nil {
		t.Fatalf("esrun: %v\n%s", err, runLog)
	}
}

// seen is a condition for waitFor: query's single value is want.
func seen(ctx context.Context, api, query string, want float64) func() bool {
	return func() bool {
		got, err := queryScalar(ctx, api, query)
		return err == nil && got == want
	}
}

// runReport is the part of esrun's -report that Prometheus mirrors.
type runReport struct {
	Evals    int                        `json:"evals"`
	Schedule map[string]json.RawMessage `json:"schedule"`
}

func readReport(t *testing.T, path string) runReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no report: %v", err)
	}
	var rep runReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// field is the schedule's number name.
func (r runReport) field(t *testing.T, name string) float64 {
	t.Helper()
	var v float64
	if err := json.Unmarshal(r.Schedule[name], &v); err != nil {
		t.Fatalf("the report's schedule.%s: %v", name, err)
	}
	return v
}

// generations is the number of the schedule's generations.
func (r runReport) generations(t *testing.T) float64 {
	t.Helper()
	var gens []json.RawMessage
	if err := json.Unmarshal(r.Schedule["generations"], &gens); err != nil {
		t.Fatalf("the report's schedule.generations: %v", err)
	}
	return float64(len(gens))
}

// checkSeries compares every series of the table "Report and
// Prometheus" (docs/metrics.md) that the master exported for run, as
// Prometheus last scraped it, with the report's figure: the same number
// (within 1e-9 relative). The targets are gone: last_over_time reads
// past their staleness markers.
func checkSeries(t *testing.T, ctx context.Context, api, run string, rep runReport, diagnose fmt.Stringer) {
	t.Helper()
	gens := rep.generations(t)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{"esgrid_generation_seconds_total", rep.field(t, "total")},
		{"esgrid_generation_duration_seconds_sum", rep.field(t, "total")},
		{"esgrid_sync_wait_seconds_total", rep.field(t, "sync_wait")},
		{"esgrid_comm_seconds_total", rep.field(t, "comm")},
		{"esgrid_comm_paper_seconds_total", rep.field(t, "comm_paper")},
		{"esgrid_compute_seconds_total", rep.field(t, "compute")},
		{"esgrid_slot_busy_seconds_total", rep.field(t, "busy")},
		{"esgrid_between_generations_seconds_total", rep.field(t, "between")},
		{"esgrid_lb_seconds_total", rep.field(t, "lb")},
		{"esgrid_barrier_bound_seconds_total", rep.field(t, "barrier_bound")},
		{"esgrid_wasted_seconds_total", rep.field(t, "wasted")},
		{`esgrid_tasks_sent_total{kind="original"}`, rep.field(t, "originals")},
		{`esgrid_tasks_sent_total{kind="resend"}`, rep.field(t, "resends")},
		{`esgrid_tasks_sent_total{kind="replica"}`, rep.field(t, "replicas")},
		{`esgrid_cancels_total{outcome="held"}`, rep.field(t, "cancels_held")},
		{`esgrid_cancels_total{outcome="running"}`, rep.field(t, "cancels_running")},
		{`esgrid_cancels_total{outcome="late"}`, rep.field(t, "cancels_late")},
		{`esgrid_results_total{outcome="duplicate"}`, rep.field(t, "duplicates")},
		{`esgrid_results_total{outcome="stale"}`, rep.field(t, "stale")},
		{"esgrid_generations_total", gens},
		{"esgrid_generation_sync_wait_seconds_count", gens},
		{"esgrid_evaluations_total", float64(rep.Evals)},
		{"esgrid_workers_named_total", rep.field(t, "workers")},
		{"esgrid_workers_joined_total", rep.field(t, "joins")},
	} {
		sel := `job="esgrid-master",run="` + run + `"`
		query := c.series
		if i := strings.IndexByte(query, '{'); i >= 0 {
			query = query[:i+1] + sel + "," + query[i+1:]
		} else {
			query += "{" + sel + "}"
		}
		query = "last_over_time(" + query + "[1h])"
		got, err := queryScalar(ctx, api, query)
		if err != nil {
			t.Errorf("%s: %v\n%s", query, err, diagnose)
			continue
		}
		if got != c.want && math.Abs(got-c.want) > 1e-9*math.Abs(c.want) {
			t.Errorf("run %s: %s = %v; the report says %v", run, query, got, c.want)
		}
	}
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

// stop ends a process gracefully (SIGTERM); after 2 minutes it kills it
// and fails the test.
func stop(t *testing.T, p *proc) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// stringer makes a func a fmt.Stringer, for waitFor's log.
type stringer func() string

func (f stringer) String() string { return f() }

// exported returns the value of one series on an exporter's /metrics page,
// given as it appears there (name{labels} in the exporter's order).
func exported(t *testing.T, ctx context.Context, page, series string) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", page, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", page, sc.Text(), err)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", page, series)
	return 0
}

// queryScalar runs an instant PromQL query and returns its single value.
func queryScalar(ctx context.Context, api, query string) (float64, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := apiGet(ctx, api, "/api/v1/query?query="+url.QueryEscape(query), &data); err != nil {
		return 0, err
	}
	if len(data.Result) != 1 {
		return 0, fmt.Errorf("%d series, want 1", len(data.Result))
	}
	s, _ := data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// apiGet asks Prometheus's HTTP API for path (with its query) and decodes
// the answer's data into data; an answer that is not a success is an
// error that gives Prometheus's reason.
func apiGet(ctx context.Context, api, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", api+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	if r.Status != "success" {
		return fmt.Errorf("query failed: %s", r.Error)
	}
	return json.Unmarshal(r.Data, data)
}
