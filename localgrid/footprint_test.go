package localgrid

import (
	"testing"

	"github.com/esgrid/esgrid/problems"
)

// The estimate grows with what sizes a run, and a default-sized run is
// far below any machine's budget.
func TestMemoryEstimate(t *testing.T) {
	base := Footprint{Mu: 30, Lambda: 70, Dim: 30, Local: 8, LocalSlots: 1}
	if b := base.MemoryEstimate(); b > 100<<20 {
		t.Errorf("default run: %v bytes", b)
	}
	for _, tt := range []struct {
		name string
		f    Footprint
	}{
		{"dim", Footprint{Mu: 30, Lambda: 70, Dim: 3000}},
		{"mu", Footprint{Mu: 3000, Lambda: 70, Dim: 30}},
		{"lambda", Footprint{Mu: 30, Lambda: 7000, Dim: 30}},
		{"load", Footprint{Mu: 30, Lambda: 70, Dim: 30, LoadN: 1000}},
		{"cma", Footprint{Mu: 30, Lambda: 70, Dim: 1000, CMA: true}},
	} {
		f := tt.f
		f.Local, f.LocalSlots = base.Local, base.LocalSlots
		b := base
		if f.CMA {
			b.Dim = f.Dim
		}
		if f.MemoryEstimate() <= b.MemoryEstimate() {
			t.Errorf("%s: the estimate does not grow", tt.name)
		}
	}
	// Each local agent builds its own load; an in-process pool one.
	f1 := Footprint{Mu: 30, Lambda: 70, Dim: 30, LoadN: 2000, Local: 1, LocalSlots: 1}
	f4 := f1
	f4.Local = 4
	if d := f4.MemoryEstimate() - f1.MemoryEstimate(); d < 3*float64(problems.LoadBytes(2000, 1)) {
		t.Errorf("3 more agents with a 2000×2000 load add %v bytes", d)
	}
	pool := Footprint{Mu: 30, Lambda: 70, Dim: 30, LoadN: 2000, InProcess: true, Slots: 1, Local: 4, LocalSlots: 1}
	if pool.MemoryEstimate() >= f4.MemoryEstimate() {
		t.Error("an in-process pool counts the local agents' loads")
	}
}

// String names the run as a refusal says it.
func TestFootprintString(t *testing.T) {
	for _, tt := range []struct {
		f    Footprint
		want string
	}{
		{Footprint{Mu: 30, Lambda: 70, Dim: 30, Local: 2, LocalSlots: 1}, "a (30+70)-ES in 30 dimensions on 2 local workers × 1 slot"},
		{Footprint{Mu: 30, Lambda: 70, Dim: 30}, "a (30+70)-ES in 30 dimensions"},
		{Footprint{Lambda: 12, Dim: 5, CMA: true, LoadN: 100, InProcess: true, Slots: 4}, "a CMA-ES with λ = 12 in 5 dimensions with an LU load of 100×100 on 4 slots"},
	} {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}
