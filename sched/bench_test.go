package sched

import (
	"fmt"
	"testing"
	"time"
)

// benchDriver replays one batch: results come back from the workers in
// turn, each worker returning its oldest instance, as a master would see
// them from FIFO remote queues. Its own bookkeeping allocates nothing once
// warm.
type benchDriver struct {
	p    Policy
	out  [][]TaskID // instances per worker (index = WorkerID), oldest first
	acts []Action
}

func newBenchDriver(b *testing.B, name string, workers, slots int) *benchDriver {
	p, err := New(name, Config{})
	if err != nil {
		b.Fatal(err)
	}
	d := &benchDriver{p: p, out: make([][]TaskID, workers)}
	for w := range workers {
		d.out[w] = make([]TaskID, 0, 4096)
		d.apply(Event{Kind: WorkerJoined, Worker: WorkerID(w), Slots: slots})
	}
	return d
}

func (d *benchDriver) apply(ev Event) {
	d.acts = d.p.Step(ev, d.acts[:0])
	for _, a := range d.acts {
		switch a.Kind {
		case Send:
			d.out[a.Worker] = append(d.out[a.Worker], a.Task)
		case Cancel:
			o := d.out[a.Worker]
			for i, t := range o {
				if t == a.Task {
					d.out[a.Worker] = append(o[:i], o[i+1:]...)
					break
				}
			}
		}
	}
}

// batch runs one batch of n tasks and returns the number of events.
func (d *benchDriver) batch(n int) int {
	d.apply(Event{Kind: BatchStarted, N: n})
	events := 1
	for w := 0; !d.p.Done(); w = (w + 1) % len(d.out) {
		o := d.out[w]
		if len(o) == 0 {
			continue
		}
		t := o[0]
		d.out[w] = append(o[:0], o[1:]...)
		d.apply(Event{Kind: ResultArrived, Worker: WorkerID(w), Task: t})
		events++
	}
	return events
}

// BenchmarkStep measures a policy's cost per event over whole batches of
// 1000 tasks on 50 workers of 2 slots (100 slots), including the sync tail
// where rr and r3q replicate. Once the first batch has sized the buffers,
// a batch should allocate nothing.
func BenchmarkStep(b *testing.B) {
	for _, name := range Names {
		b.Run(name, func(b *testing.B) {
			d := newBenchDriver(b, name, 50, 2)
			d.batch(1000) // warm up: size the buffers
			b.ReportAllocs()
			b.ResetTimer()
			events := 0
			for b.Loop() {
				events += d.batch(1000)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
		})
	}
}

// TestStepAllocs pins the no-allocation claim: a warm policy allocates
// nothing over a whole batch.
func TestStepAllocs(t *testing.T) {
	for _, name := range Names {
		for _, size := range []struct{ workers, slots, n int }{{7, 1, 70}, {50, 2, 1000}, {2, 1, 20000}} {
			t.Run(fmt.Sprintf("%s/%d", name, size.n), func(t *testing.T) {
				p, err := New(name, Config{})
				if err != nil {
					t.Fatal(err)
				}
				d := &benchDriver{p: p, out: make([][]TaskID, size.workers)}
				for w := range size.workers {
					d.out[w] = make([]TaskID, 0, 4096)
					d.apply(Event{Kind: WorkerJoined, Worker: WorkerID(w), Slots: size.slots})
				}
				d.acts = make([]Action, 0, 4096)
				d.batch(size.n)
				if a := testing.AllocsPerRun(5, func() { d.batch(size.n) }); a != 0 {
					t.Errorf("%v allocations per batch", a)
				}
				// A worker's instance list stays near its capacity, however
				// long the batch (cyclic excepted: its share is the list).
				if name != "cyclic" {
					for _, w := range p.(*policy).workers {
						if cap(w.inst) > 2*w.cap+8 {
							t.Errorf("w%d: instance list grew to %d for capacity %d", w.id, cap(w.inst), w.cap)
						}
					}
				}
			})
		}
	}
}

// BenchmarkLedger measures the ledger's cost per step when fed by a driver
// (the same batches as BenchmarkStep, r3q, with an execution report per
// result), and a Report at the end of every batch.
func BenchmarkLedger(b *testing.B) {
	d := newBenchDriver(b, "r3q", 50, 2)
	l := NewLedger(LedgerConfig{})
	var now time.Duration
	events := 0
	b.ReportAllocs()
	for b.Loop() {
		ev := Event{Kind: BatchStarted, N: 1000}
		d.apply(ev)
		l.Step(now, ev, d.acts)
		events++
		for w := 0; !d.p.Done(); w = (w + 1) % len(d.out) {
			o := d.out[w]
			if len(o) == 0 {
				continue
			}
			t := o[0]
			d.out[w] = append(o[:0], o[1:]...)
			now += time.Millisecond
			l.Ran(Execution{Worker: WorkerID(w), Task: t, Start: now - time.Millisecond, End: now})
			ev := Event{Kind: ResultArrived, Worker: WorkerID(w), Task: t}
			d.apply(ev)
			l.Step(now, ev, d.acts)
			events++
		}
		_ = l.Report()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}
