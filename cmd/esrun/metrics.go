package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/livepage"
	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// monitor is a run's Prometheus metrics (-metrics ADDR): the master's,
// fed by its ledger's per-generation output and read from the master at
// each scrape, the local agents', and the ES's progress.
type monitor struct {
	reg    *prometheus.Registry
	master *metrics.Master
	live   *livepage.Page // the status page at /
	stop   context.CancelFunc
	done   <-chan struct{}
}

// newMonitor returns the run's metrics, or nil without -metrics.
func newMonitor(o *options, problem string) *monitor {
	if o.metrics == "" {
		return nil
	}
	return &monitor{reg: metrics.NewRegistry(), master: metrics.NewMaster(nil), live: livepage.New(o.sched, problem)}
}

// onInstance is the ledger's OnInstance for the status page (nil
// without metrics).
func (mon *monitor) onInstance() func(sched.Instance) {
	if mon == nil {
		return nil
	}
	return mon.live.Instance
}

// onGeneration is the ledger's OnGeneration (nil without metrics).
func (mon *monitor) onGeneration() func(sched.Generation) {
	if mon == nil {
		return nil
	}
	return mon.master.Generation
}

// start registers the grid's metrics and serves them on o.metrics,
// saying where on stderr.
func (mon *monitor) start(o *options, g *localGrid, problem string, con logx.Console) error {
	if mon == nil {
		return nil
	}
	mon.master.SetState(g.master.MetricsState)
	mon.live.SetMaster(g.master)
	mon.master.SetRun(o.sched, problem)
	if err := mon.master.Register(mon.reg); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if g.gossip != nil {
		if err := mon.reg.Register(metrics.NewGossip(g.gossip.Refused, grid.GossipRefusedKinds()...)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	for _, a := range g.Agents() {
		if err := mon.reg.Register(metrics.NewAgent(a.Name(), func() metrics.AgentState { return agentState(a) })); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := metrics.Serve(ctx, o.metrics, mon.reg, con.Log, mon.live.Handler())
	if err != nil {
		cancel()
		return addrError("-metrics", o.metrics, err)
	}
	mon.stop, mon.done = cancel, done
	url := "http://" + addr + "/metrics"
	con.Say(slog.LevelInfo, "esrun: metrics on "+url+", the run's status page on http://"+addr+"/", "serving metrics", "url", url)
	return nil
}

// progress takes the ES's state after each generation, and the
// estimates of the terminal's line.
func (mon *monitor) progress(s es.Stats, est *report.Progress) {
	if mon != nil {
		mon.master.Progress(s.Gen, s.Best, s.Mean, s.Evals)
		mon.live.Generation(s, est)
	}
}

// close keeps serving for linger (so that Prometheus scrapes the run's
// final figures), then stops the server.
func (mon *monitor) close(linger time.Duration, con logx.Console) {
	if mon == nil || mon.stop == nil {
		return
	}
	if linger > 0 {
		con.Say(slog.LevelInfo, fmt.Sprintf("esrun: serving the final metrics for %v more", linger), "serving the final metrics", "linger", linger)
		time.Sleep(linger)
	}
	mon.stop()
	<-mon.done
}

// agentState is a local agent's activity, as the metrics take it.
func agentState(a *worker.Agent) metrics.AgentState {
	act := a.Activity()
	return metrics.AgentState{
		Slots: act.Slots, Connected: act.Connected, Held: act.Held, Running: act.Running,
		Finished: act.Finished, Cancelled: act.Cancelled, Failed: act.Failed, Busy: act.Busy, Session: act.Session,
	}
}
