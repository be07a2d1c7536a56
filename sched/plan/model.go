// Package plan fits the execution-time models of docs/papers.md §4 (Kishimoto
// and Ichikawa) to measured task times and searches the grid's
// configurations with them: which machine groups to use, how many machines
// of each and how many slots per machine. It is pure: no clock, no I/O,
// no goroutines; cmd/esplan measures and writes, this package computes.
//
// The paper's models, in esgrid's terms. A group is a set of identical
// machines (same hardware, same CPU count). A configuration uses P_i
// machines of group i with M_i slots each; P = Σ P_i·M_i is the number of
// tasks the grid runs at once (the paper's processes). T_i is the time one
// task takes on a machine of group i:
//
//	N–T model  T_i(N)|P,M   = k0 + k1·N + k2·N² + k3·N³        (eq. 4)
//	P–T model  T_i(N, P)|M  = k4·P·T_i(N) + k5·T_i(N)/P + k6   (eq. 5)
//
// where N is the task's size (the LU load's order, whose work grows as N³
// and whose data as N²). The N–T model is fitted per (P, M) by linear least
// squares over at least 5 well-spread sizes; the P–T model per M from the
// N–T models of at least 3 values of P > M, with T_i(N) the group's N–T
// model alone (P = M), which is also used as is when P = M. A group with
// too few measurements for its own P–T model borrows another group's,
// scaled by the ratio of their N–T models that minimises the squared
// error (model substitution, §2.4). A model that predicts a negative time,
// or a time that falls as N grows, anywhere in the range it is asked
// about is refused (the paper's Fig. 2: a cubic fitted on a narrow range
// turns negative beyond it).
package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Cubic is an N–T model: T(N) = K[0] + K[1]·N + K[2]·N² + K[3]·N³,
// seconds for a task of size N.
type Cubic [4]float64

// At is the model's time at size n.
func (c Cubic) At(n float64) float64 { return c[0] + n*(c[1]+n*(c[2]+n*c[3])) }

// slope is dT/dN at n.
func (c Cubic) slope(n float64) float64 { return c[1] + n*(2*c[2]+3*n*c[3]) }

// String shows the coefficients.
func (c Cubic) String() string {
	return fmt.Sprintf("%.4g + %.4g·N + %.4g·N² + %.4g·N³", c[0], c[1], c[2], c[3])
}

// ErrTooFewSizes: a model needs more distinct sizes (or slot counts) than
// were measured.
var ErrTooFewSizes = errors.New("plan: too few measured sizes")

// ErrRefused: a model predicts a negative time, or a time that falls as N
// grows, within the range asked about (the paper's Fig. 2).
var ErrRefused = errors.New("plan: model refused")

// MinSizes is the fewest distinct sizes FitCubic accepts by default: the
// paper's "at least 5 to 6 well-spread N" (four coefficients need four,
// and a fit through exactly four points has nothing to average out).
const MinSizes = 5

// FitCubic fits an N–T model to the points (n[i], t[i]) by linear least
// squares (gonum's QR solve) on relative errors: it minimises
// Σ ((T(n[i]) − t[i]) / t[i])². It needs at least minSizes distinct sizes
// (MinSizes when minSizes < 4) and positive times. The sizes are scaled to
// [0, 1] for the solve, so that N³ of a few thousand does not ruin the
// conditioning.
func FitCubic(n, t []float64, minSizes int) (Cubic, error) {
	if minSizes < 4 {
		minSizes = MinSizes
	}
	if len(n) != len(t) {
		return Cubic{}, fmt.Errorf("plan: %d sizes and %d times", len(n), len(t))
	}
	if d := distinct(n); d < minSizes {
		return Cubic{}, fmt.Errorf("%w: %d distinct sizes N, at least %d needed (well spread: the paper's Fig. 2 shows what a narrow range does)", ErrTooFewSizes, d, minSizes)
	}
	scale := 0.0
	for i := range n {
		if !(n[i] > 0) || math.IsInf(n[i], 0) || math.IsNaN(t[i]) || math.IsInf(t[i], 0) {
			return Cubic{}, fmt.Errorf("plan: bad point (N %g, T %g)", n[i], t[i])
		}
		scale = max(scale, n[i])
	}
	// Relative errors: each row is divided by its time, so that a task of
	// 0.1 s and one of 300 s count alike (unweighted, the largest sizes
	// decide alone and the small ones err by hundreds of per cent).
	a := mat.NewDense(len(n), 4, nil)
	b := mat.NewVecDense(len(t), nil)
	for i, ni := range n {
		if !(t[i] > 0) {
			return Cubic{}, fmt.Errorf("plan: time %g s at N %g", t[i], ni)
		}
		x, w := ni/scale, 1/t[i]
		a.SetRow(i, []float64{w, w * x, w * x * x, w * x * x * x})
		b.SetVec(i, 1)
	}
	var k mat.VecDense
	if err := k.SolveVec(a, b); err != nil {
		return Cubic{}, fmt.Errorf("plan: N–T least squares: %w", err)
	}
	var c Cubic
	for j := range c {
		c[j] = k.AtVec(j) / math.Pow(scale, float64(j))
	}
	return c, nil
}

// decreaseTolerance is how much a model may fall, as a fraction of its
// largest time on the range, before the guard calls it decreasing: a
// cubic fitted to noisy times of small tasks (where the constant dominates)
// may dip by a hair; the paper's failure is a fall to below zero.
const decreaseTolerance = 0.01

// Check is the guard: it refuses (ErrRefused) a model whose time is not
// positive somewhere in [lo, hi], or that falls as N grows by more than
// 1 % of its largest time there. It looks at both ends, at the extrema of
// the cubic and of its slope, and at 64 points between.
func (c Cubic) Check(lo, hi float64) error {
	if lo > hi {
		lo, hi = hi, lo
	}
	pts := []float64{lo, hi}
	for i := 1; i < 64; i++ {
		pts = append(pts, lo+(hi-lo)*float64(i)/64)
	}
	// Roots of the slope (the cubic's extrema) and of its derivative.
	if c[3] != 0 {
		pts = append(pts, -c[2]/(3*c[3]))
		disc := 4*c[2]*c[2] - 12*c[3]*c[1]
		if disc >= 0 {
			s := math.Sqrt(disc)
			pts = append(pts, (-2*c[2]+s)/(6*c[3]), (-2*c[2]-s)/(6*c[3]))
		}
	} else if c[2] != 0 {
		pts = append(pts, -c[1]/(2*c[2]))
	}
	pts = slices.DeleteFunc(pts, func(x float64) bool { return x < lo || x > hi || math.IsNaN(x) })
	slices.Sort(pts)
	top := 0.0
	for _, x := range pts {
		top = max(top, c.At(x))
	}
	peak, peakAt := math.Inf(-1), lo
	for _, x := range pts {
		v := c.At(x)
		if !(v > 0) {
			return fmt.Errorf("%w: T(%.0f) = %.4g s ≤ 0 (model %v, asked about N in [%.0f, %.0f]); measure at more, wider-spread sizes N", ErrRefused, x, v, c, lo, hi)
		}
		if v > peak {
			peak, peakAt = v, x
		}
		if peak-v > decreaseTolerance*top {
			return fmt.Errorf("%w: T falls from %.4g s at N = %.0f to %.4g s at N = %.0f (model %v, asked about N in [%.0f, %.0f]); measure at more, wider-spread sizes N",
				ErrRefused, peak, peakAt, v, x, c, lo, hi)
		}
	}
	return nil
}

// PT is a P–T model for one M: T(N, P) = Scale·(K4·P·B(N) + K5·B(N)/P + K6),
// with B the group's N–T model alone (P = M). Scale is 1 for a group's own
// model; a substituted model is another group's, scaled.
type PT struct {
	K4, K5, K6 float64
	Base       Cubic
	Scale      float64
}

// At is the model's time at size n with p tasks running in the grid.
func (m PT) At(n float64, p int) float64 {
	b := m.Base.At(n)
	pf := float64(p)
	return m.Scale * (m.K4*pf*b + m.K5*b/pf + m.K6)
}

// String shows the coefficients.
func (m PT) String() string {
	s := fmt.Sprintf("%.4g·P·T(N) + %.4g·T(N)/P + %.4g", m.K4, m.K5, m.K6)
	if m.Scale != 1 {
		s = fmt.Sprintf("%.4g × (%s)", m.Scale, s)
	}
	return s
}

// PTPoint is one time of the N–T model of some P > M, at size N.
type PTPoint struct {
	N float64
	P int
	T float64
}

// MinPs is the fewest distinct P (> M) a P–T model is fitted from: three
// coefficients, and the paper's "at least 3 (better 4 or more)".
const MinPs = 3

// FitPT fits a P–T model over base (the N–T model alone) to pts by linear
// least squares on relative errors, as FitCubic; it needs points of at
// least minPs distinct P (MinPs when minPs < 3).
func FitPT(base Cubic, pts []PTPoint, minPs int) (PT, error) {
	if minPs < 3 {
		minPs = MinPs
	}
	ps := make([]float64, len(pts))
	for i, q := range pts {
		ps[i] = float64(q.P)
	}
	if d := distinct(ps); d < minPs {
		return PT{}, fmt.Errorf("%w: N–T models of %d distinct P > M, at least %d needed for a P–T model", ErrTooFewSizes, d, minPs)
	}
	a := mat.NewDense(len(pts), 3, nil)
	b := mat.NewVecDense(len(pts), nil)
	for i, q := range pts {
		if q.P < 1 {
			return PT{}, fmt.Errorf("plan: P–T point with P = %d", q.P)
		}
		if !(q.T > 0) {
			return PT{}, fmt.Errorf("plan: P–T point with time %g s", q.T)
		}
		bn, w := base.At(q.N), 1/q.T // relative errors, as FitCubic
		a.SetRow(i, []float64{w * float64(q.P) * bn, w * bn / float64(q.P), w})
		b.SetVec(i, 1)
	}
	var k mat.VecDense
	if err := k.SolveVec(a, b); err != nil {
		return PT{}, fmt.Errorf("plan: P–T least squares: %w", err)
	}
	return PT{K4: k.AtVec(0), K5: k.AtVec(1), K6: k.AtVec(2), Base: base, Scale: 1}, nil
}

// Ratio is the time ratio r that minimises Σ (r·from(N) − to(N))² over the
// sizes ns: how much slower (r > 1) or faster the machines of to's model
// are than from's (the paper's ×0.307, ×0.637).
func Ratio(from, to Cubic, ns []float64) (float64, error) {
	var num, den float64
	for _, n := range ns {
		a, b := from.At(n), to.At(n)
		num += a * b
		den += a * a
	}
	if !(den > 0) || !(num > 0) {
		return 0, fmt.Errorf("plan: no positive time ratio between %v and %v", from, to)
	}
	return num / den, nil
}

func distinct(xs []float64) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return len(slices.Compact(s))
}
