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
// Bounds, as pycma's BoundPenalty (Hansen et al. 2009, "A method for
// handling uncertainty in evolutionary optimization", IEEE TEC 13(1), with
// its addendum): a sample x lives in ℝⁿ; the vector evaluated is its
// repair x̂ = clip(x) into the box, and the ranking uses
// f(x̂) + Σ γ_i (x_i − x̂_i)²/n. The weights γ_i grow while the mean lies
// more than a few standard deviations outside the box, so the mean is
// pulled back into it, rather than drifting where nothing is evaluated.
//
// Restarts (Config.Restarts): a run that meets one of the stopping criteria
// of Auger and Hansen (2005) starts again from a mean drawn uniformly in
// the box, with a population twice as large (IPOP), or, for BIPOP (Hansen
// 2009), either that or a small population with a random λ and σ₀, whichever
// regime has used fewer evaluations. Restart r draws from the RNG of
// (Seed, −1−r), so a run with restarts is still a pure function of its
// Config.

// cmaState is the strategy's state and its constants.
type cmaState struct {
	// Constants of the run, derived from the Config and the run's λ and μ
	// (Hansen's tutorial, Table 1).
	n, mu, lambda int
	weights       []float64 // w_1 ≥ … ≥ w_μ > 0, Σ w = 1
	mueff         float64   // μ_eff = 1/Σ w²
	cs, ds        float64   // c_σ, d_σ: step-size cumulation and damping
	cc, c1, cmu   float64   // c_c, c_1, c_μ: covariance cumulation and learning rates
	chiN          float64   // E‖N(0, I)‖
	eigenEvery    int       // generations between eigendecompositions
	lower, upper  float64
	span          float64 // Upper − Lower
	seed          uint64
	restarts      Restart
	lambdaDef     int     // λ of the first run
	sigmaDef      float64 // σ₀ of the first run

	// The state a checkpoint holds.
	mean    []float64
	sigma   float64
	pc, ps  []float64
	c, b    []float64 // C and its eigenvectors B (columns), n×n row-major
	d       []float64 // D: square roots of C's eigenvalues
	eigenAt int       // generation of the last eigendecomposition

	// The bound penalty: weights γ, and the history of the fitness
	// spread (interquartile range over the mean variance), newest first.
	gamma    []float64 // nil until the mean has first left the box
	spread   []float64
	run      run
	regimes  regimes
	bestHist []float64 // per generation of the run: the best fitness
	medHist  []float64 // and the median, both of the last maxHistory generations

	// The range of the last generation's fitness values (not stored: it
	// is used in the Tell that sets it).
	lastLo, lastHi float64

	// The batch asked and not yet told: z_k and y_k = B·D·z_k per task.
	z, y [][]float64
}

// run describes the current run of a CMA-ES with restarts (there is one
// run without).
type run struct {
	Index  int       `msgpack:"index"`  // restarts before it
	Start  int       `msgpack:"start"`  // its first generation
	Evals  int       `msgpack:"evals"`  // evaluations before it
	Lambda int       `msgpack:"lambda"` // its λ and μ
	Mu     int       `msgpack:"mu"`
	Sigma0 float64   `msgpack:"sigma0"` // its initial step size
	Small  bool      `msgpack:"small"`  // BIPOP: of the small-population regime
	Stop   Criterion `msgpack:"stop"`   // the criterion that ended the run before it
}

// regimes counts BIPOP's budgets: the evaluations of each regime and the
// runs of the large one (the first run is one).
type regimes struct {
	LargeEvals int `msgpack:"large_evals"`
	SmallEvals int `msgpack:"small_evals"`
	LargeRuns  int `msgpack:"large_runs"`
}

// cmaCheckpoint is the part of a checkpoint that is CMA-ES's state.
type cmaCheckpoint struct {
	Mean     []float64 `msgpack:"mean"`
	Sigma    float64   `msgpack:"sigma"`
	PC       []float64 `msgpack:"pc"`
	PS       []float64 `msgpack:"ps"`
	C        []float64 `msgpack:"c"`
	B        []float64 `msgpack:"b"`
	D        []float64 `msgpack:"d"`
	EigenAt  int       `msgpack:"eigen_at"`
	Gamma    []float64 `msgpack:"gamma"`
	Spread   []float64 `msgpack:"spread"`
	Run      run       `msgpack:"run"`
	Regimes  regimes   `msgpack:"regimes"`
	BestHist []float64 `msgpack:"best_hist"`
	MedHist  []float64 `msgpack:"med_hist"`
}

// Restart limits. A restart doubles λ at most maxDoublings times (λ_def·2¹⁰,
// beyond the 2⁹ of the published BBOB runs); the stopping criteria's
// histories keep the last maxHistory generations (Auger and Hansen's
// longest stagnation window).
const (
	maxDoublings = 10
	maxHistory   = 20000
)

// newCMA returns the initial state for a valid cfg with defaults: the mean
// drawn uniformly in the box from the RNG of (Seed, −1), σ = sigma0(),
// C = I and both paths 0.
func newCMA(cfg Config) *cmaState {
	s := &cmaState{
		n: cfg.Dim, lower: cfg.Lower, upper: cfg.Upper, span: cfg.Upper - cfg.Lower,
		seed: cfg.Seed, restarts: cfg.Restarts, lambdaDef: cfg.Lambda, sigmaDef: cfg.sigma0(),
	}
	s.regimes.LargeRuns = 1
	s.start(run{Lambda: cfg.Lambda, Mu: cfg.Mu, Sigma0: s.sigmaDef}, genRNG(cfg.Seed, -1))
	return s
}

// setPopulation sets λ, μ and the constants that follow from them.
func (s *cmaState) setPopulation(lambda, mu int) {
	s.lambda, s.mu = lambda, mu
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

	nf := float64(s.n)
	s.cs = (s.mueff + 2) / (nf + s.mueff + 5)
	s.ds = 1 + 2*max(0, math.Sqrt((s.mueff-1)/(nf+1))-1) + s.cs
	s.cc = (4 + s.mueff/nf) / (nf + 4 + 2*s.mueff/nf)
	s.c1 = 2 / (float64((nf+1.3)*(nf+1.3)) + s.mueff)
	s.cmu = min(1-s.c1, 2*(s.mueff-2+1/s.mueff)/(float64((nf+2)*(nf+2))+s.mueff))
	s.chiN = math.Sqrt(nf) * (1 - 1/(4*nf) + 1/(21*float64(nf*nf)))
	s.eigenEvery = max(1, int(1/(float64(10*nf)*(s.c1+s.cmu))))
}

// start begins run r: its population, a mean drawn uniformly in the box
// from rng, σ = r.Sigma0, C = I, both paths 0, no penalty, no history.
func (s *cmaState) start(r run, rng *rand.Rand) {
	n := s.n
	s.run = r
	s.setPopulation(r.Lambda, r.Mu)
	s.mean = make([]float64, n)
	for i := range s.mean {
		s.mean[i] = s.lower + float64(s.span*rng.Float64())
	}
	s.sigma = r.Sigma0
	s.pc, s.ps = make([]float64, n), make([]float64, n)
	s.c, s.b, s.d = make([]float64, n*n), make([]float64, n*n), make([]float64, n)
	for i := range n {
		s.c[i*n+i], s.b[i*n+i], s.d[i] = 1, 1, 1
	}
	s.eigenAt = r.Start
	s.gamma, s.spread, s.bestHist, s.medHist = nil, nil, nil, nil
}

// sample draws the λ tasks of a generation: z_k ~ N(0, I) (n draws per
// task, in task order), y_k = B·D·z_k, x_k = clip(m + σ·y_k).
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
			ind.X[i] = s.clip(s.mean[i] + float64(s.sigma*sum))
		}
		copy(ind.Sigma, sd)
		s.z[k], s.y[k] = z, y
	}
	return b
}

// clip is the nearest point of [Lower, Upper] (Lower for NaN, which a
// finite state never produces).
func (s *cmaState) clip(x float64) float64 {
	if math.IsNaN(x) {
		return s.lower
	}
	return min(max(x, s.lower), s.upper)
}

// penalty is the bound penalty of the sample x = m + σ·y:
// Σ γ_i (x_i − clip(x_i))²/n, with γ_i = 1 before the weights are set.
func (s *cmaState) penalty(y []float64) float64 {
	sum := 0.0
	for i, v := range y {
		x := s.mean[i] + float64(s.sigma*v)
		dx := x - s.clip(x)
		g := 1.0
		if s.gamma != nil {
			g = s.gamma[i]
		}
		sum += float64(g * float64(dx*dx))
	}
	return sum / float64(s.n)
}

// update ranks the told batch, moves the distribution and returns the μ
// best tasks, best first (the generation's parents). With restarts, a run
// that meets a stopping criterion is replaced by the next.
func (s *cmaState) update(e *Engine, batch []Individual) []Individual {
	n := s.n
	order := s.rank(batch)
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

	// h_σ stalls the update of p_c while ‖p_σ‖ is large (Table 1); g
	// counts the generations of the run.
	g := float64(e.gen + 1 - s.run.Start)
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
	s.updatePenalty(batch, e.gen-s.run.Start)
	s.z, s.y = nil, nil

	if s.restarts == RestartIPOP || s.restarts == RestartBIPOP {
		s.record(batch)
		if s.run.Small {
			s.regimes.SmallEvals += s.lambda
		} else {
			s.regimes.LargeEvals += s.lambda
		}
		if why := s.stopCriterion(e.gen - s.run.Start); why != "" {
			s.restart(e.gen+1, e.evals, why)
		}
	}
	return parents
}

// rank returns the task indices of batch best first, by fitness plus the
// bound penalty (NaN last, ties by index).
func (s *cmaState) rank(batch []Individual) []int {
	ranked := make([]float64, len(batch))
	for k := range batch {
		ranked[k] = batch[k].F
		if p := s.penalty(s.y[k]); p > 0 {
			ranked[k] += p
		}
	}
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(compareFitness(ranked[a], ranked[b]), cmp.Compare(a, b))
	})
	return order
}

// updatePenalty adapts the weights γ of the bound penalty after generation
// k of the run, as pycma's BoundPenalty.update does: the spread of the
// fitness values (interquartile range over the mean variance σ²·C_ii) is
// kept for the last 20 + 3n/λ generations; the weights start at twice its
// median once the mean is first out of the box, then grow in each
// coordinate where the mean is more than 3·max(1, √n/μ_eff) standard
// deviations outside, and shrink where they exceed 5 times the median.
func (s *cmaState) updatePenalty(batch []Individual, k int) {
	n := s.n
	fs := make([]float64, 0, len(batch))
	for _, ind := range batch {
		if !math.IsNaN(ind.F) {
			fs = append(fs, ind.F)
		}
	}
	if len(fs) == 0 {
		return
	}
	slices.Sort(fs)
	variance := make([]float64, n)
	meanVar := 0.0
	for i := range variance {
		variance[i] = float64(s.sigma*s.sigma) * s.c[i*n+i]
		meanVar += variance[i]
	}
	meanVar /= float64(n)
	l := 1 + len(fs)
	v := (fs[min(3*l/4, len(fs)-1)] - fs[l/4]) / meanVar
	switch {
	case finite(v) && v > 0:
		s.spread = slices.Insert(s.spread, 0, v)
	case math.IsInf(v, 1) && len(s.spread) > 1:
		s.spread = slices.Insert(s.spread, 0, slices.Max(s.spread))
	}
	if len(s.spread) > 20+3*n/s.lambda {
		s.spread = s.spread[:len(s.spread)-1]
	}
	if len(s.spread) == 0 {
		return
	}
	dfit := median(s.spread)
	out := false
	dmean := make([]float64, n)
	for i, m := range s.mean {
		dmean[i] = (m - s.clip(m)) / math.Sqrt(variance[i])
		out = out || dmean[i] != 0
	}
	if out && (s.gamma == nil || k == 1) {
		s.gamma = make([]float64, n)
		for i := range s.gamma {
			s.gamma[i] = 2 * dfit
		}
	}
	if s.gamma == nil {
		return
	}
	damp := min(1, s.mueff/10/float64(n))
	limit := 3 * max(1, math.Sqrt(float64(n))/s.mueff)
	for i := range s.gamma {
		if edist := math.Abs(dmean[i]) - limit; edist > 0 {
			s.gamma[i] *= math.Pow(math.Exp(math.Tanh(edist/3)/2), damp)
		}
		if s.gamma[i] > 5*dfit {
			s.gamma[i] *= math.Pow(math.Exp(-1.0/3), damp)
		}
		if !finite(s.gamma[i]) {
			s.gamma[i] = math.MaxFloat64
		}
	}
}

// median is the median of v (v is not changed).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	k := len(s)
	if k%2 == 1 {
		return s[k/2]
	}
	return (s[k/2-1] + s[k/2]) / 2
}

// record appends the generation's best and median fitness to the run's
// histories.
func (s *cmaState) record(batch []Individual) {
	fs := make([]float64, len(batch))
	for i := range batch {
		fs[i] = batch[i].F
	}
	slices.SortFunc(fs, compareFitness)
	s.lastLo, s.lastHi = fs[0], fs[len(fs)-1]
	s.bestHist = append(s.bestHist, fs[0])
	s.medHist = append(s.medHist, fs[len(fs)/2])
	if len(s.bestHist) > maxHistory {
		s.bestHist = slices.Delete(s.bestHist, 0, 1)
		s.medHist = slices.Delete(s.medHist, 0, 1)
	}
}

// Criterion names a stopping criterion of a run of CMA-ES with restarts.
type Criterion string

// The stopping criteria of a run, as Auger and Hansen (2005), §2, name
// them.
const (
	NoEffectAxis   Criterion = "NoEffectAxis"   // 0.1σ along a principal axis leaves the mean unchanged
	NoEffectCoord  Criterion = "NoEffectCoord"  // 0.2σ·√C_ii in a coordinate leaves the mean unchanged
	EqualFunValues Criterion = "EqualFunValues" // the last 10 + ⌈30n/λ⌉ best values are equal
	ConditionCov   Criterion = "ConditionCov"   // cond C reached 10¹⁴
	TolX           Criterion = "TolX"           // σ·max(|p_c|, √C_ii) < 10⁻¹²·σ₀ in every coordinate
	TolFun         Criterion = "TolFun"         // recent best values and the last generation within 10⁻¹²
	TolXUp         Criterion = "TolXUp"         // σ·max D grew past 10⁴·σ₀
	Stagnation     Criterion = "Stagnation"     // no progress of the best and median values over the recent generations
)

// stopCriterion names the first criterion of Auger and Hansen (2005), §2,
// that the run meets after its generation k (0 first), or "".
func (s *cmaState) stopCriterion(k int) Criterion {
	n := s.n
	// The best fitness of each of the last 10 + ⌈30n/λ⌉ generations.
	window := 10 + (30*n+s.lambda-1)/s.lambda
	if h := s.bestHist; len(h) >= window {
		recent := h[len(h)-window:]
		lo, hi := slices.Min(recent), slices.Max(recent)
		if hi-lo == 0 {
			return EqualFunValues
		}
		// TolFun: the range of those and of the whole last generation.
		if max(hi, s.lastHi)-min(lo, s.lastLo) < 1e-12 {
			return TolFun
		}
	}
	small := true
	for i := range n {
		if float64(s.sigma*max(math.Abs(s.pc[i]), math.Sqrt(s.c[i*n+i]))) >= 1e-12*s.run.Sigma0 {
			small = false
			break
		}
	}
	if small {
		return TolX
	}
	dmax, dmin := slices.Max(s.d), slices.Min(s.d)
	if float64(s.sigma*dmax) > 1e4*s.run.Sigma0 {
		return TolXUp
	}
	if dmax*dmax >= (1-1e-9)*maxCondition*float64(dmin*dmin) {
		return ConditionCov
	}
	// Adding 0.1σ along a principal axis (the next in turn) or 0.2σ·√C_ii
	// to one coordinate leaves the mean as it is.
	axis := k % n
	same := true
	for j := range n {
		if s.mean[j]+float64(0.1*s.sigma*float64(s.d[axis]*s.b[j*n+axis])) != s.mean[j] {
			same = false
			break
		}
	}
	if same {
		return NoEffectAxis
	}
	for j := range n {
		if s.mean[j]+float64(0.2*s.sigma*math.Sqrt(s.c[j*n+j])) == s.mean[j] {
			return NoEffectCoord
		}
	}
	// Stagnation: over the last 20% of the run's generations (at least
	// 120 + 30n/λ, at most 20000), the medians of the most recent 30% of
	// the best and of the median fitness values are no better than those
	// of the first 30%.
	gens := k + 1
	least := 120 + 30*n/s.lambda
	if gens >= least {
		w := min(max(least, gens/5), maxHistory, len(s.bestHist))
		part := max(1, w*3/10)
		stale := func(h []float64) bool {
			h = h[len(h)-w:]
			return !(median(h[w-part:]) < median(h[:part]))
		}
		if stale(s.bestHist) && stale(s.medHist) {
			return Stagnation
		}
	}
	return ""
}

// restart ends the run at generation gen, after evals evaluations, because
// of criterion why, and starts the next: IPOP doubles λ; BIPOP runs the
// regime that has used fewer evaluations, the large one with λ doubled
// once more for each of its runs, the small one with
// λ_s = ⌊λ_def·(½·λ_l/λ_def)^(U₁²)⌋ (λ_l the next large λ) and
// σ₀ = σ₀,def·10^(−2U₂) (Hansen 2009). Every run takes μ = ⌊λ/2⌋.
func (s *cmaState) restart(gen, evals int, why Criterion) {
	index := s.run.Index + 1
	rng := genRNG(s.seed, -1-index)
	next := run{Index: index, Start: gen, Evals: evals, Sigma0: s.sigmaDef, Stop: why}
	doubled := func(k int) int { return s.lambdaDef << min(k, maxDoublings) }
	switch {
	case s.restarts == RestartIPOP:
		next.Lambda = doubled(index)
	default:
		u1, u2 := rng.Float64(), rng.Float64()
		if s.regimes.SmallEvals < s.regimes.LargeEvals {
			large := float64(doubled(s.regimes.LargeRuns))
			next.Small = true
			next.Lambda = max(2, int(float64(s.lambdaDef)*math.Pow(large/2/float64(s.lambdaDef), float64(u1*u1))))
			next.Sigma0 = s.sigmaDef * math.Pow(10, -2*u2)
		} else {
			next.Lambda = doubled(s.regimes.LargeRuns)
			s.regimes.LargeRuns++
		}
	}
	next.Mu = next.Lambda / 2
	s.start(next, rng)
}

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

// maxCondition bounds the condition number of C as sampled: eigenvalues
// below the largest divided by maxCondition are raised to it. A run with
// restarts ends when C reaches it (ConditionCov).
const maxCondition = 1e14

// checkpoint returns the state to store.
func (s *cmaState) checkpoint() *cmaCheckpoint {
	return &cmaCheckpoint{
		Mean: s.mean, Sigma: s.sigma, PC: s.pc, PS: s.ps,
		C: s.c, B: s.b, D: s.d, EigenAt: s.eigenAt,
		Gamma: s.gamma, Spread: s.spread, Run: s.run, Regimes: s.regimes,
		BestHist: s.bestHist, MedHist: s.medHist,
	}
}

// restore replaces the state with a stored one, after checking its shape;
// gen is the next generation to run and evals the evaluations so far.
func (s *cmaState) restore(c *cmaCheckpoint, gen, evals int) error {
	n := s.n
	r := c.Run
	restarts := s.restarts == RestartIPOP || s.restarts == RestartBIPOP
	switch {
	case len(c.Mean) != n || len(c.PC) != n || len(c.PS) != n || len(c.D) != n:
		return fmt.Errorf("CMA-ES vectors of lengths %d, %d, %d, %d, want %d", len(c.Mean), len(c.PC), len(c.PS), len(c.D), n)
	case len(c.C) != n*n || len(c.B) != n*n:
		return fmt.Errorf("CMA-ES matrices of %d and %d entries, want %d", len(c.C), len(c.B), n*n)
	case !(c.Sigma >= 0) || !finite(c.Sigma):
		return fmt.Errorf("CMA-ES step size %v", c.Sigma)
	case c.Gamma != nil && len(c.Gamma) != n:
		return fmt.Errorf("CMA-ES bound penalty of %d weights, want %d", len(c.Gamma), n)
	case r.Index < 0 || !restarts && (r.Index != 0 || r.Start != 0 || r.Evals != 0 || r.Lambda != s.lambdaDef || r.Mu != s.mu || r.Small):
		return fmt.Errorf("CMA-ES run %+v of a configuration without restarts", r)
	case r.Lambda < 2 || r.Lambda > s.lambdaDef<<maxDoublings || r.Mu < 1 || r.Mu > r.Lambda:
		return fmt.Errorf("CMA-ES run with λ = %d and μ = %d", r.Lambda, r.Mu)
	case r.Start < 0 || r.Start > gen || r.Evals < 0 || evals != r.Evals+(gen-r.Start)*r.Lambda:
		return fmt.Errorf("CMA-ES run from generation %d after %d evaluations: %d evaluations after generation %d", r.Start, r.Evals, evals, gen-1)
	case c.EigenAt < r.Start || c.EigenAt > gen:
		return fmt.Errorf("CMA-ES decomposed at generation %d, after generation %d", c.EigenAt, gen-1)
	case len(c.BestHist) != len(c.MedHist) || len(c.BestHist) > min(maxHistory, gen-r.Start) || len(c.Spread) > 20+3*n/r.Lambda:
		return fmt.Errorf("CMA-ES histories of %d, %d and %d generations", len(c.BestHist), len(c.MedHist), len(c.Spread))
	case r.Sigma0 <= 0 || !finite(r.Sigma0) || c.Regimes.LargeEvals < 0 || c.Regimes.SmallEvals < 0 || c.Regimes.LargeRuns < 1:
		return fmt.Errorf("CMA-ES restart state %+v, %+v", r, c.Regimes)
	}
	for _, v := range [][]float64{c.Mean, c.PC, c.PS, c.C, c.B, c.D, c.Gamma, c.Spread} {
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
	s.setPopulation(r.Lambda, r.Mu)
	s.run, s.regimes = r, c.Regimes
	s.mean, s.sigma, s.pc, s.ps = c.Mean, c.Sigma, c.PC, c.PS
	s.c, s.b, s.d, s.eigenAt = c.C, c.B, c.D, c.EigenAt
	s.gamma, s.spread, s.bestHist, s.medHist = c.Gamma, c.Spread, c.BestHist, c.MedHist
	return nil
}
