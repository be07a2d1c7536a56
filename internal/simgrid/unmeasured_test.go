package simgrid

import (
	"slices"
	"testing"
	"time"
)

// The check of "no worker left unmeasured" flags a worker that began no
// evaluation in measureWithin generations in a row, and only from when
// it could have work, over windows long enough for two of its tasks.
func TestUnmeasured(t *testing.T) {
	ms := time.Millisecond
	sc := Scenario{Workers: []WorkerSpec{{Name: "w0", Slots: 1, Task: ms}, {Name: "w1", Slots: 1, Task: ms}}}
	sc.ES.Lambda = 4
	// Six generations of 10 ms after the initial parents' batch.
	at := []time.Duration{0, 10 * ms, 20 * ms, 30 * ms, 40 * ms, 50 * ms, 60 * ms}
	out := func(began0 []time.Duration, ready0 time.Duration, task0 time.Duration) []string {
		s := sc
		s.Workers = slices.Clone(sc.Workers)
		s.Workers[0].Task = task0
		o := &Outcome{BatchAt: [][]time.Duration{at}, Elapsed: 70 * ms,
			Began: map[string][]time.Duration{"w0": began0, "w1": {11 * ms, 21 * ms, 31 * ms, 41 * ms, 51 * ms, 61 * ms}},
			Ready: map[string]time.Duration{"w0": ready0, "w1": 0}}
		return unmeasured(s, o)
	}
	if got := out([]time.Duration{11 * ms, 21 * ms, 31 * ms, 41 * ms, 51 * ms, 61 * ms}, 0, ms); len(got) != 0 {
		t.Errorf("a worker measured every generation: flagged %v", got)
	}
	if got := out([]time.Duration{11 * ms}, 0, ms); len(got) != 1 || got[0] != "w0 (generations 2–4)" {
		t.Errorf("a worker passed over from generation 2 on: flagged %v, want w0 (generations 2–4)", got)
	}
	if got := out(nil, 45*ms, ms); len(got) != 0 {
		t.Errorf("a worker ready only at 45 ms: flagged %v", got)
	}
	if got := out(nil, 5*ms, ms); len(got) != 1 {
		t.Errorf("a worker ready at 5 ms and never given work: flagged %v, want it", got)
	}
	if got := out([]time.Duration{11 * ms}, 0, 40*ms); len(got) != 0 {
		t.Errorf("a worker whose task takes 40 ms, over 30 ms windows: flagged %v", got)
	}
}
