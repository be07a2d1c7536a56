//go:build linux

package problems

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gonum.org/v1/gonum/mat"
)

// BenchmarkLoad times one LU load evaluation of size n, with par
// goroutines evaluating side by side: ns/op is the wall time of one
// evaluation when par run at once, and "cores" is the CPU time the
// process used per unit of wall time. For the load to mean one CPU per
// slot, ns/op must stay about the same from par=1 to par=2 on a machine
// with 2 free cores, and cores must be about par. impl=gonum is the
// previous load (gonum's mat.LU, whose blocked products run on several
// goroutines), kept here for comparison.
//
//	go test -run '^$' -bench Load -benchtime 20x ./problems/
func BenchmarkLoad(b *testing.B) {
	for _, impl := range []string{"esgrid", "gonum"} {
		for _, n := range []int{200, 500, 1000} {
			for _, par := range []int{1, 2} {
				b.Run(fmt.Sprintf("impl=%s/n=%d/par=%d", impl, n, par), func(b *testing.B) {
					benchLoad(b, impl, n, par)
				})
			}
		}
	}
}

func benchLoad(b *testing.B, impl string, n, par int) {
	w := newLUWork(n)
	a := mat.NewDense(n, n, w.a)
	lus := make([]mat.LU, par)
	eval := func(g int) {
		switch impl {
		case "esgrid":
			if _, err := w.run(context.Background()); err != nil {
				b.Error(err)
			}
		case "gonum":
			lus[g].Factorize(a)
			logDet, _ := lus[g].LogDet()
			luSink.Add(math.Float64bits(logDet))
		}
	}
	// Each goroutine runs its k evaluations on its own, with no handshake
	// between them, so that waking goroutines (slow on a virtual machine)
	// does not count: ns/op is the wall time of one evaluation.
	side := func(k int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for g := range par {
			wg.Go(func() {
				for range k {
					eval(g)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	side(1) // every goroutine gets its scratch and warms its caches
	cpu0 := cpuTime()
	b.ResetTimer()
	wall := side(b.N)
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(wall), "cores")
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadCancel measures cancel latency: an n×n evaluation is
// cancelled at a pseudo-random moment within its first three quarters,
// and the time from cancel() to Eval's return is recorded. ns/op is
// meaningless here; read mean-µs and max-µs.
//
//	go test -run '^$' -bench LoadCancel -benchtime 50x ./problems/
func BenchmarkLoadCancel(b *testing.B) {
	for _, n := range []int{500, 1000, 2000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			p := WithLoad(&counting{}, n)
			x := []float64{0.5}
			start := time.Now()
			p.Eval(context.Background(), x) // warm the pool, and time one
			full := time.Since(start)
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			var sum, worst time.Duration
			runs := 0
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := p.Eval(ctx, x)
					done <- err
				}()
				time.Sleep(time.Duration(rng.Float64() * 0.75 * float64(full)))
				t0 := time.Now()
				cancel()
				err := <-done
				lat := time.Since(t0)
				if err == nil {
					continue // finished before the cancel: no latency to count
				}
				sum += lat
				worst = max(worst, lat)
				runs++
			}
			if runs > 0 {
				b.ReportMetric(float64(sum.Microseconds())/float64(runs), "mean-µs")
				b.ReportMetric(float64(worst.Microseconds()), "max-µs")
				b.ReportMetric(float64(full.Milliseconds()), "eval-ms")
			}
		})
	}
}

// BenchmarkLoadCheckGap measures the stretches between two looks at the
// context in thread CPU time, which a busy or virtual machine's
// scheduling does not inflate: the bound on cancel latency that the
// decomposition itself sets. Read p50-µs, p99-µs and max-µs.
//
//	go test -run '^$' -bench LoadCheckGap -benchtime 3x ./problems/
func BenchmarkLoadCheckGap(b *testing.B) {
	for _, n := range []int{500, 1000, 2000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			// Thread CPU time means one thread: keep this goroutine on it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			w := newLUWork(n)
			var gaps []time.Duration
			var last time.Duration
			w.onCheck = func(int64) {
				now := threadCPUTime()
				gaps = append(gaps, now-last)
				last = now
			}
			for b.Loop() {
				last = threadCPUTime()
				if _, err := w.run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(gaps)
			q := func(f float64) float64 {
				return float64(gaps[int(f*float64(len(gaps)-1))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(q(1), "max-µs")
		})
	}
}

// threadCPUTime is the CPU time the calling thread has used.
func threadCPUTime() time.Duration {
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
