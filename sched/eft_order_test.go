package sched

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortChainsAsComparison checks that sortChains orders a run's keys
// as the comparison sort does (longest chain first, ties by place), for
// runs short and long, with ties, zeros of both signs and negative chains.
func TestSortChainsAsComparison(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := &eftState{}
	values := []float64{0, math.Copysign(0, -1), -1, 1, 2.5, 1e-300, 1e300, math.Inf(1), math.Inf(-1)}
	for trial := range 400 {
		n := 1 + rng.IntN(300)
		if trial%2 == 0 {
			n = 1 + rng.IntN(64)
		}
		keys := make([]eftSendKey, n)
		for i := range keys {
			var c float64
			switch rng.IntN(3) {
			case 0:
				c = values[rng.IntN(len(values))]
			case 1:
				c = float64(rng.IntN(5)) * 1e6 // ties
			default:
				c = rng.NormFloat64() * 1e8
			}
			keys[i] = eftSendKey{chain: c, pos: int32(i), k: int32(i), wi: int32(rng.IntN(7))}
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, func(x, y eftSendKey) int {
			if c := cmp.Compare(y.chain, x.chain); c != 0 {
				return c
			}
			return cmp.Compare(x.pos, y.pos)
		})
		got := slices.Clone(keys)
		e.sortChains(got)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d keys): sortChains differs from the comparison sort", trial, n)
		}
	}
}
