package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
)

// randomSet writes a machine set of 3 to 20 machines: speeds spread up
// to 40×, 1 to 8 CPUs, 0.2 to 100 ms one way, now and then a machine
// that slows 3 to 10 times mid-run or leaves.
func randomSet(seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0x5e75))
	spreads := []float64{2, 5, 10, 20, 40}
	cpus := []int{1, 1, 2, 2, 4, 8}
	delays := []string{"200us", "1ms", "2ms", "5ms", "10ms", "20ms", "40ms", "80ms", "100ms"}
	var b strings.Builder
	fmt.Fprintf(&b, "master cost=%s\n", []string{"10us", "10us", "25us"}[r.IntN(3)])
	spread := spreads[r.IntN(len(spreads))]
	n := 3 + r.IntN(18)
	for i := range n {
		speed := math.Pow(spread, r.Float64()) / math.Sqrt(spread)
		fmt.Fprintf(&b, "machine X%d", i)
		if i == 0 {
			b.WriteString(" local")
		} else {
			fmt.Fprintf(&b, " delay=%s", delays[r.IntN(len(delays))])
		}
		fmt.Fprintf(&b, " cpus=%d speed=%.3g", cpus[r.IntN(len(cpus))], speed)
		if i > 0 && r.IntN(10) == 0 {
			fmt.Fprintf(&b, " slow=%ds*%d", 2+r.IntN(10), []int{3, 5, 10}[r.IntN(3)])
		}
		if i > 0 && r.IntN(20) == 0 {
			fmt.Fprintf(&b, " leave=%ds", 2+r.IntN(10))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestEFTRandomSets runs eft, r3q and wq on random machine sets (the
// case the issue names: grids that are not in the repo), with and
// without noise, short and long tasks, and checks that eft is never much
// slower than either, and faster than R3Q across them. Virtual time only,
// seeded: the figures are the simulator's and the same on every run. By
// default 6 sets, all 16 under the long build tag.
func TestEFTRandomSets(t *testing.T) {
	sets := longtest.Pick(6, 16) // with -tags long, all of them
	if testing.Short() {
		sets = 4
	}
	var logSum float64
	var n int
	for seed := range uint64(sets) {
		text := randomSet(seed)
		set, err := ParseSet(fmt.Sprintf("random%d", seed), strings.NewReader(text))
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, text)
		}
		for _, noise := range []float64{0, 0.1} {
			for _, grain := range []time.Duration{100 * time.Millisecond, time.Second} {
				total := map[string]time.Duration{}
				for _, policy := range []string{"eft", "r3q", "wq"} {
					var sum time.Duration
					for trial := range uint64(2) {
						cfg := Config{Set: set, Policy: policy, Workload: ES(30, 70, 20, grain), Noise: noise, Seed: 1 + trial, NoOptimum: true}
						r, err := Run(cfg)
						if err != nil {
							t.Fatalf("seed %d %s: %v", seed, policy, err)
						}
						sum += r.End
					}
					total[policy] = sum
				}
				vsR3Q := float64(total["eft"]) / float64(total["r3q"])
				vsWQ := float64(total["eft"]) / float64(total["wq"])
				logSum += math.Log(vsR3Q)
				n++
				if vsR3Q > 1.05 || vsWQ > 1.05 {
					t.Errorf("seed %d, noise %.1f, %v tasks: eft %v, r3q %v, wq %v\n%s", seed, noise, grain, total["eft"], total["r3q"], total["wq"], text)
				}
			}
		}
	}
	gm := math.Exp(logSum / float64(n))
	t.Logf("eft / r3q over %d settings: geometric mean %.3f", n, gm)
	if gm > 0.97 {
		t.Errorf("eft / r3q geometric mean %.3f: eft should be faster than R3Q on mismatched grids", gm)
	}
}
