package grid

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/metrics"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkMasterPerTask measures the whole process (master and four
// in-process workers over loopback TCP) per task: trivial fitness, 30-D
// vectors, batches of 1000. It reports process CPU time and bytes on the
// wire (both directions) per task. With metrics=on the master feeds its
// Prometheus metrics (the ledger's per-generation output) and they are
// scraped every 100 ms, as a Prometheus would, so that the two give the
// metrics' cost per task.
func BenchmarkMasterPerTask(b *testing.B) {
	for _, policy := range []string{"wq", "r3q"} {
		for _, on := range []bool{false, true} {
			name := policy + "/metrics=off"
			if on {
				name = policy + "/metrics=on"
			}
			b.Run(name, func(b *testing.B) {
				benchmarkMaster(b, policy, on)
			})
		}
	}
}

func benchmarkMaster(b *testing.B, policy string, withMetrics bool) {
	key := testClusterKey(b, "bench")
	cfg := MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy,
		Problem: ProblemSpec{Name: "sphere", Dim: 30}, Logger: testLogger(b),
	}
	var mm *metrics.Master
	if withMetrics {
		mm = metrics.NewMaster(nil)
		cfg.Ledger.OnGeneration = mm.Generation
	}
	m, err := NewMaster(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if withMetrics {
		reg := metrics.NewRegistry()
		mm.SetState(m.MetricsState)
		if err := mm.Register(reg); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/metrics", nil))
				}
			}
		}()
		defer func() { cancel(); <-done }()
	}
	var ws []*testWorker
	for i := range 4 {
		w := newTestWorker("w"+string(rune('0'+i)), 2, 0)
		if err := w.start(b, m.Addr(), key); err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
	}
	for m.Workers() < len(ws) {
		time.Sleep(time.Millisecond)
	}
	const batch = 1000
	xs := randomBatch(rand.New(rand.NewPCG(1, 1)), batch, 30)
	// Warm up buffers.
	if _, err := m.Evaluate(b.Context(), 0, xs); err != nil {
		b.Fatal(err)
	}
	st0 := m.Stats()
	cpu0 := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	tasks := 0
	for i := 0; tasks < b.N; i++ {
		if _, err := m.Evaluate(b.Context(), i+1, xs); err != nil {
			b.Fatal(err)
		}
		tasks += batch
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	st := m.Stats()
	b.ReportMetric(float64(cpu.Microseconds())/float64(tasks), "cpu-µs/task")
	b.ReportMetric(float64(st.BytesOut-st0.BytesOut+st.BytesIn-st0.BytesIn)/float64(tasks), "wire-B/task")
	b.ReportMetric(float64(st.FramesOut-st0.FramesOut)/float64(tasks), "frames-out/task")
	// ns/op and allocs/op are per task: b.N counts tasks.
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
