package es

import (
	"fmt"
	"math"
	"strings"
)

// Strategy names the algorithm an Engine runs. Both hand out batches
// through the same Ask/Tell seam, so whatever evaluates one evaluates the
// other.
type Strategy string

// The strategies.
const (
	// StrategyES is the self-adaptive (μ+λ) or (μ,λ) Evolution Strategy of
	// Schwefel and Rechenberg, optionally with recombination (the default;
	// "" means it too).
	StrategyES Strategy = "es"
	// StrategyCMA is the (μ/μ_W,λ)-CMA-ES of Hansen and Ostermeier (2001),
	// with cumulative step-size adaptation and the rank-one and rank-μ
	// covariance updates as in Hansen's tutorial (arXiv:1604.00772).
	StrategyCMA Strategy = "cma"
)

// Strategies lists the strategy names, the default first.
var Strategies = []Strategy{StrategyES, StrategyCMA}

// Restart names a restart strategy of CMA-ES.
type Restart string

// The restart strategies.
const (
	// RestartNone runs CMA-ES once, until the run's stopping criteria
	// (the default; "" means it too).
	RestartNone Restart = "none"
	// RestartIPOP restarts a run that meets one of the stopping criteria of
	// Auger and Hansen ("A restart CMA evolution strategy with increasing
	// population size", CEC 2005) with λ doubled, from a new uniform mean.
	RestartIPOP Restart = "ipop"
	// RestartBIPOP interleaves IPOP's large populations with runs of small
	// populations of random λ and σ₀, giving each regime about the same
	// budget (Hansen, "Benchmarking a BI-population CMA-ES on the BBOB-2009
	// function testbed", GECCO 2009 workshop).
	RestartBIPOP Restart = "bipop"
)

// Restarts lists the restart strategies.
var Restarts = []Restart{RestartNone, RestartIPOP, RestartBIPOP}

// Recombination says how a child's starting point is made from the ρ
// parents chosen for it, before mutation (Bäck and Schwefel 1993; Beyer
// and Schwefel 2002, §4.1).
type Recombination string

// The recombination operators.
const (
	// RecombineNone copies the first of the child's ρ parents: the paper's
	// ES, which has no recombination ("" means it too).
	RecombineNone Recombination = "none"
	// RecombineDiscrete takes each coordinate from one of the ρ parents,
	// chosen uniformly and independently per coordinate (dominant or
	// discrete recombination, ρ_D).
	RecombineDiscrete Recombination = "discrete"
	// RecombineIntermediate takes the mean of the ρ parents, coordinate by
	// coordinate (intermediate recombination, ρ_I; with ρ = μ, the global
	// intermediate recombination of the (μ/μ_I, λ)-ES).
	RecombineIntermediate Recombination = "intermediate"
)

// Recombinations lists the operators for object variables; step sizes
// take RecombineNone and RecombineIntermediate only.
var Recombinations = []Recombination{RecombineNone, RecombineDiscrete, RecombineIntermediate}

// MaxCMADim bounds Dim for CMA-ES, whose covariance matrix and its
// eigenvectors take 2·Dim² numbers and an O(Dim³) decomposition every few
// generations.
const MaxCMADim = 2000

// Config parameterises a run. The zero value is not valid: Dim and a box
// Lower < Upper are required, Mu and Lambda too for the ES, and at least one
// stopping criterion in Stop. Validate reports the first field at fault; New
// fills in the defaults named below, so Engine.Config shows the values in
// force.
type Config struct {
	// Problem names the fitness function. The engine never reads it; it is
	// stored in checkpoints and reports so a resumed run can rebuild the same
	// problem.
	Problem string `msgpack:"problem" json:"problem"`
	// Strategy is the algorithm: StrategyES (default) or StrategyCMA.
	Strategy Strategy `msgpack:"strategy" json:"strategy"`
	// Mu is μ, the number of parents (≥ 1). For CMA-ES it is the number of
	// best offspring whose weighted mean is the next mean; default ⌊λ/2⌋.
	Mu int `msgpack:"mu" json:"mu"`
	// Lambda is λ, the number of offspring per generation (≥ 1; ≥ Mu with
	// Comma and for CMA-ES). The λ evaluations of a generation are one batch
	// of tasks. For CMA-ES the default is 4 + ⌊3 ln n⌋.
	Lambda int `msgpack:"lambda" json:"lambda"`
	// Dim is n, the number of coordinates (≥ 1; ≤ MaxCMADim for CMA-ES).
	Dim int `msgpack:"dim" json:"dim"`
	// Lower and Upper bound every coordinate; finite, Lower < Upper.
	Lower float64 `msgpack:"lower" json:"lower"`
	Upper float64 `msgpack:"upper" json:"upper"`
	// Seed determines the whole run: the batch of generation g is drawn
	// from an RNG seeded by (Seed, g) alone (and CMA-ES's initial mean from
	// one seeded by (Seed, −1)).
	Seed uint64 `msgpack:"seed" json:"seed"`
	// Comma selects the next parents from the offspring alone, the
	// (μ,λ)-ES. The default, false, is the paper's (μ+λ) plus-selection.
	// ES only: CMA-ES always selects from the offspring.
	Comma bool `msgpack:"comma" json:"comma"`
	// Recombination is how the ES combines the object variables x of a
	// child's ρ parents. Default RecombineNone, the paper's setting.
	Recombination Recombination `msgpack:"recombination" json:"recombination,omitempty"`
	// SigmaRecombination is how the ES combines the step sizes σ of a
	// child's ρ parents: RecombineNone (default; the first parent's) or
	// RecombineIntermediate (their mean).
	SigmaRecombination Recombination `msgpack:"sigma_recombination" json:"sigma_recombination,omitempty"`
	// Rho is ρ, the number of distinct parents, drawn uniformly, that each
	// child of the ES is recombined from (1 ≤ ρ ≤ μ). Default μ (global
	// recombination) when either recombination is set, else 1; ρ > 1
	// needs a recombination, and ρ = 1 makes recombination a copy.
	Rho int `msgpack:"rho" json:"rho,omitempty"`
	// InitSigma is the initial step size: every coordinate's for the ES,
	// the global σ₀ for CMA-ES. 0 means the default, (Upper − Lower)/10
	// for the ES and 0.3·(Upper − Lower) for CMA-ES (Hansen's tutorial,
	// appendix B). It must not exceed Upper − Lower, which is also the cap
	// on every self-adapted step size of the ES.
	InitSigma float64 `msgpack:"init_sigma" json:"init_sigma"`
	// Restarts is CMA-ES's restart strategy: RestartNone (default),
	// RestartIPOP or RestartBIPOP. Restarts change λ and μ from run to run;
	// Lambda and Mu are those of the first run. CMA-ES only.
	Restarts Restart `msgpack:"restarts" json:"restarts,omitempty"`
	// Stop says when a run ends.
	Stop Stop `msgpack:"stop" json:"stop"`
}

// Stop holds the stopping criteria; a run ends at the first one met. At
// least one must be set. Context cancellation always stops Run as well.
type Stop struct {
	// Generations is the last generation to run: generation 0 evaluates the
	// μ initial parents (for CMA-ES, its first λ samples), generations
	// 1..Generations evaluate λ offspring each. 0 means no limit.
	Generations int `msgpack:"generations" json:"generations"`
	// Target, if set, stops the run once the best fitness found is ≤ *Target.
	Target *float64 `msgpack:"target" json:"target"`
	// MaxEvals, if > 0, is the evaluation budget: a generation whose batch
	// would take the count of evaluations past it is not started. It must
	// be ≥ the size of generation 0's batch (μ for the ES, λ for CMA-ES) so
	// that generation 0 fits. 0 means no budget.
	MaxEvals int `msgpack:"max_evals" json:"max_evals"`
}

// BudgetPerDim is the default evaluation budget per dimension of a run
// that has a target or runs CMA-ES, and no generation count: 10⁴·n, the
// budget of the CEC 2005 benchmark on which IPOP-CMA-ES was published,
// which CMA-ES without restarts needs a small part of on every unimodal
// function of esbench's table (at most 1,600·n).
const BudgetPerDim = 10_000

// DefaultBudget is the default evaluation budget (Stop.MaxEvals) of a run
// in dim dimensions: BudgetPerDim·dim, and at least one generation's
// batch (mu, lambda).
func DefaultBudget(dim, mu, lambda int) int { return max(BudgetPerDim*dim, mu, lambda) }

// ConfigError says which field of a Config is invalid and why.
type ConfigError struct {
	Field string // the Go field name, e.g. "Mu" or "Stop.MaxEvals"
	Msg   string
}

// Error says which field is invalid and why.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("es: invalid config: %s %s", e.Field, e.Msg)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate checks c and returns a *ConfigError naming the first invalid
// field, or nil. Zero values that New replaces by a default are valid.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch c.Strategy {
	case "", StrategyES, StrategyCMA:
	default:
		return bad("Strategy", "must be %q or %q, got %q", StrategyES, StrategyCMA, c.Strategy)
	}
	cma := c.Strategy == StrategyCMA
	switch {
	case c.Mu < 0 || c.Mu == 0 && !cma:
		return bad("Mu", "must be ≥ 1, got %d", c.Mu)
	case c.Lambda < 0 || c.Lambda == 0 && !cma:
		return bad("Lambda", "must be ≥ 1, got %d", c.Lambda)
	case c.Dim < 1:
		return bad("Dim", "must be ≥ 1, got %d", c.Dim)
	case cma && c.Dim > MaxCMADim:
		return bad("Dim", "must be ≤ %d for CMA-ES, got %d", MaxCMADim, c.Dim)
	case !finite(c.Lower):
		return bad("Lower", "must be finite, got %v", c.Lower)
	case !finite(c.Upper):
		return bad("Upper", "must be finite, got %v", c.Upper)
	case !(c.Lower < c.Upper):
		return bad("Upper", "must be > Lower (%v), got %v", c.Lower, c.Upper)
	case !finite(c.Upper - c.Lower):
		return bad("Upper", "Upper − Lower overflows (%v − %v)", c.Upper, c.Lower)
	case !finite(c.InitSigma) || c.InitSigma < 0:
		return bad("InitSigma", "must be finite and ≥ 0, got %v", c.InitSigma)
	case c.InitSigma > c.Upper-c.Lower:
		return bad("InitSigma", "must be ≤ Upper − Lower (%v), got %v", c.Upper-c.Lower, c.InitSigma)
	}
	if !cma && c.Restarts != "" {
		return bad("Restarts", "applies to CMA-ES only, got %q", c.Restarts)
	}
	if cma {
		if err := c.validateCMA(); err != nil {
			return err
		}
	} else if err := c.validateES(); err != nil {
		return err
	}
	d := c.withDefaults()
	return c.Stop.validate(d.firstBatch(), d.firstBatchName())
}

func (c Config) validateES() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch c.Recombination {
	case "", RecombineNone, RecombineDiscrete, RecombineIntermediate:
	default:
		return bad("Recombination", "must be %q, %q or %q, got %q", RecombineNone, RecombineDiscrete, RecombineIntermediate, c.Recombination)
	}
	switch c.SigmaRecombination {
	case "", RecombineNone, RecombineIntermediate:
	default:
		return bad("SigmaRecombination", "must be %q or %q, got %q", RecombineNone, RecombineIntermediate, c.SigmaRecombination)
	}
	recombines := c.recombines()
	switch {
	case c.Comma && c.Lambda < c.Mu:
		return bad("Lambda", "must be ≥ Mu (%d) for comma selection, got %d", c.Mu, c.Lambda)
	case c.Rho < 0 || c.Rho > c.Mu:
		return bad("Rho", "must be in [1, Mu (%d)], got %d", c.Mu, c.Rho)
	case c.Rho > 1 && !recombines:
		return bad("Rho", "is %d but neither object variables nor step sizes are recombined", c.Rho)
	}
	return nil
}

func (c Config) validateCMA() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	d := c.withDefaults()
	switch {
	case c.Comma:
		return bad("Comma", "does not apply to CMA-ES, which always selects from the offspring")
	case c.Recombination != "" && c.Recombination != RecombineNone,
		c.SigmaRecombination != "" && c.SigmaRecombination != RecombineNone:
		return bad("Recombination", "does not apply to CMA-ES, whose mean is the weighted mean of the μ best offspring")
	case c.Rho != 0:
		return bad("Rho", "does not apply to CMA-ES (ρ = μ, weighted), got %d", c.Rho)
	case c.Restarts != "" && c.Restarts != RestartNone && c.Restarts != RestartIPOP && c.Restarts != RestartBIPOP:
		return bad("Restarts", "must be %q, %q or %q, got %q", RestartNone, RestartIPOP, RestartBIPOP, c.Restarts)
	case d.Lambda < 2:
		return bad("Lambda", "must be ≥ 2 for CMA-ES, got %d", d.Lambda)
	case d.Mu > d.Lambda:
		return bad("Mu", "must be ≤ Lambda (%d) for CMA-ES, got %d", d.Lambda, d.Mu)
	}
	return nil
}

func (s Stop) validate(firstBatch int, name string) error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: "Stop." + field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Generations < 0:
		return bad("Generations", "must be ≥ 0, got %d", s.Generations)
	case s.Target != nil && !finite(*s.Target):
		return bad("Target", "must be finite, got %v", *s.Target)
	case s.MaxEvals < 0:
		return bad("MaxEvals", "must be ≥ 0, got %d", s.MaxEvals)
	case s.MaxEvals > 0 && s.MaxEvals < firstBatch:
		return bad("MaxEvals", "must be ≥ %s (%d) so that generation 0 fits, got %d", name, firstBatch, s.MaxEvals)
	case s.Generations == 0 && s.Target == nil && s.MaxEvals == 0:
		return bad("Generations", "is 0 (no limit) and there is neither a target nor an evaluation budget: the run would never stop")
	}
	return nil
}

// recombines says the ES recombines x or σ.
func (c Config) recombines() bool {
	return c.Recombination != "" && c.Recombination != RecombineNone ||
		c.SigmaRecombination != "" && c.SigmaRecombination != RecombineNone
}

// withDefaults returns c with the zero values that have a default filled
// in. c need not be valid.
func (c Config) withDefaults() Config {
	if c.Strategy == "" {
		c.Strategy = StrategyES
	}
	if c.Strategy == StrategyCMA {
		if c.Lambda == 0 && c.Dim >= 1 {
			c.Lambda = 4 + int(3*math.Log(float64(c.Dim)))
		}
		if c.Mu == 0 {
			c.Mu = c.Lambda / 2
		}
		if c.Restarts == "" {
			c.Restarts = RestartNone
		}
		return c
	}
	if c.Recombination == "" {
		c.Recombination = RecombineNone
	}
	if c.SigmaRecombination == "" {
		c.SigmaRecombination = RecombineNone
	}
	if c.Rho == 0 {
		c.Rho = 1
		if c.recombines() {
			c.Rho = c.Mu
		}
	}
	return c
}

// firstBatch is the size of generation 0's batch: the μ initial parents of
// the ES, the λ first samples of CMA-ES.
func (c Config) firstBatch() int {
	if c.Strategy == StrategyCMA {
		return c.Lambda
	}
	return c.Mu
}

// firstBatchName names the size of generation 0's batch.
func (c Config) firstBatchName() string {
	if c.Strategy == StrategyCMA {
		return "Lambda"
	}
	return "Mu"
}

// MaxLambda is the largest batch a run of c can ask for: Lambda (μ for
// the ES's generation 0 if larger), or with restarts λ doubled as often as
// they may double it, but never more than the evaluation budget allows.
func (c Config) MaxLambda() int {
	c = c.withDefaults()
	if c.Restarts != RestartIPOP && c.Restarts != RestartBIPOP {
		return max(c.Lambda, c.firstBatch())
	}
	top := c.Lambda << maxDoublings
	if c.Stop.MaxEvals > 0 {
		top = min(top, max(c.Lambda, c.Stop.MaxEvals))
	}
	return top
}

// sigma0 is the initial step size after defaults.
func (c Config) sigma0() float64 {
	if c.InitSigma > 0 {
		return c.InitSigma
	}
	if c.Strategy == StrategyCMA {
		return float64(0.3 * (c.Upper - c.Lower))
	}
	return (c.Upper - c.Lower) / 10
}

// Notation is the strategy in the literature's notation: "(30+70)-ES" for
// the paper's, "(15/15,100)-ES" with ρ = 15 and comma selection,
// "(7/7_W,14)-CMA-ES" for CMA-ES. It describes c after defaults.
func (c Config) Notation() string {
	c = c.withDefaults()
	if c.Strategy == StrategyCMA {
		if c.Restarts == RestartIPOP || c.Restarts == RestartBIPOP {
			return fmt.Sprintf("%s-(%d/%d_W,%d)-CMA-ES", strings.ToUpper(string(c.Restarts)), c.Mu, c.Mu, c.Lambda)
		}
		return fmt.Sprintf("(%d/%d_W,%d)-CMA-ES", c.Mu, c.Mu, c.Lambda)
	}
	sel := "+"
	if c.Comma {
		sel = ","
	}
	if c.Rho > 1 {
		return fmt.Sprintf("(%d/%d%s%d)-ES", c.Mu, c.Rho, sel, c.Lambda)
	}
	return fmt.Sprintf("(%d%s%d)-ES", c.Mu, sel, c.Lambda)
}
