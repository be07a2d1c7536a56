package plan

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// CalibrationVersion is the format of a Calibration file.
const CalibrationVersion = 1

// Calibration is what was measured: the machines and, per batch, each
// worker's mean task time. It is what `esplan calibrate` writes and what
// the models are fitted from.
type Calibration struct {
	Version int `json:"version"`
	// Source says where the measurements came from: "grid" (esplan
	// calibrate) or "reports" (esrun -report files).
	Source   string    `json:"source"`
	Machines []Machine `json:"machines"`
	Samples  []Sample  `json:"samples"`
	// Notes are remarks made while measuring (a group whose machines
	// disagree, a batch that failed).
	Notes []string `json:"notes,omitempty"`
}

// Machine is one worker of the grid.
type Machine struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	// CPUs is the slots the worker announced when it joined: its CPUs
	// unless it was told otherwise (esworker -slots).
	CPUs int `json:"cpus"`
}

// Sample is one measurement: Worker, of Group, ran Count tasks of size N
// with M slots busy on it and P tasks running in the whole grid (Σ of the
// slots in use), taking Exec seconds each on average (the execution time
// the worker reports, slowdown emulation included).
type Sample struct {
	Group  string  `json:"group"`
	Worker string  `json:"worker"`
	N      int     `json:"n"`
	P      int     `json:"p"`
	M      int     `json:"m"`
	Exec   float64 `json:"exec"`
	Count  int     `json:"count"`
	Source string  `json:"source,omitempty"` // the batch or report it came from
}

// Check says what is wrong with a calibration, if anything.
func (c *Calibration) Check() error {
	if c.Version != CalibrationVersion {
		return fmt.Errorf("plan: calibration format %d, this esplan reads %d", c.Version, CalibrationVersion)
	}
	names := map[string]bool{}
	for _, m := range c.Machines {
		switch {
		case m.Name == "" || m.Group == "":
			return fmt.Errorf("plan: calibration: a machine without a name or group")
		case names[m.Name]:
			return fmt.Errorf("plan: calibration: machine %q twice", m.Name)
		case m.CPUs < 1:
			return fmt.Errorf("plan: calibration: machine %q has %d CPUs", m.Name, m.CPUs)
		}
		names[m.Name] = true
	}
	for i, s := range c.Samples {
		if s.Group == "" || s.N < 1 || s.M < 1 || s.P < s.M || !(s.Exec > 0) || math.IsInf(s.Exec, 0) || s.Count < 1 {
			return fmt.Errorf("plan: calibration: bad sample %d: %+v", i, s)
		}
	}
	return nil
}

// Groups lists the groups of the calibration's machines, sorted, each with
// its machines sorted by name.
func (c *Calibration) Groups() []Group {
	by := map[string]*Group{}
	for _, m := range c.Machines {
		g := by[m.Group]
		if g == nil {
			g = &Group{Name: m.Group}
			by[m.Group] = g
		}
		g.Machines = append(g.Machines, m.Name)
		g.CPUs = max(g.CPUs, m.CPUs)
	}
	out := make([]Group, 0, len(by))
	for _, g := range by {
		slices.Sort(g.Machines)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Group is a set of identical machines.
type Group struct {
	Name     string
	Machines []string
	CPUs     int // slots each announced (the largest, should they differ)
}

// Options tune Fit.
type Options struct {
	// MinSizes is the fewest distinct sizes an N–T model is fitted from.
	// Default MinSizes (5).
	MinSizes int
	// MinPs is the fewest distinct P > M a P–T model is fitted from.
	// Default MinPs (3).
	MinPs int
	// NoSubstitution forbids model substitution (for comparison).
	NoSubstitution bool
}

// PM is a configuration of one machine: P tasks in the grid, M on it.
type PM struct{ P, M int }

// GroupModel holds a group's fitted models.
type GroupModel struct {
	Group string
	// Alone[M] is the N–T model with M slots on one machine of the group
	// and nothing else running (P = M).
	Alone map[int]Cubic
	// NT[{P, M}] is the N–T model of P > M (measured with others running).
	NT map[PM]Cubic
	// PT[M] is the P–T model for M slots (P > M), the group's own or
	// substituted (PTFrom says whose).
	PT     map[int]PT
	PTFrom map[int]string
	// Sizes are the distinct sizes measured, sorted; NTSizes those of
	// each N–T model of P > M.
	Sizes   []float64
	NTSizes map[PM][]float64
	// Why lists, per model that could not be made, the reason.
	Why []string
}

// Models are every group's models.
type Models struct {
	Groups map[string]*GroupModel
	// Notes say what was fitted, substituted or left out.
	Notes []string
}

// Fit fits every group's N–T models, then its P–T models, then
// substitutes P–T models for the groups that have too few measurements.
func Fit(cal *Calibration, opt Options) (*Models, error) {
	if err := cal.Check(); err != nil {
		return nil, err
	}
	type key struct {
		g    string
		p, m int
	}
	pts := map[key][][2]float64{}
	for _, s := range cal.Samples {
		// Each sample counts once per task it averages, so a batch of many
		// tasks weighs more than a straggler.
		k := key{s.Group, s.P, s.M}
		for range min(s.Count, 64) {
			pts[k] = append(pts[k], [2]float64{float64(s.N), s.Exec})
		}
	}
	ms := &Models{Groups: map[string]*GroupModel{}}
	keys := make([]key, 0, len(pts))
	for k := range pts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.g != b.g {
			return a.g < b.g
		}
		if a.m != b.m {
			return a.m < b.m
		}
		return a.p < b.p
	})
	for _, k := range keys {
		gm := ms.Groups[k.g]
		if gm == nil {
			gm = &GroupModel{Group: k.g, Alone: map[int]Cubic{}, NT: map[PM]Cubic{}, NTSizes: map[PM][]float64{}, PT: map[int]PT{}, PTFrom: map[int]string{}}
			ms.Groups[k.g] = gm
		}
		ns, ts := make([]float64, len(pts[k])), make([]float64, len(pts[k]))
		for i, q := range pts[k] {
			ns[i], ts[i] = q[0], q[1]
		}
		gm.Sizes = mergeSizes(gm.Sizes, ns)
		c, err := FitCubic(ns, ts, opt.MinSizes)
		if err != nil {
			gm.Why = append(gm.Why, fmt.Sprintf("N–T model P=%d M=%d: %v", k.p, k.m, err))
			continue
		}
		if k.p == k.m {
			gm.Alone[k.m] = c
		} else {
			gm.NT[PM{k.p, k.m}] = c
			gm.NTSizes[PM{k.p, k.m}] = mergeSizes(nil, ns)
		}
	}
	// Own P–T models.
	names := slices.Sorted(maps.Keys(ms.Groups))
	for _, g := range names {
		gm := ms.Groups[g]
		for _, m := range slices.Sorted(maps.Keys(gm.Alone)) {
			var pp []PTPoint
			for pm, c := range gm.NT {
				if pm.M != m {
					continue
				}
				for _, n := range gm.NTSizes[pm] {
					pp = append(pp, PTPoint{N: n, P: pm.P, T: c.At(n)})
				}
			}
			slices.SortFunc(pp, func(a, b PTPoint) int {
				if a.P != b.P {
					return a.P - b.P
				}
				return int(a.N - b.N)
			})
			pt, err := FitPT(gm.Alone[m], pp, opt.MinPs)
			if err != nil {
				gm.Why = append(gm.Why, fmt.Sprintf("P–T model M=%d: %v", m, err))
				continue
			}
			gm.PT[m], gm.PTFrom[m] = pt, g
			ms.Notes = append(ms.Notes, fmt.Sprintf("group %s, M=%d: own P–T model %v", g, m, pt))
		}
	}
	if !opt.NoSubstitution {
		ms.substitute(names)
	}
	if len(ms.Groups) == 0 {
		return nil, errors.New("plan: no measurements to fit")
	}
	return ms, nil
}

// substitute gives each group without its own P–T model for some M the
// model of a group that has one, scaled by the least-squares time ratio
// of the two groups' N–T models alone (the same M, else M = 1, else any
// M both have): the paper's model substitution (§2.4).
func (ms *Models) substitute(names []string) {
	for _, g := range names {
		gm := ms.Groups[g]
		for _, m := range slices.Sorted(maps.Keys(gm.Alone)) {
			if _, ok := gm.PT[m]; ok {
				continue
			}
			best, bestErr := "", math.Inf(1)
			var bestPT PT
			for _, s := range names {
				sm := ms.Groups[s]
				src, ok := sm.PT[m]
				if s == g || !ok || sm.PTFrom[m] != s {
					continue
				}
				ref, ok := commonAlone(sm, gm, m)
				if !ok {
					continue
				}
				ns := gm.Sizes
				r, err := Ratio(sm.Alone[ref], gm.Alone[ref], ns)
				if err != nil {
					continue
				}
				// Relative misfit of the scaled model, to pick the source
				// whose shape is closest.
				var e float64
				for _, n := range ns {
					d := (r*sm.Alone[ref].At(n) - gm.Alone[ref].At(n)) / gm.Alone[ref].At(n)
					e += d * d
				}
				if e < bestErr {
					best, bestErr = s, e
					bestPT = src
					bestPT.Scale = r * src.Scale
				}
			}
			if best == "" {
				continue
			}
			gm.PT[m], gm.PTFrom[m] = bestPT, best
			ms.Notes = append(ms.Notes, fmt.Sprintf("group %s, M=%d: P–T model substituted from group %s × %.3f", g, m, best, bestPT.Scale))
		}
	}
}

// commonAlone picks the M whose N–T models alone both groups have: m
// itself, else 1, else the smallest.
func commonAlone(a, b *GroupModel, m int) (int, bool) {
	for _, c := range []int{m, 1} {
		if _, ok := a.Alone[c]; ok {
			if _, ok := b.Alone[c]; ok {
				return c, true
			}
		}
	}
	for _, c := range slices.Sorted(maps.Keys(a.Alone)) {
		if _, ok := b.Alone[c]; ok {
			return c, true
		}
	}
	return 0, false
}

// Predict is the time of one task of size n on a machine of group g with
// m slots while p tasks run in the grid, and which model said so. P = M:
// the N–T model alone; P > M: the N–T model measured at exactly (P, M) if
// there is one, else the P–T model (own or substituted). The model is
// checked by the guard on the sizes from the smallest measured to n (or
// to the largest measured, if n is inside): a model that turns negative
// or falls there is refused.
func (ms *Models) Predict(g string, n float64, p, m int) (float64, string, error) {
	gm := ms.Groups[g]
	if gm == nil {
		return 0, "", fmt.Errorf("plan: no measurements of group %q", g)
	}
	if m < 1 || p < m {
		return 0, "", fmt.Errorf("plan: P = %d, M = %d", p, m)
	}
	lo, hi := n, n
	if len(gm.Sizes) > 0 {
		lo, hi = min(lo, gm.Sizes[0]), max(hi, gm.Sizes[len(gm.Sizes)-1])
	}
	if p == m {
		c, ok := gm.Alone[m]
		if !ok {
			return 0, "", fmt.Errorf("plan: group %s has no N–T model for M=%d alone", g, m)
		}
		if err := c.Check(lo, hi); err != nil {
			return 0, "", fmt.Errorf("group %s, N–T model M=%d alone: %w", g, m, err)
		}
		return c.At(n), fmt.Sprintf("N–T M=%d alone", m), nil
	}
	if c, ok := gm.NT[PM{p, m}]; ok {
		if err := c.Check(lo, hi); err != nil {
			return 0, "", fmt.Errorf("group %s, N–T model P=%d M=%d: %w", g, p, m, err)
		}
		return c.At(n), fmt.Sprintf("N–T P=%d M=%d", p, m), nil
	}
	pt, ok := gm.PT[m]
	if !ok {
		return 0, "", fmt.Errorf("plan: group %s has no P–T model for M=%d (and no N–T model at P=%d)", g, m, p)
	}
	if err := pt.Base.Check(lo, hi); err != nil {
		return 0, "", fmt.Errorf("group %s, base of the P–T model M=%d (from %s): %w", g, m, gm.PTFrom[m], err)
	}
	t := pt.At(n, p)
	if !(t > 0) {
		return 0, "", fmt.Errorf("%w: group %s, P–T model M=%d (from %s) gives %.4g s at N=%.0f, P=%d", ErrRefused, g, m, gm.PTFrom[m], t, n, p)
	}
	how := fmt.Sprintf("P–T M=%d", m)
	if gm.PTFrom[m] != g {
		how += " from " + gm.PTFrom[m]
	}
	return t, how, nil
}

func mergeSizes(a, b []float64) []float64 {
	a = append(a, b...)
	slices.Sort(a)
	return slices.Compact(a)
}
