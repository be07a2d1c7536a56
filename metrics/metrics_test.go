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
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/docstest"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/sched"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var genSample = sched.Generation{Total: time.Second, SyncWait: 200 * time.Millisecond, Comm: 100 * time.Millisecond,
	CommPaper: 300 * time.Millisecond, Compute: 700 * time.Millisecond, LB: 600 * time.Millisecond, RoundTrip: 10 * time.Millisecond,
	Accepted: 70, Counts: sched.Counts{Originals: 70, Replicas: 5, CancelsHeld: 3, CancelsRunning: 1, CancelsLate: 1, Duplicates: 1}}

// exercised returns a registry with every collector of the package, fed
// as a run would feed them.
func exercised(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := NewRegistry()
	m := NewMaster(func() MasterState {
		return MasterState{Workers: 2, Joined: 3, Stale: 4, Refused: map[string]int64{"busy": 1}, Inbox: 1, InboxCap: 4096, Assignments: 100, InboxWaiting: 30,
			PerWorker: []WorkerState{{Name: "w1", Slots: 2, Queued: 1, Running: 2, Exec: 100 * time.Millisecond, RoundTrip: 2 * time.Millisecond}}}
	})
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.SetRun(RunInfo{ID: "0123abcd", Seed: 7, Policy: "r3q", Problem: "ridge", Strategy: "es"})
	m.Generation(genSample)
	m.Progress(1, 10, 20, 100)
	a := NewAgent("w1", func() AgentState {
		return AgentState{Slots: 2, Connected: true, Held: 1, Running: 2, Finished: 10, Busy: 3 * time.Second, Session: 2 * time.Second}
	})
	if err := reg.Register(a); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewGossip(func() map[string]int64 {
		return map[string]int64{"refused_too_large": 72, "refused_per_source": 16}
	})); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewPlugins("w1", []string{"sim"}, func(string) PluginState { return PluginState{Started: 2, Crashed: 1} })); err != nil {
		t.Fatal(err)
	}
	return reg
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// Every metric of ours follows Prometheus's conventions and says what it
// is.
func TestNamesFollowConventions(t *testing.T) {
	fams := gather(t, exercised(t))
	ours := 0
	for name, mf := range fams {
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		ours++
		if !strings.HasPrefix(name, "esgrid_") {
			t.Errorf("%s lacks the esgrid_ prefix", name)
		}
		if (mf.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a counter's name, and only a counter's, ends in _total (type %v)", name, mf.GetType())
		}
		for _, bad := range []string{"_ms", "_milliseconds", "_minutes", "_kb", "_mb"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s: not in base units", name)
			}
		}
	}
	if ours < 30 {
		t.Errorf("only %d esgrid metrics", ours)
	}
	for _, want := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[want] == nil {
			t.Errorf("no %s: the runtime and process collectors are missing", want)
		}
	}
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf := fams[name]
	if mf == nil {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range mf.GetMetric() {
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return m.Histogram.GetSampleSum()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

// The ledger's per-generation figures are the counters' and histograms'
// only source: two generations add up.
func TestGenerationsAddUp(t *testing.T) {
	reg := exercised(t)
	// A second master on another registry, fed twice.
	reg2 := prometheus.NewRegistry()
	m := NewMaster(nil)
	if err := m.Register(reg2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m.Generation(sched.Generation{Total: time.Second, SyncWait: 250 * time.Millisecond, Comm: 125 * time.Millisecond,
			Compute: 625 * time.Millisecond, LB: 500 * time.Millisecond, RoundTrip: 20 * time.Millisecond, Accepted: 7,
			Counts: sched.Counts{Originals: 7, Replicas: 2, CancelsHeld: 1, CancelsLate: 1, Duplicates: 1}})
	}
	fams := gather(t, reg2)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"esgrid_generations_total", nil, 2},
		{"esgrid_sync_wait_seconds_total", nil, 0.5},
		{"esgrid_generation_sync_wait_seconds", nil, 0.5},
		{"esgrid_comm_seconds_total", nil, 0.25},
		{"esgrid_compute_seconds_total", nil, 1.25},
		{"esgrid_generation_seconds_total", nil, 2},
		{"esgrid_lb_seconds_total", nil, 1},
		{"esgrid_barrier_bound_seconds_total", nil, 1.04},
		{"esgrid_tasks_sent_total", []string{"kind", "original"}, 14},
		{"esgrid_tasks_sent_total", []string{"kind", "replica"}, 4},
		{"esgrid_cancels_total", []string{"outcome", "held"}, 2},
		{"esgrid_cancels_total", []string{"outcome", "running"}, 0},
		{"esgrid_cancels_total", []string{"outcome", "late"}, 2},
		{"esgrid_results_total", []string{"outcome", "accepted"}, 14},
		{"esgrid_results_total", []string{"outcome", "duplicate"}, 2},
		{"esgrid_results_total", []string{"outcome", "stale"}, 0},
	} {
		if got := value(t, fams, c.name, c.labels...); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The state read at scrape time, and the per-worker series.
	fams = gather(t, reg)
	if v := value(t, fams, "esgrid_master_worker_round_trip_seconds", "worker", "w1"); v != 0.002 {
		t.Errorf("round trip %v", v)
	}
	if v := value(t, fams, "esgrid_results_total", "outcome", "stale"); v != 4 {
		t.Errorf("stale %v", v)
	}
	if v := value(t, fams, "esgrid_worker_idle_seconds_total", "worker", "w1"); v != 1 { // 2 slots × 2 s − 3 s busy
		t.Errorf("idle %v", v)
	}
}

// A worker's series exist only while it is connected: the label set
// follows the workers present.
func TestWorkerSeriesPruned(t *testing.T) {
	workers := []WorkerState{{Name: "a"}, {Name: "b"}}
	m := NewMaster(func() MasterState { return MasterState{PerWorker: workers} })
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	count := func() int { return len(gather(t, reg)["esgrid_master_worker_slots"].GetMetric()) }
	if n := count(); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
	workers = workers[:1]
	if n := count(); n != 1 {
		t.Fatalf("%d series after a worker left, want 1", n)
	}
}

// Idle slot-seconds never decrease, even when an abandoned evaluation's
// time arrives late.
func TestAgentIdleMonotonic(t *testing.T) {
	st := AgentState{Slots: 1, Session: 10 * time.Second, Busy: 2 * time.Second}
	a := NewAgent("w", func() AgentState { return st })
	reg := prometheus.NewRegistry()
	reg.MustRegister(a)
	first := value(t, gather(t, reg), "esgrid_worker_idle_seconds_total")
	st.Busy = 5 * time.Second
	if second := value(t, gather(t, reg), "esgrid_worker_idle_seconds_total"); second < first {
		t.Errorf("idle went from %v to %v", first, second)
	}
}

// promqlWords are the words of PromQL that are not metric names.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum min max avg count stddev stdvar topk bottomk quantile count_values group
		by without on ignoring group_left group_right offset bool and or unless
		rate irate increase delta idelta deriv predict_linear histogram_quantile abs ceil floor round clamp clamp_min clamp_max
		sum_over_time avg_over_time max_over_time min_over_time count_over_time last_over_time time vector scalar label_replace label_join
		sort sort_desc absent absent_over_time changes resets exp ln log2 log10 sqrt timestamp inf nan`) {
		promqlWords[w] = true
	}
}

var (
	reStrings   = regexp.MustCompile(`"[^"]*"`)
	reMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	reRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	reGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	reVariables = regexp.MustCompile(`\$\{?\w+\}?`)
	reIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reNumber    = regexp.MustCompile(`\b\d+(\.\d+)?([eE][-+]?\d+)?\b`)
	reOffset    = regexp.MustCompile(`\boffset\s+-?[0-9a-z]+`)
)

// metricNames extracts the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	e := reStrings.ReplaceAllString(expr, " ")
	e = reMatchers.ReplaceAllString(e, " ")
	e = reRanges.ReplaceAllString(e, " ")
	e = reGrouping.ReplaceAllString(e, " ")
	e = reVariables.ReplaceAllString(e, " ")
	e = reOffset.ReplaceAllString(e, " ")
	e = reNumber.ReplaceAllString(e, " ")
	var out []string
	for _, w := range reIdent.FindAllString(e, -1) {
		if !promqlWords[w] {
			out = append(out, w)
		}
	}
	return out
}

func TestMetricNamesOfPromQL(t *testing.T) {
	got := metricNames(`sum by (outcome) (rate(esgrid_cancels_total{outcome!="late"}[$__rate_interval])) / on(job) esgrid_workers > 0.5 unless esgrid_workers offset 1m`)
	if want := []string{"esgrid_cancels_total", "esgrid_workers", "esgrid_workers"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// notShown lists the exported families no panel shows, each with why.
// The Go runtime's and the process's families (go_, process_) are
// esgrid's own internals, for debugging esgrid rather than watching a
// run: the dashboard shows the few that say a master is in trouble
// (its CPU, goroutines and memory), and no other is listed here.
var notShown = map[string]string{}

// dashboardQueries returns the expressions of the committed Grafana
// dashboard (generated by internal/dashboard): each panel's queries by
// its title, and each annotation's by its name.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../dashboards/esgrid.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out["panel "+p.Title] = append(out["panel "+p.Title], tg.Expr)
		}
	}
	for _, a := range dash.Annotations.List {
		out["annotation "+a.Name] = append(out["annotation "+a.Name], a.Expr)
	}
	return out
}

// Every query of the Grafana dashboard names only metrics the code
// exports (gathered after exercising every collector), and every family
// of esgrid's is shown by some panel or listed in notShown with why.
func TestDashboardShowsEveryExportedFamily(t *testing.T) {
	exported := map[string]string{} // series name -> its family
	families := gather(t, exercised(t))
	for name, mf := range families {
		exported[name] = name
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[name+s] = name
			}
		}
	}
	used := map[string]bool{}
	for what, exprs := range dashboardQueries(t) {
		for _, expr := range exprs {
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("%s: no metric in %q", what, expr)
			}
			for _, n := range names {
				if exported[n] == "" {
					t.Errorf("%s: %q names %s, which the code does not export", what, expr, n)
				}
				used[exported[n]] = true
			}
		}
	}
	shown := 0
	for name := range families {
		runtime := strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
		switch why, listed := notShown[name]; {
		case used[name] && listed:
			t.Errorf("%s is shown, yet listed as not shown (%s)", name, why)
		case used[name]:
			shown++
		case !listed && !runtime:
			t.Errorf("no panel shows %s: show it, or list it in notShown with why", name)
		}
	}
	for name := range notShown {
		if families[name] == nil {
			t.Errorf("notShown lists %s, which the code does not export", name)
		}
	}
	t.Logf("%d of %d families shown", shown, len(families))
}

// Serve serves the registry and stops with its context.
func TestServe(t *testing.T) {
	leaktest.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := Serve(ctx, "127.0.0.1:0", exercised(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# HELP esgrid_sync_wait_seconds_total") ||
		!strings.Contains(string(body), `esgrid_worker_busy_slots{worker="w1"} 2`) {
		t.Fatalf("status %d, body:\n%s", resp.StatusCode, body)
	}
}

// A connection left idle after a scrape is closed by the server, so that
// clients cannot pile connections up; and headers over the cap are
// refused.
func TestServeClosesIdleConnections(t *testing.T) {
	leaktest.Check(t)
	was := serveTimeouts
	serveTimeouts.idle = 50 * time.Millisecond
	defer func() { serveTimeouts = was }()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := Serve(ctx, "127.0.0.1:0", exercised(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	// Nothing more is sent: the server must close the connection (the
	// read's own deadline only stops a test that would hang).
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %d bytes, err %v; want EOF from the server", n, err)
	}

	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 4*maxHeaderBytes))
	c2.SetReadDeadline(time.Now().Add(time.Minute))
	resp2, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers of %d bytes: status %d, want 431", 4*maxHeaderBytes, resp2.StatusCode)
	}
}

// The gossip transport's refusals are counters by kind, the "refused_"
// prefix of the transport's kinds dropped.
func TestGossipRefusals(t *testing.T) {
	fams := gather(t, exercised(t))
	if v := value(t, fams, "esgrid_gossip_refused_total", "kind", "too_large"); v != 72 {
		t.Errorf("too_large = %v, want 72", v)
	}
	if v := value(t, fams, "esgrid_gossip_refused_total", "kind", "per_source"); v != 16 {
		t.Errorf("per_source = %v, want 16", v)
	}
}

// Counters of kinds and causes exist from the start, at 0: a query of
// rate() or increase() works before the first refusal or loss (issue 27).
func TestCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMaster(func() MasterState {
		return MasterState{Dropped: 3, Lost: map[string]int64{"gossip_dead": 2}, GossipKept: 5}
	})
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewGossip(func() map[string]int64 { return map[string]int64{"refused_rate": 4} },
		"refused_busy", "refused_rate", "wrong_key")); err != nil {
		t.Fatal(err)
	}
	fams := gather(t, reg)
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"esgrid_workers_lost_total", "cause", "closed", 0},
		{"esgrid_workers_lost_total", "cause", "gossip_dead", 2},
		{"esgrid_workers_lost_total", "cause", "left_cluster", 0},
		{"esgrid_workers_lost_total", "cause", "reconnected", 0},
		{"esgrid_workers_lost_total", "cause", "dropped", 3},
		{"esgrid_gossip_refused_total", "kind", "busy", 0},
		{"esgrid_gossip_refused_total", "kind", "rate", 4},
		{"esgrid_gossip_refused_total", "kind", "wrong_key", 0},
		{"esgrid_tasks_sent_total", "kind", "resend", 0},
	} {
		if v := value(t, fams, c.name, c.label, c.value); v != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.value, v, c.want)
		}
	}
	if v := value(t, fams, "esgrid_gossip_verdicts_kept_total"); v != 5 {
		t.Errorf("esgrid_gossip_verdicts_kept_total = %v, want 5", v)
	}
	if n := len(fams["esgrid_gossip_refused_total"].GetMetric()); n != 3 {
		t.Errorf("%d gossip refusal series, want 3", n)
	}
}

// The last generation's figures are gauges, set at each generation's
// end (a value between generations, where rate() of the counters has
// none), and esgrid_run_info describes the run.
func TestLastGenerationAndRunInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMaster(nil)
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, f := range LastGenerationFigures {
		if v := value(t, gather(t, reg), "esgrid_last_generation_seconds", "figure", f); v != 0 {
			t.Errorf("%s = %v before any generation, want 0", f, v)
		}
	}
	m.SetRun(RunInfo{ID: "0123abcd", Seed: 7, Policy: "r3q", Problem: "ridge", Strategy: "cma"})
	m.Generation(genSample)
	second := genSample
	second.Total, second.Compute, second.LB = 2*time.Second, 1500*time.Millisecond, 0
	m.Generation(second)
	fams := gather(t, reg)
	for f, want := range map[string]float64{"duration": 2, "compute": 1.5, "sync_wait": 0.2, "comm": 0.1, "comm_paper": 0.3, "lb": 0, "barrier_bound": 0} {
		if v := value(t, fams, "esgrid_last_generation_seconds", "figure", f); v != want {
			t.Errorf("%s = %v, want %v (the second generation's)", f, v, want)
		}
	}
	if v := value(t, fams, "esgrid_run_info", "run_id", "0123abcd", "seed", "7", "policy", "r3q", "problem", "ridge", "strategy", "cma"); v != 1 {
		t.Errorf("esgrid_run_info = %v", v)
	}
	// A run's registry labels every series, the runtime's included.
	runReg, run := NewRunRegistry("ridge-0123abcd")
	if err := NewMaster(nil).Register(run); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"esgrid_generations_total", "go_goroutines"} {
		value(t, gather(t, runReg), name, "run", "ridge-0123abcd")
	}
}

// Every family of esgrid's is documented: docs/metrics.md names it in
// code, as `name` or `name{labels}`, so that a user reading a panel or a
// scrape finds what it counts.
func TestDocsNameEveryExportedFamily(t *testing.T) {
	doc := string(docstest.Read(t, "docs/metrics.md"))
	ours := 0
	for name := range gather(t, exercised(t)) {
		if !strings.HasPrefix(name, "esgrid_") {
			continue
		}
		ours++
		if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+name+"{") {
			t.Errorf("docs/metrics.md does not name %s", name)
		}
	}
	if ours < 30 {
		t.Errorf("only %d esgrid families", ours)
	}
}
