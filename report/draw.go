package report

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/esgrid/esgrid/internal/atomicfile"
)

var (
	colCompute = color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}
	colSync    = color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}
	colComm    = color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff}
	colBest    = color.RGBA{R: 0x55, G: 0xa8, B: 0x68, A: 0xff}
	colMean    = color.RGBA{R: 0xc4, G: 0x4e, B: 0x52, A: 0xff}
)

// panel is one plot of the picture, its legend (drawn beside it, outside
// the plot) and its share of the picture's height.
type panel struct {
	p      *plot.Plot
	legend plot.Legend
	weight float64
}

// panels are the plots of rep, top to bottom.
func panels(rep *Report) ([]panel, error) {
	var ps []panel
	s := rep.Schedule
	if s != nil && len(s.Generations) > 0 {
		p, l, err := timePlot(rep)
		if err != nil {
			return nil, err
		}
		ps = append(ps, panel{p, l, 1})
		if p, l := efficiencyPlot(rep); p != nil {
			ps = append(ps, panel{p, l, 0.8})
		}
	}
	if p, l := convergencePlot(rep); p != nil {
		ps = append(ps, panel{p, l, 1})
	}
	if s != nil && len(s.PerWorker) > 0 {
		p, err := workerPlot(rep)
		if err != nil {
			return nil, err
		}
		ps = append(ps, panel{p, plot.NewLegend(), 0.8})
	}
	if m := buildTimeline(rep); m != nil && len(m.Rows) > 0 {
		p, l := timelinePlot(m)
		// Room for every worker's row, at least as much as another plot.
		ps = append(ps, panel{p, l, math.Max(1, 0.3+0.12*float64(len(m.Rows)))})
	}
	if len(ps) == 0 {
		return nil, errors.New("nothing to draw")
	}
	return ps, nil
}

// drawPanels lays the panels out on c: one above the other, each plot's
// data area starting and ending at the same x, the legends in a column
// on the right.
func drawPanels(c draw.Canvas, ps []panel) {
	const pad = 4 * vg.Millimeter
	c = draw.Crop(c, pad, -pad, pad, -pad)
	var legendW vg.Length
	for _, p := range ps {
		legendW = max(legendW, legendWidth(p.legend))
	}
	if legendW > 0 {
		legendW += pad
	}
	plots := draw.Crop(c, 0, -legendW, 0, 0)
	total := 0.0
	for _, p := range ps {
		total += p.weight
	}
	gap := 6 * vg.Millimeter
	height := plots.Max.Y - plots.Min.Y - gap*vg.Length(len(ps)-1)
	canvases := make([]draw.Canvas, len(ps))
	top := plots.Max.Y
	for i, p := range ps {
		h := height * vg.Length(p.weight/total)
		canvases[i] = draw.Canvas{Canvas: plots.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: plots.Min.X, Y: top - h}, Max: vg.Point{X: plots.Max.X, Y: top}}}
		top -= h + gap
	}
	// Align the data areas.
	var left, right vg.Length
	for i, p := range ps {
		d := p.p.DataCanvas(canvases[i])
		left = max(left, d.Min.X-canvases[i].Min.X)
		right = max(right, canvases[i].Max.X-d.Max.X)
	}
	for i, p := range ps {
		d := p.p.DataCanvas(canvases[i])
		ci := draw.Crop(canvases[i], left-(d.Min.X-canvases[i].Min.X), -(right - (canvases[i].Max.X - d.Max.X)), 0, 0)
		p.p.Draw(ci)
		d = p.p.DataCanvas(ci)
		lc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: c.Max.X - legendW + pad, Y: d.Min.Y}, Max: vg.Point{X: c.Max.X, Y: d.Max.Y}}}
		p.legend.Top, p.legend.Left = true, true
		p.legend.Draw(lc)
	}
}

// legendWidth is the width of l's widest entry with its thumbnail.
func legendWidth(l plot.Legend) vg.Length {
	c := draw.New(vgimg.New(1000, 1000))
	r := l.Rectangle(c)
	return r.Max.X - r.Min.X
}

// Format is a picture's file format: PNG or SVG.
type Format string

// The formats Draw writes.
const (
	PNG Format = "png" // a bitmap
	SVG Format = "svg" // a vector picture, for the web or print
)

// Draw draws the run into path, in format f, width × height pixels
// (an SVG of the same size at 96 pixels per inch): the time per
// generation, the efficiency per generation, the convergence, the
// workers' utilisation and their timeline, one above the other. The file
// is written whole or not at all, mode 0644.
func Draw(rep *Report, path string, f Format, width, height int) error {
	ps, err := panels(rep)
	if err != nil {
		return err
	}
	w, h := vg.Length(width)*vg.Inch/vgimg.DefaultDPI, vg.Length(height)*vg.Inch/vgimg.DefaultDPI
	var out io.WriterTo
	switch f {
	case SVG:
		c := vgsvg.New(w, h)
		fillWhite(c, w, h)
		drawPanels(draw.New(c), ps)
		out = c
	default:
		c := vgimg.New(w, h)
		fillWhite(c, w, h)
		drawPanels(draw.New(c), ps)
		out = vgimg.PngCanvas{Canvas: c}
	}
	if err := writeFile(path, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// fillWhite paints the background, which is otherwise transparent.
func fillWhite(c vg.Canvas, w, h vg.Length) {
	var p vg.Path
	p.Move(vg.Point{})
	p.Line(vg.Point{X: w})
	p.Line(vg.Point{X: w, Y: h})
	p.Line(vg.Point{Y: h})
	p.Close()
	c.SetColor(color.White)
	c.Fill(p)
}

// writeFile writes a file whole or not at all (atomicfile.Write), mode
// 0644 whatever the umask: the picture is for others to read.
func writeFile(path string, out io.WriterTo) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := out.WriteTo(w)
		return err
	})
}

// timePlot: per generation, compute, sync wait and comm stacked (esgrid's
// comm, so that the three add up to the generation's duration).
func timePlot(rep *Report) (*plot.Plot, plot.Legend, error) {
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
	p.Y.Tick.Marker = readableTicks{}
	l := plot.NewLegend()
	width := vg.Length(math.Max(1, math.Min(12, 900/float64(len(gens)))))
	var below *plotter.BarChart
	for _, part := range parts {
		vals := make(plotter.Values, len(gens))
		for i := range gens {
			vals[i] = math.Max(part.of(i), 0) * 1000
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, l, err
		}
		bc.Color = part.col
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		l.Add(part.name, bc)
	}
	p.X.Tick.Marker = genTicks(len(gens), func(i int) int { return gens[i].Gen })
	// Bar i of n in [i−½, i+½]: generation by generation under the
	// efficiency plot.
	p.X.Min, p.X.Max = -0.5, float64(len(gens))-0.5
	return p, l, nil
}

// genTicks labels the generations, not the bars' positions, at a
// readable step.
func genTicks(n int, gen func(i int) int) plot.Ticker {
	step := max(1, n/10)
	var ticks []plot.Tick
	for i := 0; i < n; i += step {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: fmt.Sprint(gen(i))})
	}
	return plot.ConstantTicks(ticks)
}

// efficiencyPlot: per generation, its LB over its time, as the report
// holds them. The axis shows 0–100 % and a margin, and stretches to any
// value above: a generation faster than its lower bound is an error to
// see, not to clip.
func efficiencyPlot(rep *Report) (*plot.Plot, plot.Legend) {
	s := rep.Schedule
	l := plot.NewLegend()
	var xys plotter.XYs
	top := 0.0
	for _, g := range s.Generations {
		if g.Total > 0 && g.LB > 0 {
			e := 100 * g.LB / g.Total
			xys = append(xys, plotter.XY{X: float64(g.Gen), Y: e})
			top = math.Max(top, e)
		}
	}
	if len(xys) == 0 {
		return nil, l
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Efficiency per generation: its LB ÷ its time (the run: %s of LB %s)", share(s.EfficiencyLB, 1), seconds(s.LB))
	p.X.Label.Text = "generation"
	p.Y.Label.Text = "efficiency [%]"
	p.Y.Min, p.Y.Max = 0, math.Max(110, top*1.05)
	p.Y.Tick.Marker = readableTicks{}
	p.X.Tick.Marker = readableTicks{}
	p.Add(plotter.NewGrid())
	ref, _ := plotter.NewLine(plotter.XYs{{X: xys[0].X, Y: 100}, {X: xys[len(xys)-1].X, Y: 100}})
	if ref != nil {
		ref.Color = colComm
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
		l.Add("100 % = at the lower bound", ref)
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err == nil {
		line.Color, line.Width = colCompute, vg.Points(1.2)
		points.Color, points.Shape = colCompute, draw.CircleGlyph{}
		points.Radius = vg.Points(math.Max(0.8, math.Min(2.2, 200/float64(len(xys)))))
		p.Add(line, points)
		l.Add("LB ÷ time", line, points)
	}
	p.X.Min, p.X.Max = xys[0].X-0.5, xys[len(xys)-1].X+0.5
	return p, l
}

// convergencePlot: the best and mean fitness of the parents per
// generation, on a logarithmic scale when every value is positive.
func convergencePlot(rep *Report) (*plot.Plot, plot.Legend) {
	l := plot.NewLegend()
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
		return nil, l
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Convergence: %s on %s, %d-D (best %s)", rep.Config.Strategy, rep.Config.Problem, rep.Config.Dim, fitness(rep.Best.F))
	p.X.Label.Text = "generation"
	p.Y.Label.Text = "fitness"
	p.X.Tick.Marker = readableTicks{}
	p.Y.Tick.Marker = readableTicks{}
	if positive {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = powerTicks{}
		p.Y.Label.Text = "fitness (log scale)"
	}
	for _, c := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{{"best", best, colBest}, {"mean of the parents", mean, colMean}} {
		if len(c.xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(c.xys)
		if err != nil {
			continue
		}
		line.Color = c.col
		line.Width = vg.Points(1.5)
		p.Add(line)
		l.Add(c.name, line)
	}
	if positive && p.Y.Min == p.Y.Max {
		// One value (a single generation, or μ = 1 on a plateau): the
		// plot widens an empty range by ±1, below zero for any value up
		// to 1, and a log scale panicked there. A decade each side.
		// Kept within float64 at its ends.
		v := p.Y.Min
		p.Y.Min, p.Y.Max = v/10, v*10
		if math.IsInf(p.Y.Max, 1) {
			p.Y.Min, p.Y.Max = v/100, v
		}
		if p.Y.Min == 0 {
			p.Y.Min, p.Y.Max = v, v*100
		}
	}
	p.Add(plotter.NewGrid())
	return p, l
}

// workerPlot: each worker's utilisation, the share of its slot-time while
// present that it spent executing, printed on its bar, with when it left
// if it left before the end.
func workerPlot(rep *Report) (*plot.Plot, error) {
	s := rep.Schedule
	ws := s.PerWorker
	vals := make(plotter.Values, len(ws))
	names := make([]string, len(ws))
	var labels plotter.XYLabels
	top := 100.0
	// The run's clock ends with its last generation: total sums the
	// generations alone, without the time between them.
	end := s.Total
	if g := s.Generations; len(g) > 0 {
		end = g[len(g)-1].End
	}
	for i, w := range ws {
		vals[i] = 100 * utilisation(w.Busy, w.Slots, w.Present)
		top = math.Max(top, vals[i])
		names[i] = w.Name
		if names[i] == "" {
			names[i] = fmt.Sprint(w.Worker)
		}
		names[i] = fmt.Sprintf("%s (%d)", names[i], w.Slots)
		text := fmt.Sprintf("%.1f%%", vals[i])
		if w.Left != nil && *w.Left < end {
			text += fmt.Sprintf("\npresent %s of %s", secondsTick(w.Present), secondsTick(end))
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: vals[i]})
		labels.Labels = append(labels.Labels, text)
	}
	p := plot.New()
	p.Title.Text = "Utilisation per worker (slots): share of its slot-time executing while present"
	p.Y.Label.Text = "utilisation [%]"
	p.Y.Min, p.Y.Max = 0, top*1.25 // room for the values above the bars
	p.Y.Tick.Marker = readableTicks{}
	bc, err := plotter.NewBarChart(vals, vg.Length(math.Max(2, math.Min(40, 800/float64(len(ws))))))
	if err != nil {
		return nil, err
	}
	bc.Color = colCompute
	bc.LineStyle.Width = 0
	p.Add(bc)
	if len(ws) <= 40 {
		p.NominalX(names...)
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].XAlign, lb.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
			lb.TextStyle[i].Font.Size = vg.Points(9)
		}
		lb.Offset = vg.Point{Y: vg.Points(2)}
		p.Add(lb)
	}
	// Room for the first and last bars.
	p.X.Min, p.X.Max = -0.75, float64(len(ws))-0.25
	return p, nil
}
