package localgrid

import (
	"fmt"

	"github.com/esgrid/esgrid/problems"
)

// Footprint is what decides the memory of a run in one process: its
// population, its problem's load and what evaluates it there, a pool of
// Slots slots (InProcess) or a master with Local agents of LocalSlots
// slots each (a Grid).
type Footprint struct {
	Mu, Lambda, Dim int
	LoadN           int  // LU load size, 0 = none
	CMA             bool // CMA-ES: a Dim × Dim covariance matrix
	InProcess       bool
	Slots           int // the in-process pool's slots
	Local           int // local agents, when not InProcess
	LocalSlots      int // slots of each local agent
}

// Rough costs behind MemoryEstimate, in bytes.
const (
	// baseBytes is the process before any population: the Go runtime,
	// gossip, connections, buffers.
	baseBytes = 64 << 20
	// slotBytes is one evaluation slot: its goroutine, stack and buffers.
	slotBytes = 32 << 10
)

// MemoryEstimate is about the most memory a run of f needs in this
// process, in bytes (float64, so that hostile sizes cannot overflow it).
func (f Footprint) MemoryEstimate() float64 {
	n, mu, lambda := float64(f.Dim), float64(f.Mu), float64(f.Lambda)
	// Parents and the batch hold x and σ (16 bytes a coordinate);
	// selection, the checkpoint's encoding and the report copy them about
	// once more (measured: 38 bytes a coordinate at -dim 200000).
	b := float64(baseBytes) + 40*n*(mu+lambda)
	if f.CMA {
		// Covariance, eigenvectors and the decomposition's workspace.
		b += 4 * 8 * n * n
	}
	var slots float64
	if f.InProcess {
		slots = float64(f.Slots)
		b += float64(problems.LoadBytes(f.LoadN, f.Slots))
	} else {
		// The master encodes every task into frames and the local agents
		// decode those they are sent, replicas included (measured: 56
		// bytes a coordinate of the batch at -dim 200000).
		b += 64 * n * lambda
		slots = float64(f.Local) * float64(f.LocalSlots)
		// Every local agent builds its own load.
		b += float64(f.Local) * float64(problems.LoadBytes(f.LoadN, f.LocalSlots))
	}
	return b + slots*slotBytes
}

// String says what the run is, for a message that refuses it: "a
// (30+70)-ES in 30 dimensions on 2 local workers × 4 slots".
func (f Footprint) String() string {
	what := fmt.Sprintf("a (%d+%d)-ES in %d dimensions", f.Mu, f.Lambda, f.Dim)
	if f.CMA {
		what = fmt.Sprintf("a CMA-ES with λ = %d in %d dimensions", f.Lambda, f.Dim)
	}
	if f.LoadN > 0 {
		what += fmt.Sprintf(" with an LU load of %d×%d", f.LoadN, f.LoadN)
	}
	if f.InProcess {
		what += " on " + plural(f.Slots, "slot")
	} else if f.Local > 0 {
		what += fmt.Sprintf(" on %s × %s", plural(f.Local, "local worker"), plural(f.LocalSlots, "slot"))
	}
	return what
}

// plural is "1 slot", "2 slots".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
