package worker

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/sysmem"
	"github.com/esgrid/esgrid/problems"
)

// A master holds the cluster key, but the key proves membership, not
// sense: whatever its Welcome or its tasks ask, the worker checks it
// against what this machine can give before it builds, holds or runs
// anything, and refuses with a reason the master logs (a Reject after
// the Welcome, grid/refusals.go; an evaluation error for a task).

// MaxDim is the largest dimension a worker builds a problem in: a task's
// vector of more coordinates cannot cross the wire (the grid's frame
// decoder refuses it), so a larger problem could never be evaluated, and
// building it would only spend memory. It is the same as a plugin's
// (plugin.MaxDim). No setting raises it.
const MaxDim = 1 << 20

// DefaultMemShare is Limits.MemShare's default: half of the machine's
// memory, as for the commands' own checks (internal/sysmem).
const DefaultMemShare = 0.5

// MaxMemShare bounds Limits.MemShare: the rest is the system's, and the
// worker's own (its runtime, gossip, its connection at its own frame cap).
const MaxMemShare = 0.9

// ErrLimit is wrapped by the reason a worker refuses what a master asks
// beyond its limits.
var ErrLimit = errors.New("over this worker's limits")

// Limits bound what a master may ask of an agent. Zero fields take the
// defaults named in their comments.
type Limits struct {
	// MemShare is the share of the machine's memory (Memory) that what one
	// master asks may need: the problem built, its LU load on every slot,
	// the vectors being evaluated and held, and the connection's buffers
	// at the master's frame cap when it raised the worker's. Default
	// DefaultMemShare; at most MaxMemShare (esworker -mem-share).
	MemShare float64
	// Memory is the machine's memory, in bytes, that MemShare is of.
	// Default: internal/sysmem's figure (MemTotal, or the cgroup's limit
	// when lower). A problem is also refused when it needs more than the
	// system has available at the time (sysmem.Available).
	Memory float64
}

func (l Limits) withDefaults() (Limits, error) {
	if l.MemShare == 0 {
		l.MemShare = DefaultMemShare
	}
	if !(l.MemShare > 0 && l.MemShare <= MaxMemShare) {
		return l, fmt.Errorf("worker: memory share %v outside (0, %v]", l.MemShare, MaxMemShare)
	}
	if !(l.Memory >= 0) || math.IsInf(l.Memory, 0) {
		return l, fmt.Errorf("worker: memory %v bytes", l.Memory)
	}
	return l, nil
}

// budget is the memory one master's problem may need on this worker.
func (l Limits) budget() sysmem.Budget {
	b := sysmem.Limit()
	if l.Memory > 0 {
		b = sysmem.Budget{Physical: l.Memory, From: "set"}
	}
	return b.WithShare(l.MemShare)
}

// Rough costs behind footprint, in bytes.
const (
	// heldTaskOverhead is a held task besides its vector: its list
	// element, map entry and slice header, rounded up.
	heldTaskOverhead = 256
	// slotBytesPerCoord is a running evaluation's vectors, per
	// coordinate: x, and its copy encoded for a plugin (9 bytes a
	// coordinate), rounded up.
	slotBytesPerCoord = 24
	// decodeFactor bounds what a frame's bytes may decode into: a float
	// written as a one-byte integer decodes into 8 bytes.
	decodeFactor = 8
)

// footprint is what the memory a master's problem needs on this worker
// is made of, in bytes (float64: products of hostile figures never
// overflow).
type footprint struct {
	problem float64 // the problem built: the ellipsoid's coefficients (8 bytes a coordinate) at most, for a built-in
	load    float64 // its LU load: the shared matrix and one copy per slot (problems.LoadBytes)
	slots   float64 // the vectors being evaluated, on every slot
	held    float64 // one held task per slot at least, so that the remote queue can work
	conn    float64 // a frame at the master's cap, what it decodes into, and the send queue, when the master raised the worker's cap
}

func (f footprint) total() float64 { return f.problem + f.load + f.slots + f.held + f.conn }

// taskBytes is what a held task of dimension dim takes.
func taskBytes(dim int) float64 { return 8*float64(dim) + heldTaskOverhead }

// footprintOf estimates the memory that spec needs on a worker with
// slots slots whose connection has configuration cc, its own frame cap
// having been ownFrame.
func footprintOf(spec grid.ProblemSpec, slots int, cc grid.ConnConfig, ownFrame int) footprint {
	n, s := float64(spec.Dim), float64(slots)
	f := footprint{
		problem: 8 * n,
		load:    float64(problems.LoadBytes(spec.LoadN, slots)),
		slots:   s * slotBytesPerCoord * n,
		held:    s * taskBytes(spec.Dim),
	}
	if cc.MaxFrame > ownFrame {
		// The bytes queued to send may take twice the cap as the buffer
		// grows.
		f.conn = float64(decodeFactor+1)*float64(cc.MaxFrame) + 2*float64(cc.MaxQueued)
	}
	return f
}

// admission is what a worker accepted of a master's Welcome: the
// problem's dimension, and the bytes its held tasks may take.
type admission struct {
	dim     int
	heldMax float64
}

// admit checks a master's problem spec against the limits before
// anything is built: its dimension, its LU load, and the memory it needs
// on slots slots with connection configuration cc (ownFrame: the
// worker's own frame cap). available reports the memory the system has
// now (sysmem.Available). The error wraps ErrLimit and says which limit
// was hit and how the worker's owner or the master can change it.
func (l Limits) admit(spec grid.ProblemSpec, slots int, cc grid.ConnConfig, ownFrame int,
	available func() (float64, string, bool)) (admission, error) {
	switch {
	case spec.Dim < 1:
		return admission{}, fmt.Errorf("%w: dimension %d: must be ≥ 1", ErrLimit, spec.Dim)
	case spec.Dim > MaxDim:
		return admission{}, fmt.Errorf("%w: dimension %d is more than %d, the largest vector a task can carry; no worker setting raises it",
			ErrLimit, spec.Dim, MaxDim)
	case spec.LoadN < 0:
		return admission{}, fmt.Errorf("%w: LU load %d: must be ≥ 0", ErrLimit, spec.LoadN)
	case spec.LoadN > problems.MaxLoadN:
		return admission{}, fmt.Errorf("%w: LU load of %d×%d is more than the %d×%d this worker takes; no worker setting raises it",
			ErrLimit, spec.LoadN, spec.LoadN, problems.MaxLoadN, problems.MaxLoadN)
	}
	f := footprintOf(spec, slots, cc, ownFrame)
	b := l.budget()
	// Short: the master logs a refusal's first 300 bytes.
	if need := f.total(); !(need <= b.Bytes) {
		return admission{}, fmt.Errorf("%w: needs %s on %d slots (%s), over its %s (%v × %s, %s); raise esworker -mem-share (≤ %v) or lower -slots, or the master's -dim, -lu, -max-frame",
			ErrLimit, sysmem.Format(need), slots, f.parts(), sysmem.Format(b.Bytes), l.MemShare, sysmem.Format(b.Physical), b.From, MaxMemShare)
	}
	if avail, from, ok := available(); ok && f.total() > avail {
		return admission{}, fmt.Errorf("%w: needs %s on %d slots (%s), and the system has %s available now (%s)",
			ErrLimit, sysmem.Format(f.total()), slots, f.parts(), sysmem.Format(avail), from)
	}
	// The held tasks may take what the rest leaves.
	return admission{dim: spec.Dim, heldMax: b.Bytes - (f.total() - f.held)}, nil
}

// parts lists the larger parts of the footprint.
func (f footprint) parts() string {
	s := ""
	for _, p := range []struct {
		name string
		b    float64
	}{{"load", f.load}, {"vectors", f.problem + f.slots + f.held}, {"frames", f.conn}} {
		if p.b > 0 {
			if s != "" {
				s += ", "
			}
			s += p.name + " " + sysmem.Format(p.b)
		}
	}
	return s
}

// checkTask says why a task that a master sent cannot be held, or nil:
// its vector must have the problem's dimension and finite coordinates,
// and fit in what is left for held tasks (held bytes are held already).
func (ad admission) checkTask(t *grid.Task, held float64) error {
	if len(t.X) != ad.dim {
		return fmt.Errorf("%w: task vector of length %d, the problem's dimension is %d", ErrLimit, len(t.X), ad.dim)
	}
	for i, x := range t.X {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: task coordinate %d is %v, not a point", ErrLimit, i, x)
		}
	}
	if need := taskBytes(ad.dim); held+need > ad.heldMax {
		return fmt.Errorf("%w: the remote queue already holds %s of tasks, and this worker holds at most %s (its memory share, less what the problem needs); the master sends more than the worker has slots for",
			ErrLimit, sysmem.Format(held), sysmem.Format(max(ad.heldMax, 0)))
	}
	return nil
}

// childTaskBytes is what a child master holds for each task id of its
// batch besides the vectors: the batch's slot for x, its value and flag,
// and the policy's books, rounded up.
const childTaskBytes = 64

// checkPromote says why the agent must not become the child master that
// pr asks for, or nil: every setting of pr must be in range
// (grid.Promote.Check: a child master that cannot start, or that sleeps
// for ever on each message, is no child), its tasks of the problem's
// dimension, and the batch it would hold (pr.N task ids, up to
// sched.MaxTaskID) must fit in what the memory share leaves for held
// tasks, which the promoted worker gives back.
func (ad admission) checkPromote(pr *grid.Promote) error {
	if err := pr.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrLimit, err)
	}
	if ad.dim == 0 {
		return nil // a session made without the agent's admission (tests)
	}
	for _, t := range pr.Tasks {
		if len(t.X) != ad.dim {
			return fmt.Errorf("%w: a child master's task vector of length %d, the problem's dimension is %d", ErrLimit, len(t.X), ad.dim)
		}
	}
	if need := childTaskBytes * float64(max(pr.N, 0)); need > ad.heldMax {
		return fmt.Errorf("%w: a child master of a batch of %d tasks needs %s, more than the %s this worker holds tasks in",
			ErrLimit, pr.N, sysmem.Format(need), sysmem.Format(max(ad.heldMax, 0)))
	}
	return nil
}

// clipName quotes a problem name from the wire for a message, cut to a
// sane length.
func clipName(name string) string {
	const max = 64
	if len(name) > max {
		n := max
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name = name[:n] + "…"
	}
	return fmt.Sprintf("%q", name)
}
