package problems

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a Problem that counts its evaluations.
type counting struct{ n atomic.Int64 }

func (c *counting) Name() string                   { return "counting" }
func (c *counting) Bounds() (lower, upper float64) { return -1, 1 }
func (c *counting) Eval(_ context.Context, x []float64) (float64, error) {
	c.n.Add(1)
	return x[0] * 2, nil
}

func TestWithLoadKeepsFitness(t *testing.T) {
	inner, err := New("ridge", 4)
	if err != nil {
		t.Fatal(err)
	}
	if WithLoad(inner, 0) != inner {
		t.Error("WithLoad(p, 0) is not p")
	}
	p := WithLoad(inner, 40)
	if p.Name() != "ridge" {
		t.Errorf("Name() = %q", p.Name())
	}
	if lo, hi := p.Bounds(); lo != -100 || hi != 100 {
		t.Errorf("Bounds() = %v, %v", lo, hi)
	}
	for _, x := range [][]float64{{0, 0, 0, 0}, {1, 2, 3, 4}, {-7.5, 3, 99, -100}} {
		want, _ := inner.Eval(context.Background(), x)
		got, err := p.Eval(context.Background(), x)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("loaded f(%v) = %v, %v; want %v", x, got, err, want)
		}
	}
	if _, err := p.Eval(context.Background(), []float64{1}); err == nil {
		t.Error("the inner problem's error was lost")
	}
}

// The decomposition really runs (its result reaches the sink), on the same
// matrix every time.
func TestLoadDoesTheWork(t *testing.T) {
	w := newLUWork(30)
	if again := newLUWork(30); !equalData(w.a.RawMatrix().Data, again.a.RawMatrix().Data) {
		t.Fatal("the load matrix is not deterministic")
	}
	before := luSink.Load()
	w.run()
	if luSink.Load() == before {
		t.Fatal("the decomposition left no trace in the sink")
	}
}

func equalData(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWithLoadHonoursContext(t *testing.T) {
	inner := &counting{}
	p := WithLoad(inner, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Eval(ctx, []float64{0.5}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval with a cancelled context = %v", err)
	}
	if inner.n.Load() != 0 {
		t.Fatal("the inner problem ran despite the cancelled context")
	}
	if f, err := p.Eval(context.Background(), []float64{0.5}); err != nil || f != 1 {
		t.Fatalf("Eval = %v, %v; want 1", f, err)
	}
}

func TestCalibrate(t *testing.T) {
	if _, err := Calibrate(0); err == nil {
		t.Error("Calibrate(0) succeeded")
	}
	small, err := Calibrate(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Loose sanity bounds only: timing on a shared machine is noisy, and a
	// 1 ms LU is somewhere between a 10×10 and a 2000×2000 matrix on any
	// computer that runs this test.
	if small < 10 || small > 2000 {
		t.Fatalf("Calibrate(1ms) = %d", small)
	}
	t.Logf("1 ms ≈ LU %d×%d", small, small)
}

func TestExtrapolate(t *testing.T) {
	tests := []struct {
		n         int
		t, target time.Duration
		want      int
	}{
		{100, time.Millisecond, 8 * time.Millisecond, 200},
		{100, time.Millisecond, time.Millisecond, 100},
		{300, 27 * time.Millisecond, time.Millisecond, 100},
		{100, 0, time.Millisecond, 100 * 100}, // zero time counts as 1 ns: ∛10⁶ = 100
		{5, time.Second, time.Nanosecond, 1},
	}
	for _, tt := range tests {
		if got := extrapolate(tt.n, tt.t, tt.target); got != tt.want {
			t.Errorf("extrapolate(%d, %v, %v) = %d, want %d", tt.n, tt.t, tt.target, got, tt.want)
		}
	}
}
