package es

import (
	"fmt"
	"math"
)

// Config parameterises a run of the (μ+λ)-ES. The zero value is not valid:
// Mu, Lambda, Dim and a box Lower < Upper are required, and at least one
// stopping criterion in Stop. Validate reports the first field at fault.
type Config struct {
	// Problem names the fitness function. The engine never reads it; it is
	// stored in checkpoints and reports so a resumed run can rebuild the same
	// problem.
	Problem string `msgpack:"problem" json:"problem"`
	// Mu is μ, the number of parents (≥ 1).
	Mu int `msgpack:"mu" json:"mu"`
	// Lambda is λ, the number of offspring per generation (≥ 1; ≥ Mu with
	// Comma). The λ evaluations of a generation are one batch of tasks.
	Lambda int `msgpack:"lambda" json:"lambda"`
	// Dim is n, the number of coordinates (≥ 1).
	Dim int `msgpack:"dim" json:"dim"`
	// Lower and Upper bound every coordinate; finite, Lower < Upper.
	Lower float64 `msgpack:"lower" json:"lower"`
	Upper float64 `msgpack:"upper" json:"upper"`
	// Seed determines the whole run: the initial population is drawn from
	// an RNG seeded by (Seed, 0) and the offspring of generation g from one
	// seeded by (Seed, g).
	Seed uint64 `msgpack:"seed" json:"seed"`
	// Comma selects the next parents from the offspring alone, the
	// (μ,λ)-ES. The default, false, is the paper's (μ+λ) plus-selection.
	Comma bool `msgpack:"comma" json:"comma"`
	// InitSigma is every coordinate's initial step size. 0 means the
	// default, (Upper − Lower) / 10. It must not exceed Upper − Lower,
	// which is also the cap on every self-adapted step size.
	InitSigma float64 `msgpack:"init_sigma" json:"init_sigma"`
	// Stop says when a run ends.
	Stop Stop `msgpack:"stop" json:"stop"`
}

// Stop holds the stopping criteria; a run ends at the first one met. At
// least one must be set. Context cancellation always stops Run as well.
type Stop struct {
	// Generations is the last generation to run: generation 0 evaluates the
	// μ initial parents, generations 1..Generations evaluate λ offspring
	// each. 0 means no limit.
	Generations int `msgpack:"generations" json:"generations"`
	// Target, if set, stops the run once the best fitness found is ≤ *Target.
	Target *float64 `msgpack:"target" json:"target"`
	// MaxEvals, if > 0, is the evaluation budget: a generation whose batch
	// would take the count of evaluations past it is not started. It must
	// be ≥ Mu so that generation 0 fits. 0 means no budget.
	MaxEvals int `msgpack:"max_evals" json:"max_evals"`
}

// ConfigError says which field of a Config is invalid and why.
type ConfigError struct {
	Field string // the Go field name, e.g. "Mu" or "Stop.MaxEvals"
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("es: invalid config: %s %s", e.Field, e.Msg)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate checks c and returns a *ConfigError naming the first invalid
// field, or nil.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Mu < 1:
		return bad("Mu", "must be ≥ 1, got %d", c.Mu)
	case c.Lambda < 1:
		return bad("Lambda", "must be ≥ 1, got %d", c.Lambda)
	case c.Dim < 1:
		return bad("Dim", "must be ≥ 1, got %d", c.Dim)
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
	case c.Comma && c.Lambda < c.Mu:
		return bad("Lambda", "must be ≥ Mu (%d) for comma selection, got %d", c.Mu, c.Lambda)
	}
	return c.Stop.validate(c.Mu)
}

func (s Stop) validate(mu int) error {
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
	case s.MaxEvals > 0 && s.MaxEvals < mu:
		return bad("MaxEvals", "must be ≥ Mu (%d) so that generation 0 fits, got %d", mu, s.MaxEvals)
	case s.Generations == 0 && s.Target == nil && s.MaxEvals == 0:
		return bad("Generations", "is 0 (no limit) and there is neither a target nor an evaluation budget: the run would never stop")
	}
	return nil
}

// sigma0 is the initial step size after defaults.
func (c Config) sigma0() float64 {
	if c.InitSigma > 0 {
		return c.InitSigma
	}
	return (c.Upper - c.Lower) / 10
}
