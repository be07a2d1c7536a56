package sched

import (
	"testing"
	"time"
)

// The paper's LAN set (Table 1, 100 ms column: time per task on M1 and
// L1–L6), one slot each.
func lanMachines() []machine {
	times := []time.Duration{101, 42, 95, 148, 163, 184, 275}
	ms := make([]machine, len(times))
	for i, t := range times {
		ms[i] = machine{id: WorkerID(i + 1), slots: 1, taskTime: t * time.Millisecond}
	}
	return ms
}

func lanDriver(t *testing.T, policy string, delay time.Duration) *handDriver {
	d := newHandDriver(t, policy, Config{}, delay, LedgerConfig{RoundTrip: 2 * delay}, lanMachines())
	for _, m := range lanMachines() {
		d.l.SetSpeed(m.id, 101/float64(m.taskTime/time.Millisecond))
	}
	return d
}

// heldTargets runs 20 generations of 70 tasks and returns how many
// replicas were sent while another instance of the task was held (by the
// policy's own belief), and how many replicas there were.
func heldTargets(t *testing.T, reverse bool, delay time.Duration) (held, total int, rep Report) {
	d := lanDriver(t, "r3q", delay)
	p := d.p.(*policy)
	p.reverse = reverse
	d.onStep = func(acts []Action) {
		for _, a := range acts {
			if a.Kind != Send || !a.Replica {
				continue
			}
			total++
			for _, vi := range p.tasks[a.Task].on {
				if v := &p.workers[vi]; v.id != a.Worker && v.pos(a.Task) >= v.slots {
					held++
					break
				}
			}
		}
	}
	for range 20 {
		d.runBatch(70)
	}
	d.drain()
	return held, total, d.l.Report()
}

// R3Q replicates in reverse order of transfer so that replicas target held
// tasks, whose cancel is then just a removal from a remote queue (docs/papers.md
// §1). Against the same policy replicating in order of transfer, its
// replicas target held originals more often, at every delay.
func TestR3QReplicatesHeld(t *testing.T) {
	for _, delay := range []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond} {
		rh, rt, rep := heldTargets(t, true, delay)
		fh, ft, _ := heldTargets(t, false, delay)
		t.Logf("delay %v: reverse %d/%d, forward %d/%d replicas of held tasks; cancels held %d running %d",
			delay, rh, rt, fh, ft, rep.CancelsHeld, rep.CancelsRunning)
		if rt == 0 || ft == 0 || float64(rh)/float64(rt) <= float64(fh)/float64(ft) || float64(rh)/float64(rt) < 0.8 {
			t.Errorf("delay %v: reverse order targets held tasks %d/%d, forward %d/%d", delay, rh, rt, fh, ft)
		}
		if rep.CancelsHeld == 0 {
			t.Errorf("delay %v: no held cancels", delay)
		}
	}
	// RR keeps one instance per slot: whatever it cancels is running.
	d := lanDriver(t, "rr", 30*time.Millisecond)
	for range 10 {
		d.runBatch(70)
	}
	if rep := d.l.Report(); rep.CancelsHeld != 0 || rep.CancelsRunning == 0 {
		t.Errorf("rr: %d held and %d running cancels", rep.CancelsHeld, rep.CancelsRunning)
	}
}

// On the paper's LAN set with no noise, the policies show the paper's shape
// (docs/papers.md §1 "Results to reproduce"): R3Q has the lowest total at every
// delay; the remote queue cuts comm time; RR waits less than WQ at the
// barrier.
func TestLANShape(t *testing.T) {
	for _, delay := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond} {
		reps := map[string]Report{}
		for _, p := range Names {
			d := lanDriver(t, p, delay)
			for range 10 {
				d.runBatch(70)
			}
			d.drain()
			rep := d.l.Report()
			reps[p] = rep
			t.Logf("delay %v %-6s total %v sync %v comm %v compute %v effLB %.2f effBB %.2f replicas %d cancels held %d running %d",
				delay, p, rep.Total, rep.SyncWait, rep.Comm, rep.Compute, rep.EfficiencyLB, rep.EfficiencyBarrier, rep.Replicas, rep.CancelsHeld, rep.CancelsRunning)
		}
		for _, p := range Names {
			if p != "r3q" && reps[p].Total <= reps["r3q"].Total {
				t.Errorf("delay %v: %s total %v not above r3q's %v", delay, p, reps[p].Total, reps["r3q"].Total)
			}
		}
		if reps["rwq"].Comm >= reps["wq"].Comm || reps["r3q"].Comm >= reps["wq"].Comm {
			t.Errorf("delay %v: comm wq %v rwq %v r3q %v", delay, reps["wq"].Comm, reps["rwq"].Comm, reps["r3q"].Comm)
		}
		if reps["rr"].SyncWait > reps["wq"].SyncWait {
			t.Errorf("delay %v: sync rr %v above wq %v", delay, reps["rr"].SyncWait, reps["wq"].SyncWait)
		}
	}
}
