package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colCompute = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	colSync    = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
	colComm    = color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff}
	colBest    = color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff}
	colMean    = color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}
)

// drawReport draws the run into a PNG of width × height pixels: the time
// per generation, the convergence and the workers' utilisation, one above
// the other. The file is written whole or not at all.
func drawReport(rep *report, path string, width, height int) error {
	var plots []*plot.Plot
	if s := rep.Schedule; s != nil && len(s.Generations) > 0 {
		p, err := timePlot(rep)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	if p := convergencePlot(rep); p != nil {
		plots = append(plots, p)
	}
	if s := rep.Schedule; s != nil && len(s.PerWorker) > 0 {
		p, err := workerPlot(rep)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return errors.New("nothing to draw")
	}
	img := vgimg.New(vg.Length(width)*vg.Inch/vgimg.DefaultDPI, vg.Length(height)*vg.Inch/vgimg.DefaultDPI)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// timePlot: per generation, compute, sync wait and comm stacked (esgrid's
// comm, so that the three add up to the generation's duration).
func timePlot(rep *report) (*plot.Plot, error) {
	s := rep.Schedule
	gens := s.Generations
	parts := []struct {
		name string
		col  color.Color
		of   func(i int) float64
	}{
		{"compute", colCompute, func(i int) float64 { return gens[i].Compute }},
		{"sync wait", colSync, func(i int) float64 { return gens[i].SyncWait }},
		{"comm", colComm, func(i int) float64 { return gens[i].Comm }},
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Time per generation: %s on %d workers (total %s: compute %s, sync wait %s, comm %s)",
		s.Policy, s.Workers, seconds(s.Total), share(s.Compute, s.Total), share(s.SyncWait, s.Total), share(s.Comm, s.Total))
	p.X.Label.Text = "generation"
	p.Y.Label.Text = "time [ms]"
	p.Legend.Top = true
	width := vg.Length(math.Max(1, math.Min(12, 900/float64(len(gens)))))
	var below *plotter.BarChart
	for _, part := range parts {
		vals := make(plotter.Values, len(gens))
		for i := range gens {
			vals[i] = math.Max(part.of(i), 0) * 1000
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bc.Color = part.col
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part.name, bc)
	}
	// Label the generations, not the bars' positions, at a readable step.
	step := max(1, len(gens)/10)
	var ticks []plot.Tick
	for i := 0; i < len(gens); i += step {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: fmt.Sprint(gens[i].Gen)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	return p, nil
}

// convergencePlot: the best and mean fitness of the parents per
// generation, on a logarithmic scale when every value is positive.
func convergencePlot(rep *report) *plot.Plot {
	var best, mean plotter.XYs
	positive := true
	for _, g := range rep.Generations {
		if g.Best != nil && !math.IsInf(*g.Best, 0) {
			best = append(best, plotter.XY{X: float64(g.Gen), Y: *g.Best})
			positive = positive && *g.Best > 0
		}
		if g.Mean != nil && !math.IsInf(*g.Mean, 0) {
			mean = append(mean, plotter.XY{X: float64(g.Gen), Y: *g.Mean})
			positive = positive && *g.Mean > 0
		}
	}
	if len(best) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Convergence: %s on %s, %d-D (best %s)", rep.Config.Strategy, rep.Config.Problem, rep.Config.Dim, fitness(rep.Best.F))
	p.X.Label.Text = "generation"
	p.Y.Label.Text = "fitness"
	if positive {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	for _, l := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{{"best", best, colBest}, {"mean of the parents", mean, colMean}} {
		if len(l.xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xys)
		if err != nil {
			continue
		}
		line.Color = l.col
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Add(plotter.NewGrid())
	return p
}

// workerPlot: each worker's utilisation, the share of its slot-time while
// present that it spent executing.
func workerPlot(rep *report) (*plot.Plot, error) {
	ws := rep.Schedule.PerWorker
	vals := make(plotter.Values, len(ws))
	names := make([]string, len(ws))
	for i, w := range ws {
		vals[i] = 100 * utilisation(w.Busy, w.Slots, w.Present)
		names[i] = w.Name
		if names[i] == "" {
			names[i] = fmt.Sprint(w.Worker)
		}
		names[i] = fmt.Sprintf("%s (%d)", names[i], w.Slots)
	}
	p := plot.New()
	p.Title.Text = "Utilisation per worker (slots): share of its slot-time executing"
	p.Y.Label.Text = "utilisation [%]"
	p.Y.Min, p.Y.Max = 0, 100
	bc, err := plotter.NewBarChart(vals, vg.Length(math.Max(2, math.Min(40, 800/float64(len(ws))))))
	if err != nil {
		return nil, err
	}
	bc.Color = colCompute
	bc.LineStyle.Width = 0
	p.Add(bc)
	if len(names) <= 40 {
		p.NominalX(names...)
	}
	// Room for the first and last bars.
	p.X.Min, p.X.Max = -0.75, float64(len(ws))-0.25
	return p, nil
}
