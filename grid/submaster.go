package grid

import (
	"fmt"
	"math"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// Masters that split (docs/papers.md §2): the overload test, and
// the configuration and counters of splitting. The protocol between
// masters is in split.go.

// SplitRule says when an overloaded master splits.
type SplitRule uint8

// The split rules.
const (
	// SplitOff: never split; the overload test still runs and is
	// reported.
	SplitOff SplitRule = iota
	// SplitPaper: the paper's plain rule: overloaded and at least 4
	// running workers (so that neither master is left with one child).
	SplitPaper
	// SplitGain: the paper's rule, and only when the expected throughput
	// after the split, with one worker fewer computing, beats the
	// throughput now (docs/papers.md §2's caveat; see expectedGain).
	SplitGain
)

// String names the rule as flags spell it.
func (r SplitRule) String() string {
	switch r {
	case SplitOff:
		return "off"
	case SplitPaper:
		return "paper"
	case SplitGain:
		return "gain"
	}
	return fmt.Sprintf("split(%d)", uint8(r))
}

// ParseSplitRule reads "off", "paper" or "gain".
func ParseSplitRule(s string) (SplitRule, error) {
	for _, r := range []SplitRule{SplitOff, SplitPaper, SplitGain} {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("grid: unknown split rule %q (off, paper, gain)", s)
}

// SplitConfig configures the overload test and splitting.
type SplitConfig struct {
	// Rule says when an overloaded master splits. Default SplitOff.
	Rule SplitRule
	// Window is n of the overload test: the master is overloaded when
	// the messages waiting for it right after an assignment, averaged
	// over the last n assignments, reach 1. 0 means the paper's 2 ×
	// processors, 2 × (1 + the slots of the workers connected), at most
	// sched.MaxDefaultOverloadWindow (512): beyond a few hundred, a
	// larger n only delays the decision.
	Window int
	// MessageCost, when > 0, makes the master spend that long (asleep) on
	// every message from a worker before handling it: a master made
	// artificially slow, to saturate it with fine-grained tasks on a few
	// machines. A child master inherits it. Default 0; at most
	// MaxMessageCost.
	MessageCost time.Duration
	// GainMargin is how much better (as a fraction) SplitGain's expected
	// throughput after a split must be: finite and ≥ 0. Default 0.1.
	GainMargin float64
}

// MaxOverloadWindow bounds SplitConfig.Window.
const MaxOverloadWindow = sched.MaxOverloadWindow

// MaxMessageCost bounds SplitConfig.MessageCost (esrun -master-cost): an
// emulation knob, not a setting. A child master inherits its parent's,
// so a worker refuses a Promote that asks more (Promote.Check).
const MaxMessageCost = time.Second

// check says why c cannot be a master's, or nil.
func (c SplitConfig) check() error {
	switch {
	case c.Rule > SplitGain:
		return fmt.Errorf("unknown split rule %d", uint8(c.Rule))
	case c.Window < 0 || c.Window > MaxOverloadWindow:
		return fmt.Errorf("overload window %d outside [0, %d]", c.Window, MaxOverloadWindow)
	case c.MessageCost < 0 || c.MessageCost > MaxMessageCost:
		return fmt.Errorf("message cost %v outside [0, %v]", c.MessageCost, MaxMessageCost)
	case c.GainMargin < 0 || math.IsNaN(c.GainMargin) || math.IsInf(c.GainMargin, 0):
		return fmt.Errorf("gain margin %v: want a finite fraction ≥ 0", c.GainMargin)
	}
	return nil
}

// SplitStats are the overload test and what splitting did, in
// MasterStats.
type SplitStats struct {
	// OverloadWindow is n now; OverloadMean the mean of the messages
	// waiting after each of the last n assignments (over fewer while
	// fewer were made); Overloaded the test's decision now (only with n
	// assignments made).
	OverloadWindow int
	OverloadMean   float64
	Overloaded     bool
	// OverloadedAssignments counts the assignments after which the test
	// said overloaded.
	OverloadedAssignments int64
	// Masters is the number of masters working on this master's batch
	// now: itself and its children's trees. MastersMax is the most seen.
	Masters, MastersMax int
	// Splits counts the children this master made; Suppressed the
	// splits an overload asked for and the rule refused (too few
	// running workers, or, under SplitGain, no expected gain).
	Splits, Suppressed int64
	// Lent counts tasks handed to children (at a split or in a grant);
	// FromChildren the results they returned; GivenBack the tasks they
	// gave back unfinished (a grant to this master, or a child lost).
	Lent, FromChildren, GivenBack int64
	// Requests, Grants and Refusals count task requests this master
	// sent, and the grants and refusals it received.
	Requests, Grants, Refusals int64
	// ChildrenLost counts children whose link broke before they
	// returned.
	ChildrenLost int64
	// Timeline is the number of masters over time (since the master
	// started), one point per change, at most maxTimeline.
	Timeline []MastersAt
}

// MastersAt is one point of SplitStats.Timeline.
type MastersAt struct {
	At      time.Duration
	Masters int
}

const maxTimeline = 4096

// splitState is the loop's state for the overload test and splitting.
type splitState struct {
	slots int            // Σ slots of the workers joined and not left
	test  sched.Overload // docs/papers.md §2's overload test
	// The messages from workers this turn of the loop took, and how many
	// were waiting behind each, summed (noteAssigned).
	turnMsgs    int
	turnWaiting int64
	stats       SplitStats

	*splitProto // the protocol's state (split.go); nil until needed
}

// window is n now.
func (m *Master) window() int {
	if n := m.cfg.Split.Window; n > 0 {
		return min(n, MaxOverloadWindow)
	}
	return sched.DefaultOverloadWindow(1 + max(m.split.slots, 0))
}

// noteAssigned records k assignments (docs/papers.md §2: the messages already
// waiting for the master are counted right after each). This master
// takes every waiting message before it writes the tasks they caused
// (so that several results from one worker become one frame back), so
// the count for the tasks of a turn is how many messages were waiting
// behind each message the turn took, on average: for a master that takes
// one message and assigns at once, exactly the paper's count. A turn
// that took no message from a worker (a deadline, a call) counts the
// inbox as it is (waiting).
func (m *Master) noteAssigned(k, waiting int) {
	s := &m.split
	if s.turnMsgs > 0 {
		waiting = int((s.turnWaiting + int64(s.turnMsgs)/2) / int64(s.turnMsgs))
	}
	s.test.SetWindow(m.window())
	s.test.Note(k, waiting)
}

// messageTaken notes a message from a worker just taken from the inbox
// with waiting others behind it, and spends the emulated cost of
// handling it (SplitConfig.MessageCost).
func (m *Master) messageTaken(waiting int) {
	m.split.turnMsgs++
	m.split.turnWaiting += int64(waiting)
	m.messageCost()
}

// endTurn forgets the turn's counts.
func (s *splitState) endTurn() { s.turnMsgs, s.turnWaiting = 0, 0 }

// overloaded is the test's decision now.
func (m *Master) overloaded() bool {
	m.split.test.SetWindow(m.window())
	return m.split.test.Overloaded()
}

// splitStats is the SplitStats part of Stats, on the loop.
func (m *Master) splitStats() SplitStats {
	st := m.split.stats
	m.split.test.SetWindow(m.window())
	st.OverloadWindow = m.split.test.Window()
	st.OverloadMean = m.split.test.Mean()
	st.Overloaded = m.split.test.Overloaded()
	st.OverloadedAssignments = m.split.test.OverloadedAfter
	st.Masters = max(m.mastersNow(), 1)
	st.MastersMax = max(st.MastersMax, st.Masters)
	st.Timeline = append([]MastersAt(nil), st.Timeline...)
	return st
}

// messageCost is the emulated cost of handling one message
// (SplitConfig.MessageCost). It gives way to Close, so that a slow
// master still stops at once.
func (m *Master) messageCost() {
	if d := m.cfg.Split.MessageCost; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-m.quit:
		}
	}
}
