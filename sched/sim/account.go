package sim

import (
	"time"

	"github.com/esgrid/esgrid/sched"
)

// accountant is where the engine reports what happened: the run's
// sched.Ledger, or a recorder in tests. The engine keeps no time books of
// its own.
type accountant interface {
	// step is one policy step at time at, with the actions it returned.
	step(at time.Duration, ev sched.Event, acts []sched.Action)
	// ran is one execution that ended, finished or stopped by a cancel.
	ran(x sched.Execution)
	// dropped says a cancel removed a held instance at its worker.
	dropped(at time.Duration, w sched.WorkerID, t sched.TaskID)
}

// ledgerAccountant feeds a sched.Ledger.
type ledgerAccountant struct{ l *sched.Ledger }

func (a ledgerAccountant) step(at time.Duration, ev sched.Event, acts []sched.Action) {
	a.l.Step(at, ev, acts)
}
func (a ledgerAccountant) ran(x sched.Execution)                               { a.l.Ran(x) }
func (a ledgerAccountant) dropped(time.Duration, sched.WorkerID, sched.TaskID) {}

// newLedger returns the ledger of a run of cfg, told what the simulator
// knows exactly: every machine's speed at the workload's mean grain (for
// LB) and the mean round trip over the workers (for the barrier bound).
func newLedger(cfg *Config) *sched.Ledger {
	grain := cfg.Workload.MeanGrain()
	l := sched.NewLedger(sched.LedgerConfig{
		TaskWork:  grain,
		RoundTrip: cfg.Set.MeanRoundTrip(cfg.AddedDelay),
	})
	for k := range cfg.Set.Machines {
		l.SetSpeed(sched.WorkerID(k), float64(grain)/float64(cfg.Set.TaskTime(k, grain)))
	}
	return l
}
