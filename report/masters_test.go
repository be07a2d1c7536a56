package report

import (
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
)

func TestMastersRecord(t *testing.T) {
	st := grid.MasterStats{Assignments: 100}
	st.SplitStats = grid.SplitStats{OverloadWindow: 18, OverloadMean: 1.5, Overloaded: true, MastersMax: 3, Splits: 2,
		Timeline: []grid.MastersAt{{Masters: 1}, {At: time.Second, Masters: 2}}}
	// The first generation started 250 ms after the master: the timeline
	// is on the generations' clock, as the schedule's times.
	r := NewMasters("paper", st, 250*time.Millisecond)
	if r.Rule != "paper" || r.OverloadWindow != 18 || !r.Overloaded || r.MastersMax != 3 || r.Assignments != 100 ||
		len(r.Timeline) != 2 || r.Timeline[0].At != -0.25 || r.Timeline[1].At != 0.75 {
		t.Errorf("%+v", r)
	}
	if r := NewMasters("off", grid.MasterStats{}, 0); r.MastersMax != 1 {
		t.Errorf("no split: %d masters", r.MastersMax)
	}
}
