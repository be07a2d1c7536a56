package grid

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// BenchmarkMasterPerTask measures the whole process (master and four
// in-process workers over loopback TCP) per task: trivial fitness, 30-D
// vectors, batches of 1000. It reports process CPU time and bytes on the
// wire (both directions) per task.
func BenchmarkMasterPerTask(b *testing.B) {
	for _, policy := range []string{"wq", "r3q"} {
		b.Run(policy, func(b *testing.B) {
			benchmarkMaster(b, policy)
		})
	}
}

func benchmarkMaster(b *testing.B, policy string) {
	key := testClusterKey(b, "bench")
	m, err := NewMaster(b.Context(), MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: policy,
		Problem: ProblemSpec{Name: "sphere", Dim: 30}, Logger: testLogger(b),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
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
