package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRealPrometheusSplit is TestRealPrometheus for a run whose masters
// split (README: "Masters that split"): esrun made a slow master
// (-master-cost) over eight one-slot esworker processes with
// fine-grained tasks, scraped by a real Prometheus. The children's counts
// reach the root, so the report counts one original per evaluation, and
// Prometheus holds the report's every figure.
func TestRealPrometheusSplit(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := map[string]string{}
	for _, cmd := range []string{"esrun", "esworker"} {
		bin[cmd] = filepath.Join(dir, cmd)
		b := exec.CommandContext(ctx, "go", "build", "-o", bin[cmd], "github.com/esgrid/esgrid/cmd/"+cmd)
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", cmd, err, out)
		}
	}
	const scrape, linger = time.Second, 20 * time.Second
	masterAddr, promAddr := freeAddr(t), freeAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: esgrid-master
    static_configs:
      - targets: ["%[2]s"]
`, scrape, masterAddr)
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

	report := filepath.Join(dir, "run.json")
	runLog := &lockedBuf{}
	const key = "cHJvbWV0aGV1cy1zcGxpdC1rZXktMDEyMzQ1Njc4OWE="
	const workers = 8
	esrun := start(t, ctx, runLog, bin["esrun"], "-sched", "rwq", "-local", "0", "-min-workers", fmt.Sprint(workers),
		"-split", "paper", "-master-cost", "1ms",
		"-problem", "rastrigin", "-dim", "8", "-mu", "10", "-lambda", "300", "-gens", "3", "-seed", "5",
		"-key", key, "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0",
		"-metrics", masterAddr, "-metrics-linger", linger.String(), "-report", report, "-quiet")
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
	var ws []*proc
	for i := range workers {
		ws = append(ws, start(t, ctx, &lockedBuf{}, bin["esworker"], "-join", gossip, "-key", key, "-name", fmt.Sprintf("sw%d", i),
			"-slots", "1", "-slowdown", "1000", "-once"))
	}
	diagnose := stringer(func() string {
		return fmt.Sprintf("esrun's log:\n%s\nPrometheus's log:\n%s", runLog, promLog)
	})
	waitFor(t, ctx, "esrun's report", func() bool {
		if _, err := os.Stat(report); err == nil {
			return true
		}
		if esrun.exited() {
			t.Fatalf("esrun exited with no report: %v\n%s", esrun.err, runLog)
		}
		return false
	}, runLog)
	// As TestRealPrometheus: two samples after the report appeared mean
	// one scrape of the final figures.
	const samples = `count_over_time(esgrid_generations_total{job="esgrid-master"}[1h])`
	n0, _ := queryScalar(ctx, api, samples)
	waitFor(t, ctx, "Prometheus to scrape esrun's final figures", func() bool {
		exited := esrun.exited()
		if n, err := queryScalar(ctx, api, samples); err == nil && n >= n0+2 {
			return true
		}
		if exited {
			t.Fatalf("esrun's %v linger ended before Prometheus scraped its final figures\n%s", linger, diagnose)
		}
		return false
	}, diagnose)
	if err := wait(ctx, esrun); err != nil {
		t.Fatalf("esrun: %v\n%s", err, runLog)
	}
	for _, w := range ws {
		if err := wait(ctx, w); err != nil {
			t.Errorf("an esworker -once: %v", err)
		}
	}

	rep := readReport(t, report)
	var masters struct {
		Splits       int `json:"splits"`
		FromChildren int `json:"from_children"`
	}
	if err := json.Unmarshal(rep.Schedule["masters"], &masters); err != nil {
		t.Fatalf("the report's schedule.masters: %v", err)
	}
	if masters.Splits == 0 || masters.FromChildren == 0 {
		t.Fatalf("the master never split (%+v): the test proves nothing\n%s", masters, runLog)
	}
	// One original per evaluation, wherever it was sent; every instance
	// an original, a resend or a replica.
	if got := rep.field(t, "originals"); got != float64(rep.Evals) {
		t.Errorf("%v originals for %d evaluations (%d splits, %d results from child masters)", got, rep.Evals, masters.Splits, masters.FromChildren)
	}
	if sent, sum := rep.field(t, "tasks_sent"), rep.field(t, "originals")+rep.field(t, "resends")+rep.field(t, "replicas"); sent != sum {
		t.Errorf("%v instances sent, %v originals + resends + replicas", sent, sum)
	}
	t.Logf("%d evaluations, %v originals, %v resends, %v replicas; %d splits, %d results from child masters",
		rep.Evals, rep.field(t, "originals"), rep.field(t, "resends"), rep.field(t, "replicas"), masters.Splits, masters.FromChildren)
	if gens := rep.generations(t); gens != 4 {
		t.Fatalf("%v generations in the report, want 4", gens)
	}
	checkSeries(t, ctx, api, "esgrid-master", rep, diagnose)
	stop(t, p)
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

// checkSeries compares every series of README's table "Report and
// Prometheus" that job exported, as Prometheus last scraped it, with the
// report's figure: the same number (within 1e-9 relative).
func checkSeries(t *testing.T, ctx context.Context, api, job string, rep runReport, diagnose fmt.Stringer) {
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
		query := c.series
		if i := strings.IndexByte(query, '{'); i >= 0 {
			query = query[:i+1] + `job="` + job + `",` + query[i+1:]
		} else {
			query += `{job="` + job + `"}`
		}
		query = "last_over_time(" + query + "[1h])"
		got, err := queryScalar(ctx, api, query)
		if err != nil {
			t.Errorf("%s: %v\n%s", query, err, diagnose)
			continue
		}
		if got != c.want && math.Abs(got-c.want) > 1e-9*math.Abs(c.want) {
			t.Errorf("%s = %v; the report says %v", query, got, c.want)
		}
	}
}
