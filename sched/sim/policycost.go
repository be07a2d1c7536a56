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
// scale sets, λ = 2 × slots, 100 ms tasks, noise 0.1, replayed), on an
// AMD EPYC core under a load of about 8 on 2 cores, so an upper figure
// rather than a lower. Remeasure with
//
//	go test -run X -bench PolicyCost -benchtime 5x ./sched/sim
var policyCosts = map[string][len(policyCostSizes)]float64{
	"wq":     {89, 106, 154, 742, 2850},
	"rr":     {485, 463, 3238, 15505, 63237},
	"rwq":    {90, 132, 371, 1006, 4203},
	"r3q":    {758, 351, 599, 1412, 9850},
	"cyclic": {79, 87, 86, 103, 133},
	"eft":    {3987, 3963, 4261, 2349, 2374},
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
