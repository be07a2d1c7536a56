// Package calibratetest gives tests of calibrate and of esplan a
// calibration whose answer is known.
package calibratetest

import "github.com/esgrid/esgrid/sched/plan"

// Known is a calibration of two fast machines (group fast: fast-1 and
// fast-2, which also measured P > M) and a slow one (group slow: slow-1,
// 30 times slower) whose times follow a known N–T model, at N from 100
// to 3,200 and M of 1 and 2: a plan for it sets slow-1 aside.
func Known() *plan.Calibration {
	truth := plan.Cubic{0.002, 1e-6, 2e-9, 5e-11}
	cal := &plan.Calibration{Version: plan.CalibrationVersion, Source: "test", Machines: []plan.Machine{
		{Name: "fast-1", Group: "fast", CPUs: 2}, {Name: "fast-2", Group: "fast", CPUs: 2}, {Name: "slow-1", Group: "slow", CPUs: 2},
	}}
	add := func(g, w string, n, p, m int, x float64) {
		cal.Samples = append(cal.Samples, plan.Sample{Group: g, Worker: w, N: n, P: p, M: m, Exec: x, Count: 3})
	}
	for _, n := range []int{100, 200, 400, 800, 1600, 3200} {
		for _, m := range []int{1, 2} {
			t1 := truth.At(float64(n)) * (1 + 0.1*float64(m-1))
			add("fast", "fast-1", n, m, m, t1)
			add("slow", "slow-1", n, m, m, 30*t1)
			for _, p := range []int{m + 1, m + 2, m + 4, m + 6} {
				add("fast", "fast-2", n, p, m, t1*(1+0.08*float64(p)))
			}
		}
	}
	return cal
}
