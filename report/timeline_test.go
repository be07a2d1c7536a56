package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"gonum.org/v1/plot"
)

// testdata/leaver.json is the report of a real run: esrun -local 1
// -slots 1 -min-workers 3 -mu 10 -lambda 30 -gens 12 -load-ms 40 with two
// esworker processes, "steady" (2 slots) and "leaver" (1 slot, -fail-every
// 29, -delay 5ms), leaver killed 3 s into the run.
const leaverReport = "testdata/leaver.json"

// The timeline has a row per worker, marks the one that left where it
// left, and shows every instance of the report in a slot lane (or, held
// or failed, in the row's queue strip), as many as the report counts.
func TestTimelineModel(t *testing.T) {
	rep, err := Read(leaverReport)
	if err != nil {
		t.Fatal(err)
	}
	m := buildTimeline(rep)
	if m == nil {
		t.Fatal("no timeline")
	}
	s := rep.Schedule
	if len(m.Rows) != len(s.PerWorker) || len(m.Rows) != 3 {
		t.Fatalf("%d rows for %d workers", len(m.Rows), len(s.PerWorker))
	}
	if m.From != 0 || m.To != s.Total || len(m.GenStart) != len(s.Generations) {
		t.Errorf("window %v–%v with %d generation lines; want 0–%v and %d", m.From, m.To, len(m.GenStart), s.Total, len(s.Generations))
	}
	bars := 0
	for i, r := range m.Rows {
		w := s.PerWorker[i]
		gone := w.Name == "leaver"
		if r.Worker != w.Worker || !strings.HasPrefix(r.Label, w.Name+" (") || r.Gone != gone || r.Lanes != w.Slots {
			t.Errorf("row %d: %+v for worker %+v", i, r, w)
		}
		switch {
		case gone && (w.Left == nil || r.Left != *w.Left || r.Left > m.To/2):
			t.Errorf("%s: present until %v, the report says %v; want it to leave early", w.Name, r.Left, w.Left)
		case !gone && r.Left != m.To:
			t.Errorf("%s: present until %v, want the end %v", w.Name, r.Left, m.To)
		}
		for _, b := range r.Bars {
			bars++
			switch {
			case isQueued(b.Kind) != (b.Lane < 0) || b.Lane >= r.Lanes:
				t.Errorf("%s: a %s instance in lane %d of %d", w.Name, b.Kind, b.Lane, r.Lanes)
			case b.End > r.Left || b.Start < r.Joined && !isQueued(b.Kind):
				t.Errorf("%s: instance %+v outside its presence %v–%v", w.Name, b, r.Joined, r.Left)
			}
		}
	}
	if bars != len(s.Timeline.Instances) {
		t.Errorf("%d bars for %d instances", bars, len(s.Timeline.Instances))
	}
	var raw struct {
		Schedule struct {
			Timeline struct {
				Instances []map[string]any `json:"instances"`
			} `json:"timeline"`
		} `json:"schedule"`
	}
	data, _ := os.ReadFile(leaverReport)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, in := range raw.Schedule.Timeline.Instances {
		want[in["kind"].(string)]++
	}
	for _, k := range instanceKinds {
		if m.Kinds[k.kind] != want[k.kind] {
			t.Errorf("%d %s instances drawn, the report has %d", m.Kinds[k.kind], k.kind, want[k.kind])
		}
	}
	if m.Kinds[kindCancelledHeld] != s.CancelsHeld || m.Kinds[kindCancelledRunning] != s.CancelsRunning || m.Kinds[kindFailed] == 0 || m.Kinds[kindReplica] == 0 {
		t.Errorf("instances %v; the report counts cancels %d held and %d running", m.Kinds, s.CancelsHeld, s.CancelsRunning)
	}
}

// A lane is a slot: an execution takes the first free, or the one that
// frees first when results dated at arrival overlap; held and failed
// instances go to the queue strip.
func TestPackLanes(t *testing.T) {
	bars := []timelineBar{
		{Kind: kindOriginal, Start: 0, End: 2},
		{Kind: kindOriginal, Start: 0.5, End: 1},
		{Kind: kindCancelledHeld, Start: 0.6, End: 3},
		{Kind: kindReplica, Start: 1, End: 3},
		{Kind: kindOriginal, Start: 1.9, End: 4}, // overlaps both by a little
		{Kind: kindFailed, Start: 3, End: 3.5},
	}
	if n := packLanes(bars, 2); n != 2 {
		t.Errorf("%d lanes for 2 slots", n)
	}
	want := []int{0, 1, -1, 1, 0, -1}
	for i, b := range bars {
		if b.Lane != want[i] {
			t.Errorf("bar %d (%+v): lane %d, want %d", i, b, b.Lane, want[i])
		}
	}
}

// The pictures of a real run: a PNG that decodes, an SVG that parses,
// both of mode 0644 whatever the umask, with every worker's row, the one
// that left marked, and every kind of instance drawn.
func TestPicturesOfARealRun(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	pngPath, svgPath := filepath.Join(dir, "run.png"), filepath.Join(dir, "run.svg")
	rep, err := Read(leaverReport)
	if err != nil {
		t.Fatal(err)
	}
	for _, pic := range []struct {
		path string
		f    Format
	}{{pngPath, PNG}, {svgPath, SVG}} {
		if err := Draw(rep, pic.path, pic.f, 1000, 1800); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(pic.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", pic.path, fi.Mode())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	img := readPNG(t, pngPath, 1000, 1800)
	drawn := map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			drawn[color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(bl >> 8), A: 0xff}] = true
		}
	}
	for _, k := range instanceKinds {
		if !drawn[k.col.(color.RGBA)] {
			t.Errorf("no %s instance drawn (colour %v)", k.kind, k.col)
		}
	}
	if !drawn[colPresent] {
		t.Error("no presence drawn")
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	texts, root := svgTexts(t, svg)
	if root != "svg" {
		t.Fatalf("SVG root element %q", root)
	}
	for _, want := range []string{"leaver (1) left at 3.09 s", "local-1 (1)", "steady (2)", "Timeline per worker", "Efficiency per generation",
		"cancelled held (queued): 25", "failed (sent → error): 1", "97.1%", "present 3.09 s of 9.04 s", "10⁵"} {
		if !strings.Contains(texts, want) {
			t.Errorf("the SVG does not say %q", want)
		}
	}
	if l := regexp.MustCompile(`(?m)^[-+]?[0-9.]+e[-+]?[0-9]+$`).FindString(texts); l != "" {
		t.Errorf("an axis labelled in e notation: %s", l)
	}
}

// svgTexts parses an SVG whole and returns its texts, one a line, and
// the name of its root element.
func svgTexts(t *testing.T, data []byte) (string, string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var texts strings.Builder
	root, inText := "", false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			inText = tok.Name.Local == "text"
		case xml.EndElement:
			if inText {
				texts.WriteString("\n")
			}
			inText = false
		case xml.CharData:
			if inText {
				texts.Write(tok)
			}
		}
	}
	return texts.String(), root
}

// Log axes are labelled 10ᵏ (over few decades 2 and 5 × 10ᵏ too, over
// many every other power), linear ones in one style: never 1e+06 beside
// 100000.
func TestTicksAreConsistent(t *testing.T) {
	labels := func(ticks []plot.Tick) []string {
		var ls []string
		for _, tk := range ticks {
			if tk.Label != "" {
				ls = append(ls, tk.Label)
			}
		}
		return ls
	}
	for _, tt := range []struct {
		name string
		got  []string
		want string
	}{
		{"log 3e4–2e6", labels(powerTicks{}.Ticks(3e4, 2e6)), "5×10⁴ 10⁵ 2×10⁵ 5×10⁵ 10⁶ 2×10⁶"},
		{"log 1e-3–1e9", labels(powerTicks{}.Ticks(1e-3, 1e9)), "10⁻³ 10⁻¹ 10¹ 10³ 10⁵ 10⁷ 10⁹"},
		{"log 3000–4000", labels(powerTicks{}.Ticks(3000, 4000)), "3×10³ 4×10³"},
		{"linear 0–1.2e6", labels(readableTicks{}.Ticks(0, 1.2e6)), "0 0.2×10⁶ 0.4×10⁶ 0.6×10⁶ 0.8×10⁶ 1×10⁶ 1.2×10⁶"},
		{"linear -0.5–12.5", labels(readableTicks{}.Ticks(-0.5, 12.5)), "0 2 4 6 8 10 12"},
		{"linear 0–0.3", labels(readableTicks{}.Ticks(0, 0.3)), "0 0.05 0.1 0.15 0.2 0.25 0.3"},
	} {
		if got := strings.Join(tt.got, " "); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
