package grid

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// BenchmarkMasterResultHoarder measures what one result costs the master
// against a worker that holds N instances outstanding (a key holder
// announcing N slots, or many slots × a deep queue) and answers the
// newest first, the worst order for the books kept in send order, or
// oldest first, as an honest worker does. Each
// iteration is a generation of 2N tasks under wq (which keeps N out on
// it). Reported: ns of the whole generation per result; a cost that does
// not grow with N is flat across the sizes.
func BenchmarkMasterResultHoarder(b *testing.B) {
	for _, order := range []string{"newest", "oldest"} {
		for _, n := range []int{10, 100, 1000, 4096} {
			b.Run(fmt.Sprintf("first=%s/N=%d", order, n), func(b *testing.B) {
				benchmarkHoarder(b, n, order == "newest")
			})
		}
	}
}

func benchmarkHoarder(b *testing.B, n int, newest bool) {
	{
		{
			m, err := NewMaster(b.Context(), MasterConfig{Listen: "127.0.0.1:0", Key: testClusterKey(b, "bench"),
				Policy: "wq", Problem: ProblemSpec{Name: "sphere", Dim: 2}, Logger: testLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			nc, err := net.Dial("tcp", m.Addr())
			if err != nil {
				b.Fatal(err)
			}
			c, _, err := ClientHandshake(b.Context(), nc, DialConfig{Key: m.cfg.Key, Name: "hoarder", Slots: n, Timeout: 5 * time.Second,
				Conn: ConnConfig{Logger: testLogger(b)}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { c.Close(); <-c.Done() }()
			var mu sync.Mutex
			type held struct {
				gen int32
				t   Task
			}
			var stack []held
			more := make(chan struct{}, 1)
			c.Start(func(msg Message) {
				if ts, ok := msg.(*Tasks); ok {
					mu.Lock()
					for _, t := range ts.Items {
						stack = append(stack, held{ts.Gen, t})
					}
					mu.Unlock()
					select {
					case more <- struct{}{}:
					default:
					}
				}
			})
			go func() { // answers the newest first, one a frame
				for {
					mu.Lock()
					if len(stack) == 0 {
						mu.Unlock()
						select {
						case <-more:
							continue
						case <-c.Done():
							return
						}
					}
					var h held
					if newest {
						h, stack = stack[len(stack)-1], stack[:len(stack)-1]
					} else {
						h, stack = stack[0], stack[1:]
					}
					mu.Unlock()
					r := Result{Gen: h.gen, ID: h.t.ID, Token: h.t.Token, F: h.t.X[0], Exec: int64(time.Microsecond)}
					if c.Send(&Results{Items: []Result{r}}) != nil {
						return
					}
				}
			}()
			if err := m.WaitWorkers(b.Context(), 1); err != nil {
				b.Fatal(err)
			}
			xs := make([][]float64, 2*n)
			for i := range xs {
				xs[i] = []float64{float64(i), 0}
			}
			gen := 0
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.Evaluate(b.Context(), gen, xs); err != nil {
					b.Fatal(err)
				}
				gen++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/result")
		}
	}
}
