package soak

import (
	"fmt"
	"time"
)

// The timeouts in force in every run, as esrun and esworker set them by
// default (the soak changes none of them).
const (
	// startup is one master's start: its load calibration, and every
	// worker found through gossip, connected and greeted (the handshake
	// timeout is 10 s, a worker's reconnection backoff at most 5 s).
	startup = 30 * time.Second
	// genOverhead is one generation's own cost: the master's steps and the
	// checkpoint written whole.
	genOverhead = 500 * time.Millisecond
	// firstDeadline is how long an instance may run while no execution has
	// been measured anywhere (sched.Deadlines.First).
	firstDeadline = 30 * time.Second
	// deadlineFloor is the shortest deadline (sched.Deadlines.Floor).
	deadlineFloor = time.Second
	// deadlineFactor: an instance is overdue after this many times its
	// worker's usual execution time plus its round trip.
	deadlineFactor = 4
	// abandonGrace is how long a worker waits for a cancelled evaluation
	// before it frees the slot (worker.AgentConfig.AbandonGrace).
	abandonGrace = 5 * time.Second
	// rejoin is a killed worker's replacement found through gossip and
	// greeted.
	rejoin = startup
)

// observed are the faults seen so far in a run, each of which may cost
// time: the bound grows with them.
type observed struct {
	Masters  int           // masters started
	Failures int           // evaluations failed (plugin crashes, -fail-every): the master's "evaluation failed"
	Lates    int           // the master's "worker is late": an instance overdue (a hang, a stop, a slow link)
	Kills    int           // workers killed
	Stops    int           // workers stopped
	Stopped  time.Duration // the time workers were stopped, summed
}

// any says whether a fault was seen.
func (o observed) any() bool {
	return o.Masters > 1 || o.Failures > 0 || o.Lates > 0 || o.Kills > 0 || o.Stops > 0
}

// bound is how long a run may take, from its first master's start to its
// last master's exit, and how it was computed:
//
//	B = K × (M·S + W + F)
//
//	K  the slack (-slack), for a shared machine's load
//	M  masters started: 1, and 1 more when the master is killed and resumed
//	S  one master's start (startup)
//	W  Σ over generations g of ⌈n_g / s⌉·e + o: the work on the smallest
//	   worker alone (the others may be gone), n_g the generation's tasks
//	   (μ, then λ), s that worker's slots, e one evaluation on the slowest
//	   worker (load × slowdown + 2 × delay + 1 ms for the plugin's pipe),
//	   o = genOverhead; plus W/(G+1) for a generation evaluated again
//	   after a master was killed
//	F  the faults seen, each costing at most one deadline D beyond its own
//	   time: the first deadline D1 once if there was any fault; each
//	   failed evaluation D (it is retried at once); each overdue instance
//	   ("worker is late": a hang, a stop, a slow link) D + the abandon
//	   grace (its slot is freed by then); each worker killed D + rejoin;
//	   each stop of t, t + D. D = max(floor, 4·e + 2·delay) is a deadline
//	   once an execution was measured.
//
// The faults are those seen so far, so the bound grows while the run
// goes on, and a run that stops making progress meets it.
type bound struct {
	Total           time.Duration
	K               float64
	Masters         int
	Startup         time.Duration
	Work, Faults, D time.Duration
}

func (b bound) String() string {
	return fmt.Sprintf("%v = %g × (%d×start %v + work %v + faults %v)", b.Total.Round(time.Second), b.K, b.Masters, b.Startup,
		b.Work.Round(time.Millisecond), b.Faults.Round(time.Millisecond))
}

// boundOf computes the bound of scenario s with slack k, given the faults
// seen.
func boundOf(s scenario, k float64, ob observed) bound {
	b := bound{K: k, Masters: max(ob.Masters, 1), Startup: startup}
	var e, maxDelay time.Duration
	slots := s.Workers[0].Slots
	for _, w := range s.Workers {
		e = max(e, time.Duration(s.ES.LoadMS*w.Slowdown)*time.Millisecond+2*w.Delay+time.Millisecond)
		maxDelay = max(maxDelay, w.Delay)
		slots = min(slots, w.Slots)
	}
	perGen := func(n int) time.Duration { return time.Duration((n+slots-1)/slots)*e + genOverhead }
	b.Work = perGen(s.ES.Mu)
	for range s.ES.Gens {
		b.Work += perGen(s.ES.Lambda)
	}
	b.Work += time.Duration(b.Masters-1) * b.Work / time.Duration(s.ES.Gens+1)
	d := max(deadlineFloor, deadlineFactor*e+2*maxDelay)
	b.D = d
	if ob.any() {
		b.Faults = firstDeadline +
			time.Duration(ob.Failures)*d +
			time.Duration(ob.Lates)*(d+abandonGrace) +
			time.Duration(ob.Kills)*(d+rejoin) +
			ob.Stopped + time.Duration(ob.Stops)*d
	}
	b.Total = time.Duration(k * float64(time.Duration(b.Masters)*startup+b.Work+b.Faults))
	return b
}
