package report

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/sched"
	dto "github.com/prometheus/client_model/go"
)

// The report's totals and the Prometheus counters are the same numbers
// (issue 27): fed the same generations, whose durations in seconds do
// not add up exactly in float64, every total equals its counter bit for
// bit, and the time between generations is a figure of its own.
func TestReportIsPrometheus(t *testing.T) {
	var gens []sched.Generation
	at := time.Duration(0)
	for i := range 7 {
		d := func(k int) time.Duration { return time.Duration(100_000_007*(i+1) + 13*k) }
		g := sched.Generation{Index: i, Tasks: 10, Start: at, Total: d(0), SyncWait: d(1) / 7, Comm: d(2) / 3,
			CommPaper: d(3) / 2, Busy: d(4) / 5, LB: d(5) / 11, RoundTrip: time.Duration(1_000_003 * i),
			Counts: sched.Counts{Originals: 10, Resends: i % 3, Replicas: i, CancelsHeld: 1, CancelsRunning: i % 2, CancelsLate: 1, Wasted: d(6) / 9, Duplicates: 2}}
		if i == 3 {
			g.LB = 0 // no execution finished: no bound
		}
		if i > 0 {
			g.Between = time.Duration(3_000_001 * i)
		}
		g.Compute = g.Total - g.SyncWait - g.Comm
		g.End = g.Start + g.Total
		at = g.End + time.Duration(3_000_001*(i+1))
		gens = append(gens, g)
	}
	m := metrics.NewMaster(nil)
	reg := metrics.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, g := range gens {
		m.Generation(g)
	}
	s := NewSchedule("r3q", sched.Report{Generations: gens}, grid.MasterStats{}, 0)
	got := gather(t, reg)
	for _, c := range []struct {
		series string
		report float64
	}{
		{"esgrid_generation_seconds_total", s.Total},
		{"esgrid_sync_wait_seconds_total", s.SyncWait},
		{"esgrid_comm_seconds_total", s.Comm},
		{"esgrid_comm_paper_seconds_total", s.CommPaper},
		{"esgrid_compute_seconds_total", s.Compute},
		{"esgrid_slot_busy_seconds_total", s.Busy},
		{"esgrid_between_generations_seconds_total", s.Between},
		{"esgrid_lb_seconds_total", s.LB},
		{"esgrid_barrier_bound_seconds_total", s.BarrierBound},
		{"esgrid_wasted_seconds_total", s.Wasted},
		{`esgrid_tasks_sent_total{kind="original"}`, float64(s.Originals)},
		{`esgrid_tasks_sent_total{kind="resend"}`, float64(s.Resends)},
		{`esgrid_tasks_sent_total{kind="replica"}`, float64(s.Replicas)},
		{`esgrid_cancels_total{outcome="held"}`, float64(s.CancelsHeld)},
		{`esgrid_cancels_total{outcome="running"}`, float64(s.CancelsRunning)},
		{`esgrid_cancels_total{outcome="late"}`, float64(s.CancelsLate)},
		{`esgrid_results_total{outcome="duplicate"}`, float64(s.Duplicates)},
		{"esgrid_generations_total", float64(len(s.Generations))},
	} {
		if v, ok := got[c.series]; !ok || v != c.report {
			t.Errorf("%s = %v (exported: %v); the report says %v", c.series, v, ok, c.report)
		}
	}
	var sum time.Duration
	for _, g := range gens {
		sum += g.Between
	}
	if want := 3_000_001 * (1 + 2 + 3 + 4 + 5 + 6); sum != time.Duration(want) || s.Between == 0 {
		t.Errorf("between generations: %v in the report, want %v s", s.Between, time.Duration(want).Seconds())
	}
}

// gather returns every counter and gauge reg exports, by name{labels}.
func gather(t *testing.T, reg interface {
	Gather() ([]*dto.MetricFamily, error)
}) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			if ls := m.GetLabel(); len(ls) > 0 {
				key += "{"
				for i, l := range ls {
					if i > 0 {
						key += ","
					}
					key += l.GetName() + `="` + l.GetValue() + `"`
				}
				key += "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
