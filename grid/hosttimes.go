package grid

import (
	"slices"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// hostTimes are the hosts' smoothed execution times, and what a worker
// that has finished nothing yet is given its deadline by: their upper
// median (Master.deadline). A host is what -verify counts as one voter
// (hostOf). A mean over every result would be the fastest answerer's: a
// key holder that claims 1 ns for its many results drives it to the
// floor, and fresh honest workers' instances, and the checks they are
// asked (four deadlines), are stopped as overdue until the checks are
// given up and its lies stand unverified. Of the hosts' times, a liar
// on fewer hosts than the honest ones measured moves the median neither
// way; on as many it can lengthen it (against one honest host the median
// is the larger of the two; the task timeout bounds a fresh worker's
// deadline), and only on more can it shorten it. Hosts count once
// measured, gone or not (a liar cannot wait out the honest hosts and set
// it alone), until they are excluded: the first maxNamesKept hosts (one
// machine may have endless IPv6 addresses). The simulator (sched/sim)
// has no liar, and keeps the mean of every result.
type hostTimes struct {
	by     map[string]*float64 // host → smoothed execution time (ns)
	median float64             // upper median of by, while !stale
	stale  bool                // a time changed since median
	sorted []float64           // scratch for median
}

// measured folds an evaluation w finished in exec into its host's mean.
// A map lookup on w's first result only: the hot path sets a flag, and
// the median waits until a fresh worker's deadline needs it.
func (h *hostTimes) measured(w *mworker, exec time.Duration) {
	if w.hostExec == nil {
		if h.by == nil {
			h.by = make(map[string]*float64)
		}
		if w.hostExec = h.by[w.host]; w.hostExec == nil {
			w.hostExec = new(float64)
			if len(h.by) < maxNamesKept {
				h.by[w.host] = w.hostExec
			} // else a host past the cap keeps a time no one reads

		}
	}
	sched.Smooth(w.hostExec, exec)
	h.stale = true
}

// exclude strikes host's time: an excluded host's word counts no more.
func (h *hostTimes) exclude(host string) {
	delete(h.by, host)
	h.stale = true
}

// grid is the upper median of the hosts' times (ns; 0: none measured).
func (h *hostTimes) grid() float64 {
	if !h.stale {
		return h.median
	}
	h.sorted = h.sorted[:0]
	for _, e := range h.by {
		if *e > 0 {
			h.sorted = append(h.sorted, *e)
		}
	}
	slices.Sort(h.sorted) // the median does not depend on the map's order
	h.median, h.stale = 0, false
	if n := len(h.sorted); n > 0 {
		h.median = h.sorted[n/2]
	}
	return h.median
}
