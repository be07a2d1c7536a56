package problems_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/esgrid/esgrid/problems"
)

func small(strips int) problems.Mandelbrot {
	m := problems.PaperMandelbrot(strips)
	m.Width, m.Height, m.MaxIter = 48, 32, 500
	return m
}

// reference counts with complex128 arithmetic, pixel by pixel.
func reference(m problems.Mandelbrot) int64 {
	var total int64
	for px := range m.Width {
		for py := range m.Height {
			c := complex(m.XMin+float64(px)*(m.XMax-m.XMin)/float64(m.Width), m.YMin+float64(py)*(m.YMax-m.YMin)/float64(m.Height))
			var z complex128
			k := 0
			for ; k < m.MaxIter && real(z)*real(z)+imag(z)*imag(z) <= 4; k++ {
				z = z*z + c
			}
			total += int64(k)
		}
	}
	return total
}

func stripTotal(t *testing.T, m problems.Mandelbrot) int64 {
	t.Helper()
	var total int64
	for i := range m.Strips {
		n, err := m.Strip(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// However the columns are split, the strips add up to the whole image.
func TestMandelbrotStripsCoverTheImage(t *testing.T) {
	want := reference(small(1))
	if want == 0 {
		t.Fatal("empty reference image")
	}
	for _, strips := range []int{1, 5, 7, 48} {
		if got := stripTotal(t, small(strips)); got != want {
			t.Errorf("%d strips: total %d, want %d", strips, got, want)
		}
	}
}

func TestMandelbrotKnownPixels(t *testing.T) {
	one := problems.Mandelbrot{Width: 1, Height: 1, MaxIter: 1000, Strips: 1}
	tests := []struct {
		x, y float64
		want int64
	}{
		{0, 0, 1000}, // in the set: every iteration
		{2, 2, 1},    // z1 = 2+2i escapes at once
		{-2, 0, 1000},
		{1, 0, 3}, // 0 → 1 → 2 → 5: |z|² = 25 > 4 at the third check
	}
	for _, tt := range tests {
		m := one
		m.XMin, m.XMax, m.YMin, m.YMax = tt.x, tt.x+1, tt.y, tt.y+1
		if got, err := m.Strip(context.Background(), 0); err != nil || got != tt.want {
			t.Errorf("pixel (%v, %v): %d, %v; want %d", tt.x, tt.y, got, err, tt.want)
		}
	}
}

func TestMandelbrotValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*problems.Mandelbrot)
	}{
		{"empty region", func(m *problems.Mandelbrot) { m.XMax = m.XMin }},
		{"zero width", func(m *problems.Mandelbrot) { m.Width = 0 }},
		{"zero iterations", func(m *problems.Mandelbrot) { m.MaxIter = 0 }},
		{"no strips", func(m *problems.Mandelbrot) { m.Strips = 0 }},
		{"more strips than columns", func(m *problems.Mandelbrot) { m.Strips = m.Width + 1 }},
	}
	for _, tt := range tests {
		m := small(4)
		tt.edit(&m)
		if m.Validate() == nil {
			t.Errorf("%s: accepted", tt.name)
		}
		if _, err := m.Problem(); err == nil {
			t.Errorf("%s: Problem() accepted", tt.name)
		}
	}
	if err := problems.PaperMandelbrot(480).Validate(); err != nil {
		t.Errorf("the paper's setting: %v", err)
	}
}

func TestMandelbrotProblem(t *testing.T) {
	m := small(6)
	p, err := m.Problem()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := p.Bounds(); lo != 0 || hi != 5 {
		t.Errorf("Bounds() = %v, %v; want 0, 5", lo, hi)
	}
	want, _ := m.Strip(context.Background(), 3)
	for _, x := range []float64{3, 2.6, 3.4} {
		if got := eval(t, p, []float64{x}); got != float64(want) {
			t.Errorf("Eval([%v]) = %v, want strip 3's %d", x, got, want)
		}
	}
	for _, x := range [][]float64{{-1}, {6}, {math.NaN()}, {0, 1}, {}} {
		if _, err := p.Eval(context.Background(), x); err == nil {
			t.Errorf("Eval(%v) accepted", x)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Eval(ctx, []float64{0}); !errors.Is(err, context.Canceled) {
		t.Errorf("Eval with a cancelled context = %v", err)
	}

	reg, err := problems.New("mandelbrot", 1)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := reg.Bounds(); lo != 0 || hi != 479 {
		t.Errorf("registered mandelbrot Bounds() = %v, %v; want 0, 479", lo, hi)
	}
	if _, err := problems.New("mandelbrot", 2); err == nil {
		t.Error("registered mandelbrot accepted dimension 2")
	}
}
