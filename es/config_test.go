package es

import (
	"errors"
	"math"
	"testing"
)

func validConfig() Config {
	return Config{Mu: 3, Lambda: 7, Dim: 4, Lower: -1, Upper: 1, Stop: Stop{Generations: 5}}
}

func TestConfigValidate(t *testing.T) {
	target := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"valid", func(c *Config) {}, ""},
		{"valid comma", func(c *Config) { c.Comma = true }, ""},
		{"valid target only", func(c *Config) { c.Stop = Stop{Target: target(0)} }, ""},
		{"valid budget only", func(c *Config) { c.Stop = Stop{MaxEvals: 3} }, ""},
		{"mu zero", func(c *Config) { c.Mu = 0 }, "Mu"},
		{"lambda negative", func(c *Config) { c.Lambda = -1 }, "Lambda"},
		{"dim zero", func(c *Config) { c.Dim = 0 }, "Dim"},
		{"lower NaN", func(c *Config) { c.Lower = math.NaN() }, "Lower"},
		{"upper inf", func(c *Config) { c.Upper = math.Inf(1) }, "Upper"},
		{"empty box", func(c *Config) { c.Upper = c.Lower }, "Upper"},
		{"box overflows", func(c *Config) { c.Lower, c.Upper = -math.MaxFloat64, math.MaxFloat64 }, "Upper"},
		{"sigma negative", func(c *Config) { c.InitSigma = -1 }, "InitSigma"},
		{"sigma wider than box", func(c *Config) { c.InitSigma = 3 }, "InitSigma"},
		{"comma needs lambda ≥ mu", func(c *Config) { c.Comma, c.Lambda = true, 2 }, "Lambda"},
		{"generations negative", func(c *Config) { c.Stop.Generations = -1 }, "Stop.Generations"},
		{"target NaN", func(c *Config) { c.Stop.Target = target(math.NaN()) }, "Stop.Target"},
		{"budget negative", func(c *Config) { c.Stop.MaxEvals = -5 }, "Stop.MaxEvals"},
		{"budget below mu", func(c *Config) { c.Stop.MaxEvals = 2 }, "Stop.MaxEvals"},
		{"never stops", func(c *Config) { c.Stop = Stop{} }, "Stop.Generations"},
		{"unknown strategy", func(c *Config) { c.Strategy = "de" }, "Strategy"},
		{"valid es", func(c *Config) { c.Strategy = StrategyES }, ""},
		{"valid recombination", func(c *Config) {
			c.Recombination, c.SigmaRecombination, c.Rho = RecombineDiscrete, RecombineIntermediate, 2
		}, ""},
		{"valid recombination, default ρ", func(c *Config) { c.Recombination = RecombineIntermediate }, ""},
		{"valid ρ 1 with recombination", func(c *Config) { c.SigmaRecombination, c.Rho = RecombineIntermediate, 1 }, ""},
		{"unknown recombination", func(c *Config) { c.Recombination = "uniform" }, "Recombination"},
		{"discrete σ recombination", func(c *Config) { c.SigmaRecombination = RecombineDiscrete }, "SigmaRecombination"},
		{"ρ above μ", func(c *Config) { c.Recombination, c.Rho = RecombineDiscrete, 4 }, "Rho"},
		{"ρ negative", func(c *Config) { c.Recombination, c.Rho = RecombineDiscrete, -1 }, "Rho"},
		{"ρ without recombination", func(c *Config) { c.Rho = 2 }, "Rho"},
		{"restarts of the ES", func(c *Config) { c.Restarts = RestartIPOP }, "Restarts"},
		{"cma ipop", func(c *Config) { c.Strategy, c.Restarts = StrategyCMA, RestartIPOP }, ""},
		{"cma bipop", func(c *Config) { c.Strategy, c.Restarts = StrategyCMA, RestartBIPOP }, ""},
		{"cma unknown restarts", func(c *Config) { c.Strategy, c.Restarts = StrategyCMA, "lrcma" }, "Restarts"},
		{"valid cma, defaults", func(c *Config) { c.Strategy, c.Mu, c.Lambda = StrategyCMA, 0, 0 }, ""},
		{"valid cma", func(c *Config) { c.Strategy = StrategyCMA }, ""},
		{"cma μ above λ", func(c *Config) { c.Strategy, c.Mu, c.Lambda = StrategyCMA, 8, 7 }, "Mu"},
		{"cma μ above default λ", func(c *Config) { c.Strategy, c.Mu, c.Lambda = StrategyCMA, 9, 0 }, "Mu"},
		{"cma λ 1", func(c *Config) { c.Strategy, c.Mu, c.Lambda = StrategyCMA, 1, 1 }, "Lambda"},
		{"cma comma", func(c *Config) { c.Strategy, c.Comma = StrategyCMA, true }, "Comma"},
		{"cma recombination", func(c *Config) { c.Strategy, c.Recombination = StrategyCMA, RecombineDiscrete }, "Recombination"},
		{"cma ρ", func(c *Config) { c.Strategy, c.Rho = StrategyCMA, 3 }, "Rho"},
		{"cma too many dimensions", func(c *Config) { c.Strategy, c.Dim = StrategyCMA, MaxCMADim+1 }, "Dim"},
		{"cma budget below λ", func(c *Config) { c.Strategy, c.Stop = StrategyCMA, Stop{MaxEvals: 6} }, "Stop.MaxEvals"},
		{"cma budget is λ", func(c *Config) { c.Strategy, c.Stop = StrategyCMA, Stop{MaxEvals: 7} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v, want a *ConfigError", err)
			}
			if ce.Field != tt.field {
				t.Errorf("error names %q (%v), want %q", ce.Field, err, tt.field)
			}
			if _, err := New(c); err == nil {
				t.Errorf("New accepted an invalid config")
			}
		})
	}
}

func TestStepSizeConstants(t *testing.T) {
	e, err := New(Config{Mu: 1, Lambda: 1, Dim: 16, Lower: 0, Upper: 1, Stop: Stop{Generations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// τ = 1/√(2√n) = 1/√8, τ' = 1/√(2n) = 1/√32 for n = 16.
	if want := 1 / math.Sqrt(8); e.tau != want {
		t.Errorf("tau = %v, want %v", e.tau, want)
	}
	if want := 1 / math.Sqrt(32); e.tauPrime != want {
		t.Errorf("tauPrime = %v, want %v", e.tauPrime, want)
	}
}

func TestBound(t *testing.T) {
	e, err := New(Config{Mu: 1, Lambda: 1, Dim: 1, Lower: -1, Upper: 3, Stop: Stop{Generations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want float64 }{
		{0, 0},
		{-1, -1},
		{3, 3},
		{-1.5, -0.5}, // reflected at the lower bound
		{4, 2},       // reflected at the upper bound
		{-6, 3},      // reflects past the upper bound: clamped
		{9, -1},      // reflects past the lower bound: clamped
		{math.Inf(1), -1},
		{math.Inf(-1), 3},
	}
	for _, tt := range tests {
		if got := e.bound(tt.in); got != tt.want {
			t.Errorf("bound(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCompareFitness(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ordered := []float64{math.Inf(-1), -1, 0, 2, inf, nan}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareFitness(a, b); got != want {
				t.Errorf("compareFitness(%v, %v) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// MaxLambda bounds the batches of a run: λ, or with restarts λ doubled ten
// times, but never past the budget.
func TestMaxLambda(t *testing.T) {
	base := Config{Strategy: StrategyCMA, Dim: 10, Lower: -1, Upper: 1, Stop: Stop{Generations: 5}}
	ipop, budget := base, base
	ipop.Restarts = RestartIPOP
	budget.Restarts, budget.Stop.MaxEvals = RestartBIPOP, 5000
	for _, tt := range []struct {
		cfg  Config
		want int
	}{{base, 10}, {ipop, 10240}, {budget, 5000}, {Config{Mu: 30, Lambda: 7, Dim: 2, Lower: -1, Upper: 1}, 30}} {
		if got := tt.cfg.MaxLambda(); got != tt.want {
			t.Errorf("%+v: MaxLambda() = %d, want %d", tt.cfg, got, tt.want)
		}
	}
}
