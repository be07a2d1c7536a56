// Package calibrate measures a grid's machines for the execution-time
// models of docs/papers.md §4 (package sched/plan fits and searches them) and
// turns the best configuration into the plan file that grid reads
// (grid.Plan, esrun -plan and esworker -plan).
//
// A calibration comes from the live grid (Grid: this process is the
// master, workers join it as they join esrun, each task is the built-in
// sphere with an N×N LU load) or from esrun -report files (FromReports).
//
//	cal, err := calibrate.Grid(ctx, calibrate.Config{Workers: 4, Key: key, Sizes: sizes, Slots: []int{1, 2}})
//	ms, err := plan.Fit(cal, plan.Options{})
//	res, err := plan.Search(ms, plan.Request{N: 200, Tasks: 70, Groups: cal.Groups()})
//	p := calibrate.PlanFile(cal, cal.Groups(), 200, 70, res)
package calibrate

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched/plan"
)

// Config is a calibration of the live grid.
type Config struct {
	// Workers is how many workers to wait for, and measure; at least 1.
	Workers int
	// Listen is the data address workers connect to (port 0: any, then
	// kept for every size).
	Listen string
	// Gossip is the gossip address workers join; empty: none (workers
	// are given the data address).
	Gossip string
	// Key is the cluster key.
	Key *grid.Key
	// Sizes are the LU sizes N to measure, ascending, each once: at least
	// plan.MinSizes, well spread.
	Sizes []int
	// Slots are the slot counts M per machine, ascending, each once
	// (capped at each machine's CPUs, which are always measured too).
	Slots []int
	// Reps is the number of tasks per busy slot in each batch; at least 1.
	Reps int
	// Wait is how long to wait for the workers at each size.
	Wait time.Duration
	// GroupBy is "prefix" (a machine's group is its name without
	// trailing -<number> parts, grid.GroupOf) or "worker" (each its own).
	GroupBy string
	// Logger logs the grid's events; nil: none.
	Logger *slog.Logger
	// Progress receives a line per batch, the address to give workers and
	// the notes; nil: none.
	Progress io.Writer
	// OnListen, if not nil, is told the data address once it is known.
	OnListen func(addr string)
}

// Grid measures the live grid: per size N, one master on one data
// address, behind one gossip member; for each M, every group's first
// machine alone with M slots (P = M), then the first k machines in turn
// over the groups (k = 2, ..., all: P > M). The time of a task is what
// the worker reports it executed. Workers must stay for the whole
// calibration. On an error, it returns what was measured so far too.
func Grid(ctx context.Context, cfg Config) (*plan.Calibration, error) {
	log, progress := cfg.Logger, cfg.Progress
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if progress == nil {
		progress = io.Discard
	}
	c := &calibrator{cfg: cfg, key: cfg.Key, log: log, progress: progress, onListen: cfg.OnListen}
	return c.run(ctx)
}
