package report

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/internal/logx"
)

// progressWindow is how many recent generations the rate and the ETA are
// estimated from: recent enough to follow a grid that grows or shrinks.
const progressWindow = 10

// Progress estimates a run's evaluation rate and the time it has left
// from its last generations.
type Progress struct {
	of     int  // the last generation the stopping criteria allow
	known  bool // of is known (-gens or -max-evals); not with -target alone
	lambda int  // evaluations per generation after generation 0
	recent []sample
}

// sample is one generation: its evaluations and its wall time.
type sample struct {
	evals int
	wall  time.Duration
}

// NewProgress estimates the run of c.
func NewProgress(c es.Config) *Progress {
	of, known := lastGen(c)
	return &Progress{of: of, known: known, lambda: c.Lambda}
}

// lastGen is the last generation that c's stopping criteria let run:
// -gens, or the last whose batch fits in -max-evals, whichever is first.
// A run stopped by -target alone has none (known is false), nor has one of
// CMA-ES with restarts by its budget alone.
func lastGen(c es.Config) (last int, known bool) {
	last, known = c.Stop.Generations, c.Stop.Generations > 0
	if c.Restarts == es.RestartIPOP || c.Restarts == es.RestartBIPOP {
		// λ changes from run to run: the budget gives no last generation.
		return last, known
	}
	if c.Stop.MaxEvals > 0 {
		first := c.Mu // generation 0's batch (es.Config's firstBatch)
		if c.Strategy == es.StrategyCMA {
			first = c.Lambda
		}
		if b := (c.Stop.MaxEvals - first) / c.Lambda; !known || b < last {
			last, known = b, true
		}
	}
	return last, known
}

// Last is the last generation the stopping criteria allow, if known (not
// with a target alone).
func (p *Progress) Last() (gen int, known bool) { return p.of, p.known }

// Add records a generation of evals evaluations that took wall.
func (p *Progress) Add(evals int, wall time.Duration) {
	if len(p.recent) == progressWindow {
		p.recent = p.recent[1:]
	}
	p.recent = append(p.recent, sample{evals, wall})
}

// Rate is the evaluations per second over the recent generations; 0
// before any time has passed.
func (p *Progress) Rate() float64 {
	var n int
	var d time.Duration
	for _, s := range p.recent {
		n, d = n+s.evals, d+s.wall
	}
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ETA is the time left after generation gen at the recent rate; ok is
// false when it cannot be estimated (no last generation, no rate yet).
func (p *Progress) ETA(gen int) (time.Duration, bool) {
	r := p.Rate()
	switch {
	case !p.known:
		return 0, false
	case gen >= p.of:
		return 0, true
	case r <= 0:
		return 0, false
	}
	left := float64((p.of-gen)*p.lambda) / r
	return time.Duration(left * float64(time.Second)), true
}

// Line is the terminal's line for generation s that took wall:
// "gen    3/100  evals …  best …  mean …  1.49ms  4700 evals/s  ETA 1.2s".
func (p *Progress) Line(s es.Stats, wall time.Duration) string {
	gen := fmt.Sprintf("gen %4d", s.Gen)
	if p.known {
		gen += fmt.Sprintf("/%d", p.of)
	}
	eta := "ETA unknown"
	if d, ok := p.ETA(s.Gen); ok {
		eta = "ETA " + etaText(d)
	}
	return fmt.Sprintf("%s  evals %7d  best %.6e  mean %.6e  %v  %s evals/s  %s",
		gen, s.Evals, s.Best, s.Mean, logx.Round(wall), rateText(p.Rate()), eta)
}

// etaText writes an estimate to the precision it has: whole minutes past
// an hour, whole seconds past a minute ("78h35m", not "78h34m51.384s").
func etaText(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	case d >= time.Minute:
		return d.Round(time.Second).String()
	}
	return logx.Round(d).String()
}

// Record is generation s as the one Info record per generation of the
// JSON log: of and eta_s are null when unknown.
func (p *Progress) Record(log *slog.Logger, s es.Stats, wall time.Duration) {
	of, eta := slog.Any("of", nil), slog.Any("eta_s", nil)
	if p.known {
		of = slog.Int("of", p.of)
	}
	if d, ok := p.ETA(s.Gen); ok {
		eta = slog.Duration("eta", d) // eta_s, in seconds (logx)
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "generation", slog.Int("gen", s.Gen), of, slog.Int("evals", s.Evals),
		slog.Float64("best", s.Best), slog.Float64("mean", s.Mean), slog.Duration("wall", wall),
		slog.Float64("evals_per_s", p.Rate()), eta)
}

// rateText writes an evaluation rate with three significant digits, and
// without an exponent above 100.
func rateText(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}
