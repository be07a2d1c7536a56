package grid

import "github.com/esgrid/esgrid/metrics"

// MetricsState is the master's state for its metrics (metrics.NewMaster):
// its counters and its view of each connected worker, read when
// Prometheus scrapes.
func (m *Master) MetricsState() metrics.MasterState {
	st := m.Stats()
	refused := make(map[string]int64)
	for _, k := range RefusedKinds() {
		refused[k] = 0 // every kind's counter exists from the start
	}
	for k, n := range m.Refused() {
		refused[k] = n
	}
	ms := metrics.MasterState{
		Workers: st.Workers, Joined: st.Joined, Named: st.Named,
		Stale: st.Stale, Unsolicited: st.Unsolicited, Failed: st.Failed, Overdue: st.Overdue, Dropped: st.Dropped,
		BytesIn: st.BytesIn, BytesOut: st.BytesOut, FramesIn: st.FramesIn, FramesOut: st.FramesOut,
		Inbox: st.Inbox, InboxCap: st.InboxCap, Assignments: st.Assignments, InboxWaiting: st.InboxWaiting,
		Refused: refused, Verified: st.Verified, Mismatches: st.Mismatches, Excluded: st.Excluded,
		OverloadMean: st.OverloadMean, Overloaded: st.Overloaded, Masters: st.Masters,
		Splits: st.Splits, Suppressed: st.Suppressed, GossipKept: st.GossipKept,
		Lost: map[string]int64{"closed": st.Lost.Closed, "gossip_dead": st.Lost.Dead, "left_cluster": st.Lost.Left, "reconnected": st.Lost.Reconnected},
	}
	for _, w := range m.WorkerStats() {
		ms.PerWorker = append(ms.PerWorker, metrics.WorkerState{
			Name: w.Name, Slots: w.Slots, Queued: w.Queued, Running: w.Running, Exec: w.Exec, RoundTrip: w.RoundTrip,
		})
	}
	return ms
}
