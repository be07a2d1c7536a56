package report

import (
	"math"
	"strings"
	"testing"
)

func TestPercent(t *testing.T) {
	tests := []struct {
		r    float64
		want string
	}{
		{0, "0%"},
		{0.0018, "0.18%"},
		{0.00123, "0.12%"},
		{0.05, "5%"},
		{0.0567, "5.7%"},
		{0.09996, "10.0%"},
		{0.0994, "9.9%"},
		{0.1, "10.0%"},
		{0.8766, "87.7%"},
		{1, "100.0%"},
		{1.234, "123.4%"},
		{0.00001, "<0.01%"},
		{math.NaN(), "NaN%"},
	}
	for _, tt := range tests {
		if got := percent(tt.r); got != tt.want {
			t.Errorf("percent(%v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}

// The summary of a run with trivial fitness, whose efficiency is a small
// fraction of a percent, still says how small.
func TestScheduleSummaryEfficiency(t *testing.T) {
	s := &Schedule{Policy: "r3q", Workers: 2, Total: 0.2, Compute: 0.1, SyncWait: 0.05, Comm: 0.05,
		LB: 0.000355, EfficiencyLB: 0.000355 / 0.2, PerWorker: []ScheduleWorker{{Slots: 1}, {Slots: 1}}}
	line, _, _ := strings.Cut(s.Summary(), "\n")
	if !strings.HasSuffix(line, "; efficiency 0.18% of LB 355µs") {
		t.Errorf("summary %q", line)
	}
}

// The summary counts each worker's slots once, however often it joined:
// under -split a worker moved to a child master and back joins again
// each time. Before, six 1-slot workers were "6 workers (109 slots)".
func TestScheduleSummaryCountsRejoinsOnce(t *testing.T) {
	s := &Schedule{Policy: "r3q", Workers: 3, Joins: 6, PerWorker: []ScheduleWorker{
		{Worker: 1, Name: "a", Slots: 1}, {Worker: 2, Name: "b", Slots: 2}, {Worker: 3, Name: "a", Slots: 1},
		{Worker: 4, Name: "b", Slots: 2}, {Worker: 5, Name: "a", Slots: 1}, {Worker: 6, Slots: 4}, // unnamed: its own
	}}
	line, _, _ := strings.Cut(s.Summary(), "\n")
	if !strings.HasPrefix(line, "schedule r3q on 3 workers (7 slots): ") {
		t.Errorf("summary %q; want 3 workers of 1, 2 and 4 slots", line)
	}
}
