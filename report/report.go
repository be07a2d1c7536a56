// Package report is the JSON report of an esgrid run (esrun -report
// FILE). A run writes it: a Recorder follows the ES generation by
// generation (the progress line, its rate and ETA), and the grid's
// account is added at the end (Schedule, the task instances' Timeline,
// the Masters' splits); Write writes it whole or not at all. A reader
// reads it back (Read), summarises it in text and draws it: the time of
// every generation stacked as compute, sync wait and comm, the efficiency
// against LB, the convergence, the utilisation of every worker and a
// timeline per worker of its task instances.
//
//	rep, err := report.Read("run.json")
//	fmt.Print(report.Summary(rep))
//	err = report.Draw(rep, "run.svg", report.SVG, 1200, 2100)
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Report is the part of esrun's -report file that this package reads.
type Report struct {
	Config struct {
		Problem  string `json:"problem"`
		Strategy string `json:"strategy"`
		Mu       int    `json:"mu"`
		Lambda   int    `json:"lambda"`
		Dim      int    `json:"dim"`
		Seed     uint64 `json:"seed"`
		Grid     *struct {
			Sched string `json:"sched"`
		} `json:"grid"`
		Evaluator string `json:"evaluator"`
	} `json:"config"`
	Generations []struct {
		Gen   int      `json:"gen"`
		Evals int      `json:"evals"`
		Best  *float64 `json:"best"`
		Mean  *float64 `json:"mean"`
	} `json:"generations"`
	Stop string `json:"stop"`
	Best struct {
		F *float64 `json:"f"`
	} `json:"best"`
	Evals       int     `json:"evals"`
	WallSeconds float64 `json:"wall_seconds"`
	Schedule    *struct {
		Policy            string  `json:"policy"`
		Workers           int     `json:"workers"`
		Total             float64 `json:"total"`
		SyncWait          float64 `json:"sync_wait"`
		Comm              float64 `json:"comm"`
		CommPaper         float64 `json:"comm_paper"`
		Compute           float64 `json:"compute"`
		Busy              float64 `json:"busy"`
		Between           float64 `json:"between"`
		LB                float64 `json:"lb"`
		BarrierBound      float64 `json:"barrier_bound"`
		RoundTrip         float64 `json:"round_trip"`
		EfficiencyLB      float64 `json:"efficiency_lb"`
		EfficiencyBarrier float64 `json:"efficiency_barrier"`
		Originals         int     `json:"originals"`
		Resends           int     `json:"resends"`
		Replicas          int     `json:"replicas"`
		CancelsHeld       int     `json:"cancels_held"`
		CancelsRunning    int     `json:"cancels_running"`
		CancelsLate       int     `json:"cancels_late"`
		Wasted            float64 `json:"wasted"`
		Duplicates        int     `json:"duplicates"`
		Stale             int     `json:"stale"`
		Generations       []struct {
			Gen       int     `json:"gen"`
			Start     float64 `json:"start"`
			End       float64 `json:"end"`
			LB        float64 `json:"lb"`
			Total     float64 `json:"total"`
			SyncWait  float64 `json:"sync_wait"`
			Comm      float64 `json:"comm"`
			CommPaper float64 `json:"comm_paper"`
			Compute   float64 `json:"compute"`
			Replicas  int     `json:"replicas"`
		} `json:"generations"`
		PerWorker []struct {
			Worker    int      `json:"worker"`
			Name      string   `json:"name"`
			Host      string   `json:"host"`
			Slots     int      `json:"slots"`
			Present   float64  `json:"present"`
			Busy      float64  `json:"busy"`
			Comm      float64  `json:"comm"`
			CommPaper float64  `json:"comm_paper"`
			Accepted  int      `json:"accepted"`
			MeanExec  float64  `json:"mean_exec"`
			RoundTrip float64  `json:"round_trip"`
			Joined    float64  `json:"joined"`
			Left      *float64 `json:"left"` // absent: there at the end
		} `json:"per_worker"`
		Timeline *struct {
			Limit     int        `json:"limit"`
			FromGen   int        `json:"from_gen"`
			Omitted   int        `json:"omitted"`
			Instances []Instance `json:"instances"`
		} `json:"timeline"`
	} `json:"schedule"`
}

// Instance is one task instance of the report's timeline.
type Instance struct {
	Worker int     `json:"worker"`
	Gen    int     `json:"gen"`
	Kind   string  `json:"kind"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
}

// maxReport bounds the file read: a report of a million generations is
// a few hundred MB.
const maxReport = 1 << 30

// maxSlots bounds a worker's slots in a report: a master takes no
// worker of more (grid.MaxMetaSlots), and the timeline draws a lane per
// slot.
const maxSlots = 1 << 16

// maxTime bounds the times of a report's timeline, in seconds from the
// run's start: a century. A generation from −1e308 s to 1e308 s (a
// damaged or hostile file) made the timeline's axis span +Inf, and
// drawing it never ended.
const maxTime = 100 * 365.25 * 24 * 3600

// inRun says whether t, seconds from the run's start, can be a time of a
// run.
func inRun(t float64) bool { return t >= -maxTime && t <= maxTime }

// Read reads the report at path (at most 1 GiB); a file that is not an
// esrun report, one without a generation, or one with a worker of more
// slots than a master takes, is an error.
func Read(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rep Report
	dec := json.NewDecoder(io.LimitReader(f, maxReport))
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: not an esrun report: %w", path, err)
	}
	if len(rep.Generations) == 0 && rep.Schedule == nil {
		return nil, fmt.Errorf("%s: the report has no generation", path)
	}
	if s := rep.Schedule; s != nil {
		for _, w := range s.PerWorker {
			if w.Slots < 0 || w.Slots > maxSlots {
				return nil, fmt.Errorf("%s: worker %d has %d slots, outside [0, %d]: not an esrun report", path, w.Worker, w.Slots, maxSlots)
			}
			if !inRun(w.Joined) || w.Left != nil && !inRun(*w.Left) {
				return nil, fmt.Errorf("%s: worker %d joined or left at a time outside ±%g s: not an esrun report", path, w.Worker, maxTime)
			}
		}
		for _, g := range s.Generations {
			if !inRun(g.Start) || !inRun(g.End) {
				return nil, fmt.Errorf("%s: generation %d runs from %g s to %g s, outside ±%g s: not an esrun report", path, g.Gen, g.Start, g.End, maxTime)
			}
		}
		if s.Timeline != nil {
			for _, in := range s.Timeline.Instances {
				if !inRun(in.Start) || !inRun(in.End) {
					return nil, fmt.Errorf("%s: an instance of generation %d runs from %g s to %g s, outside ±%g s: not an esrun report", path, in.Gen, in.Start, in.End, maxTime)
				}
			}
		}
	}
	return &rep, nil
}
