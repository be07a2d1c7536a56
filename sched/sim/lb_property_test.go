package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
	"github.com/esgrid/esgrid/sched"
)

// TestLBNeverExceedsTotal: on random machine sets whose machines change
// pace again and again (faster and slower, in the middle of generations),
// leave, hold several slots and run every policy, with replicas, cancels
// and overdue tasks, every generation's LB is at most its total, and the
// run's efficiency against LB at most 100 %: exactly, with no margin, for
// the bound holds by construction. Every complete generation has an LB,
// so the property is never met by a missing one. Seeded: 30 runs by
// default, 300 under the long build tag.
func TestLBNeverExceedsTotal(t *testing.T) {
	runs := longtest.Pick(30, 300)
	paces := []float64{0.125, 0.25, 0.5, 1, 1, 2, 4, 8}
	checked := 0
	for seed := range uint64(runs) {
		r := rand.New(rand.NewPCG(seed, 0x1b))
		text := randomSet(seed)
		set, err := ParseSet(fmt.Sprintf("random%d", seed), strings.NewReader(text))
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, text)
		}
		grain := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, time.Second}[r.IntN(3)]
		w := ES(10, 10+r.IntN(60), 10, grain)
		if r.IntN(3) == 0 {
			// Uneven tasks: a bag of strips per batch.
			w = Workload{}
			for range 10 {
				w.Batches = append(w.Batches, Batch{N: 48, Grains: MandelbrotGrains(48, grain)})
			}
		}
		cfg := Config{
			Set: set, Policy: sched.Names[r.IntN(len(sched.Names))], Workload: w,
			Noise: []float64{0, 0.2, 0.5}[r.IntN(3)], Seed: seed, NoOptimum: true,
		}
		// A lab PC's owner comes and goes: paces change every fraction of
		// a generation's nominal length, on a third of the machines.
		span := time.Duration(w.Batches[0].N) * grain / time.Duration(len(set.Machines))
		for _, m := range set.Machines {
			if r.IntN(3) != 0 {
				continue
			}
			at := time.Duration(0)
			for range 40 {
				at += time.Duration(r.Int64N(int64(2*span))) + time.Millisecond
				cfg.Slowdowns = append(cfg.Slowdowns, Slowdown{Machine: m.Name, At: at, Factor: paces[r.IntN(len(paces))]})
			}
		}
		res, err := Run(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		rep := res.Report
		for _, g := range rep.Generations {
			if g.LB > g.Total {
				t.Errorf("seed %d %s: generation %d: LB %v > total %v", seed, cfg.Policy, g.Index, g.LB, g.Total)
			}
			if g.Complete && g.LB <= 0 {
				t.Errorf("seed %d %s: complete generation %d without LB", seed, cfg.Policy, g.Index)
			}
			checked++
		}
		if rep.LB > rep.Total || rep.EfficiencyLB > 1 {
			t.Errorf("seed %d %s: LB %v, total %v: efficiency %v", seed, cfg.Policy, rep.LB, rep.Total, rep.EfficiencyLB)
		}
	}
	t.Logf("%d generations of %d runs checked", checked, runs)
}
