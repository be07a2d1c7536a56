// Package es is esgrid's optimiser: the paper's (μ+λ) Evolution Strategy
// (self-adaptive log-normal step sizes, bound handling by reflection,
// plus-selection or comma as an option) with optional recombination of
// object variables and step sizes, and CMA-ES as a second strategy; both
// behind an ask/tell core that leaves fitness evaluation to an Evaluator.
// The engine starts no goroutines; its only I/O is the checkpoint.
//
// A run is a pure function of its Config: the batch of generation g is
// drawn from an RNG derived from (Seed, g) alone, and selection breaks ties
// by index. So neither the order nor the place in which fitness values were
// computed can change the trajectory, and a checkpoint needs no RNG state.
package es

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Individual is one point of the search with its strategy parameters.
type Individual struct {
	// X is the object vector, len Dim, inside [Lower, Upper].
	X []float64 `msgpack:"x"`
	// Sigma holds one step size per coordinate: the ES's self-adapted σ_i,
	// or for CMA-ES the standard deviation σ·√C_ii of the distribution the
	// individual was sampled from.
	Sigma []float64 `msgpack:"s"`
	// F is the fitness f(X), lower is better; NaN ranks worst of all.
	F float64 `msgpack:"f"`
}

// StopReason says why a run ended; "" means it has not.
type StopReason string

// The reasons a run ends without error.
const (
	StopGenerations StopReason = "generations" // Stop.Generations were run
	StopTarget      StopReason = "target"      // the best fitness reached Stop.Target
	StopBudget      StopReason = "budget"      // the next batch would exceed Stop.MaxEvals
)

// Stats describes the population after one generation's selection. For
// CMA-ES the parents are the μ best offspring of the generation, whose
// weighted mean is the next mean.
type Stats struct {
	Gen      int     `json:"gen"`       // the generation just completed
	Evals    int     `json:"evals"`     // evaluations so far, this generation's included
	Best     float64 `json:"best"`      // best fitness among the parents
	Mean     float64 `json:"mean"`      // mean fitness of the parents
	BestEver float64 `json:"best_ever"` // best fitness found so far (= Best under plus-selection)
	NaNs     int     `json:"nans"`      // NaN fitness values received so far
}

// Engine is the ask/tell core of the ES and of CMA-ES. Ask hands out a
// generation's batch of vectors, Tell takes their fitness values and
// performs selection. An Engine is not safe for concurrent use.
type Engine struct {
	cfg     Config
	gen     int          // generation of the next batch
	parents []Individual // sorted best first; nil until generation 0 is told
	batch   []Individual // the batch asked and not yet told, or nil
	xs      [][]float64  // the X of each member of batch, as handed out
	best    Individual   // best individual found so far
	evals   int
	nans    int
	last    Stats

	tau, tauPrime float64
	cma           *cmaState // the CMA-ES state; nil for the ES
	notes         []Note    // kept in checkpoints for the program driving the run (notes.go)
}

// New returns an engine at generation 0, or a *ConfigError. The engine's
// Config is cfg with its defaults filled in.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := float64(cfg.Dim)
	e := &Engine{
		cfg:      cfg,
		best:     Individual{F: math.NaN()},
		tau:      1 / math.Sqrt(2*math.Sqrt(n)),
		tauPrime: 1 / math.Sqrt(2*n),
	}
	if cfg.Strategy == StrategyCMA {
		e.cma = newCMA(cfg)
	}
	return e, nil
}

// Restarts returns how many times CMA-ES has restarted (0 without
// Config.Restarts, and for the ES), and the criterion that ended the last
// run ("" before the first restart).
func (e *Engine) Restarts() (int, Criterion) {
	if e.cma == nil {
		return 0, ""
	}
	return e.cma.run.Index, e.cma.run.Stop
}

// Lambda returns the size of the next generation's batch: Config.Lambda,
// but for CMA-ES with restarts the λ of the current run.
func (e *Engine) Lambda() int {
	if e.cma != nil {
		return e.cma.lambda
	}
	return e.cfg.Lambda
}

// Config returns the engine's configuration, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Gen returns the generation whose batch Ask hands out next.
func (e *Engine) Gen() int { return e.gen }

// Evals returns the number of fitness values told so far.
func (e *Engine) Evals() int { return e.evals }

// NaNs returns how many of the fitness values told so far were NaN.
func (e *Engine) NaNs() int { return e.nans }

// Last returns the statistics of the last completed generation; its Gen is
// -1 before generation 0 is told.
func (e *Engine) Last() Stats {
	if e.parents == nil {
		return Stats{Gen: -1, Best: math.NaN(), Mean: math.NaN(), BestEver: math.NaN()}
	}
	return e.last
}

// Best returns a copy of the best individual found so far (F is NaN before
// generation 0 is told).
func (e *Engine) Best() Individual { return e.best.clone() }

// Parents returns a copy of the current parents, best first.
func (e *Engine) Parents() []Individual {
	out := make([]Individual, len(e.parents))
	for i, p := range e.parents {
		out[i] = p.clone()
	}
	return out
}

// SetStop replaces the stopping criteria, e.g. to extend a resumed run.
func (e *Engine) SetStop(s Stop) error {
	if err := s.validate(e.cfg.firstBatch(), e.cfg.firstBatchName()); err != nil {
		return err
	}
	e.cfg.Stop = s
	return nil
}

// Done reports why the run is over, or "" if the next generation should run.
func (e *Engine) Done() StopReason {
	s := e.cfg.Stop
	if e.parents != nil {
		if s.Target != nil && e.best.F <= *s.Target {
			return StopTarget
		}
		if s.Generations > 0 && e.gen > s.Generations {
			return StopGenerations
		}
	}
	if s.MaxEvals > 0 && e.evals+e.batchSize() > s.MaxEvals {
		return StopBudget
	}
	return ""
}

func (e *Engine) batchSize() int {
	if e.cma != nil {
		return e.cma.lambda
	}
	if e.gen == 0 {
		return e.cfg.firstBatch()
	}
	return e.cfg.Lambda
}

// Ask returns the current generation and its batch: for the ES, μ random
// initial parents for generation 0 and λ offspring after that; for CMA-ES,
// λ samples of the current distribution in every generation. Task i of the
// batch is xs[i]; every vector is inside the box. Until Tell, Ask returns
// the same batch again. The caller must not modify xs.
func (e *Engine) Ask() (gen int, xs [][]float64) {
	if e.batch == nil {
		rng := genRNG(e.cfg.Seed, e.gen)
		switch {
		case e.cma != nil:
			e.batch = e.cma.sample(e, rng)
		case e.gen == 0:
			e.batch = e.initial(rng)
		default:
			e.batch = e.offspring(rng)
		}
		e.xs = make([][]float64, len(e.batch))
		for i := range e.batch {
			e.xs[i] = e.batch[i].X
		}
	}
	return e.gen, e.xs
}

// ErrNoBatch is returned by Tell when no batch has been asked.
var ErrNoBatch = errors.New("es: Tell without a pending Ask")

// Tell gives the fitness values of the batch Ask returned, fitness[i] being
// f(xs[i]), then selects the next parents and moves to the next generation.
// A NaN value ranks below every other value, +Inf included, and is counted.
func (e *Engine) Tell(fitness []float64) error {
	if e.batch == nil {
		return ErrNoBatch
	}
	if len(fitness) != len(e.batch) {
		return fmt.Errorf("es: generation %d: told %d fitness values for a batch of %d", e.gen, len(fitness), len(e.batch))
	}
	for i, f := range fitness {
		e.batch[i].F = f
		if math.IsNaN(f) {
			e.nans++
		}
	}
	e.evals += len(fitness)
	if e.cma != nil {
		e.parents = e.cma.update(e, e.batch)
	} else {
		e.parents = e.selectParents(e.batch)
	}
	if e.best.X == nil || better(e.parents[0].F, e.best.F) {
		e.best = e.parents[0]
	}
	e.last = e.stats(e.gen)
	e.gen++
	e.batch, e.xs = nil, nil
	return nil
}

// genRNG is the only source of randomness: one stream per (seed, gen).
// Both words go through splitmix64 so neighbouring seeds or generations
// start unrelated streams. Generation −1 is the stream of whatever a
// strategy draws before its first batch (CMA-ES's initial mean).
func genRNG(seed uint64, gen int) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix64(seed), splitmix64(uint64(gen)^0x6a09e667f3bcc909)))
}

func splitmix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// newBatch allocates k individuals whose vectors share two backing arrays.
func (e *Engine) newBatch(k int) []Individual {
	n := e.cfg.Dim
	xs := make([]float64, k*n)
	sigmas := make([]float64, k*n)
	b := make([]Individual, k)
	for i := range b {
		b[i] = Individual{X: xs[i*n : (i+1)*n : (i+1)*n], Sigma: sigmas[i*n : (i+1)*n : (i+1)*n], F: math.NaN()}
	}
	return b
}

// initial draws μ parents uniformly in the box, all with step size sigma0.
func (e *Engine) initial(rng *rand.Rand) []Individual {
	b := e.newBatch(e.cfg.Mu)
	lo, span, s0 := e.cfg.Lower, e.cfg.Upper-e.cfg.Lower, e.cfg.sigma0()
	for _, ind := range b {
		for i := range ind.X {
			ind.X[i] = e.bound(lo + float64(span*rng.Float64()))
			ind.Sigma[i] = s0
		}
	}
	return b
}

// offspring makes λ children. Without recombination (ρ = 1, the paper's
// ES) each child copies a parent chosen uniformly, so each parent has λ/μ
// children on average; with recombination its starting point is
// recombined from ρ distinct parents chosen uniformly (see recombine).
// Then self-adaptive log-normal mutation:
// σ'_i = σ_i·exp(τ'·N(0,1) + τ·N_i(0,1)), x'_i = x_i + σ'_i·N_i(0,1).
// The draws happen in a fixed order, so the batch depends on (Seed, gen)
// and the parents alone.
func (e *Engine) offspring(rng *rand.Rand) []Individual {
	b := e.newBatch(e.cfg.Lambda)
	span := e.cfg.Upper - e.cfg.Lower
	var mates []int
	if e.cfg.Rho > 1 {
		mates = make([]int, len(e.parents))
	}
	for _, child := range b {
		var px, ps []float64
		if mates == nil {
			p := e.parents[rng.IntN(len(e.parents))]
			px, ps = p.X, p.Sigma
		} else {
			// The recombinant is written into the child and mutated in
			// place: coordinate i is read before it is overwritten.
			e.recombine(rng, mates, child.X, child.Sigma)
			px, ps = child.X, child.Sigma
		}
		global := e.tauPrime * rng.NormFloat64()
		for i := range child.X {
			// Capping σ at the box's width keeps it finite and meaningful.
			// float64(a*b) forbids FMA fusion, which would round
			// differently on some CPUs.
			s := min(ps[i]*math.Exp(global+float64(e.tau*rng.NormFloat64())), span)
			child.Sigma[i] = s
			child.X[i] = e.bound(px[i] + float64(s*rng.NormFloat64()))
		}
	}
	return b
}

// recombine writes into x and sigma the recombinant of ρ = len(e.parents)
// or fewer distinct parents, chosen uniformly without replacement by a
// partial Fisher–Yates shuffle of mates (scratch space of len μ): the
// object variables by e.cfg.Recombination, the step sizes by
// e.cfg.SigmaRecombination. "none" takes the first parent chosen,
// "discrete" each coordinate from one of the ρ parents drawn uniformly,
// "intermediate" their mean. The draws: ρ for the parents, then n for
// discrete recombination.
func (e *Engine) recombine(rng *rand.Rand, mates []int, x, sigma []float64) {
	mu, rho := len(e.parents), e.cfg.Rho
	for k := range mates {
		mates[k] = k
	}
	for k := range rho {
		j := k + rng.IntN(mu-k)
		mates[k], mates[j] = mates[j], mates[k]
	}
	chosen := mates[:rho]
	first := e.parents[chosen[0]]
	switch e.cfg.Recombination {
	case RecombineDiscrete:
		for i := range x {
			x[i] = e.parents[chosen[rng.IntN(rho)]].X[i]
		}
	case RecombineIntermediate:
		for i := range x {
			x[i] = e.bound(meanAt(e.parents, chosen, i, func(p *Individual) []float64 { return p.X }))
		}
	default:
		copy(x, first.X)
	}
	if e.cfg.SigmaRecombination == RecombineIntermediate {
		for i := range sigma {
			sigma[i] = meanAt(e.parents, chosen, i, func(p *Individual) []float64 { return p.Sigma })
		}
	} else {
		copy(sigma, first.Sigma)
	}
}

// meanAt is the mean of coordinate i of the chosen parents' vectors,
// summed in the order chosen.
func meanAt(parents []Individual, chosen []int, i int, vec func(*Individual) []float64) float64 {
	sum := 0.0
	for _, k := range chosen {
		sum += vec(&parents[k])[i]
	}
	return sum / float64(len(chosen))
}

// bound maps x into [Lower, Upper]: reflection at the violated bound, then
// clamping for a step so long that it reflects past the other side.
func (e *Engine) bound(x float64) float64 {
	lo, hi := e.cfg.Lower, e.cfg.Upper
	if x < lo {
		x = lo + (lo - x)
	} else if x > hi {
		x = hi - (x - hi)
	}
	return min(max(x, lo), hi)
}

// compareFitness orders fitness values best first: ascending, NaN last.
func compareFitness(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an || bn:
		if an == bn {
			return 0
		}
		if an {
			return 1
		}
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func better(a, b float64) bool { return compareFitness(a, b) < 0 }

// selectParents returns the best μ of parents+offspring (plus) or of the
// offspring alone (comma). Candidates are numbered parents first (best
// first), then offspring in task order, and equal fitness values break ties
// by that number. Sorting numbers rather than Individuals keeps the sort
// cheap.
func (e *Engine) selectParents(offspring []Individual) []Individual {
	pool := offspring
	if !e.cfg.Comma {
		pool = make([]Individual, 0, len(e.parents)+len(offspring))
		pool = append(append(pool, e.parents...), offspring...)
	}
	order := make([]int, len(pool))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(compareFitness(pool[a].F, pool[b].F), cmp.Compare(a, b))
	})
	next := make([]Individual, e.cfg.Mu)
	for i := range next {
		next[i] = pool[order[i]]
	}
	return next
}

// stats summarises the parents as the outcome of generation gen.
func (e *Engine) stats(gen int) Stats {
	sum := 0.0
	for _, p := range e.parents {
		sum += p.F
	}
	return Stats{
		Gen:      gen,
		Evals:    e.evals,
		Best:     e.parents[0].F,
		Mean:     sum / float64(len(e.parents)),
		BestEver: e.best.F,
		NaNs:     e.nans,
	}
}

func (ind Individual) clone() Individual {
	return Individual{X: slices.Clone(ind.X), Sigma: slices.Clone(ind.Sigma), F: ind.F}
}
