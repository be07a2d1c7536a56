package report

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// readableTicks are linear ticks every 1, 2 or 5 × 10ᵏ, about eight of
// them, labelled in one style: plain numbers, or, when the values reach
// 10⁴ or stay below 10⁻³, each a multiple of one power of ten
// ("2.5×10⁶"), never "1e+06" beside "500000".
type readableTicks struct{}

func (readableTicks) Ticks(min, max float64) []plot.Tick {
	if math.IsInf(min, 0) || math.IsInf(max, 0) || math.IsNaN(min) || math.IsNaN(max) {
		return nil
	}
	if !(max > min) {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	// max/8 − min/8, not (max − min)/8: a range wider than a float64
	// (−1e308 to 1e308, a damaged report's fitness) went to gonum's
	// DefaultTicks, which never returned for it, and esreport hung.
	step := niceStep(max/8 - min/8)
	first, last := math.Ceil(min/step-1e-9), math.Floor(max/step+1e-9) // float noise: 6 × 0.05 > 0.3
	if !(last-first <= 16) || math.Max(math.Abs(first), math.Abs(last)) >= 1<<53 {
		// A range too narrow for its magnitude (1e17 to 1e17+64): its
		// steps are not integers apart in a float64, and i++ would never
		// reach the end.
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	var ticks []plot.Tick
	big := 0.0
	for i := first; i <= last; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not −0
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: "x"})
		big = math.Max(big, math.Abs(v))
	}
	exp := 0
	if big >= 1e4 || big > 0 && big < 1e-3 {
		exp = int(math.Floor(math.Log10(big)))
	}
	for i, t := range ticks {
		ticks[i].Label = scaled(t.Value, exp)
	}
	return ticks
}

// niceStep is the smallest of 1, 2 and 5 × 10ᵏ at least d.
func niceStep(d float64) float64 {
	p := math.Pow10(int(math.Floor(math.Log10(d))))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= d {
			return m * p
		}
	}
	return 10 * p
}

// scaled writes v as a multiple of 10^exp ("2.5×10⁶"; just "2.5" when
// exp is 0), rounded to 6 significant digits so that float noise
// (0.30000000000000004) does not show.
func scaled(v float64, exp int) string {
	m := v / math.Pow10(exp)
	s := strconv.FormatFloat(roundSig(m, 6), 'f', -1, 64)
	switch {
	case exp == 0:
		return s
	case m == 0:
		return "0"
	}
	return s + "×" + power(exp)
}

func roundSig(v float64, digits int) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	return f
}

// power writes 10^k with superscript digits: 10⁶, 10⁻³.
func power(k int) string {
	const sup = "⁰¹²³⁴⁵⁶⁷⁸⁹"
	digits := []rune(sup)
	var b strings.Builder
	b.WriteString("10")
	if k < 0 {
		b.WriteRune('⁻')
		k = -k
	}
	for _, c := range strconv.Itoa(k) {
		b.WriteRune(digits[c-'0'])
	}
	return b.String()
}

// powerTicks are ticks for a logarithmic axis: every power of ten
// labelled "10ᵏ", the multiples 2..9 between them unlabelled; over less
// than three powers of ten, the multiples 2 and 5 labelled too, in the same
// style ("2×10³").
type powerTicks struct{}

func (powerTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	var ticks []plot.Tick
	powers := 0
	for k := lo; k <= hi; k++ {
		if v := math.Pow10(k); v >= min && v <= max {
			powers++
		}
	}
	// Too many decades for every label: label every step-th power.
	step := 1 + (hi-lo)/12
	for k := lo; k <= hi; k++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(k)
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			switch {
			case m == 1 && (k-lo)%step == 0:
				t.Label = power(k)
			case m == 1:
			case powers < 3 && (m == 2 || m == 5):
				t.Label = strconv.Itoa(m) + "×" + power(k)
			}
			if step > 1 && m > 1 {
				continue // no minor ticks over many decades
			}
			ticks = append(ticks, t)
		}
	}
	if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Label != "" }) {
		// Within one decade, between 2 and 5 or 5 and 10: every multiple.
		for i, t := range ticks {
			e := int(math.Floor(math.Log10(t.Value) + 1e-9))
			ticks[i].Label = strconv.Itoa(int(math.Round(t.Value/math.Pow10(e)))) + "×" + power(e)
		}
	}
	return ticks
}
