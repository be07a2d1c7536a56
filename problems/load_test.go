package problems

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
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
// matrix every time, with the same result every time.
func TestLoadIsDeterministic(t *testing.T) {
	w := newLUWork(70)
	if again := newLUWork(70); !equalData(w.a, again.a) {
		t.Fatal("the load matrix is not deterministic")
	}
	before := luSink.Load()
	first, err := w.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if luSink.Load() == before {
		t.Fatal("the decomposition left no trace in the sink")
	}
	for range 3 {
		if got, err := w.run(context.Background()); err != nil || math.Float64bits(got) != math.Float64bits(first) {
			t.Fatalf("run = %v, %v; first run gave %v", got, err, first)
		}
	}
	if got, _ := newLUWork(70).run(context.Background()); math.Float64bits(got) != math.Float64bits(first) {
		t.Fatalf("a second load of the same size gave %v, want %v", got, first)
	}
}

func equalData(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// randomMatrix has no dominant diagonal, so partial pivoting really swaps.
func randomMatrix(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	a := make([]float64, n*n)
	for i := range a {
		a[i] = 2*rng.Float64() - 1
	}
	return a
}

// factorize runs one uncancellable decomposition of the n×n src.
func factorize(src []float64, n int) (lu []float64, piv []int, logDet float64, work int64) {
	lu, piv = make([]float64, n*n), make([]int, n)
	r := luRun{next: luCheckEvery}
	logDet, ok := r.factorize(lu, src, n, piv)
	if !ok {
		panic("an uncancellable decomposition stopped")
	}
	return lu, piv, logDet, r.work
}

// P·A = L·U with |l_ij| ≤ 1, and log|det A| as gonum computes it, for
// sizes below, at and around the panel and tile widths.
func TestLUIsCorrect(t *testing.T) {
	sizes := []int{1, 2, 3, 7, luBlock - 1, luBlock, luBlock + 1, 2*luBlock + 5, 100, luTile + luBlock + 3}
	for _, n := range sizes {
		for _, src := range [][]float64{randomMatrix(n, uint64(n)), newLUWork(n).a} {
			lu, piv, logDet, _ := factorize(src, n)

			// P·A: the swaps applied in order, as dgetrf records them.
			pa := append([]float64(nil), src...)
			swaps := 0
			for i, p := range piv {
				if p < i || p >= n {
					t.Fatalf("n=%d: piv[%d] = %d", n, i, p)
				}
				if p != i {
					swaps++
					for c := range n {
						pa[i*n+c], pa[p*n+c] = pa[p*n+c], pa[i*n+c]
					}
				}
			}
			l, u := mat.NewDense(n, n, nil), mat.NewDense(n, n, nil)
			for i := range n {
				for j := range n {
					switch {
					case j < i:
						if v := lu[i*n+j]; math.Abs(v) > 1 {
							t.Fatalf("n=%d: |l[%d][%d]| = %v > 1: the pivot was not the largest", n, i, j, v)
						}
						l.Set(i, j, lu[i*n+j])
					case j == i:
						l.Set(i, j, 1)
						u.Set(i, j, lu[i*n+j])
					default:
						u.Set(i, j, lu[i*n+j])
					}
				}
			}
			var prod mat.Dense
			prod.Mul(l, u)
			if !mat.EqualApprox(&prod, mat.NewDense(n, n, pa), 1e-9*float64(n)) {
				t.Fatalf("n=%d: L·U differs from P·A", n)
			}

			var g mat.LU
			g.Factorize(mat.NewDense(n, n, append([]float64(nil), src...)))
			wantLogDet, wantSign := g.LogDet()
			if math.Abs(logDet-wantLogDet) > 1e-9*math.Max(1, math.Abs(wantLogDet)) {
				t.Errorf("n=%d: log|det| = %v, gonum says %v", n, logDet, wantLogDet)
			}
			sign := 1.0
			if swaps%2 == 1 {
				sign = -1
			}
			for i := range n {
				if lu[i*n+i] < 0 {
					sign = -sign
				}
			}
			if sign != wantSign {
				t.Errorf("n=%d: sign(det) = %v, gonum says %v", n, sign, wantSign)
			}
		}
	}
}

// A singular matrix is decomposed to the end without a panic, like dgetrf.
func TestLUSingular(t *testing.T) {
	n := 40
	a := randomMatrix(n, 3)
	for i := range n {
		a[i*n+5] = 0 // a zero column
	}
	if _, _, logDet, _ := factorize(a, n); !math.IsInf(logDet, -1) {
		t.Fatalf("log|det| of a singular matrix = %v, want -Inf", logDet)
	}
}

// The work counter counts the flops of LU (2/3·n³) plus the copy and the
// panel's row visits (weighted, O(n²)), so that checks at a fixed count
// come at about even intervals of time.
func TestLUWorkCount(t *testing.T) {
	for _, n := range []int{50, 300, 700} {
		_, _, _, work := factorize(newLUWork(n).a, n)
		cube := 2 * float64(n) * float64(n) * float64(n) / 3
		square := float64(luCopyCost+4*luRowCost) * float64(n) * float64(n)
		if w := float64(work); w < cube || w > cube+square {
			t.Errorf("n=%d: work = %d, want 2/3·n³ = %.0f plus at most %.0f", n, work, cube, square)
		}
		t.Logf("n=%d: work = 2/3·n³ + %.1f·n²", n, (float64(work)-cube)/float64(n*n))
	}
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

// A cancel that arrives while the decomposition runs (from another
// goroutine, as the worker's cancel does) stops it at the next check: the
// work counter ends within one check interval of where the cancel came,
// far short of a whole decomposition. The decomposition is held at a
// check until the cancel has happened, so the test does not depend on
// timing.
func TestLoadCancelStopsRunningDecomposition(t *testing.T) {
	const n = 400
	_, _, _, total := factorize(newLUWork(n).a, n)

	inner := &counting{}
	p := WithLoad(inner, n).(*loaded)
	started, cancelled := make(chan int64), make(chan struct{})
	var last int64 // written and read by the evaluating goroutine, then after it ended
	var once sync.Once
	p.lu.onCheck = func(work int64) {
		last = work
		if work >= total/10 {
			once.Do(func() {
				started <- work
				<-cancelled
			})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		f   float64
		err error
	}
	res := make(chan result)
	go func() {
		f, err := p.Eval(ctx, []float64{0.5})
		res <- result{f, err}
	}()
	at := <-started
	cancel()
	close(cancelled)
	r := <-res

	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Eval cancelled mid-decomposition = %v, %v; want context.Canceled", r.f, r.err)
	}
	if inner.n.Load() != 0 {
		t.Error("the inner problem ran after the cancel")
	}
	if last-at > luCheckEvery {
		t.Errorf("work went on from %d to %d after the cancel (one check interval is %d)", at, last, luCheckEvery)
	}
	if last > total/2 {
		t.Errorf("stopped at work %d of %d: the cancel was not honoured mid-run", last, total)
	}
	t.Logf("cancelled at work %d, stopped at %d, of %d", at, last, total)

	// The slot's scratch went back to the pool in a usable state.
	p.lu.onCheck = nil
	if f, err := p.Eval(context.Background(), []float64{0.5}); err != nil || f != 1 {
		t.Fatalf("Eval after a cancelled one = %v, %v; want 1", f, err)
	}
}

// Cancellation is looked at during the copy of a large matrix too, before
// any flop: a check comes within luCheckEvery elements.
func TestLoadCancelDuringCopy(t *testing.T) {
	w := newLUWork(1000)
	ctx, cancel := context.WithCancel(context.Background())
	var checks []int64
	w.onCheck = func(work int64) {
		checks = append(checks, work)
		cancel()
	}
	if _, err := w.run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run = %v, want context.Canceled", err)
	}
	if len(checks) != 1 || checks[0] > luCheckEvery+luCopyCost*1000 {
		t.Fatalf("checks at %v: want one, within the first %d units of copying", checks, luCheckEvery+luCopyCost*1000)
	}
}

// Many goroutines share one load (read-only matrix, pooled scratch) and
// all get the same result; run with -race.
func TestLoadConcurrentUse(t *testing.T) {
	w := newLUWork(90)
	want, err := w.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 6 {
		wg.Go(func() {
			for range 5 {
				if got, err := w.run(context.Background()); err != nil || math.Float64bits(got) != math.Float64bits(want) {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d concurrent runs differed from the first", bad.Load())
	}
}

// Steady state allocates nothing: the scratch comes from the pool.
func TestLoadAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	p := WithLoad(&counting{}, 60)
	x := []float64{0.25}
	p.Eval(context.Background(), x) // fill the pool
	if allocs := testing.AllocsPerRun(20, func() { p.Eval(context.Background(), x) }); allocs != 0 {
		t.Fatalf("an evaluation allocates %v times", allocs)
	}
}

// A size above MaxLoadN (a hostile or mistaken -lu, possibly from the
// network) allocates nothing and fails every evaluation with a message
// that names the limit.
func TestWithLoadRefusesHugeSizes(t *testing.T) {
	for _, n := range []int{MaxLoadN + 1, 4_000_000_000} {
		p := WithLoad(&counting{}, n)
		_, err := p.Eval(context.Background(), []float64{0})
		if err == nil || !strings.Contains(err.Error(), "maximum") {
			t.Errorf("WithLoad(p, %d).Eval = %v, want an error naming the maximum", n, err)
		}
	}
}

func TestLoadBytes(t *testing.T) {
	tests := []struct {
		n, slots int
		want     int64
	}{
		{0, 4, 0},
		{-3, 4, 0},
		{10, 0, 800},
		{10, 1, 1600},
		{MaxLoadN, 1, 2 * 128 << 20},
		{MaxLoadN, 1 << 16, (1<<16 + 1) * 128 << 20},
	}
	for _, tt := range tests {
		if got := LoadBytes(tt.n, tt.slots); got != tt.want {
			t.Errorf("LoadBytes(%d, %d) = %d, want %d", tt.n, tt.slots, got, tt.want)
		}
	}
}

func TestCalibrate(t *testing.T) {
	if _, err := Calibrate(0); err == nil {
		t.Error("Calibrate(0) succeeded")
	}
	start := time.Now()
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
	t.Logf("1 ms ≈ LU %d×%d (calibrated in %v)", small, small, time.Since(start))
}

// A target that needs more than MaxLoadN is refused, after a calibration
// that stays short (it never times a decomposition near the cap).
func TestCalibrateRefusesBeyondMax(t *testing.T) {
	if testing.Short() {
		t.Skip("times decompositions for about a second")
	}
	_, err := Calibrate(time.Hour)
	if err == nil || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("Calibrate(1h) = %v, want an error naming the maximum", err)
	}
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
