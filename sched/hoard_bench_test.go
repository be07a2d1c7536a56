package sched

import (
	"fmt"
	"testing"
)

// BenchmarkStepHoarder measures a result's cost against one worker that
// holds N instances (wq: N slots; rwq: N/2 slots and a queue of two a
// slot) and answers the newest first, the worst order for a list kept
// in send order, or the oldest first, as an honest worker does. Each
// iteration is a batch of 4N tasks; reported in ns per event. A cost
// that does not grow with the instances held is flat across N.
func BenchmarkStepHoarder(b *testing.B) {
	for _, name := range []string{"wq", "rwq"} {
		for _, newest := range []bool{true, false} {
			for _, n := range []int{16, 256, 4096, 8192} {
				slots := n
				if name == "rwq" {
					slots = n / 2
				}
				if slots > MaxSlots {
					continue
				}
				first := "oldest"
				if newest {
					first = "newest"
				}
				b.Run(fmt.Sprintf("%s/first=%s/N=%d", name, first, n), func(b *testing.B) {
					d := newBenchDriver(b, name, 1, slots)
					events := 0
					for b.Loop() {
						events += d.hoarderBatch(4*n, newest)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
				})
			}
		}
	}
}

// hoarderBatch runs one batch of n tasks on worker 0, answered newest
// (or oldest) first; it returns the number of events.
func (d *benchDriver) hoarderBatch(n int, newest bool) int {
	d.apply(Event{Kind: BatchStarted, N: n})
	events := 1
	for !d.p.Done() {
		o := d.out[0]
		var t TaskID
		if newest {
			t, d.out[0] = o[len(o)-1], o[:len(o)-1]
		} else {
			t = o[0]
			d.out[0] = append(o[:0], o[1:]...)
		}
		d.apply(Event{Kind: ResultArrived, Worker: 0, Task: t})
		events++
	}
	return events
}
