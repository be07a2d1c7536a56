package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/livepage"
	"github.com/esgrid/esgrid/metrics"
)

// newMonitor returns the run's metrics (-metrics), or nil without.
func newMonitor(o *options, problem string) *livepage.Monitor {
	if o.metrics == "" {
		return nil
	}
	return livepage.NewMonitor(o.runName, o.sched, problem)
}

// startMonitor registers the grid's metrics and serves them on
// o.metrics, saying where on stderr.
func startMonitor(mon *livepage.Monitor, o *options, g *localGrid, problem string, con logx.Console) error {
	if mon == nil {
		return nil
	}
	if err := mon.Register(g.Grid, metrics.RunInfo{Seed: o.seed, Policy: o.sched, Problem: problem, Strategy: o.strategy}); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	addr, err := mon.Serve(o.metrics, con.Log)
	if err != nil {
		return flagx.ListenError("-metrics", o.metrics, err)
	}
	url := "http://" + addr + "/metrics"
	con.Say(slog.LevelInfo, "esrun: metrics on "+url+" (run="+mon.Name+", run_id="+mon.ID+"), the run's status page on http://"+addr+"/",
		"serving metrics", "url", url, "run", mon.Name, "run_id", mon.ID)
	return nil
}

// closeMonitor keeps serving the final metrics for linger, saying so,
// then stops.
func closeMonitor(mon *livepage.Monitor, linger time.Duration, con logx.Console) {
	if mon.Serving() && linger > 0 {
		con.Say(slog.LevelInfo, fmt.Sprintf("esrun: serving the final metrics for %v more", linger), "serving the final metrics", "linger", linger)
	}
	mon.Close(linger)
}
