package sched

import (
	"testing"
	"time"
)

// sendSpy counts, per worker, the Sends of the policy it wraps since the
// batch began.
type sendSpy struct {
	Policy
	sends []int
}

func (s *sendSpy) Step(ev Event, out []Action) []Action {
	if ev.Kind == BatchStarted {
		clear(s.sends)
	}
	n := len(out)
	out = s.Policy.Step(ev, out)
	for _, a := range out[n:] {
		if a.Kind == Send && int(a.Worker) < len(s.sends) {
			s.sends[a.Worker]++
		}
	}
	return out
}

// TestEFTProbesAWorkerLeftOut: a worker forty times slower than the
// other, whose copies lose their races, is passed over by eft's plan
// (the fast one can finish every batch before it could finish a task).
// It is still sent a task (a probe) at least once in every three
// batches: before the fix, the probe it was due waited for its turn in
// the plan's order, which the fast worker never left it before Q ran
// out, and it was sent nothing after the first batch (issue 28, part 6).
func TestEFTProbesAWorkerLeftOut(t *testing.T) {
	for _, c := range []struct {
		name string
		ms   []noisyMachine
	}{
		{"forty times slower", []noisyMachine{{4, 4 * time.Millisecond, 9 * time.Millisecond}, {2, 163 * time.Millisecond, 14 * time.Millisecond}}},
		{"six times slower, five workers", []noisyMachine{
			{2, 20 * time.Millisecond, 25 * time.Millisecond}, {2, 20 * time.Millisecond, 25 * time.Millisecond},
			{2, 40 * time.Millisecond, 25 * time.Millisecond}, {2, 60 * time.Millisecond, 25 * time.Millisecond},
			{2, 120 * time.Millisecond, 25 * time.Millisecond}}},
	} {
		d := newNoisyDriver(t, 1, 0.3, 0.3, c.ms)
		spy := &sendSpy{Policy: d.p, sends: make([]int, len(c.ms))}
		d.p = spy
		last := make([]int, len(c.ms)) // the last batch that sent each worker something
		for b := 1; b <= 30; b++ {
			d.runBatch(11)
			for w, n := range spy.sends {
				if n > 0 {
					last[w] = b
				}
				if b-last[w] >= 3 {
					t.Fatalf("%s: worker %d was sent nothing in batches %d–%d (sends this batch %v)", c.name, w, last[w]+1, b, spy.sends)
				}
			}
		}
		t.Logf("%s: accepted per worker %v", c.name, d.accepts)
	}
}
