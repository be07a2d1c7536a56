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
	"github.com/esgrid/esgrid/sched"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkMasterPerTask measures the whole process (master and eight
// in-process workers of two slots over loopback TCP) per task, under
// every policy: 30-D vectors, generations of λ = 70 (esrun's default),
// evaluations of 1 ms. Since evaluations take time, as in real runs,
// results come back one or two at a time and each frame carries the
// tasks it would in a real run (reported as tasks/frame), so that the
// policy's work per task shows, not only framing amortised over bursts
// of instant results. It reports process CPU time (master and workers:
// see internal/gridtest's BenchmarkMasterAgents for the master's own, in
// a process of its own) and bytes on the wire (both directions) per
// task. With metrics=on (wq and r3q) the master feeds its Prometheus
// metrics (the ledger's per-generation output) and they are scraped
// every 100 ms, as a Prometheus would, so that the two give the metrics'
// cost per task.
func BenchmarkMasterPerTask(b *testing.B) {
	for _, policy := range sched.Names {
		for _, on := range []bool{false, true} {
			if on && policy != "wq" && policy != "r3q" {
				continue
			}
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
	for i := range 8 {
		w := newTestWorker("w"+string(rune('0'+i)), 2, time.Millisecond)
		if err := w.start(b, m.Addr(), key); err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
	}
	for m.Workers() < len(ws) {
		time.Sleep(time.Millisecond)
	}
	const batch = 70
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
	b.ReportMetric(float64(st.TasksSent-st0.TasksSent)/float64(st.FramesOut-st0.FramesOut), "tasks/frame")
	// ns/op and allocs/op are per task: b.N counts tasks.
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
