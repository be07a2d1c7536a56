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
// by the replaying thread's CPU time), on one core of an AMD EPYC
// (Turin), the least of three runs of 5 loops. wq, rr, rwq, r3q and
// cyclic on 27 November 2026 at load 5.6–7.8, after Q was compacted as
// tasks are taken from it (r3q had cost 7.6 µs at 4,096 workers); eft's
// row is not from that run: 16 to 256 workers on 27 November (load 4–6,
// after its step was made cheaper), 1,024 and 4,096 on 26 November (load
// 1.2–3). Remeasure with
//
//	go test -run X -bench PolicyCost -benchtime 5x ./sched/sim
//	go test -run X -bench PolicyCost -benchtime 5x ./sched/sim -sim.cost-policies wq,rr,rwq,r3q,cyclic
var policyCosts = map[string][len(policyCostSizes)]float64{
	"wq":     {72, 87, 123, 324, 1415},
	"rr":     {232, 422, 1084, 3167, 28086},
	"rwq":    {76, 107, 206, 647, 2695},
	"r3q":    {249, 298, 373, 780, 996},
	"cyclic": {63, 64, 67, 81, 113},
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
