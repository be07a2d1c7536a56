package report

import (
	"slices"
	"sync"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// MaxTimeline is how many task instances a report's timeline holds at
// most. A run of a million tasks would otherwise make a report of
// hundreds of MB: past the limit the timeline keeps the instances of the
// latest generations, whole, and says from which generation on it is
// complete (timelineRecord.FromGen).
const MaxTimeline = 20000

// Timeline is the run's task instances, per worker, in the -report
// file: what esreport's per-worker timeline draws. Times are seconds on
// the run's clock (0: the first generation started), as the schedule's
// generations.
type Timeline struct {
	Limit int `json:"limit"` // maxTimeline
	// FromGen is the first generation whose instances are here: all of
	// them, unless one generation alone had more than Limit. Omitted
	// counts the instances left out.
	FromGen   int              `json:"from_gen"`
	Omitted   int              `json:"omitted"`
	Instances []InstanceRecord `json:"instances"`
}

// InstanceRecord is one instance of a task on a worker, once it ended.
type InstanceRecord struct {
	Worker int `json:"worker"`
	Gen    int `json:"gen"` // the generation running when it started
	Task   int `json:"task"`
	// Kind is how it ended: "original" or "replica" (it finished),
	// "stale" (it finished after its generation had ended, so unused),
	// "cancelled_held" (a cancel dropped it from the worker's queue
	// before it ran; Start is its send), "cancelled_running" (a cancel
	// stopped it), "failed" (its evaluation returned an error; Start is
	// its send).
	Kind    string  `json:"kind"`
	Replica bool    `json:"replica,omitempty"` // of a cancelled or failed one
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
}

// Instances collects the ledger's ended instances (LedgerConfig.OnInstance)
// up to a limit, dropping the oldest generations whole.
type Instances struct {
	mu      sync.Mutex
	limit   int
	from    int // instances of generations before it are dropped
	omitted int
	ins     []sched.Instance
	// full is set while one generation alone fills the limit: its further
	// instances, and older ones, are left out at once. Without it every
	// one of them sorted the whole timeline again, on the master's loop:
	// quadratic in a generation of more than MaxTimeline tasks.
	full  bool
	sorts int // shed's sorts, which a test holds to one per many adds
}

// NewInstances collects at most limit instances (at least 1).
func NewInstances(limit int) *Instances { return &Instances{limit: max(limit, 1)} }

// Add is the ledger's OnInstance.
func (t *Instances) Add(in sched.Instance) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// An instance that ended before the first generation began (the
	// ledger's -1: a task sent while the run was being set up) belongs to
	// the run's start, not to the generations the limit dropped.
	in.Gen = max(in.Gen, 0)
	if in.Gen < t.from || t.full && in.Gen <= t.ins[0].Gen {
		t.omitted++
		return
	}
	t.ins = append(t.ins, in)
	if len(t.ins) > t.limit {
		t.shed()
	}
}

// shed drops the oldest generations whole until at most 3/4 of the
// limit is left, so that it runs once in many adds. A generation larger
// than the limit on its own keeps its first instances.
func (t *Instances) shed() {
	t.sorts++
	slices.SortStableFunc(t.ins, func(a, b sched.Instance) int { return a.Gen - b.Gen })
	last := t.ins[len(t.ins)-1].Gen
	if t.ins[0].Gen == last {
		t.ins = t.ins[:t.limit]
		t.omitted++
		t.full = true
		return
	}
	t.full = false
	cut := len(t.ins) - t.limit*3/4
	from := t.ins[cut].Gen
	if t.ins[cut-1].Gen == from {
		from++ // its generation would be cut in two: drop all of it
	}
	from = min(from, last)
	i, _ := slices.BinarySearchFunc(t.ins, from, func(in sched.Instance, g int) int { return in.Gen - g })
	t.omitted += i
	t.ins = slices.Delete(t.ins, 0, i)
	t.from = from
}

// Record is the timeline for the report: t0 is the start of the ledger's
// first generation, startGen that generation's number.
func (t *Instances) Record(t0 time.Duration, startGen int) *Timeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &Timeline{Limit: t.limit, FromGen: startGen + max(t.from, 0), Omitted: t.omitted,
		Instances: make([]InstanceRecord, 0, len(t.ins))}
	for _, in := range t.ins {
		r.Instances = append(r.Instances, InstanceRecord{
			Worker: int(in.Worker), Gen: startGen + in.Gen, Task: int(in.Task), Kind: InstanceKind(in), Replica: in.Replica && in.Kind != sched.InstanceFinished,
			Start: (in.Start - t0).Seconds(), End: (in.End - t0).Seconds(),
		})
	}
	slices.SortStableFunc(r.Instances, func(a, b InstanceRecord) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return r
}

// InstanceKind names an instance's fate as reports and the live page do:
// original, replica, stale, cancelled_held, cancelled_running or failed.
func InstanceKind(in sched.Instance) string {
	switch in.Kind {
	case sched.InstanceCancelledHeld:
		return "cancelled_held"
	case sched.InstanceCancelledRunning:
		return "cancelled_running"
	case sched.InstanceFailed:
		return "failed"
	}
	switch {
	case !in.Known:
		return "stale"
	case in.Replica:
		return "replica"
	}
	return "original"
}
