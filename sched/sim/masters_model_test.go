package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/longtest"
)

// masterVariants are the split decisions compared by
// TestMastersModelExec: the paper's rule, the gain rule from what the
// master measured, and the gain rule with a fitted model's task time
// (docs/papers.md §4, sched/plan) in place of the measured one, exact or off
// by ±20 % (the paper's model error).
var masterVariants = []struct {
	name  string
	rule  string
	model float64 // ModelExec = model × Grain; 0: measured
}{
	{"off", SplitOff, 0},
	{"paper", SplitPaper, 0},
	{"gain", SplitGain, 0},
	{"gain+model", SplitGain, 1},
	{"model-20%", SplitGain, 0.8},
	{"model+20%", SplitGain, 1.2},
}

func runVariants(t *testing.T, base MastersConfig, seeds int) (mk [6]time.Duration, masters [6]int) {
	t.Helper()
	for i, v := range masterVariants {
		for seed := 1; seed <= seeds; seed++ {
			c := base
			c.Rule, c.Seed = v.rule, uint64(seed)
			c.ModelExec = time.Duration(v.model * float64(c.Grain))
			r, err := RunMasters(c)
			if err != nil {
				t.Fatal(err)
			}
			mk[i] += r.Makespan / time.Duration(seeds)
			masters[i] = max(masters[i], r.MastersMax)
		}
	}
	return mk, masters
}

// TestMastersModelExec measures whether deciding a split with a fitted
// model's task time beats deciding it with the master's measured one
// (issue 19, part 4): mean makespan over seeds on the paper's Fig. 5–7
// set-up (P = 2..18) and at 256 and 1,024 workers. It asserts only that
// every run ends; the table is the measurement (go test -tags long -v).
// By default it runs one seed at P = 2, 10 and 18 and 256 workers, enough
// to see every rule's runs end.
func TestMastersModelExec(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	paperPs := longtest.Pick([]int{2, 10, 18}, []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
	paperSeeds := longtest.Pick(1, 10)
	scaleSeeds := longtest.Pick(1, 4)
	scaleWorkers := longtest.Pick([]int{256}, []int{256, 1024})
	scaleCosts := longtest.Pick([]time.Duration{10 * time.Microsecond}, []time.Duration{10 * time.Microsecond, 25 * time.Microsecond})
	var b strings.Builder
	head := func() {
		fmt.Fprintf(&b, "%10s", "P")
		for _, v := range masterVariants {
			fmt.Fprintf(&b, " %12s", v.name)
		}
		fmt.Fprintf(&b, " %10s %10s %10s\n", "model/gain", "-20%/gain", "+20%/gain")
	}
	row := func(label string, mk [6]time.Duration, ms [6]int) {
		fmt.Fprintf(&b, "%10s", label)
		for i := range mk {
			fmt.Fprintf(&b, " %8.3f (%d)", mk[i].Seconds(), ms[i])
		}
		for _, i := range []int{3, 4, 5} {
			fmt.Fprintf(&b, " %+9.1f%%", 100*(float64(mk[i])/float64(mk[2])-1))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "Fig. 5-7 set-up: 2000 tasks of 9ms (log-normal, sigma 0.5), 50µs one way, 1ms per message; mean makespan [s] over %d seeds (most masters)\n", paperSeeds)
	head()
	var sum [6]time.Duration
	for _, p := range paperPs {
		mk, ms := runVariants(t, MastersConfig{
			Workers: p - 1, Tasks: 2000, Grain: 9 * time.Millisecond, Noise: 0.5,
			Latency: 50 * time.Microsecond, MasterCost: time.Millisecond, Policy: "wq",
		}, paperSeeds)
		row(fmt.Sprint(p), mk, ms)
		for i := range sum {
			sum[i] += mk[i]
		}
	}
	row("sum", sum, [6]int{})
	fmt.Fprintf(&b, "\nPast the paper: 100 tasks per worker of 10ms (log-normal, sigma 0.3), 100µs one way; mean makespan [s] over %d seeds (most masters)\n", scaleSeeds)
	head()
	for _, cost := range scaleCosts {
		for _, n := range scaleWorkers {
			mk, ms := runVariants(t, MastersConfig{
				Workers: n, Tasks: 100 * n, Grain: 10 * time.Millisecond, Noise: 0.3,
				Latency: 100 * time.Microsecond, MasterCost: cost, Policy: "wq",
			}, scaleSeeds)
			row(fmt.Sprintf("%d/%v", n, cost), mk, ms)
		}
	}
	t.Log("\n" + b.String())
}

// TestMastersModelExecDecides checks that SplitGain decides from
// ModelExec when it is set: at P = 18 of the paper's set-up the measured
// rule splits; told that a task takes 100 times its real time, the
// estimate sees workers that cannot load the master, and never splits.
func TestMastersModelExecDecides(t *testing.T) {
	c := MastersConfig{
		Workers: 17, Tasks: 2000, Grain: 9 * time.Millisecond, Noise: 0.5,
		Latency: 50 * time.Microsecond, MasterCost: time.Millisecond, Rule: SplitGain, Seed: 1,
	}
	measured, err := RunMasters(c)
	if err != nil {
		t.Fatal(err)
	}
	if measured.Splits == 0 {
		t.Fatalf("measured gain rule: no split at P = 18 (%+v)", measured.Timeline)
	}
	c.ModelExec = 100 * c.Grain
	model, err := RunMasters(c)
	if err != nil {
		t.Fatal(err)
	}
	if model.Splits != 0 || model.MastersMax != 1 || model.Suppressed == 0 {
		t.Fatalf("model exec 100 × grain: %d splits, %d masters, %d suppressed; want 0, 1, > 0", model.Splits, model.MastersMax, model.Suppressed)
	}
	c.ModelExec = c.Grain
	exact, err := RunMasters(c)
	if err != nil {
		t.Fatal(err)
	}
	if exact.Splits == 0 {
		t.Fatal("exact model exec: no split at P = 18")
	}
}
