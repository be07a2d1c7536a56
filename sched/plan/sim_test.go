package plan_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
)

// seeded is a policy told, as each worker joins, the task time that the
// fitted models predict for it (a Measured event with that Exec): docs/papers.md
// §4's models fed into scheduling, beyond the paper. eft plans dispatch
// and replication by expected finish times from the measured Exec; without
// a prior, a worker counts as the mean of those measured (or as any other,
// before anything is measured), so the first generation is planned blind.
type seeded struct {
	sched.Policy
	prior map[sched.WorkerID]time.Duration
}

func (s *seeded) Step(ev sched.Event, out []sched.Action) []sched.Action {
	out = s.Policy.Step(ev, out)
	if ev.Kind == sched.WorkerJoined {
		if p, ok := s.prior[ev.Worker]; ok {
			out = s.Policy.Step(sched.Event{Kind: sched.Measured, Worker: ev.Worker, Exec: p, At: ev.At}, out)
		}
	}
	return out
}

// TestModelPriorsInSimulation measures, on the simulator, whether the
// models' per-worker task times help eft when given as priors: total
// virtual time of (30+70)-ES runs of 1, 5 and 100 generations, 10 seeds,
// task noise σ = 0.1, priors exact or off by up to ±20 % (the paper's
// model error), on the paper's LAN set and the hetero9 set. It asserts
// only that every run ends; the table is the measurement (go test -tags
// long -v). By default it runs one seed, and 20 generations for 100.
func TestModelPriorsInSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	seeds := longtest.Pick(uint64(1), 10)
	allGens := longtest.Pick([]int{1, 5, 20}, []int{1, 5, 100})
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-6s %5s %12s %12s %12s %12s %9s %9s\n", "set", "grain", "gens", "r3q", "eft", "eft+prior", "eft+prior20", "exact", "±20%")
	for _, setName := range []string{"lan", "hetero9"} {
		set, err := sim.LoadSet(setName)
		if err != nil {
			t.Fatal(err)
		}
		for _, grain := range []time.Duration{100 * time.Millisecond, time.Second} {
			for _, gens := range allGens {
				var tot [4]time.Duration
				for seed := uint64(1); seed <= seeds; seed++ {
					exact := map[sched.WorkerID]time.Duration{}
					off := map[sched.WorkerID]time.Duration{}
					for k := range set.Machines {
						tt := set.TaskTime(k, grain)
						exact[sched.WorkerID(k)] = tt
						// A model error in [−20 %, +20 %], fixed per machine and seed.
						e := 0.2 * math.Sin(float64(7*k+int(seed)*13))
						off[sched.WorkerID(k)] = time.Duration(float64(tt) * (1 + e))
					}
					for i, mk := range []func() (sched.Policy, error){
						func() (sched.Policy, error) { return sched.New("r3q", sched.Config{}) },
						func() (sched.Policy, error) { return sched.New("eft", sched.Config{}) },
						func() (sched.Policy, error) {
							p, err := sched.New("eft", sched.Config{})
							return &seeded{p, exact}, err
						},
						func() (sched.Policy, error) {
							p, err := sched.New("eft", sched.Config{})
							return &seeded{p, off}, err
						},
					} {
						res, err := sim.Run(sim.Config{Set: set, NewPolicy: mk, Workload: sim.ES(30, 70, gens, grain), Noise: 0.1, Seed: seed, NoOptimum: true})
						if err != nil {
							t.Fatal(err)
						}
						tot[i] += res.End
					}
				}
				fmt.Fprintf(&b, "%-8s %-6v %5d %12v %12v %12v %12v %+8.2f%% %+8.2f%%\n", setName, grain, gens,
					(tot[0] / time.Duration(seeds)).Round(time.Millisecond), (tot[1] / time.Duration(seeds)).Round(time.Millisecond),
					(tot[2] / time.Duration(seeds)).Round(time.Millisecond), (tot[3] / time.Duration(seeds)).Round(time.Millisecond),
					100*(float64(tot[2])/float64(tot[1])-1), 100*(float64(tot[3])/float64(tot[1])-1))
			}
		}
	}
	t.Log("\n" + b.String())
}
