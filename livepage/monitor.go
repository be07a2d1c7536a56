package livepage

import (
	"context"
	"log/slog"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/localgrid"
	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
	"github.com/prometheus/client_golang/prometheus"
)

// Monitor is a run's Prometheus metrics and status page, served on one
// address (esrun -metrics ADDR): the master's metrics, fed by its
// ledger's per-generation output and read from the master at each
// scrape, its gossip's, the local agents', and the ES's progress.
//
// A nil *Monitor is a run without metrics: its methods do nothing.
type Monitor struct {
	// ID is the run's id (esgrid_run_info's run_id): 16 random hex digits.
	ID string
	// Name is the run's name, the run label of every series.
	Name string

	reg    *prometheus.Registry
	run    prometheus.Registerer // reg, every series labelled run=Name
	master *metrics.Master
	page   *Page // the status page at /
	stop   context.CancelFunc
	done   <-chan struct{}
}

// NewMonitor returns the monitor of a run of problem under policy, with
// a new random id. Its name is name, or by default the problem and the
// id's first 8 hex digits.
func NewMonitor(name, policy, problem string) *Monitor {
	id := metrics.NewRunID()
	if name == "" {
		name = problem + "-" + id[:8]
	}
	reg, run := metrics.NewRunRegistry(name)
	return &Monitor{ID: id, Name: name, reg: reg, run: run, master: metrics.NewMaster(nil), page: New(policy, problem)}
}

// OnInstance is the ledger's OnInstance for the status page (nil for a
// nil Monitor).
func (m *Monitor) OnInstance() func(sched.Instance) {
	if m == nil {
		return nil
	}
	return m.page.Instance
}

// OnGeneration is the ledger's OnGeneration for the metrics (nil for a
// nil Monitor).
func (m *Monitor) OnGeneration() func(sched.Generation) {
	if m == nil {
		return nil
	}
	return m.master.Generation
}

// Register registers the metrics of g's master, gossip, local agents
// and their plugins' processes, and of the run described by run (its ID is the Monitor's).
func (m *Monitor) Register(g *localgrid.Grid, run metrics.RunInfo) error {
	if m == nil {
		return nil
	}
	m.master.SetState(g.Master().MetricsState)
	m.page.SetMaster(g.Master())
	run.ID = m.ID
	m.master.SetRun(run)
	if err := m.master.Register(m.run); err != nil {
		return err
	}
	if gossip := g.Gossip(); gossip != nil {
		if err := m.run.Register(metrics.NewGossip(gossip.Refused, grid.GossipRefusedKinds()...)); err != nil {
			return err
		}
	}
	for _, a := range g.Agents() {
		if err := m.run.Register(metrics.NewAgent(a.Name(), func() metrics.AgentState { return metrics.AgentState(a.Activity()) })); err != nil {
			return err
		}
	}
	// The local agents share their plugins' counts (one build).
	cat := g.Catalog()
	return m.run.Register(metrics.NewPlugins("", cat.Names(), func(name string) metrics.PluginState {
		return metrics.PluginState(cat.Counters(name).Counts())
	}))
}

// Serve serves the metrics at /metrics and the status page at / on addr
// until Close, and returns the address it listens on.
func (m *Monitor) Serve(addr string, log *slog.Logger) (string, error) {
	if m == nil {
		return "", nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	got, done, err := metrics.Serve(ctx, addr, m.reg, log, m.page.Handler())
	if err != nil {
		cancel()
		return "", err
	}
	m.stop, m.done = cancel, done
	return got, nil
}

// Serving reports whether Serve has started the server (and Close has
// something to stop).
func (m *Monitor) Serving() bool { return m != nil && m.stop != nil }

// Progress takes the ES's state after each generation, and the
// estimates of the terminal's line.
func (m *Monitor) Progress(s es.Stats, est *report.Progress) {
	if m != nil {
		m.master.Progress(s.Gen, s.Best, s.Mean, s.Evals)
		m.page.Generation(s, est)
	}
}

// Close keeps serving for linger (so that Prometheus scrapes the run's
// final figures), then stops the server and waits for it.
func (m *Monitor) Close(linger time.Duration) {
	if !m.Serving() {
		return
	}
	time.Sleep(linger)
	m.stop()
	<-m.done
	m.stop = nil
}
