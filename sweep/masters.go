package sweep

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
)

// Masters is the configuration of the masters experiments (essim
// masters): masters that split when overloaded (docs/papers.md §2).
type Masters struct {
	PNG       string          // the directory the figures are drawn into; "": none
	Workers   []int           // scale: worker counts
	Costs     []time.Duration // scale: a master's time per message
	PerWorker int             // scale: tasks in the bag per worker
	Grain     time.Duration   // scale: mean task time
	Latency   time.Duration   // scale: one-way message delay
	Noise     float64         // scale: sigma of the log-normal task-time noise
	Window    int             // the overload test's n (0: sched.DefaultOverloadWindow)
	Policy    string          // each master's policy, one of sched.Names: wq (the paper's), rwq, eft...
	Seed      uint64          // seed of the task-time noise
}

var mastersRules = []string{sim.SplitOff, sim.SplitPaper, sim.SplitGain}

// paperConfig is the paper's experiment in shape: fine-grained tasks of
// varying length (Mandelbrot strips: log-normal, sigma 0.5) and a master
// cost that saturates one master near P = 12 (a task is 9 × the cost of
// a message, so 9 to 10 workers keep one master busy, and queueing
// flattens its curve from there to P = 13).
func paperConfig(o *Masters, p int, rule string) sim.MastersConfig {
	return sim.MastersConfig{
		Workers: p - 1, Tasks: 2000, Grain: 9 * time.Millisecond, Noise: 0.5,
		Latency: 50 * time.Microsecond, MasterCost: time.Millisecond,
		Rule: rule, Window: o.Window, Policy: o.Policy, Seed: o.Seed,
	}
}

// MastersPaper is the paper's experiment in shape (Fig. 5–7): P = 2…18,
// one master against splitting under the plain rule and the gain rule,
// the masters over time and the per-worker idle time at P = 18; tables on
// w, and the figures into o.PNG if set.
func MastersPaper(ctx context.Context, o *Masters, w io.Writer) error {
	fmt.Fprintln(w, "Masters that split, the paper's setting in shape (docs/papers.md §2, Fig. 5):")
	c := paperConfig(o, 2, sim.SplitOff)
	fmt.Fprintf(w, "%d tasks of %v (log-normal, sigma %.1f), %v one way, %v per message at a master, policy %s, window %s\n",
		c.Tasks, c.Grain, c.Noise, c.Latency, c.MasterCost, o.Policy, windowName(o.Window))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "P\tone master [s]\tpaper [s]\tmasters\tgain [s]\tmasters\tpaper vs one\tgain vs one\t")
	results := map[string][]sim.MastersResult{}
	var ps []int
	for p := 2; p <= 18; p++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ps = append(ps, p)
		for _, rule := range mastersRules {
			r, err := sim.RunMasters(paperConfig(o, p, rule))
			if err != nil {
				return err
			}
			results[rule] = append(results[rule], r)
		}
		one, pa, ga := results[sim.SplitOff][p-2], results[sim.SplitPaper][p-2], results[sim.SplitGain][p-2]
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%d\t%.3f\t%d\t%+.0f%%\t%+.0f%%\t\n", p,
			one.Makespan.Seconds(), pa.Makespan.Seconds(), pa.MastersMax, ga.Makespan.Seconds(), ga.MastersMax,
			100*(pa.Makespan.Seconds()/one.Makespan.Seconds()-1), 100*(ga.Makespan.Seconds()/one.Makespan.Seconds()-1))
	}
	tw.Flush()
	last := len(ps) - 1
	fmt.Fprintf(w, "\nP = 18 (Fig. 6, 7): masters over time and the workers' mean idle time\n")
	for _, rule := range mastersRules {
		r := results[rule][last]
		var pts []string
		for _, pt := range r.Timeline {
			pts = append(pts, fmt.Sprintf("%.3fs:%d", pt.At.Seconds(), pt.Masters))
		}
		if len(pts) > 12 {
			pts = append(pts[:12], "…")
		}
		fmt.Fprintf(w, "  %-5s makespan %.3fs, mean idle %.3fs over %d workers, masters %s\n", rule,
			r.Makespan.Seconds(), r.MeanIdle.Seconds(), len(r.Idle), strings.Join(pts, " "))
	}
	if o.PNG == "" {
		return nil
	}
	// Fig. 5: time against P.
	p := plot.New()
	p.Title.Text = "Fig. 5 in shape: one master vs masters that split"
	p.X.Label.Text = "P (processors)"
	p.Y.Label.Text = "time [s] (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, rule := range mastersRules {
		xy := make(plotter.XYs, len(ps))
		for k, pp := range ps {
			xy[k] = plotter.XY{X: float64(pp), Y: results[rule][k].Makespan.Seconds()}
		}
		if err := addLine(p, ruleLabel(rule), xy, i); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	if err := savePlot(p, filepath.Join(o.PNG, "masters_fig5.png")); err != nil {
		return err
	}
	// Fig. 6: masters over time at P = 18.
	p = plot.New()
	p.Title.Text = "Fig. 6 in shape: masters over time, P = 18"
	p.X.Label.Text = "time [s]"
	p.Y.Label.Text = "masters"
	for i, rule := range mastersRules[1:] {
		r := results[rule][last]
		var xy plotter.XYs
		for k, pt := range r.Timeline {
			if k > 0 {
				xy = append(xy, plotter.XY{X: pt.At.Seconds(), Y: float64(r.Timeline[k-1].Masters)})
			}
			xy = append(xy, plotter.XY{X: pt.At.Seconds(), Y: float64(pt.Masters)})
		}
		xy = append(xy, plotter.XY{X: r.Makespan.Seconds(), Y: float64(r.Timeline[len(r.Timeline)-1].Masters)})
		if err := addLine(p, ruleLabel(rule), xy, i+1); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	if err := savePlot(p, filepath.Join(o.PNG, "masters_fig6.png")); err != nil {
		return err
	}
	// Fig. 7: each worker's idle time, sorted, at P = 18.
	p = plot.New()
	p.Title.Text = "Fig. 7 in shape: idle time per worker, P = 18 (masters left out)"
	p.X.Label.Text = "worker (sorted)"
	p.Y.Label.Text = "idle [s]"
	for i, rule := range mastersRules {
		r := results[rule][last]
		xy := make(plotter.XYs, len(r.Idle))
		for k, d := range r.Idle {
			xy[k] = plotter.XY{X: float64(k + 1), Y: d.Seconds()}
		}
		if err := addLine(p, fmt.Sprintf("%s (mean %.2fs)", ruleLabel(rule), r.MeanIdle.Seconds()), xy, i); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return savePlot(p, filepath.Join(o.PNG, "masters_fig7.png"))
}

// MastersScale goes past the paper: o.Workers workers at each of o.Costs
// per message, the throughput as a fraction of linear; a table on w, and
// a figure into o.PNG if set.
func MastersScale(ctx context.Context, o *Masters, w io.Writer) error {
	fmt.Fprintf(w, "\nPast the paper: %d tasks per worker of %v (log-normal, sigma %.1f), %v one way, policy %s, window %s\n",
		o.PerWorker, o.Grain, o.Noise, o.Latency, o.Policy, windowName(o.Window))
	fmt.Fprintln(w, "throughput as a fraction of linear (workers ÷ grain): over the whole run / over the middle half of the tasks")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\tcost/msg\trule\tmakespan [s]\tfraction\tsteady\tmasters\tsplits\tsuppressed\trequests\tmean idle [s]\t")
	type point struct {
		workers int
		cost    time.Duration
		rule    string
		r       sim.MastersResult
	}
	var pts []point
	for _, c := range o.Costs {
		for _, n := range o.Workers {
			for _, rule := range mastersRules {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := sim.RunMasters(sim.MastersConfig{
					Workers: n, Tasks: n * o.PerWorker, Grain: o.Grain, Noise: o.Noise,
					Latency: o.Latency, MasterCost: c, Rule: rule, Window: o.Window, Policy: o.Policy, Seed: o.Seed,
				})
				if err != nil {
					return err
				}
				pts = append(pts, point{n, c, rule, r})
				fmt.Fprintf(tw, "%d\t%v\t%s\t%.3f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%.3f\t\n", n, c, rule, r.Makespan.Seconds(),
					r.Fraction, r.Steady, r.MastersMax, r.Splits, r.Suppressed, r.Requests, r.MeanIdle.Seconds())
			}
		}
	}
	tw.Flush()
	if o.PNG == "" {
		return nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput as a fraction of linear, %v tasks, %d per worker", o.Grain, o.PerWorker)
	p.X.Label.Text = "workers (log2)"
	p.Y.Label.Text = "fraction of linear"
	p.Y.Min, p.Y.Max = 0, 1.25
	i := 0
	for _, c := range o.Costs {
		for _, rule := range mastersRules {
			var xy plotter.XYs
			for _, pt := range pts {
				if pt.cost == c && pt.rule == rule {
					xy = append(xy, plotter.XY{X: log2(pt.workers), Y: pt.r.Fraction})
				}
			}
			if err := addLine(p, fmt.Sprintf("%v/msg, %s", c, ruleLabel(rule)), xy, i); err != nil {
				return err
			}
			i++
		}
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return savePlot(p, filepath.Join(o.PNG, "masters_scale.png"))
}

func windowName(n int) string {
	if n == 0 {
		return fmt.Sprintf("2 × processors, at most %d", sched.MaxDefaultOverloadWindow)
	}
	return strconv.Itoa(n)
}

func log2(n int) float64 {
	x := 0.0
	for v := float64(n); v > 1; v /= 2 {
		x++
	}
	return x
}

func ruleLabel(rule string) string {
	switch rule {
	case sim.SplitOff:
		return "one master"
	case sim.SplitPaper:
		return "split (paper's rule)"
	}
	return "split (gain rule)"
}

var lineColors = []color.Color{
	color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff},
	color.RGBA{R: 0xdd, G: 0x55, B: 0x22, A: 0xff},
	color.RGBA{R: 0x22, G: 0x77, B: 0xcc, A: 0xff},
	color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff},
	color.RGBA{R: 0xee, G: 0x99, B: 0x66, A: 0xff},
	color.RGBA{R: 0x77, G: 0xaa, B: 0xee, A: 0xff},
}

func addLine(p *plot.Plot, name string, xy plotter.XYs, i int) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = lineColors[i%len(lineColors)]
	l.Width = vg.Points(1.5)
	if i >= 3 {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// savePlot draws p into the PNG file path.
func savePlot(p *plot.Plot, path string) error {
	// Whole or not at all, never over a device (atomicfile): p.Save wrote
	// in place, and a full disk left the first bytes of a figure.
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "png")
	if err == nil {
		err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
			_, err := wt.WriteTo(w)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("png: %w", err)
	}
	return nil
}
