package report

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The kinds of instance the report's timeline holds (esrun's timeline.go).
const (
	kindOriginal         = "original"
	kindReplica          = "replica"
	kindStale            = "stale"
	kindCancelledRunning = "cancelled_running"
	kindCancelledHeld    = "cancelled_held"
	kindFailed           = "failed"
)

// instanceKinds lists the kinds in the legend's order, with their colour
// and what the legend says.
var instanceKinds = []struct {
	kind, label string
	col         color.Color
}{
	{kindOriginal, "original", colCompute},
	{kindReplica, "replica", colBest},
	{kindStale, "result too late (unused)", color.RGBA{R: 0x93, G: 0x78, B: 0xb5, A: 0xff}},
	{kindCancelledRunning, "cancelled running", colSync},
	{kindCancelledHeld, "cancelled held (queued)", color.RGBA{R: 0xe6, G: 0xb8, B: 0x2e, A: 0xff}},
	{kindFailed, "failed (sent → error)", colMean},
}

var (
	colPresent = color.RGBA{R: 0xe4, G: 0xe8, B: 0xf0, A: 0xff}
	colGenLine = color.RGBA{R: 0xb8, G: 0xb8, B: 0xb8, A: 0xff}
)

// isQueued says the kind's interval starts when the instance was sent
// (not when it ran): it is drawn in the row's queue strip, not in a slot.
func isQueued(kind string) bool { return kind == kindCancelledHeld || kind == kindFailed }

// timelineModel is what the per-worker timeline draws, built from the
// report alone (buildTimeline) so that tests can check it.
type timelineModel struct {
	Rows     []timelineRow
	GenStart []float64 // generation boundaries inside [From, To]
	From, To float64   // the time window, seconds on the run's clock
	FromGen  int       // the first generation whose instances are shown
	Omitted  int       // instances the report left out (its limit)
	Limit    int
	Kinds    map[string]int // instances per kind
}

// maxGenLines is how many generation boundaries the timeline draws at
// most: more would grey it over.
const maxGenLines = 60

// genStep is the step between the generations whose start is drawn.
func (m *timelineModel) genStep() int {
	return max(1, (len(m.GenStart)+maxGenLines-1)/maxGenLines)
}

// timelineRow is one worker.
type timelineRow struct {
	Worker int
	Label  string
	Slots  int
	// Joined and Left bound its presence, clipped to the window; Gone
	// says it left before the run ended.
	Joined, Left float64
	Gone         bool
	Lanes        int // slot lanes: its slots
	Bars         []timelineBar
}

// timelineBar is one instance: in slot lane Lane, or (Lane −1) in the
// queue strip.
type timelineBar struct {
	Kind       string
	Start, End float64
	Lane       int
}

// buildTimeline makes the timeline of rep, nil when the report has none.
func buildTimeline(rep *Report) *timelineModel {
	s := rep.Schedule
	if s == nil || s.Timeline == nil || len(s.Generations) == 0 {
		return nil
	}
	tl := s.Timeline
	m := &timelineModel{FromGen: tl.FromGen, Omitted: tl.Omitted, Limit: tl.Limit, Kinds: map[string]int{}, To: s.Total}
	m.From = math.Inf(1)
	for _, g := range s.Generations {
		if g.Gen >= tl.FromGen {
			m.From = math.Min(m.From, g.Start)
			m.GenStart = append(m.GenStart, g.Start)
		}
		m.To = math.Max(m.To, g.End)
	}
	if math.IsInf(m.From, 1) {
		m.From = 0
	}
	rows := map[int]*timelineRow{}
	var order []int
	for _, w := range s.PerWorker {
		name := w.Name
		if name == "" {
			name = fmt.Sprintf("worker %d", w.Worker)
		}
		r := &timelineRow{Worker: w.Worker, Label: fmt.Sprintf("%s (%d)", name, w.Slots), Slots: max(w.Slots, 1), Joined: w.Joined, Left: m.To}
		if w.Left != nil {
			r.Left, r.Gone = *w.Left, *w.Left < m.To
		}
		rows[w.Worker] = r
		order = append(order, w.Worker)
	}
	ins := slices.Clone(tl.Instances)
	slices.SortStableFunc(ins, func(a, b Instance) int { return cmp.Compare(a.Start, b.Start) })
	unlisted := map[int]bool{}
	for _, in := range ins {
		m.Kinds[in.Kind]++
		r, ok := rows[in.Worker]
		if !ok {
			// A worker the report no longer lists (it keeps the last
			// departed ones only): present while it had instances.
			r = &timelineRow{Worker: in.Worker, Label: fmt.Sprintf("worker %d", in.Worker), Slots: 1, Joined: in.Start, Left: in.End, Gone: true}
			rows[in.Worker], unlisted[in.Worker] = r, true
			order = append(order, in.Worker)
		}
		if unlisted[in.Worker] {
			r.Joined, r.Left = math.Min(r.Joined, in.Start), math.Max(r.Left, in.End)
		}
		r.Bars = append(r.Bars, timelineBar{Kind: in.Kind, Start: in.Start, End: in.End})
	}
	for _, id := range order {
		r := rows[id]
		r.Joined, r.Left = math.Max(r.Joined, m.From), math.Min(r.Left, m.To)
		r.Lanes = packLanes(r.Bars, r.Slots)
		m.Rows = append(m.Rows, *r)
	}
	return m
}

// packLanes gives each execution (bars sorted by start) a slot lane: the
// first free at its start, or else the one that frees first. Executions
// are dated at their result's arrival, so that one may seem to start
// before the one it followed on that slot ended; a worker never runs
// more than its slots at once, so there are as many lanes as slots.
func packLanes(bars []timelineBar, slots int) int {
	// No more lanes than bars are ever taken: the first free one always
	// is among them.
	ends := make([]float64, min(slots, len(bars)))
	for i := range ends {
		ends[i] = math.Inf(-1)
	}
	for i := range bars {
		b := &bars[i]
		if isQueued(b.Kind) {
			b.Lane = -1
			continue
		}
		b.Lane = 0
		for l, e := range ends {
			if e <= b.Start {
				b.Lane = l
				break
			}
			if e < ends[b.Lane] {
				b.Lane = l
			}
		}
		ends[b.Lane] = b.End
	}
	return slots
}

// The row's layout, in units of its height 1 (y grows upwards): the
// presence band over all of it, the queue strip at the bottom, the slot
// lanes above.
const (
	rowBand0, rowBand1   = 0.04, 0.96
	rowQueue0, rowQueue1 = 0.1, 0.24
	rowLanes0, rowLanes1 = 0.3, 0.9
)

// timelinePlotter draws the model; worker i is at y ∈ [n−1−i, n−i].
type timelinePlotter struct{ m *timelineModel }

func (t timelinePlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return t.m.From, t.m.To, 0, float64(len(t.m.Rows))
}

func (t timelinePlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	rect := func(col color.Color, x0, x1, y0, y1 float64) {
		if x1 < x0 {
			return
		}
		X0, X1 := trX(x0), trX(x1)
		if X1-X0 < 0.35 { // shorter than a pixel: still visible
			X1 = X0 + 0.35
		}
		pts := c.ClipPolygonXY([]vg.Point{{X: X0, Y: trY(y0)}, {X: X1, Y: trY(y0)}, {X: X1, Y: trY(y1)}, {X: X0, Y: trY(y1)}})
		if len(pts) > 0 {
			c.FillPolygon(col, pts)
		}
	}
	n := len(t.m.Rows)
	for i, r := range t.m.Rows {
		base := float64(n - 1 - i)
		rect(colPresent, r.Joined, r.Left, base+rowBand0, base+rowBand1)
	}
	line := draw.LineStyle{Color: colGenLine, Width: vg.Points(0.5)}
	for i := 0; i < len(t.m.GenStart); i += t.m.genStep() {
		g := t.m.GenStart[i]
		c.StrokeLine2(line, trX(g), c.Min.Y, trX(g), c.Max.Y)
	}
	cols := map[string]color.Color{}
	for _, k := range instanceKinds {
		cols[k.kind] = k.col
	}
	for i, r := range t.m.Rows {
		base := float64(n - 1 - i)
		lane := (rowLanes1 - rowLanes0) / float64(r.Lanes)
		for _, b := range r.Bars {
			col, ok := cols[b.Kind]
			if !ok {
				col = color.Black
			}
			if b.Lane < 0 {
				rect(col, b.Start, b.End, base+rowQueue0, base+rowQueue1)
				continue
			}
			y0 := base + rowLanes1 - float64(b.Lane+1)*lane
			rect(col, b.Start, b.End, y0+0.1*lane, y0+0.9*lane)
		}
		if r.Gone {
			// Where it left: a dark edge across its row.
			x := trX(r.Left)
			c.StrokeLine2(draw.LineStyle{Color: color.Black, Width: vg.Points(1.5)}, x, trY(base+rowBand0), x, trY(base+rowBand1))
		}
	}
}

// timelinePlot is the per-worker timeline, with its legend.
func timelinePlot(m *timelineModel) (*plot.Plot, plot.Legend) {
	p := plot.New()
	p.Title.Text = "Timeline per worker (slots): each task instance; shaded while present, | where it left"
	switch {
	case m.Omitted > 0:
		p.Title.Text += fmt.Sprintf("\nfrom generation %d only: the report keeps at most %d instances (%d earlier ones left out)", m.FromGen, m.Limit, m.Omitted)
	}
	p.X.Label.Text = "time on the run's clock [s]   (vertical lines: generations start)"
	if k := m.genStep(); k > 1 {
		p.X.Label.Text = fmt.Sprintf("time on the run's clock [s]   (vertical lines: generations start, one line per %d)", k)
	}
	p.Add(timelinePlotter{m})
	p.X.Min, p.X.Max = m.From, m.To
	p.Y.Min, p.Y.Max = 0, float64(len(m.Rows))
	var ticks []plot.Tick
	for i, r := range m.Rows {
		label := r.Label
		if r.Gone {
			label += fmt.Sprintf(" left at %s", secondsTick(r.Left))
		}
		ticks = append(ticks, plot.Tick{Value: float64(len(m.Rows)-1-i) + 0.5, Label: label})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Length = 0
	p.X.Tick.Marker = readableTicks{}
	l := plot.NewLegend()
	for _, k := range instanceKinds {
		l.Add(fmt.Sprintf("%s: %d", k.label, m.Kinds[k.kind]), swatch{k.col})
	}
	l.Add("worker present", swatch{colPresent})
	return p, l
}

// swatch is a legend's colour square.
type swatch struct{ col color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.col, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// secondsTick writes a time in seconds for a label: "4.01 s".
func secondsTick(s float64) string {
	return fmt.Sprintf("%.3g s", s)
}
