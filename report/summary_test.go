package report

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleReport is a small run as esrun -report writes it.
func sampleReport(t *testing.T) string {
	t.Helper()
	type gen struct {
		Gen   int     `json:"gen"`
		Evals int     `json:"evals"`
		Best  float64 `json:"best"`
		Mean  float64 `json:"mean"`
	}
	type sgen struct {
		Gen      int     `json:"gen"`
		Total    float64 `json:"total"`
		SyncWait float64 `json:"sync_wait"`
		Comm     float64 `json:"comm"`
		Compute  float64 `json:"compute"`
	}
	var gens []gen
	var sgens []sgen
	for g := 0; g <= 30; g++ {
		gens = append(gens, gen{Gen: g, Evals: 30 + 70*g, Best: 1e5 / float64(g+1), Mean: 3e5 / float64(g+1)})
		sgens = append(sgens, sgen{Gen: g, Total: 0.1, SyncWait: 0.02 + 0.001*float64(g%5), Comm: 0.01, Compute: 0.07 - 0.001*float64(g%5)})
	}
	rep := map[string]any{
		"config":      map[string]any{"problem": "ridge", "strategy": "es", "mu": 30, "lambda": 70, "dim": 30, "seed": 1, "evaluator": "grid", "grid": map[string]any{"sched": "r3q"}},
		"generations": gens, "stop": "generations", "best": map[string]any{"f": 3225.8}, "evals": 2130, "wall_seconds": 3.1,
		"schedule": map[string]any{
			"policy": "r3q", "workers": 2, "total": 3.1, "sync_wait": 0.7, "comm": 0.31, "comm_paper": 1.2, "compute": 2.09,
			"lb": 2.0, "barrier_bound": 2.2, "round_trip": 0.002, "efficiency_lb": 0.645, "efficiency_barrier": 0.71,
			"originals": 2130, "replicas": 40, "cancels_held": 25, "cancels_running": 10, "cancels_late": 5, "wasted": 0.3,
			"generations": sgens,
			"per_worker": []map[string]any{
				{"worker": 1, "name": "lab-pc1", "slots": 2, "present": 3.1, "busy": 5.0, "comm": 0.2, "comm_paper": 0.6, "accepted": 1500, "mean_exec": 0.003, "round_trip": 0.002},
				{"worker": 2, "name": "lab-pc2", "slots": 1, "present": 3.0, "busy": 1.5, "comm": 0.4, "comm_paper": 1.5, "accepted": 630, "mean_exec": 0.004, "round_trip": 0.003},
			},
		},
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSummaryAndPicture(t *testing.T) {
	path := sampleReport(t)
	out := filepath.Join(t.TempDir(), "run.png")
	rep, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Draw(rep, out, PNG, 900, 1100); err != nil {
		t.Fatal(err)
	}
	summary := Summary(rep)
	for _, want := range []string{"schedule r3q on 2 workers: total 3.1s = compute 2.09s (67.4%) + sync wait 700ms (22.6%) + comm 310ms (10.0%)",
		"the paper's comm", "cancels 25 held, 10 running, 5 late", "lab-pc1", "80.6%", "best fitness: 3.225800e+03"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	img := readPNG(t, out, 900, 1100)
	// Not blank: many pixels that are not the background, in several
	// colours (the three parts of the bars, the two lines).
	colours := map[color.RGBA]int{}
	ink := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: 0xff}
			if c != (color.RGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}) {
				ink++
			}
			colours[c]++
		}
	}
	if total := (b.Dx() / 2) * (b.Dy() / 2); ink < total/20 {
		t.Errorf("picture nearly blank: %d of %d sampled pixels drawn", ink, total)
	}
	for _, want := range []color.RGBA{colCompute, colSync, colComm, colBest, colMean} {
		if colours[want] == 0 {
			t.Errorf("colour %v not drawn", want)
		}
	}
}

// readPNG decodes the PNG file at path, which must be w×h pixels.
func readPNG(t *testing.T, path string, w, h int) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("picture is %v, want %d×%d", b, w, h)
	}
	return img
}
