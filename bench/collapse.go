package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/esgrid/esgrid/es"
)

// CollapseConfig is one run per strategy, whose trajectory is printed.
type CollapseConfig struct {
	Strategies []Strategy
	Problem    string
	Dim        int
	Seed       uint64
	Gens       int // generations to run
	Every      int // print every Every generations
}

// Collapse prints, for each strategy (by default the paper's ES and the
// recommended one), the step sizes and the diversity of the parents every
// o.Every generations of one run: the trajectory that shows the paper's ES
// stalling.
func Collapse(ctx context.Context, o CollapseConfig, w io.Writer) error {
	fmt.Fprintf(w, "Step sizes of the parents on the %d-D %s, seed %d: geometric mean, smallest and largest σ_i over all parents and coordinates;\n", o.Dim, o.Problem, o.Seed)
	fmt.Fprintf(w, "spread = root-mean-square distance of the parents from their centroid; distinct = parents with different x.\n")
	if o.Problem == "sphere" {
		fmt.Fprintf(w, "σ* = σ geo-mean · n / ‖x‖, the normalised step size (‖x‖ = √f of the best parent): of order 1 while the ES progresses.\n")
	}
	for _, s := range o.Strategies {
		cfg, p, err := configure(s.Config, o.Problem, o.Dim, o.Seed, es.Stop{Generations: o.Gens})
		if err != nil {
			return err
		}
		e, err := es.New(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s: %s\n\n", s.Name, describe(cfg))
		rows := [][]string{{"gen", "evals", "best f", "σ geo-mean", "σ min", "σ max", "spread", "distinct"}}
		sphere := o.Problem == "sphere"
		if sphere {
			rows[0] = append(rows[0], "σ*")
		}
		_, err = e.Run(ctx, evaluator(p), es.RunOptions{OnGeneration: func(st es.Stats) error {
			if st.Gen%o.Every != 0 && st.Gen != o.Gens {
				return nil
			}
			geo, lo, hi, spread, distinct := population(e.Parents())
			row := []string{
				strconv.Itoa(st.Gen), strconv.Itoa(st.Evals), fmt.Sprintf("%.3e", st.BestEver),
				fmt.Sprintf("%.2e", geo), fmt.Sprintf("%.2e", lo), fmt.Sprintf("%.2e", hi),
				fmt.Sprintf("%.2e", spread), strconv.Itoa(distinct),
			}
			if sphere {
				// The normalised step size σ* = σ·n/R, R = ‖x‖ = √f of the
				// best parent (Beyer 2001): progress needs σ* of order 1
				// to μ; far below, the steps are too short to matter.
				row = append(row, fmt.Sprintf("%.2g", geo*float64(o.Dim)/math.Sqrt(st.Best)))
			}
			rows = append(rows, row)
			return nil
		}})
		if err != nil {
			return err
		}
		printTable(w, rows)
	}
	return nil
}

// population describes the parents' step sizes and their spread.
func population(parents []es.Individual) (geo, lo, hi, spread float64, distinct int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	logSum, count := 0.0, 0
	n := len(parents[0].X)
	centroid := make([]float64, n)
	for _, p := range parents {
		for i, s := range p.Sigma {
			logSum += math.Log(s)
			count++
			lo, hi = min(lo, s), max(hi, s)
			centroid[i] += p.X[i] / float64(len(parents))
		}
	}
	for _, p := range parents {
		for i, x := range p.X {
			spread += (x - centroid[i]) * (x - centroid[i])
		}
	}
	spread = math.Sqrt(spread / float64(len(parents)))
	var seen [][]float64
	for _, p := range parents {
		if !slices.ContainsFunc(seen, func(x []float64) bool { return slices.Equal(x, p.X) }) {
			seen = append(seen, p.X)
		}
	}
	return math.Exp(logSum / float64(count)), lo, hi, spread, len(seen)
}
