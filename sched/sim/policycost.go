package sim

import (
	"math"
	"time"
)

// policyCostSizes are the grid sizes (workers) of policyCosts' columns.
var policyCostSizes = [...]int{16, 64, 256, 1024, 4096}

// policyCosts is what one Step of each policy costs a master, in ns per
// event, at the sizes of policyCostSizes: the least over the loops of
// BenchmarkPolicyCost (each policy's events over a simulated run of the
// scale sets, λ = 2 × slots, 100 ms tasks, noise 0.1, replayed and timed
// by the replaying thread's CPU time), on one core of an AMD EPYC, the
// least of three runs of 5 loops (26 November 2026, load 1.2–3; eft's at
// 16 to 256 workers on 27 November, load 4–6, after its step was made
// cheaper: its figures at 1,024 and 4,096 workers did not move). Remeasure
// with
//
//	go test -run X -bench PolicyCost -benchtime 5x ./sched/sim
var policyCosts = map[string][len(policyCostSizes)]float64{
	"wq":     {89, 104, 154, 380, 1644},
	"rr":     {245, 451, 1145, 2738, 35426},
	"rwq":    {90, 127, 245, 750, 3067},
	"r3q":    {265, 320, 399, 878, 7619},
	"cyclic": {78, 80, 85, 100, 119},
	"eft":    {813, 934, 1088, 1212, 1570},
}

// MeasuredPolicyCost is what one Step of the named policy costs a master
// with that many workers, as measured (policyCosts): interpolated
// linearly in the logarithms of size and cost between the sizes measured,
// the nearest size's beyond them; 0 for a policy not measured.
func MeasuredPolicyCost(name string, workers int) time.Duration {
	c, ok := policyCosts[name]
	if !ok {
		return 0
	}
	n := len(policyCostSizes)
	switch {
	case workers <= policyCostSizes[0]:
		return time.Duration(c[0])
	case workers >= policyCostSizes[n-1]:
		return time.Duration(c[n-1])
	}
	i := 1
	for policyCostSizes[i] < workers {
		i++
	}
	if policyCostSizes[i] == workers {
		return time.Duration(c[i])
	}
	x0, x1 := math.Log(float64(policyCostSizes[i-1])), math.Log(float64(policyCostSizes[i]))
	f := (math.Log(float64(workers)) - x0) / (x1 - x0)
	return time.Duration(math.Exp(math.Log(c[i-1]) + f*(math.Log(c[i])-math.Log(c[i-1]))))
}
