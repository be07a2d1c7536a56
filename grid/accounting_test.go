package grid

import (
	"testing"
)

// The ledger counts only what the master really sent: a worker that
// sends cancelled results (with an hour of "wasted" compute each) and
// cancel acknowledgements for tasks it was never given, of this
// generation and earlier ones, in every frame, moves no count: Aborted,
// Wasted, the cancel outcomes and the busy time stay the honest
// workers'. (Before: 300 such frames made Aborted 19,660,800.)
func TestMasterAccountsOnlyInstancesSent(t *testing.T) {
	m := startMaster(t, "wq")
	const hour = int64(3600e9)
	liar := newTestWorker("liar", 1, 0)
	liar.forge = func(ts *Tasks) []Result {
		var rs []Result
		for id := range int32(20) {
			for _, g := range []int32{ts.Gen, ts.Gen - 1} {
				rs = append(rs,
					Result{Gen: g, ID: id + 1000, Cancelled: true, Exec: hour},
					Result{Gen: g, ID: id + 1000, Cancelled: true, Ack: AckStopped, Exec: hour},
					Result{Gen: g, ID: id + 1000, Cancelled: true, Ack: AckDropped},
					Result{Gen: g, ID: id + 1000, Cancelled: true, Ack: AckLate},
				)
			}
		}
		return rs
	}
	startWorkers(t, m, liar, newTestWorker("honest", 2, 0))
	evalAndCheck(t, m, 5, 20)
	m.Close()
	rep := m.Report()
	if rep.Aborted != 0 || rep.Wasted != 0 || rep.CancelsHeld != 0 || rep.CancelsRunning != 0 || rep.CancelsLate != 0 {
		t.Errorf("forged reports counted: %+v", rep.Counts)
	}
	if rep.Originals != 100 {
		t.Errorf("%d originals, want 100", rep.Originals)
	}
	for _, w := range rep.Workers {
		if w.Busy > rep.Total*2 {
			t.Errorf("worker %d busy %v in a run of %v", w.Worker, w.Busy, rep.Total)
		}
	}
	if st := m.Stats(); st.CancelAcks == 0 {
		t.Errorf("no acknowledgement counted: %+v", st)
	}
}
