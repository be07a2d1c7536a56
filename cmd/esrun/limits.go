package main

import (
	"fmt"
	"runtime"

	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/problems"
)

// footprint is what decides the memory of a run in this process.
type footprint struct {
	mu, lambda, dim int
	loadN           int  // LU load size, 0 = none
	cma             bool // CMA-ES: a dim × dim covariance matrix
}

// Rough costs behind memoryEstimate, in bytes.
const (
	// baseBytes is the process before any population: the Go runtime,
	// gossip, connections, buffers.
	baseBytes = 64 << 20
	// slotBytes is one evaluation slot: its goroutine, stack and buffers.
	slotBytes = 32 << 10
)

// memoryEstimate is about the most memory a run of f needs in this
// process, in bytes (float64, so that hostile flags cannot overflow it).
func memoryEstimate(o *options, f footprint) float64 {
	n, mu, lambda := float64(f.dim), float64(f.mu), float64(f.lambda)
	// Parents and the batch hold x and σ (16 bytes a coordinate);
	// selection, the checkpoint's encoding and the report copy them about
	// once more (measured: 38 bytes a coordinate at -dim 200000).
	b := float64(baseBytes) + 40*n*(mu+lambda)
	if f.cma {
		// Covariance, eigenvectors and the decomposition's workspace.
		b += 4 * 8 * n * n
	}
	var slots float64
	if o.inprocess {
		slots = float64(poolSlots(o))
		b += float64(problems.LoadBytes(f.loadN, poolSlots(o)))
	} else {
		// The master encodes every task into frames and the local agents
		// decode those they are sent, replicas included (measured: 56
		// bytes a coordinate of the batch at -dim 200000).
		b += 64 * n * lambda
		slots = float64(o.local) * float64(o.localSlots())
		// Every local agent builds its own load.
		b += float64(o.local) * float64(problems.LoadBytes(f.loadN, o.localSlots()))
	}
	return b + slots*slotBytes
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
func checkMemory(o *options, f footprint) error {
	what := fmt.Sprintf("a (%d+%d)-ES in %d dimensions", f.mu, f.lambda, f.dim)
	if f.cma {
		what = fmt.Sprintf("a CMA-ES with λ = %d in %d dimensions", f.lambda, f.dim)
	}
	if f.loadN > 0 {
		what += fmt.Sprintf(" with an LU load of %d×%d", f.loadN, f.loadN)
	}
	if o.inprocess {
		what += " on " + plural(poolSlots(o), "slot")
	} else if o.local > 0 {
		what += fmt.Sprintf(" on %s × %s", plural(o.local, "local worker"), plural(o.localSlots(), "slot"))
	}
	if err := sysmem.Limit().Check(what, memoryEstimate(o, f)); err != nil {
		return usagef("%v; lower -dim, -mu, -lambda, the load or the slots", err)
	}
	return nil
}

// plural is "1 slot", "2 slots".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
