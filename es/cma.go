package es

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// CMA-ES, the (μ/μ_W,λ)-CMA-ES with cumulative step-size adaptation (CSA)
// and the rank-one and rank-μ updates of the covariance matrix, with the
// default parameters of Hansen's tutorial ("The CMA Evolution Strategy: A
// Tutorial", arXiv:1604.00772, Table 1 and Appendix A; Hansen and
// Ostermeier 2001, Evolutionary Computation 9(2)), positive weights only.
//
// Generation g samples x_k = m + σ·y_k, y_k = B·D·z_k, z_k ~ N(0, I), for
// k = 1..λ, with every z drawn from the generation's RNG (Seed, g) in task
// order; Tell ranks the λ fitness values (NaN last, ties by task index) and
// updates m, σ, the evolution paths p_σ and p_c, and C, all from the ranks
// alone. So, as for the ES, the run is a pure function of the Config.
//
// Bounds: a sample lives in ℝⁿ; the vector evaluated is its fold into the
// box, a triangle wave (reflection at each bound, repeated), so every task
// is inside [Lower, Upper]ⁿ and the function the distribution sees, f∘fold,
// is continuous. The update uses the unfolded sample, as pycma's
// BoundTransform does with its smoothed fold.

// cmaState is the strategy's state and its constants.
type cmaState struct {
	// Constants, derived from the Config (Hansen's tutorial, Table 1).
	n, mu, lambda int
	weights       []float64 // w_1 ≥ … ≥ w_μ > 0, Σ w = 1
	mueff         float64   // μ_eff = 1/Σ w²
	cs, ds        float64   // c_σ, d_σ: step-size cumulation and damping
	cc, c1, cmu   float64   // c_c, c_1, c_μ: covariance cumulation and learning rates
	chiN          float64   // E‖N(0, I)‖
	eigenEvery    int       // generations between eigendecompositions
	span          float64   // Upper − Lower

	// The state a checkpoint holds.
	mean    []float64
	sigma   float64
	pc, ps  []float64
	c, b    []float64 // C and its eigenvectors B (columns), n×n row-major
	d       []float64 // D: square roots of C's eigenvalues
	eigenAt int       // generation of the last eigendecomposition

	// The batch asked and not yet told: z_k and y_k = B·D·z_k per task.
	z, y [][]float64
}

// cmaCheckpoint is the part of a checkpoint that is CMA-ES's state.
type cmaCheckpoint struct {
	Mean    []float64 `msgpack:"mean"`
	Sigma   float64   `msgpack:"sigma"`
	PC      []float64 `msgpack:"pc"`
	PS      []float64 `msgpack:"ps"`
	C       []float64 `msgpack:"c"`
	B       []float64 `msgpack:"b"`
	D       []float64 `msgpack:"d"`
	EigenAt int       `msgpack:"eigen_at"`
}

// newCMA returns the initial state for a valid cfg with defaults: the mean
// drawn uniformly in the box from the RNG of (Seed, −1), σ = sigma0(),
// C = I and both paths 0.
func newCMA(cfg Config) *cmaState {
	n, mu, lambda := cfg.Dim, cfg.Mu, cfg.Lambda
	s := &cmaState{n: n, mu: mu, lambda: lambda, span: cfg.Upper - cfg.Lower}

	// Weights w_i ∝ ln(μ + ½) − ln i, i = 1..μ.
	s.weights = make([]float64, mu)
	sum := 0.0
	for i := range s.weights {
		s.weights[i] = math.Log(float64(mu)+0.5) - math.Log(float64(i+1))
		sum += s.weights[i]
	}
	sq := 0.0
	for i := range s.weights {
		s.weights[i] /= sum
		sq += float64(s.weights[i] * s.weights[i])
	}
	s.mueff = 1 / sq

	nf := float64(n)
	s.cs = (s.mueff + 2) / (nf + s.mueff + 5)
	s.ds = 1 + 2*max(0, math.Sqrt((s.mueff-1)/(nf+1))-1) + s.cs
	s.cc = (4 + s.mueff/nf) / (nf + 4 + 2*s.mueff/nf)
	s.c1 = 2 / (float64((nf+1.3)*(nf+1.3)) + s.mueff)
	s.cmu = min(1-s.c1, 2*(s.mueff-2+1/s.mueff)/(float64((nf+2)*(nf+2))+s.mueff))
	s.chiN = math.Sqrt(nf) * (1 - 1/(4*nf) + 1/(21*float64(nf*nf)))
	s.eigenEvery = max(1, int(1/(float64(10*nf)*(s.c1+s.cmu))))

	rng := genRNG(cfg.Seed, -1)
	s.mean = make([]float64, n)
	for i := range s.mean {
		s.mean[i] = cfg.Lower + float64(s.span*rng.Float64())
	}
	s.sigma = cfg.sigma0()
	s.pc, s.ps = make([]float64, n), make([]float64, n)
	s.c, s.b, s.d = make([]float64, n*n), make([]float64, n*n), make([]float64, n)
	for i := range n {
		s.c[i*n+i], s.b[i*n+i], s.d[i] = 1, 1, 1
	}
	return s
}

// sample draws the λ tasks of a generation: z_k ~ N(0, I) (n draws per
// task, in task order), y_k = B·D·z_k, x_k = fold(m + σ·y_k).
func (s *cmaState) sample(e *Engine, rng *rand.Rand) []Individual {
	n := s.n
	b := e.newBatch(s.lambda)
	// Every task's Sigma is the distribution's standard deviation per
	// coordinate, σ·√C_ii.
	sd := make([]float64, n)
	for i := range sd {
		sd[i] = s.sigma * math.Sqrt(s.c[i*n+i])
	}
	s.z, s.y = make([][]float64, s.lambda), make([][]float64, s.lambda)
	for k, ind := range b {
		z, y := make([]float64, n), make([]float64, n)
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		dz := make([]float64, n)
		for j := range dz {
			dz[j] = float64(s.d[j] * z[j])
		}
		for i := range y {
			row := s.b[i*n : (i+1)*n]
			sum := 0.0
			for j, v := range row {
				sum += float64(v * dz[j])
			}
			y[i] = sum
			ind.X[i] = e.fold(s.mean[i] + float64(s.sigma*sum))
		}
		copy(ind.Sigma, sd)
		s.z[k], s.y[k] = z, y
	}
	return b
}

// update ranks the told batch, moves the distribution and returns the μ
// best tasks, best first (the generation's parents).
func (s *cmaState) update(e *Engine, batch []Individual) []Individual {
	n := s.n
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(compareFitness(batch[a].F, batch[b].F), cmp.Compare(a, b))
	})
	parents := make([]Individual, s.mu)
	for i := range parents {
		parents[i] = batch[order[i]]
	}

	// Weighted means of the μ best steps: ⟨y⟩_w and ⟨z⟩_w.
	yw, zw := make([]float64, n), make([]float64, n)
	for r, w := range s.weights {
		y, z := s.y[order[r]], s.z[order[r]]
		for i := range yw {
			yw[i] += float64(w * y[i])
			zw[i] += float64(w * z[i])
		}
	}

	// Mean: m ← m + σ·⟨y⟩_w (c_m = 1).
	for i := range s.mean {
		s.mean[i] += float64(s.sigma * yw[i])
	}

	// Step-size path: p_σ ← (1−c_σ)·p_σ + √(c_σ(2−c_σ)μ_eff)·C^(−1/2)·⟨y⟩_w,
	// where C^(−1/2)·⟨y⟩_w = B·⟨z⟩_w.
	csn := math.Sqrt(float64(s.cs*(2-s.cs)) * s.mueff)
	psNorm := 0.0
	for i := range s.ps {
		row := s.b[i*n : (i+1)*n]
		bz := 0.0
		for j, v := range row {
			bz += float64(v * zw[j])
		}
		s.ps[i] = float64((1-s.cs)*s.ps[i]) + float64(csn*bz)
		psNorm += float64(s.ps[i] * s.ps[i])
	}
	psNorm = math.Sqrt(psNorm)

	// h_σ stalls the update of p_c while ‖p_σ‖ is large (Table 1).
	g := float64(e.gen + 1)
	hsig := psNorm/math.Sqrt(1-math.Pow(1-s.cs, 2*g))/s.chiN < 1.4+2/(float64(n)+1)
	ccn := math.Sqrt(float64(s.cc*(2-s.cc)) * s.mueff)
	for i := range s.pc {
		s.pc[i] = float64((1 - s.cc) * s.pc[i])
		if hsig {
			s.pc[i] += float64(ccn * yw[i])
		}
	}

	// C ← (1 − c_1 − c_μ + δ)·C + c_1·p_c·p_cᵀ + c_μ·Σ w_r·y_r·y_rᵀ, with
	// δ = (1−h_σ)·c_1·c_c(2−c_c). Computed on the lower triangle, mirrored.
	keep := 1 - s.c1 - s.cmu
	if !hsig {
		keep += float64(s.c1 * float64(s.cc*(2-s.cc)))
	}
	for i := range n {
		for j := 0; j <= i; j++ {
			rankMu := 0.0
			for r, w := range s.weights {
				y := s.y[order[r]]
				rankMu += float64(w * float64(y[i]*y[j]))
			}
			v := float64(keep*s.c[i*n+j]) + float64(s.c1*float64(s.pc[i]*s.pc[j])) + float64(s.cmu*rankMu)
			s.c[i*n+j], s.c[j*n+i] = v, v
		}
	}

	// σ ← σ·exp(min(1, (c_σ/d_σ)·(‖p_σ‖/E‖N(0,I)‖ − 1))), the change capped
	// at a factor e per generation (as pycma does), and σ·max(D) capped at
	// 1000 box widths so that σ stays finite on a flat function.
	s.sigma *= math.Exp(min(1, (s.cs/s.ds)*(psNorm/s.chiN-1)))
	if e.gen+1-s.eigenAt >= s.eigenEvery {
		s.decompose()
		s.eigenAt = e.gen + 1
	}
	if dmax := slices.Max(s.d); float64(s.sigma*dmax) > 1000*s.span {
		s.sigma = 1000 * s.span / dmax
	}
	s.z, s.y = nil, nil
	return parents
}

// maxCondition bounds the condition number of C as sampled: eigenvalues
// below the largest divided by maxCondition are raised to it.
const maxCondition = 1e14

// decompose sets B and D from C = B·D²·Bᵀ (gonum's symmetric
// eigendecomposition). If it fails, B and D are kept: the distribution is
// then sampled with the last good decomposition.
func (s *cmaState) decompose() {
	n := s.n
	sym := mat.NewSymDense(n, slices.Clone(s.c))
	var eig mat.EigenSym
	if !eig.Factorize(sym, true) {
		return
	}
	values := eig.Values(nil)
	var vectors mat.Dense
	eig.VectorsTo(&vectors)
	top := slices.Max(values)
	if !(top > 0) || !finite(top) {
		return
	}
	for i, v := range values {
		s.d[i] = math.Sqrt(max(v, top/maxCondition))
	}
	for i := range n {
		for j := range n {
			s.b[i*n+j] = vectors.At(i, j)
		}
	}
}

// fold maps a sample coordinate into [Lower, Upper] by a triangle wave of
// period 2·(Upper − Lower): the identity inside the box, a reflection at
// each bound, repeated.
func (e *Engine) fold(x float64) float64 {
	lo, hi := e.cfg.Lower, e.cfg.Upper
	w := hi - lo
	u := math.Mod(x-lo, 2*w)
	if !finite(u) || !finite(2*w) {
		// A coordinate too far out to fold, or a box too wide to double:
		// clamp (NaN, which a finite state never produces, to Lower).
		if math.IsNaN(x) {
			return lo
		}
		return min(max(x, lo), hi)
	}
	if u < 0 {
		u += 2 * w
	}
	if u > w {
		u = 2*w - u
	}
	return min(max(lo+u, lo), hi)
}

// checkpoint returns the state to store.
func (s *cmaState) checkpoint() *cmaCheckpoint {
	return &cmaCheckpoint{
		Mean: s.mean, Sigma: s.sigma, PC: s.pc, PS: s.ps,
		C: s.c, B: s.b, D: s.d, EigenAt: s.eigenAt,
	}
}

// restore replaces the state with a stored one, after checking its shape;
// gen is the next generation to run.
func (s *cmaState) restore(c *cmaCheckpoint, gen int) error {
	n := s.n
	switch {
	case len(c.Mean) != n || len(c.PC) != n || len(c.PS) != n || len(c.D) != n:
		return fmt.Errorf("CMA-ES vectors of lengths %d, %d, %d, %d, want %d", len(c.Mean), len(c.PC), len(c.PS), len(c.D), n)
	case len(c.C) != n*n || len(c.B) != n*n:
		return fmt.Errorf("CMA-ES matrices of %d and %d entries, want %d", len(c.C), len(c.B), n*n)
	case !(c.Sigma >= 0) || !finite(c.Sigma):
		return fmt.Errorf("CMA-ES step size %v", c.Sigma)
	case c.EigenAt < 0 || c.EigenAt > gen:
		return fmt.Errorf("CMA-ES decomposed at generation %d, after generation %d", c.EigenAt, gen-1)
	}
	for _, v := range [][]float64{c.Mean, c.PC, c.PS, c.C, c.B, c.D} {
		for _, x := range v {
			if !finite(x) {
				return fmt.Errorf("CMA-ES state holds %v", x)
			}
		}
	}
	for _, x := range c.D {
		if x < 0 {
			return fmt.Errorf("CMA-ES eigenvalue root %v", x)
		}
	}
	s.mean, s.sigma, s.pc, s.ps = c.Mean, c.Sigma, c.PC, c.PS
	s.c, s.b, s.d, s.eigenAt = c.C, c.B, c.D, c.EigenAt
	return nil
}
