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
// by the replaying thread's CPU time), on one core of an AMD EPYC. Remeasure
// with
//
//	go test -run X -bench PolicyCost -benchtime 5x ./sched/sim
var policyCosts = map[string][len(policyCostSizes)]float64{
	"wq":     {92, 108, 157, 378, 1668},
	"rr":     {247, 456, 1149, 2628, 25817},
	"rwq":    {91, 125, 246, 752, 3054},
	"r3q":    {265, 322, 405, 936, 7892},
	"cyclic": {80, 82, 90, 104, 143},
	"eft":    {1034, 1174, 1333, 1478, 1943},
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
