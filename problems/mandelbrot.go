package problems

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Mandelbrot is the bag-of-tasks benchmark of the Clop paper: an image of
// the Mandelbrot set over a region of the complex plane, its columns split
// into Strips vertical strips, each strip one task. A strip's value is the
// total iteration count of its pixels, an integer that any machine
// computes exactly, so results can be checked and compared across runs.
type Mandelbrot struct {
	// The region: real part in [XMin, XMax], imaginary part in [YMin, YMax].
	XMin, YMin, XMax, YMax float64
	// Width and Height are the image size in pixels.
	Width, Height int
	// MaxIter caps the iterations per pixel; points of the set reach it.
	MaxIter int
	// Strips is the number of tasks; strip i holds columns
	// [i·Width/Strips, (i+1)·Width/Strips).
	Strips int
}

// PaperMandelbrot returns the paper's setting: region (−0.6, −1.0)–(1.0, 0.0),
// a 480×480 image, 300,000 iterations, split into strips strips.
func PaperMandelbrot(strips int) Mandelbrot {
	return Mandelbrot{XMin: -0.6, YMin: -1.0, XMax: 1.0, YMax: 0.0, Width: 480, Height: 480, MaxIter: 300_000, Strips: strips}
}

func init() {
	// The registered form is the paper's setting cut into 480 one-column
	// strips, the finest split the paper used; its dimension must be 1.
	Register("mandelbrot", func(dim int) (Problem, error) {
		if dim != 1 {
			return nil, fmt.Errorf("dimension must be 1 (the strip index), got %d", dim)
		}
		return PaperMandelbrot(480).Problem()
	})
}

// Validate reports the first unusable parameter.
func (m Mandelbrot) Validate() error {
	for _, v := range []float64{m.XMin, m.YMin, m.XMax, m.YMax} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("mandelbrot: region must be finite")
		}
	}
	switch {
	case !(m.XMin < m.XMax) || !(m.YMin < m.YMax):
		return fmt.Errorf("mandelbrot: empty region (%v,%v)–(%v,%v)", m.XMin, m.YMin, m.XMax, m.YMax)
	case m.Width < 1 || m.Height < 1:
		return fmt.Errorf("mandelbrot: image size %d×%d must be at least 1×1", m.Width, m.Height)
	case m.MaxIter < 1:
		return fmt.Errorf("mandelbrot: MaxIter must be ≥ 1, got %d", m.MaxIter)
	case m.Strips < 1 || m.Strips > m.Width:
		return fmt.Errorf("mandelbrot: Strips must be in [1, Width=%d], got %d", m.Width, m.Strips)
	}
	return nil
}

// Columns returns the pixel columns [from, to) of strip i.
func (m Mandelbrot) Columns(i int) (from, to int) {
	return i * m.Width / m.Strips, (i + 1) * m.Width / m.Strips
}

// Strip computes strip i and returns the total iteration count of its
// pixels. It checks ctx once per column.
func (m Mandelbrot) Strip(ctx context.Context, i int) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	if i < 0 || i >= m.Strips {
		return 0, fmt.Errorf("mandelbrot: strip %d out of range [0, %d)", i, m.Strips)
	}
	from, to := m.Columns(i)
	dx := (m.XMax - m.XMin) / float64(m.Width)
	dy := (m.YMax - m.YMin) / float64(m.Height)
	var total int64
	for px := from; px < to; px++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		cx := m.XMin + float64(float64(px)*dx)
		for py := 0; py < m.Height; py++ {
			cy := m.YMin + float64(float64(py)*dy)
			total += int64(escape(cx, cy, m.MaxIter))
		}
	}
	return total, nil
}

// escape returns the number of iterations of z ← z² + c, from z = 0, until
// |z| > 2, or maxIter. The conversions forbid FMA fusion so that the count
// is the same on every architecture.
func escape(cx, cy float64, maxIter int) int {
	var x, y float64
	for k := 0; k < maxIter; k++ {
		xx, yy := float64(x*x), float64(y*y)
		if xx+yy > 4 {
			return k
		}
		y = float64(2*x*y) + cy
		x = xx - yy + cx
	}
	return maxIter
}

// Problem adapts m to the Problem interface so that an Evaluator can run a
// bag of strips: x has one coordinate, the strip index, and the value is
// the strip's iteration count. A non-integer index is rounded to the
// nearest strip, so that an optimiser may search the strips too.
func (m Mandelbrot) Problem() (Problem, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return mandelbrotProblem{m}, nil
}

type mandelbrotProblem struct{ m Mandelbrot }

func (p mandelbrotProblem) Name() string { return "mandelbrot" }

// Bounds spans the strip indices.
func (p mandelbrotProblem) Bounds() (lower, upper float64) { return 0, float64(p.m.Strips - 1) }

func (p mandelbrotProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	if len(x) != 1 {
		return 0, fmt.Errorf("mandelbrot: want one coordinate (the strip index), got %d", len(x))
	}
	i := math.Round(x[0])
	if !(i >= 0 && i < float64(p.m.Strips)) {
		return 0, fmt.Errorf("mandelbrot: strip index %v out of range [0, %d)", x[0], p.m.Strips)
	}
	n, err := p.m.Strip(ctx, int(i))
	return float64(n), err
}
