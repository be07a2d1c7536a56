package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Gossip exports what a member's bounded gossip transport refused
// (grid.Membership.Refused): streams and packets turned away before they
// could cost memory, by kind.
type Gossip struct {
	refused func() map[string]int64
	kinds   []string
	desc    *prometheus.Desc
}

// NewGossip returns the gossip metrics of one member; refused is called
// at each scrape and returns cumulative counts by kind (the transport's
// "refused_" kinds: busy, per_source, rate, too_large, slow, empty, ...).
// The counters of kinds (grid.GossipRefusedKinds) exist from the start,
// at 0.
func NewGossip(refused func() map[string]int64, kinds ...string) *Gossip {
	return &Gossip{
		refused: refused, kinds: kinds,
		desc: prometheus.NewDesc("esgrid_gossip_refused_total",
			"Gossip streams and packets the bounded transport refused, by kind (busy, per_source, rate, too_large, slow, empty, junk, ...); counted, and logged as one summary line per interval.",
			[]string{"kind"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (g *Gossip) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *Gossip) Collect(ch chan<- prometheus.Metric) {
	counts := g.refused()
	for _, kind := range g.kinds {
		if _, ok := counts[kind]; !ok {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, 0, strings.TrimPrefix(kind, "refused_"))
		}
	}
	for kind, n := range counts {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(n), strings.TrimPrefix(kind, "refused_"))
	}
}
