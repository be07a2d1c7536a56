package main

import (
	"runtime"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/localgrid"
)

// footprint is the memory footprint of a run of this population under
// o's evaluation flags.
func footprint(o *options, mu, lambda, dim, loadN int, cma bool) localgrid.Footprint {
	return localgrid.Footprint{Mu: mu, Lambda: lambda, Dim: dim, LoadN: loadN, CMA: cma,
		InProcess: o.inprocess, Slots: poolSlots(o), Local: o.local, LocalSlots: o.localSlots()}
}

// poolSlots is the size of the -inprocess pool (problems.NewPool's default).
func poolSlots(o *options) int {
	if o.slots > 0 {
		return o.slots
	}
	return runtime.NumCPU()
}

// checkMemory refuses a run that needs more memory than the machine
// allows (sysmem.Limit), naming the flags that size it.
func checkMemory(f localgrid.Footprint) error {
	if err := sysmem.Limit().Check(f.String(), f.MemoryEstimate()); err != nil {
		return usagef("%v; lower -dim, -mu, -lambda, the load or the slots", err)
	}
	return nil
}

// checkFrame refuses, before any work, a grid run whose -max-frame cannot
// carry one task of dim coordinates: every generation would fail at once.
// It is checked once the dimension is known (a checkpoint fixes it).
func checkFrame(o *options, dim int) error {
	if o.inprocess || o.maxFrameMiB == 0 {
		return nil // the default cap fits two tasks of any -dim a worker takes
	}
	if need := grid.TaskFrameSize(dim); need > o.maxFrame(dim) {
		return usagef("-max-frame %d: a task of %d dimensions takes up to %d bytes (64 + 9 per coordinate), over %d MiB; give -max-frame %d or more, or 0 (room for two tasks)",
			o.maxFrameMiB, dim, need, o.maxFrameMiB, (need+1<<20-1)>>20)
	}
	return nil
}
