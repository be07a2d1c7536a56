package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/plan"
)

// maxCalibrationBytes bounds a calibration file.
const maxCalibrationBytes = 64 << 20

func readCalibration(path string) (*plan.Calibration, error) {
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

// writeJSON writes v to path through a temporary file and a rename, so a
// reader never sees half a file; "-" is standard output.
func writeJSON(path string, v any, stdout io.Writer) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err := stdout.Write(b)
		return err
	}
	// A temporary name of its own: never a file the command line names.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, nothing
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// sortedSet is l sorted, each value once.
func sortedSet(l []int) []int {
	l = slices.Clone(l)
	slices.Sort(l)
	return slices.Compact(l)
}

// fitFlags declares the flags of the fit, which models and plan share.
func fitFlags(fs *flag.FlagSet, o *plan.Options) {
	flagx.IntVar(fs, &o.MinSizes, "min-sizes", plan.MinSizes, 4, maxFitPoints, "fewest distinct sizes `N` an N–T model is fitted from")
	flagx.IntVar(fs, &o.MinPs, "min-ps", plan.MinPs, 3, maxFitPoints, "fewest distinct `P` > M a group's own P–T model is fitted from; fewer: substituted")
}

// Bounds of esplan's numeric flags.
const (
	// maxFitPoints bounds -min-sizes and -min-ps: more points than any
	// calibration measures.
	maxFitPoints = 1000
	// maxTasks bounds plan -tasks: the ES's λ (esrun -lambda's bound).
	maxTasks = 1_000_000
	// maxTaskMS bounds plan -load-ms: an hour a task.
	maxTaskMS = 3_600_000
	// maxTop bounds plan -top.
	maxTop = 1000
)

// modelsOptions are esplan models' flags.
type modelsOptions struct {
	cal string
	fit plan.Options
}

const modelsUsage = `Usage: esplan models -cal FILE [flags]

Fits the execution-time models of a calibration (esplan calibrate -o) and
prints them: per group, the N–T model of one machine alone with M slots
(a cubic in the LU size N) and the P–T models of P tasks in the whole
grid; a group with too few points takes another's, and says so.

Flags:
`

// newModelsFlagSet declares esplan models' flags into o.
func newModelsFlagSet(o *modelsOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("esplan models", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.cal, "cal", "", "the calibration `FILE` (esplan calibrate -o)")
	fitFlags(fs, &o.fit)
	flagx.VersionFlag(fs)
	return fs
}

func runModels(args []string, stdout, stderr io.Writer) error {
	o := &modelsOptions{}
	fs := newModelsFlagSet(o)
	if err := parseCommand(fs, args, modelsUsage, stdout, stderr); err != nil { // main.go
		return err
	}
	if o.cal == "" {
		return usagef("give -cal FILE")
	}
	cal, err := readCalibration(o.cal)
	if err != nil {
		return err
	}
	ms, err := plan.Fit(cal, o.fit)
	if err != nil {
		return err
	}
	printModels(stdout, cal, ms)
	return nil
}

// printModels shows every group's models and what could not be fitted.
func printModels(w io.Writer, cal *plan.Calibration, ms *plan.Models) {
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
			fmt.Fprintf(w, "  N–T  M=%d alone: %v   T(%0.f) = %s\n", m, c, gm.Sizes[len(gm.Sizes)-1], secs(c.At(gm.Sizes[len(gm.Sizes)-1])))
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

func secs(s float64) string {
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

// planOptions are esplan plan's flags.
type planOptions struct {
	cal     string
	n       int
	taskMS  float64
	ref     string
	tasks   int
	policy  string
	slots   []int
	top     int
	out     string
	fit     plan.Options
	verbose bool
}

const planUsage = `Usage: esplan plan -cal FILE (-lu N | -load-ms MS) [flags]

Searches the configurations of a calibration's machines (which to use,
with how many slots each) with the fitted models, for batches of -tasks
tasks of the LU load size -lu N (or of -load-ms milliseconds), prints the
-top best with their predicted times and, with -o, writes the best as a
plan file for esrun -plan and esworker -plan.

Flags:
`

// newPlanFlagSet declares esplan plan's flags into o.
func newPlanFlagSet(o *planOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("esplan plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.cal, "cal", "", "the calibration `FILE` (esplan calibrate -o)")
	flagx.IntVar(fs, &o.n, "lu", 0, 0, problems.MaxLoadN, "plan for tasks of LU load size `N` (as esrun -lu N)")
	flagx.FloatVar(fs, &o.taskMS, "load-ms", 0, 0, maxTaskMS, "or for tasks of `MS` milliseconds on one machine of the -ref group, alone with one slot (as esrun -load-ms)")
	fs.StringVar(&o.ref, "ref", "", "the reference `GROUP` of -load-ms (default the fastest)")
	flagx.IntVar(fs, &o.tasks, "tasks", 70, 1, maxTasks, "tasks `N` per batch (the ES's λ)")
	fs.StringVar(&o.policy, "policy", "r3q", "the run's `POLICY`: rr, r3q and eft replicate the last tasks (modelled), wq, rwq and cyclic do not")
	flagx.IntListVar(fs, &o.slots, "slots", nil, 1, grid.MaxMetaSlots, "slot counts `M,...` to consider per machine (default: every M measured)")
	flagx.IntVar(fs, &o.top, "top", 5, 1, maxTop, "print the `K` best configurations")
	fs.StringVar(&o.out, "o", "", "write the best configuration as a plan `FILE` for esrun -plan and esworker -plan (- = standard output)")
	fitFlags(fs, &o.fit)
	fs.BoolVar(&o.verbose, "v", false, "print the models too")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "n", "lu")
	flagx.Alias(fs, "task-ms", "load-ms")
	return fs
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	o := &planOptions{}
	fs := newPlanFlagSet(o)
	if err := parseCommand(fs, args, planUsage, stdout, stderr); err != nil { // main.go
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q", fs.Arg(0))
	case o.cal == "":
		return usagef("give -cal FILE")
	case (o.n > 0) == (o.taskMS > 0):
		return usagef("give one of -lu N and -load-ms MS")
	case !slices.Contains(sched.Names, o.policy):
		return usagef("-policy %q is not a policy (known: %s)", o.policy, strings.Join(sched.Names, ", "))
	}
	if err := flagx.CheckFiles(
		flagx.File{What: "-o " + o.out, Path: o.out, Write: true},
		flagx.File{What: "-cal " + o.cal, Path: o.cal},
	); err != nil {
		return usagef("%v", err)
	}
	slots := sortedSet(o.slots)
	cal, err := readCalibration(o.cal)
	if err != nil {
		return err
	}
	ms, err := plan.Fit(cal, o.fit)
	if err != nil {
		return err
	}
	if o.verbose {
		printModels(stdout, cal, ms)
		fmt.Fprintln(stdout)
	}
	size := float64(o.n)
	if o.taskMS > 0 {
		g, s, err := sizeForTime(ms, cal, o.ref, o.taskMS/1000)
		if err != nil {
			return err
		}
		size = math.Round(s)
		fmt.Fprintf(stdout, "tasks of %g ms on group %s alone with 1 slot: N = %.0f\n", o.taskMS, g, size)
	}
	replicate := o.policy == "rr" || o.policy == "r3q" || o.policy == "eft"
	groups := cal.Groups()
	res, err := plan.Search(ms, plan.Request{N: size, Tasks: o.tasks, Groups: groups, Slots: slots, Replicate: replicate, Top: o.top})
	if err != nil {
		return err
	}
	printPlan(stdout, size, o.tasks, o.policy, groups, res)
	if o.out != "" {
		p := planFile(cal, groups, size, o.tasks, res)
		if err := writeJSON(o.out, p, stdout); err != nil {
			return err
		}
		if o.out != "-" {
			fmt.Fprintf(stdout, "plan written to %s: esrun -plan %s, and esworker -plan %s on every worker\n", o.out, o.out, o.out)
		}
	}
	return nil
}

// sizeForTime finds the N at which a machine of group ref (default: the
// fastest at the middle of the measured sizes), alone with one slot, takes
// t seconds per task; only inside the measured sizes.
func sizeForTime(ms *plan.Models, cal *plan.Calibration, ref string, t float64) (string, float64, error) {
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
			t*1000, ref, secs(c.At(lo)), lo, secs(c.At(hi)), hi)
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

func printPlan(w io.Writer, n float64, tasks int, policy string, groups []plan.Group, res *plan.Result) {
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
				per = append(per, fmt.Sprintf("%s %s (%s)", ch.Group, secs(c.TaskTime[ch.Group]), c.How[ch.Group]))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", rank, c.String(), c.P, secs(c.Batch), vs, strings.Join(per, ", "))
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
			secs(b.Batch), b.String(), secs(res.Baseline.Batch), res.Baseline.String(), 100*(1-b.Batch/res.Baseline.Batch))
	}
}

func sum(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}

// planFile turns the best configuration into a plan file: the first k
// machines (by name) of a group used on k machines get its slots, the
// others 0; a group used whole gives its slots to members the plan does
// not name as well, a group used in part or not at all sets them aside.
func planFile(cal *plan.Calibration, groups []plan.Group, n float64, tasks int, res *plan.Result) *grid.Plan {
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
