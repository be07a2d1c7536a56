package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched/plan"
)

// maxCalibrationBytes bounds a calibration file.
const maxCalibrationBytes = 64 << 20

// ReadCalibration reads and checks the calibration at path (at most
// 64 MiB), as Grid or FromReports made it.
func ReadCalibration(path string) (*plan.Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCalibrationBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCalibrationBytes {
		return nil, fmt.Errorf("calibration %s: larger than %d bytes", path, maxCalibrationBytes)
	}
	var cal plan.Calibration
	if err := json.Unmarshal(b, &cal); err != nil {
		return nil, fmt.Errorf("calibration %s: %w", path, err)
	}
	if err := cal.Check(); err != nil {
		return nil, fmt.Errorf("calibration %s: %w", path, err)
	}
	return &cal, nil
}

// PrintModels shows every group's models and what could not be fitted.
func PrintModels(w io.Writer, cal *plan.Calibration, ms *plan.Models) {
	for _, g := range cal.Groups() {
		gm := ms.Groups[g.Name]
		fmt.Fprintf(w, "group %s: %d machine(s) %s, %d CPUs\n", g.Name, len(g.Machines), strings.Join(g.Machines, " "), g.CPUs)
		if gm == nil {
			fmt.Fprintf(w, "  no measurements\n")
			continue
		}
		if len(gm.Sizes) > 0 {
			fmt.Fprintf(w, "  sizes N %v\n", gm.Sizes)
		}
		for _, m := range slices.Sorted(maps.Keys(gm.Alone)) {
			c := gm.Alone[m]
			fmt.Fprintf(w, "  N–T  M=%d alone: %v   T(%0.f) = %s\n", m, c, gm.Sizes[len(gm.Sizes)-1], Seconds(c.At(gm.Sizes[len(gm.Sizes)-1])))
		}
		pms := slices.SortedFunc(maps.Keys(gm.NT), func(a, b plan.PM) int {
			if a.M != b.M {
				return a.M - b.M
			}
			return a.P - b.P
		})
		for _, pm := range pms {
			fmt.Fprintf(w, "  N–T  P=%d M=%d: %v\n", pm.P, pm.M, gm.NT[pm])
		}
		for _, m := range slices.Sorted(maps.Keys(gm.PT)) {
			from := ""
			if gm.PTFrom[m] != g.Name {
				from = " (substituted from " + gm.PTFrom[m] + ")"
			}
			fmt.Fprintf(w, "  P–T  M=%d: %v%s\n", m, gm.PT[m], from)
		}
		for _, why := range gm.Why {
			fmt.Fprintf(w, "  not fitted: %s\n", why)
		}
	}
	for _, n := range ms.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, n := range cal.Notes {
		fmt.Fprintf(w, "calibration note: %s\n", n)
	}
}

// Seconds formats s seconds as a duration rounded to what matters: 10 ms
// from 10 s on, 100 µs from 10 ms on, else 1 µs.
func Seconds(s float64) string {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return fmt.Sprint(s)
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// SizeForTime finds the N at which a machine of group ref (default: the
// fastest at the middle of the measured sizes), alone with one slot, takes
// t seconds per task; only inside the measured sizes.
func SizeForTime(ms *plan.Models, cal *plan.Calibration, ref string, t float64) (string, float64, error) {
	if ref == "" {
		best := math.Inf(1)
		for _, g := range cal.Groups() {
			gm := ms.Groups[g.Name]
			if gm == nil || len(gm.Sizes) == 0 {
				continue
			}
			c, ok := gm.Alone[1]
			if !ok {
				continue
			}
			mid := (gm.Sizes[0] + gm.Sizes[len(gm.Sizes)-1]) / 2
			if v := c.At(mid); v < best {
				best, ref = v, g.Name
			}
		}
		if ref == "" {
			return "", 0, errors.New("-load-ms: no group has an N–T model alone with 1 slot")
		}
	}
	gm := ms.Groups[ref]
	if gm == nil {
		return "", 0, fmt.Errorf("-ref: no group %q", ref)
	}
	c, ok := gm.Alone[1]
	if !ok || len(gm.Sizes) == 0 {
		return "", 0, fmt.Errorf("-load-ms: group %s has no N–T model alone with 1 slot", ref)
	}
	lo, hi := gm.Sizes[0], gm.Sizes[len(gm.Sizes)-1]
	if err := c.Check(lo, hi); err != nil {
		return "", 0, fmt.Errorf("group %s: %w", ref, err)
	}
	if t < c.At(lo) || t > c.At(hi) {
		return "", 0, fmt.Errorf("-load-ms %g: outside the measured range of group %s alone with 1 slot (%s at N = %.0f to %s at N = %.0f); calibrate at other sizes",
			t*1000, ref, Seconds(c.At(lo)), lo, Seconds(c.At(hi)), hi)
	}
	for range 100 {
		mid := (lo + hi) / 2
		if c.At(mid) < t {
			lo = mid
		} else {
			hi = mid
		}
	}
	return ref, (lo + hi) / 2, nil
}

// PrintPlan shows the configurations res ranks best for tasks of size
// n, tasks per batch, against the baseline (every machine, slots = CPUs).
func PrintPlan(w io.Writer, n float64, tasks int, policy string, groups []plan.Group, res *plan.Result) {
	var gs []string
	for _, g := range groups {
		gs = append(gs, fmt.Sprintf("%s %d×%d CPUs", g.Name, len(g.Machines), g.CPUs))
	}
	fmt.Fprintf(w, "N = %.0f, %d tasks per batch, policy %s; machines: %s\n", n, tasks, policy, strings.Join(gs, ", "))
	fmt.Fprintf(w, "%d configurations predicted", res.Considered-sum(res.Refused))
	if r := sum(res.Refused); r > 0 {
		fmt.Fprintf(w, ", %d refused by the models:", r)
		for _, why := range slices.Sorted(maps.Keys(res.Refused)) {
			fmt.Fprintf(w, "\n  %d× %s", res.Refused[why], why)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\tconfiguration (machines×slots)\tP\tbatch\tvs baseline\tper task (model)")
	row := func(rank string, c *plan.Candidate) {
		vs := "–"
		if res.Baseline != nil && c.Batch > 0 {
			switch r := res.Baseline.Batch / c.Batch; {
			case r >= 1:
				vs = fmt.Sprintf("%.2f× faster", r)
			default:
				vs = fmt.Sprintf("%.2f× slower", 1/r)
			}
		}
		var per []string
		for _, ch := range c.Choices {
			if ch.Machines > 0 {
				per = append(per, fmt.Sprintf("%s %s (%s)", ch.Group, Seconds(c.TaskTime[ch.Group]), c.How[ch.Group]))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", rank, c.String(), c.P, Seconds(c.Batch), vs, strings.Join(per, ", "))
	}
	for i := range res.Best {
		row(strconv.Itoa(i+1), &res.Best[i])
	}
	if res.Baseline != nil {
		row("base", res.Baseline)
	}
	tw.Flush()
	if res.Baseline == nil {
		fmt.Fprintf(w, "baseline (every machine, slots = CPUs) not predicted: %v\n", res.BaselineErr)
	} else if b := res.Best[0]; res.Baseline.Batch > 0 {
		fmt.Fprintf(w, "predicted: %s per batch with %s against %s with every machine at slots = CPUs (%s): %.0f %% less time\n",
			Seconds(b.Batch), b.String(), Seconds(res.Baseline.Batch), res.Baseline.String(), 100*(1-b.Batch/res.Baseline.Batch))
	}
}

func sum(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

// PlanFile turns the best configuration into a plan file: the first k
// machines (by name) of a group used on k machines get its slots, the
// others 0; a group used whole gives its slots to members the plan does
// not name as well, a group used in part or not at all sets them aside.
func PlanFile(cal *plan.Calibration, groups []plan.Group, n float64, tasks int, res *plan.Result) *grid.Plan {
	best := res.Best[0]
	p := &grid.Plan{Version: grid.PlanVersion, N: int(math.Round(n)), Tasks: tasks, Config: best.String(), PredictedBatch: round3(best.Batch)}
	if res.Baseline != nil {
		p.BaselineBatch, p.BaselineConfig = round3(res.Baseline.Batch), res.Baseline.String()
		p.PredictedGainPc = math.Round(1000*(1-best.Batch/res.Baseline.Batch)) / 10
	}
	for i, g := range groups {
		ch := best.Choices[i]
		for k, name := range g.Machines {
			pw := grid.PlanWorker{Name: name, Group: g.Name}
			if k < ch.Machines {
				pw.Slots, pw.Exec = ch.Slots, round6(best.TaskTime[g.Name])
			}
			p.Workers = append(p.Workers, pw)
		}
		rest := 0
		if ch.Machines == len(g.Machines) {
			rest = ch.Slots
		}
		p.Groups = append(p.Groups, grid.PlanGroup{Group: g.Name, Slots: rest})
	}
	return p
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }
