package grid

import (
	"log/slog"
	"testing"
	"time"
)

// checkBooks is a master's books, no network, with w0 and w1 one-slot
// workers on two hosts, an hour into the run, and a batch of one task
// whose value w0 gave and which is checked: its check instance is out on
// w1.
func checkBooks(t *testing.T) (*Master, *batch, *mworker, *mworker) {
	t.Helper()
	m := &Master{start: time.Now().Add(-time.Hour), log: slog.New(slog.DiscardHandler), vlog: slog.New(slog.DiscardHandler),
		cfg: MasterConfig{Verify: 1, MaxRetries: 3, DeadlineFactor: 4, DeadlineFloor: time.Second,
			FirstDeadline: 30 * time.Second, TaskTimeout: 10 * time.Minute}}
	m.loopState.init()
	w0 := &mworker{id: 1, name: "w0", host: "10.0.0.1", slots: 1}
	w1 := &mworker{id: 2, name: "w1", host: "10.0.0.2", slots: 1}
	for _, w := range []*mworker{w0, w1} {
		m.byID[w.id] = w
		m.order = append(m.order, w)
	}
	b := &batch{id: 1, gen: 1, xs: [][]float64{{0.5}}, f: make([]float64, 1), done: make([]bool, 1),
		overran: make([]uint8, 1), failures: map[int32][]string{}}
	m.cur = b
	m.verifyStart(1)
	m.verifyAccepted(w0, b, 0, 1.5)
	return m, b, w0, w1
}

// outOn returns the token of the check instance of task 0 out on w, or
// fails the test.
func outOn(t *testing.T, m *Master, w *mworker) uint64 {
	t.Helper()
	c := m.v.checks[0]
	if c == nil || len(c.out) != 1 || c.out[0].w != w {
		t.Fatalf("want the check open with one instance, on %s; check %+v", w.name, c)
	}
	return c.out[0].token
}

// TestCheckHangingGivenUp: a check whose instance hangs on the only other
// host, and is stopped there each time, is given up after MaxRetries
// further tries, as a failing one is: the value stands unverified. It was
// sent to the same host again for ever, and the generation waited on it
// for hours (simgrid seed 308484). Instances dropped from the worker's
// queue, where they waited behind another, are charged nothing.
func TestCheckHangingGivenUp(t *testing.T) {
	m, b, _, w1 := checkBooks(t)
	for range 2 * m.cfg.MaxRetries {
		tok := outOn(t, m, w1)
		m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckDropped, Token: tok})
	}
	for i := range m.cfg.MaxRetries + 1 {
		tok := outOn(t, m, w1) // a hang may pass: the same host is asked again
		m.result(w1, b, &Result{Gen: b.id, ID: checkBase, Cancelled: true, Ack: AckStopped, Token: tok})
		if i < m.cfg.MaxRetries && m.checksDone() {
			t.Fatalf("check given up after %d hangs; MaxRetries is %d", i+1, m.cfg.MaxRetries)
		}
	}
	if !m.checksDone() {
		t.Fatalf("check still open after %d hangs (MaxRetries %d): instances %+v", m.cfg.MaxRetries+1, m.cfg.MaxRetries, m.v.checks[0].out)
	}
	if st := m.counts; st.Unverified != 1 || st.Verified != 0 || b.f[0] != 0 {
		t.Errorf("unverified %d, verified %d, value %v; want the value to stand unverified", st.Unverified, st.Verified, b.f[0])
	}
}

// TestCheckMeasuresWorker: a check's answer says how long its worker
// takes, as a task's does: a worker whose task hung, its deadline grown,
// gets its own deadline back once it answers a check in 140 ms (else its
// next checks wait four grown deadlines each, 20 minutes, behind a hang).
func TestCheckMeasuresWorker(t *testing.T) {
	m, b, _, w1 := checkBooks(t)
	m.exec = float64(40 * time.Millisecond)
	w1.overran = 2 * time.Minute // a task of the batch hung on it
	if d := m.deadline(w1); d < time.Minute {
		t.Fatalf("deadline %v of a worker whose task ran 2 minutes; want it grown", d)
	}
	tok := outOn(t, m, w1)
	m.result(w1, b, &Result{Gen: b.id, ID: checkBase, F: 1.5, Exec: int64(140 * time.Millisecond), Token: tok})
	if !m.checksDone() || m.counts.Verified != 1 {
		t.Fatalf("check not verified: open %v, stats %+v", !m.checksDone(), m.counts)
	}
	if d := m.deadline(w1); d != time.Second {
		t.Errorf("deadline %v after a check answered in 140 ms; want the floor, 1s", d)
	}
}
