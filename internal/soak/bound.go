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

// The timeouts of masters that split and of relays (docs/topologies.md).
const (
	// relayHop is the relay's part of a start: a worker behind it is
	// greeted through it once it is itself connected, one more handshake
	// (10 s) after one more back-off (5 s).
	relayHop = 15 * time.Second
	// endWaits are what the end of a run that split may wait for the
	// workers moved between masters: a second for those on their way back
	// to a child, and up to 7 s for one moved to it that has not come (an
	// agent's longest back-off, jittered, and a dial).
	endWaits = time.Second + 7*time.Second
	// childHello: a promoted worker that has not come up as a child
	// master by then is a child lost.
	childHello = 15 * time.Second
	// lostChildWait: a master that loses a child waits up to 40 s from the
	// loss for what it held (its workers may hear it gone only as their
	// link times out, 30 s, then give evaluations deaf to their cancel
	// 5 s, and dial after a back-off).
	lostChildWait = 40 * time.Second
	// unreadyWait: a child lost before its hello (never up, or its
	// promoted worker's connection broke first) held nothing: the master
	// waits up to 30 s for its agent and the workers that were to move
	// to it, which come back as moved workers do.
	unreadyWait = 30 * time.Second
	// endHeardWait: the root waits up to 20 s for a child's word that
	// its workers heard the end; a child silent then is counted gone and
	// its workers awaited as a lost child's.
	endHeardWait = 20 * time.Second
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
	// Masters that split: the splits any master logged; the children
	// counted lost as their link closed (or whose return was lost), never
	// up as a master, lost before their hello as the promoted worker's
	// connection broke, cut off for returning none of their tasks; and
	// the children silent at the end.
	Splits, ChildLosses, NeverUp, Unready, CutOffs, EndUnheard int
	// RelayStops: the stops of the relay (among Stops), after which its
	// workers may have to connect again.
	RelayStops int
}

// any says whether a fault was seen.
func (o observed) any() bool {
	return o.Masters > 1 || o.Failures > 0 || o.Lates > 0 || o.Kills > 0 || o.Stops > 0 ||
		o.Splits > 0 || o.ChildLosses > 0 || o.NeverUp > 0 || o.Unready > 0 || o.CutOffs > 0 || o.EndUnheard > 0
}

// bound is how long a run may take, from its first master's start to its
// last master's exit, and how it was computed:
//
//	B = K × (M·S + W + F)
//
//	K  the slack (-slack), for a shared machine's load
//	M  masters started: 1, and 1 more when the master is killed and resumed
//	S  one master's start (startup), plus relayHop with a relay
//	W  Σ over generations g of ⌈n_g / s⌉·e + n_g·2c + o: the work on the
//	   smallest worker alone (the others may be gone), n_g the
//	   generation's tasks (μ, then λ), s that worker's slots, e one
//	   evaluation on the slowest worker (load × slowdown + 2 × delay +
//	   1 ms for the plugin's pipe), c the master's emulated cost of a
//	   message (-master-cost; a task's result, and one more message:
//	   the master is one server, however many workers), o = genOverhead;
//	   plus W/(G+1) for a generation evaluated again after a master was
//	   killed
//	F  the faults seen, each costing at most one deadline D beyond its own
//	   time: the first deadline D1 once if there was any fault; each
//	   failed evaluation D (it is retried at once); each overdue instance
//	   ("worker is late": a hang, a stop, a slow link) D + the abandon
//	   grace (its slot is freed by then); each process killed (a worker,
//	   a child master's, the relay) D + rejoin; each stop of t, t + D,
//	   and a relay's stop a rejoin more (the master may drop the relay,
//	   and its workers connect again). Splits: each D (the promoted and
//	   the moved workers give back the tasks they hold), and once the
//	   end's waits for workers moved between masters (endWaits); each
//	   child lost (its link closed, or its return lost) lostChildWait,
//	   one never up childHello + unreadyWait, one whose promoted worker's
//	   connection broke before its hello unreadyWait, the k-th cut off for
//	   returning none of its tasks 2^k·D (stallDeadline: its link's loss
//	   is counted apart), one silent at the end endHeardWait +
//	   lostChildWait. D = max(floor, 4·e + 2·delay) is a deadline once an
//	   execution was measured.
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
	if s.Relay != nil {
		b.Startup += relayHop
	}
	var e, maxDelay time.Duration
	slots := s.Workers[0].Slots
	for _, w := range s.Workers {
		e = max(e, time.Duration(s.ES.LoadMS*w.Slowdown)*time.Millisecond+2*w.Delay+time.Millisecond)
		maxDelay = max(maxDelay, w.Delay)
		slots = min(slots, w.Slots)
	}
	if s.Relay != nil && !s.Relay.Only {
		e = max(e, time.Duration(s.ES.LoadMS)*time.Millisecond+time.Millisecond)
		slots = min(slots, s.Relay.Slots)
	}
	perGen := func(n int) time.Duration {
		return time.Duration((n+slots-1)/slots)*e + time.Duration(n)*2*s.MasterCost + genOverhead
	}
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
			ob.Stopped + time.Duration(ob.Stops)*d + time.Duration(ob.RelayStops)*rejoin
		if ob.Splits > 0 {
			b.Faults += endWaits + time.Duration(ob.Splits)*d
		}
		b.Faults += time.Duration(ob.ChildLosses)*lostChildWait +
			time.Duration(ob.NeverUp)*(childHello+unreadyWait) +
			time.Duration(ob.Unready)*unreadyWait +
			time.Duration(ob.EndUnheard)*(endHeardWait+lostChildWait)
		for i := range ob.CutOffs {
			b.Faults += d << (i + 1)
		}
	}
	b.Total = time.Duration(k * float64(time.Duration(b.Masters)*b.Startup+b.Work+b.Faults))
	return b
}
