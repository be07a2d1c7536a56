package bag

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestPluginName(t *testing.T) {
	name := Name(40, 10000, 480)
	if name != "mandel-40-10000-480" {
		t.Fatalf("name %q", name)
	}
	m, err := ParseName(name)
	if err != nil || m.Strips != 40 || m.MaxIter != 10000 || m.Width != 480 || m.Height != 480 || m.XMin != -0.6 {
		t.Fatalf("parse: %+v, %v", m, err)
	}
	for _, bad := range []string{"mandel-40-10000", "mandelbrot-1-2-3", "mandel-0-10-10", "mandel-20-10-10", "mandel-x-1-1"} {
		if _, err := ParseName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		if _, err := Plugin(bad); err == nil {
			t.Errorf("plugin %q accepted", bad)
		}
	}
	p, err := Plugin(name)
	if err != nil || p.Name() != name {
		t.Fatalf("plugin %q: %v, %v", name, p, err)
	}
}

// The reference holds each strip's exact value (a tiny image, read back
// as written), and the prediction simulates the bag for measured workers.
func TestReferenceAndPrediction(t *testing.T) {
	ctx := context.Background()
	made, err := NewReference(ctx, 12, 200, 48)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ref.json")
	if err := made.Write(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReference(path, Name(13, 200, 48), 13); err == nil {
		t.Error("a reference of 12 strips read as one of 13")
	}
	r, err := ReadReference(path, Name(12, 200, 48), 12)
	if err != nil {
		t.Fatal(err)
	}
	m := Image(12, 200, 48)
	for i, v := range r.Values {
		want, err := m.Strip(ctx, i)
		if err != nil || v != want {
			t.Fatalf("strip %d: %d, want %d (%v)", i, v, want, err)
		}
	}
	// Two workers, one twice the other's speed: the bag of 12 takes about
	// the work over 3 (speed units), and the floor is below it.
	ws := []WorkerFigures{{Name: "a", Slots: 1, Speed: 1}, {Name: "b", Slots: 1, Speed: 2}}
	total, floor, err := Predict("wq", 0, 0, r, ws)
	if err != nil {
		t.Fatal(err)
	}
	var work float64
	for i := range r.Values {
		work += r.Grain(i).Seconds()
	}
	if !(floor > 0 && floor <= total && total >= work/3) {
		t.Errorf("predicted %v, floor %v, work %v", total, floor, work)
	}
	if _, _, err := Predict("wq", 0, 0, r, []WorkerFigures{{Name: "a", Slots: 1}}); err == nil {
		t.Error("a prediction without a worker that returned a strip")
	}
}

func TestImbalance(t *testing.T) {
	ws := []WorkerFigures{{Slots: 1, Compute: 4}, {Slots: 2, Compute: 2}}
	// Per slot: 4, 1, 1 (mean 2): 4/2.
	if got := Imbalance(ws); got != 2 {
		t.Errorf("imbalance %v, want 2", got)
	}
}

// The figures print as a line for the bag, one per worker and the
// imbalance; strips that differ from the reference say so.
func TestPrint(t *testing.T) {
	f := &Figures{Name: "mandel-4-10-10", Policy: "wq", Strips: 4, Total: 2, Predicted: 2.2, Optimum: 1.5, Identical: true,
		Workers: []WorkerFigures{{Name: "a", Slots: 1, Compute: 1.5, Strips: 3, RoundTrip: 0.001, Speed: 1}, {Name: "b", Slots: 2, Compute: 0.5, Strips: 1}}}
	var out strings.Builder
	f.Print(&out)
	for _, want := range []string{"mandel-4-10-10 wq: 4 strips in 2.00 s", "+10.0%", "every strip equals the reference", "  a ", "  b ", "imbalance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	f.Identical = false
	out.Reset()
	if f.Print(&out); !strings.Contains(out.String(), "STRIPS DIFFER") {
		t.Errorf("differing strips not said:\n%s", out.String())
	}
}
