package main

import (
	"context"
	"log/slog"

	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/worker"
)

// serveMetrics serves the agent's metrics, its plugins' (those of cat)
// and the Go runtime's and the process's on addr until ctx is done.
func serveMetrics(ctx context.Context, addr string, a *worker.Agent, cat *plugin.Catalog, log *slog.Logger) (string, <-chan struct{}, error) {
	reg := metrics.NewRegistry()
	if err := reg.Register(metrics.NewAgent(a.Name(), func() metrics.AgentState { return metrics.AgentState(a.Activity()) })); err != nil {
		return "", nil, err
	}
	if err := reg.Register(metrics.NewPlugins(a.Name(), cat.Names(), func(name string) metrics.PluginState {
		return metrics.PluginState(cat.Counters(name).Counts())
	})); err != nil {
		return "", nil, err
	}
	return metrics.Serve(ctx, addr, reg, log, nil)
}
