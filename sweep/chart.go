package sweep

import (
	"fmt"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/sched/sim"
)

// The three parts of a bar, bottom to top, as in the paper's Fig. 5. The
// ledger's comm lies outside the sync wait, so the three add up to the
// total; the clamps only keep a bar sane if a summary were inconsistent.
var parts = []struct {
	name  string
	color color.Color
	of    func(s *sim.Summary) time.Duration
}{
	{"compute", color.RGBA{R: 0x4c, G: 0x72, B: 0xb0, A: 0xff}, func(s *sim.Summary) time.Duration { return max(s.Compute, 0) }},
	{"sync wait", color.RGBA{R: 0xdd, G: 0x84, B: 0x52, A: 0xff}, func(s *sim.Summary) time.Duration { return max(s.SyncWait, 0) }},
	{"comm", color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff}, func(s *sim.Summary) time.Duration { return max(s.Comm, 0) }},
}

// DrawChart draws the sweep into path as a PNG: one panel per grain,
// groups of bars per added delay, one bar per policy, each stacked
// compute / sync wait / comm in seconds.
func (r *Result) DrawChart(path string) error {
	c, settings, sums := r.Config, r.Settings, r.Sums
	n := len(c.Policies)
	var rows [][]*plot.Plot
	for gi, g := range c.Grains {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s set, %v tasks: mean of %d trials", c.Set.Name, g, c.Trials)
		p.Y.Label.Text = "time [s]"
		// Bars at x = group*(n+1) + policy: one empty position between groups.
		var labels []string
		var cols [][]*sim.Summary // per position: nil in the gaps
		for si, st := range settings {
			if st.Grain != g {
				continue
			}
			if len(cols) > 0 {
				labels = append(labels, "")
				cols = append(cols, nil)
			}
			for j := 0; j < n; j++ {
				label := c.Policies[j]
				if j == n/2 {
					// The group's delay, on a second line under its middle bar.
					label += "\n+" + st.Delay.String() + " delay"
				}
				labels = append(labels, label)
				cols = append(cols, []*sim.Summary{&sums[si*n+j]})
			}
		}
		var below *plotter.BarChart
		ymax := 0.0
		for _, part := range parts {
			vals := make(plotter.Values, len(cols))
			for x, c := range cols {
				if c != nil {
					vals[x] = part.of(c[0]).Seconds()
				}
			}
			bar, err := plotter.NewBarChart(vals, vg.Points(14))
			if err != nil {
				return fmt.Errorf("png: %w", err)
			}
			bar.Color = part.color
			bar.LineStyle.Width = 0
			if below != nil {
				bar.StackOn(below)
			}
			p.Add(bar)
			if gi == 0 {
				p.Legend.Add(part.name, bar)
			}
			below = bar
		}
		for x := range cols {
			ymax = max(ymax, below.BarHeight(x))
		}
		p.Y.Min, p.Y.Max = 0, ymax*1.3 // headroom for the legend
		p.NominalX(labels...)
		p.Legend.Top = true
		p.Legend.Left = true
		rows = append(rows, []*plot.Plot{p})
	}
	width := vg.Length(max(6, 0.35*float64(len(c.Policies)*len(c.Delays)+len(c.Delays)))) * vg.Inch
	height := vg.Length(3.2*float64(len(rows))) * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("png: %w", err)
	}
	return nil
}
