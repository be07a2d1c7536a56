package report

import (
	"time"

	"github.com/esgrid/esgrid/grid"
)

// Masters is the overload test and what splitting did, in the
// -report file's schedule.
type Masters struct {
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
	Timeline              []MastersPoint `json:"timeline,omitempty"`
}

// MastersPoint is the number of masters from a moment on.
type MastersPoint struct {
	At      float64 `json:"at"` // seconds on the generations' clock, as the schedule's times (negative: before the first)
	Masters int     `json:"masters"`
}

// NewMasters is the masters' record; t0 is when the first
// generation started, on the master's clock.
func NewMasters(rule string, st grid.MasterStats, t0 time.Duration) *Masters {
	s := st.SplitStats
	r := &Masters{
		Rule: rule, OverloadWindow: s.OverloadWindow, OverloadMean: s.OverloadMean, Overloaded: s.Overloaded,
		OverloadedAssignments: s.OverloadedAssignments, Assignments: st.Assignments, InboxWaiting: st.InboxWaiting,
		MastersMax: max(s.MastersMax, 1), Splits: s.Splits, Suppressed: s.Suppressed, Lent: s.Lent,
		FromChildren: s.FromChildren, GivenBack: s.GivenBack, Requests: s.Requests, Grants: s.Grants,
		Refusals: s.Refusals, ChildrenLost: s.ChildrenLost,
	}
	for _, p := range s.Timeline {
		r.Timeline = append(r.Timeline, MastersPoint{At: (p.At - t0).Seconds(), Masters: p.Masters})
	}
	return r
}
