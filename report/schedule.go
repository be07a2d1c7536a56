package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/sched"
)

// Schedule is the grid's account of a run in the -report file: the
// paper's times (total, sync wait, comm, compute), the efficiency against
// the lower bounds, what the policy did (replicas, cancels), and the
// master's traffic. Times are in seconds.
type Schedule struct {
	Policy  string `json:"policy"`
	Workers int    `json:"workers"` // workers that joined during the run, each name once
	Joins   int    `json:"joins"`   // joins: a worker back from a child master, or reconnecting, counts again
	// The time figures are sums over the generations, in their order, of
	// each generation's figure in seconds (metrics.Seconds): the very
	// numbers the Prometheus counters add (docs/metrics.md: "Report and
	// Prometheus").
	Total     float64 `json:"total"` // the generations' durations
	SyncWait  float64 `json:"sync_wait"`
	Comm      float64 `json:"comm"`       // ours: outside the sync wait, starved slots left out
	CommPaper float64 `json:"comm_paper"` // the paper's: every moment a worker slot did not execute
	Compute   float64 `json:"compute"`
	// Busy is the time a slot executed, averaged over the workers present
	// in each generation: Busy/Total is the master's utilisation.
	Busy float64 `json:"busy"`
	// Between is the time between generations (selection, the next
	// batch, a checkpoint), outside Total.
	Between      float64 `json:"between"`
	LB           float64 `json:"lb"`            // Σ of each generation's LB
	BarrierBound float64 `json:"barrier_bound"` // Σ of each generation's LB + the round trip as it was estimated then
	// RoundTrip is the run's round trip as estimated at its end.
	RoundTrip         float64 `json:"round_trip"`
	EfficiencyLB      float64 `json:"efficiency_lb"` // LB ÷ total
	EfficiencyBarrier float64 `json:"efficiency_barrier"`
	Counts
	Stale       int64            `json:"stale"` // results of an earlier generation, discarded
	TasksSent   int64            `json:"tasks_sent"`
	Results     int64            `json:"results"`
	BytesOut    int64            `json:"bytes_out"` // master to workers, on the wire
	BytesIn     int64            `json:"bytes_in"`
	Generations []ScheduleGen    `json:"generations"`
	PerWorker   []ScheduleWorker `json:"per_worker"`
	Masters     *Masters         `json:"masters,omitempty"` // the overload test and splits (split.go)
	// Timeline is the task instances per worker (instances.go).
	Timeline *Timeline `json:"timeline,omitempty"`
}

// Counts are the policy's actions.
type Counts struct {
	Originals      int     `json:"originals"`       // tasks sent: each task's first instance
	Resends        int     `json:"resends"`         // tasks sent again from Q (withdrawn, overdue, failed, lost)
	Replicas       int     `json:"replicas"`        // instances sent as replicas
	CancelsHeld    int     `json:"cancels_held"`    // cancels that removed an instance from a remote queue before it ran (the workers' word)
	CancelsRunning int     `json:"cancels_running"` // cancels that stopped a running instance
	CancelsLate    int     `json:"cancels_late"`    // cancels that found the instance finished
	Aborted        int     `json:"aborted"`
	Wasted         float64 `json:"wasted"` // execution time of aborted instances
	Dropped        int     `json:"dropped"`
	Duplicates     int     `json:"duplicates"` // results of a task already done, discarded
}

func newCounts(c sched.Counts) Counts {
	return Counts{
		Originals: c.Originals, Resends: c.Resends, Replicas: c.Replicas, CancelsHeld: c.CancelsHeld, CancelsRunning: c.CancelsRunning, CancelsLate: c.CancelsLate,
		Aborted: c.Aborted, Wasted: c.Wasted.Seconds(), Dropped: c.Dropped, Duplicates: c.Duplicates,
	}
}

// ScheduleGen is one generation's account.
type ScheduleGen struct {
	Gen            int     `json:"gen"`
	Tasks          int     `json:"tasks"`
	Start          float64 `json:"start"` // seconds since the first generation started
	End            float64 `json:"end"`
	Total          float64 `json:"total"`
	SyncWait       float64 `json:"sync_wait"`
	Comm           float64 `json:"comm"`
	CommPaper      float64 `json:"comm_paper"`
	Compute        float64 `json:"compute"`
	Busy           float64 `json:"busy"`    // mean time a worker slot executed
	Between        float64 `json:"between"` // since the previous generation's end
	LB             float64 `json:"lb"`
	RoundTrip      float64 `json:"round_trip"` // as estimated when its figures were final
	Workers        int     `json:"workers"`
	Originals      int     `json:"originals"`
	Resends        int     `json:"resends"`
	Replicas       int     `json:"replicas"`
	CancelsHeld    int     `json:"cancels_held"`
	CancelsRunning int     `json:"cancels_running"`
	CancelsLate    int     `json:"cancels_late"`
}

// ScheduleWorker is one worker's account.
type ScheduleWorker struct {
	Worker    int     `json:"worker"`         // the master's id for it
	Name      string  `json:"name,omitempty"` // as it introduced itself (esworker -name); see workers.go
	Host      string  `json:"host,omitempty"` // the address it connected from
	Slots     int     `json:"slots"`
	Present   float64 `json:"present"`
	Busy      float64 `json:"busy"`      // slot-seconds spent executing
	SyncWait  float64 `json:"sync_wait"` // of present, inside the sync waits
	Starved   float64 `json:"starved"`   // slot-seconds with nothing to run while Q was empty, before the sync waits
	Comm      float64 `json:"comm"`
	CommPaper float64 `json:"comm_paper"`
	Accepted  int     `json:"accepted"` // results that counted
	MeanExec  float64 `json:"mean_exec"`
	// ExecSpread: the standard deviation of its finished tasks' times
	// over their mean.
	ExecSpread float64 `json:"exec_spread"`
	RoundTrip  float64 `json:"round_trip"`
	// Joined and Left are when it joined and left, on the generations'
	// clock (negative: before the first generation); Left is absent
	// while it was still there at the end.
	Joined float64  `json:"joined"`
	Left   *float64 `json:"left,omitempty"`
}

// NewSchedule summarises the master's ledger and counters. The
// ledger numbers its batches from 0; startGen is the generation of the
// first.
func NewSchedule(policy string, r sched.Report, st grid.MasterStats, startGen int) *Schedule {
	s := &Schedule{
		Policy: policy, Workers: st.Named, Joins: st.Joined, RoundTrip: r.RoundTrip.Seconds(),
		Stale: st.Stale, TasksSent: st.TasksSent, Results: st.Results,
		BytesOut: st.BytesOut, BytesIn: st.BytesIn,
		Generations: make([]ScheduleGen, 0, len(r.Generations)),
		PerWorker:   make([]ScheduleWorker, 0, len(r.Workers)),
	}
	var t0 time.Duration
	if len(r.Generations) > 0 {
		t0 = r.Generations[0].Start
	}
	sec := metrics.Seconds
	var counts sched.Counts
	var wasted float64
	for _, g := range r.Generations {
		s.Generations = append(s.Generations, ScheduleGen{
			Gen: startGen + g.Index, Tasks: g.Tasks, Start: (g.Start - t0).Seconds(), End: (g.End - t0).Seconds(),
			Total: sec(g.Total), SyncWait: sec(g.SyncWait),
			Comm: sec(g.Comm), CommPaper: sec(g.CommPaper), Compute: sec(g.Compute), Busy: sec(g.Busy), Between: sec(g.Between),
			LB: sec(g.LB), RoundTrip: sec(g.RoundTrip), Workers: g.Workers, Originals: g.Originals, Resends: g.Resends, Replicas: g.Replicas,
			CancelsHeld: g.CancelsHeld, CancelsRunning: g.CancelsRunning, CancelsLate: g.CancelsLate,
		})
		// The same additions, in the same order, as metrics.Master.Generation.
		s.SyncWait += sec(g.SyncWait)
		s.Comm += sec(g.Comm)
		s.CommPaper += sec(g.CommPaper)
		s.Compute += sec(g.Compute)
		s.Total += sec(g.Total)
		s.Between += sec(g.Between)
		s.Busy += sec(g.Busy)
		wasted += sec(g.Wasted)
		if g.LB > 0 {
			s.LB += sec(g.LB)
			s.BarrierBound += sec(g.LB + g.RoundTrip)
		}
		counts.Originals += g.Originals
		counts.Resends += g.Resends
		counts.Replicas += g.Replicas
		counts.CancelsHeld += g.CancelsHeld
		counts.CancelsRunning += g.CancelsRunning
		counts.CancelsLate += g.CancelsLate
		counts.Aborted += g.Aborted
		counts.Dropped += g.Dropped
		counts.Duplicates += g.Duplicates
	}
	s.Counts = newCounts(counts)
	s.Wasted = wasted
	if s.Total > 0 {
		s.EfficiencyLB, s.EfficiencyBarrier = s.LB/s.Total, s.BarrierBound/s.Total
	}
	for _, w := range r.Workers {
		var left *float64
		if w.Left >= 0 && w.Left+w.Joined > 0 { // both 0: it never joined
			left = new((w.Left - t0).Seconds())
		}
		s.PerWorker = append(s.PerWorker, ScheduleWorker{
			Joined: (w.Joined - t0).Seconds(), Left: left,
			Worker: int(w.Worker), Slots: w.Slots, Present: w.Present.Seconds(), Busy: w.Busy.Seconds(),
			SyncWait: w.SyncWait.Seconds(), Starved: w.Starved.Seconds(),
			Comm: w.Comm.Seconds(), CommPaper: w.CommPaper.Seconds(), Accepted: w.Accepted, MeanExec: w.MeanExec.Seconds(), ExecSpread: w.ExecSpread, RoundTrip: w.RoundTrip.Seconds(),
		})
	}
	return s
}

// Summary is the schedule in two lines: where the time went, and what
// the policy did.
func (s *Schedule) Summary() string {
	slots := s.slots()
	d := func(sec float64) time.Duration { return logx.Round(time.Duration(sec * float64(time.Second))) }
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %s on %s (%s): total %v = compute %v + sync wait %v + comm %v (the paper's comm: %v), and %v between generations; efficiency %s of LB %v\n",
		s.Policy, plural(s.Workers, "worker"), plural(slots, "slot"),
		d(s.Total), d(s.Compute), d(s.SyncWait), d(s.Comm), d(s.CommPaper), d(s.Between), percent(s.EfficiencyLB), d(s.LB))
	fmt.Fprintf(&b, "tasks: %d originals, %d resends, %d replicas; cancels %d held, %d running, %d late; %d duplicate and %d stale results discarded\n",
		s.Originals, s.Resends, s.Replicas, s.CancelsHeld, s.CancelsRunning, s.CancelsLate, s.Duplicates, s.Stale)
	return b.String()
}

// slots is the workers' slots, each name's once (its most): a worker
// that joins again (back from a child master, or reconnecting) is a new
// entry under the same name, and Workers counts names. An entry with no
// name counts on its own.
func (s *Schedule) slots() int {
	n := 0
	most := make(map[string]int)
	for _, w := range s.PerWorker {
		if w.Name == "" {
			n += w.Slots
		} else {
			most[w.Name] = max(most[w.Name], w.Slots)
		}
	}
	for _, k := range most {
		n += k
	}
	return n
}

// percent writes a ratio as a percentage precise enough to compare runs:
// one decimal from 10 %, two significant digits below (a trivial fitness
// makes efficiencies of a fraction of a percent), "<0.01%" for less.
func percent(r float64) string {
	p := 100 * r
	switch {
	case p != p || math.Abs(p) >= 9.95: // rounds to 10 or more
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	case p == 0:
		return "0%"
	case p > 0 && p < 0.01:
		return "<0.01%"
	}
	return strconv.FormatFloat(p, 'g', 2, 64) + "%"
}
