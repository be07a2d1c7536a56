package metrics

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noPluginsPanel is the panel of plugins' processes, empty in a run
// without plugins (as the runs of TestRealPrometheus are): a process
// exports the counters of the plugins it lists, and no others.
const noPluginsPanel = "panel Plugin processes (so far)"

// noPlugins is checkDashboard's mayBeEmpty for a run without plugins.
var noPlugins = map[string]bool{noPluginsPanel: true}

// checkDashboard runs every query of the committed dashboard, panels'
// and annotations', as Grafana does: a range query over [from, to], its
// variables set to vars (job, run, instance, worker) and Grafana's
// intervals to the test's scrape interval. Each must succeed and return
// at least one series with a finite value, but those in mayBeEmpty
// (by "annotation NAME" or "panel TITLE"), which must only succeed.
func checkDashboard(t *testing.T, ctx context.Context, api string, vars map[string]string, from, to time.Time, mayBeEmpty map[string]bool, diagnose fmt.Stringer) {
	t.Helper()
	rng := strconv.Itoa(int(math.Ceil(to.Sub(from).Seconds()))) + "s"
	r := strings.NewReplacer("$__rate_interval", "4s", "$__interval", "1s", "$__range", rng,
		"$job", vars["job"], "$run", vars["run"], "$instance", vars["instance"], "$worker", vars["worker"])
	queries := 0
	for what, exprs := range dashboardQueries(t) {
		for _, expr := range exprs {
			e := r.Replace(expr)
			if strings.Contains(e, "$") {
				t.Errorf("%s: a variable left in %q", what, e)
				continue
			}
			queries++
			n, finite, err := queryRange(ctx, api, e, from, to)
			switch {
			case err != nil:
				t.Errorf("run %s, %s: %q: %v", vars["run"], what, e, err)
			case mayBeEmpty[what]:
			case n == 0 || !finite:
				t.Errorf("run %s, %s: %q: %d series, a finite value %v; want a series with a value", vars["run"], what, e, n, finite)
			}
		}
	}
	if t.Failed() {
		t.Logf("%s", diagnose)
	}
	t.Logf("run %s: %d queries of the dashboard checked over %v", vars["run"], queries, to.Sub(from).Round(time.Second))
}

// queryRange runs a PromQL range query at a step of a quarter of the
// scrape interval and returns its series' number and whether any value
// is finite. A series scraped once is then seen: it lives from that
// scrape to the next, which marks it stale, and at a 1 s step that second
// could fall between two steps (CI: the split run's master saw its
// workers for a second at a time, each moved to a child master within a
// second of joining, and its per-worker panels came back empty). Its
// steps end at to itself (from is moved back to a whole number of steps
// before it): a query over a run's end reads what Prometheus had seen
// when the test asked it.
func queryRange(ctx context.Context, api, query string, from, to time.Time) (series int, finite bool, err error) {
	const step = 250 * time.Millisecond
	from = to.Add(-to.Sub(from).Truncate(step) - step)
	v := url.Values{"query": {query}, "start": {ts(from)}, "end": {ts(to)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	var data struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	if err := apiGet(ctx, api, "/api/v1/query_range?"+v.Encode(), &data); err != nil {
		return 0, false, err
	}
	for _, s := range data.Result {
		for _, p := range s.Values {
			str, _ := p[1].(string)
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				finite = true
			}
		}
	}
	return len(data.Result), finite, nil
}

func ts(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// labelValues returns the values of label on the series match selects
// over [from, to]: Grafana's label_values(match, label), as a dashboard
// variable asks it.
func labelValues(ctx context.Context, api, label, match string, from, to time.Time) ([]string, error) {
	v := url.Values{"match[]": {match}, "start": {ts(from)}, "end": {ts(to)}}
	var values []string
	err := apiGet(ctx, api, "/api/v1/label/"+label+"/values?"+v.Encode(), &values)
	return values, err
}
