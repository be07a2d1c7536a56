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
func (a ledgerAccountant) ran(x sched.Execution) { a.l.Ran(x) }
func (a ledgerAccountant) dropped(at time.Duration, w sched.WorkerID, t sched.TaskID) {
	a.l.Dropped(at, w, t)
}

// late says a cancel found its instance finished at its worker.
func (a ledgerAccountant) late(at time.Duration, w sched.WorkerID, t sched.TaskID) {
	a.l.Late(at, w, t)
}

// speed says machine w's speed ratio changed at at (a slowdown), for its
// report; LB follows the machine's pace through its executions.
func (a ledgerAccountant) speed(_ time.Duration, w sched.WorkerID, ratio float64) {
	a.l.SetSpeed(w, ratio)
}

// lateAccountant and speedAccountant are what an accountant may also take:
// cancels that found their instance finished, and machines changing pace.
type lateAccountant interface {
	late(at time.Duration, w sched.WorkerID, t sched.TaskID)
}

type speedAccountant interface {
	speed(at time.Duration, w sched.WorkerID, ratio float64)
}

// newLedger returns the ledger of a run of cfg, told what the simulator
// knows exactly: every machine's speed at the workload's mean grain (for
// the workers' reports) and the mean round trip over the workers (for the
// barrier bound). LB, as in a real run, comes from each generation's
// executions.
func newLedger(cfg *Config) *sched.Ledger {
	grain := cfg.Workload.MeanGrain()
	l := sched.NewLedger(sched.LedgerConfig{
		RoundTrip: cfg.Set.MeanRoundTrip(cfg.AddedDelay),
	})
	for k := range cfg.Set.Machines {
		l.SetSpeed(sched.WorkerID(k), float64(grain)/float64(cfg.Set.TaskTime(k, grain)))
	}
	return l
}
