package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scaleSet is n workers of four kinds in equal numbers (as the built-in
// scale sets): speeds 0.5 to 2, 1 to 4 CPUs, 0.2 to 5 ms one way, 10 µs
// per message at the master and the workers.
func scaleSet(tb testing.TB, n int) *Set {
	tb.Helper()
	q := max(n/4, 1)
	text := fmt.Sprintf(`master cost=10us
machine A count=%d cpus=1 speed=0.5 delay=5ms   send=10us recv=10us
machine B count=%d cpus=2 speed=1   delay=1ms   send=10us recv=10us
machine C count=%d cpus=4 speed=1.5 delay=200us send=10us recv=10us
machine D count=%d cpus=2 speed=2   delay=2ms   send=10us recv=10us
`, q, q, q, q)
	s, err := ParseSet(fmt.Sprintf("scale%d", 4*q), strings.NewReader(text))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkSim measures the simulator at 16, 256 and 4,096 workers: a
// (0+λ)-ES with λ two tasks per CPU, 100 ms tasks, noise 0.1, under wq,
// r3q and eft, the clairvoyant optimum included, and prints tasks per
// second of real time.
func BenchmarkSim(b *testing.B) {
	for _, n := range []int{16, 256, 4096} {
		set := scaleSet(b, n)
		slots := 0
		for _, m := range set.Machines {
			slots += m.CPUs
		}
		gens := max(1, 20_000/(2*slots)) // about 20,000 tasks a run
		for _, p := range []string{"wq", "r3q", "eft"} {
			b.Run(fmt.Sprintf("%s/workers=%d", p, n), func(b *testing.B) {
				cfg := Config{Set: set, Policy: p, Workload: ES(0, 2*slots, gens, 100*time.Millisecond), Noise: 0.1, Seed: 1}
				tasks := 0
				for b.Loop() {
					if _, err := Run(cfg); err != nil {
						b.Fatal(err)
					}
					tasks += cfg.Workload.Tasks()
				}
				b.ReportMetric(float64(tasks)/b.Elapsed().Seconds(), "tasks/s")
			})
		}
	}
}
