package main

import (
	"flag"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
)

// splitOptions are the flags of masters that split (docs/papers.md §2).
type splitOptions struct {
	rule   string
	window int
	cost   time.Duration
}

func addSplitFlags(fs *flag.FlagSet, o *splitOptions) {
	fs.StringVar(&o.rule, "split", "off", "masters that split when overloaded (docs/papers.md §2): `RULE` off, paper (overloaded and ≥ 4 running workers: a worker becomes a child master over half the workers and half the queue), or gain (paper, and only when the expected throughput after the split, one worker fewer, beats it now)")
	flagx.IntVar(fs, &o.window, "overload-window", 0, 0, grid.MaxOverloadWindow, "the overload test's `N`: overloaded when the messages waiting after an assignment, averaged over the last N assignments, reach 1; 0 = 2 × processors (1 + the workers' slots)")
	flagx.BareDurationVar(fs, &o.cost, "master-cost", 0, 0, grid.MaxMessageCost, time.Millisecond, "emulate a slow master: spend `D` on every message from a worker (e.g. 500us; a bare number is milliseconds, as in essim), so that fine-grained tasks saturate one master on a few machines; child masters inherit it")
}

func (o *splitOptions) check() error {
	if _, err := grid.ParseSplitRule(o.rule); err != nil {
		return usagef("-split %q: want off, paper or gain", o.rule)
	}
	return nil
}

func (o *splitOptions) config() grid.SplitConfig {
	r, _ := grid.ParseSplitRule(o.rule)
	return grid.SplitConfig{Rule: r, Window: o.window, MessageCost: o.cost}
}

// mastersRecord is the overload test and what splitting did, in the
// -report file's schedule.
type mastersRecord struct {
	Rule                  string         `json:"rule"`
	OverloadWindow        int            `json:"overload_window"`         // n
	OverloadMean          float64        `json:"overload_mean"`           // over the last n assignments, at the end
	Overloaded            bool           `json:"overloaded"`              // the test's decision at the end
	OverloadedAssignments int64          `json:"overloaded_assignments"`  // assignments after which it said overloaded
	Assignments           int64          `json:"assignments"`             // tasks handed to workers by this master
	InboxWaiting          int64          `json:"inbox_waiting,omitempty"` // Σ inbox length at each flush (metrics)
	MastersMax            int            `json:"masters_max"`
	Splits                int64          `json:"splits"`
	Suppressed            int64          `json:"suppressed"`
	Lent                  int64          `json:"lent"`
	FromChildren          int64          `json:"from_children"`
	GivenBack             int64          `json:"given_back"`
	Requests              int64          `json:"requests"`
	Grants                int64          `json:"grants"`
	Refusals              int64          `json:"refusals"`
	ChildrenLost          int64          `json:"children_lost"`
	Timeline              []mastersPoint `json:"timeline,omitempty"`
}

type mastersPoint struct {
	At      float64 `json:"at"` // seconds on the generations' clock, as the schedule's times (negative: before the first)
	Masters int     `json:"masters"`
}

// newMastersRecord is the masters' record; t0 is when the first
// generation started, on the master's clock.
func newMastersRecord(rule string, st grid.MasterStats, t0 time.Duration) *mastersRecord {
	s := st.SplitStats
	r := &mastersRecord{
		Rule: rule, OverloadWindow: s.OverloadWindow, OverloadMean: s.OverloadMean, Overloaded: s.Overloaded,
		OverloadedAssignments: s.OverloadedAssignments, Assignments: st.Assignments, InboxWaiting: st.InboxWaiting,
		MastersMax: max(s.MastersMax, 1), Splits: s.Splits, Suppressed: s.Suppressed, Lent: s.Lent,
		FromChildren: s.FromChildren, GivenBack: s.GivenBack, Requests: s.Requests, Grants: s.Grants,
		Refusals: s.Refusals, ChildrenLost: s.ChildrenLost,
	}
	for _, p := range s.Timeline {
		r.Timeline = append(r.Timeline, mastersPoint{At: (p.At - t0).Seconds(), Masters: p.Masters})
	}
	return r
}
