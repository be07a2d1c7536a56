package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// PluginEvents are the values of esgrid_plugin_process_events_total's
// event label, every one exported from the start, at 0, for every
// listed plugin.
var PluginEvents = []string{"started", "start_failed", "crashed", "killed", "protocol_error"}

// PluginState is one plugin's process events so far (plugin.Counts):
// its fields are plugin.Counts', in order, so that PluginState(c)
// converts one. (This package does not import the plugin host, whose
// tests import the grid, which imports this package.)
type PluginState struct {
	Started, StartFailed, Crashed, Killed, ProtocolErrors int64
}

// Plugins exports what happened to the processes of the plugins one
// process may run (a plugin.Catalog's counters): its starts, failed
// starts, crashes, kills and protocol errors, by plugin. They are the
// process's, across its sessions with masters; esrun's count its local
// workers' processes together, and the one that read the hello.
type Plugins struct {
	names []string
	state func(name string) PluginState
	desc  *prometheus.Desc
}

// NewPlugins returns the metrics of the plugins names, labelled
// worker=worker unless worker is empty (esrun, whose local workers share
// the processes' counts); state is called for each at each scrape.
func NewPlugins(worker string, names []string, state func(name string) PluginState) *Plugins {
	var l prometheus.Labels
	if worker != "" {
		l = prometheus.Labels{"worker": worker}
	}
	return &Plugins{names: names, state: state, desc: prometheus.NewDesc("esgrid_plugin_process_events_total",
		"What happened to the processes of each plugin, by event: started (and said hello), start_failed, crashed (exited during an evaluation: a non-zero status or a signal), killed (an evaluation cancelled, by a lost race, a deadline or -task-timeout, and the cancel not answered in time), protocol_error (killed for writing what is not the protocol).",
		[]string{"plugin", "event"}, l)}
}

// Describe implements prometheus.Collector.
func (p *Plugins) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector.
func (p *Plugins) Collect(ch chan<- prometheus.Metric) {
	for _, name := range p.names {
		c := p.state(name)
		for i, n := range []int64{c.Started, c.StartFailed, c.Crashed, c.Killed, c.ProtocolErrors} {
			ch <- prometheus.MustNewConstMetric(p.desc, prometheus.CounterValue, float64(n), name, PluginEvents[i])
		}
	}
}
