package soak

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// finding is one invariant a run broke: its kind (the summary counts by
// kind) and what was seen.
type finding struct {
	Kind   string
	Detail string
}

// Kinds of finding.
const (
	kindStall      = "stall"
	kindTrajectory = "trajectory"
	kindOrigOver   = "counts: originals > tasks"
	kindOrigUnder  = "counts: originals < tasks"
	kindSent       = "counts: sent ≠ originals + replicas"
	kindAccepted   = "counts: accepted ≠ tasks"
	kindSchedule   = "counts: schedule"
	kindExit       = "exit: esrun"
	kindWorkerExit = "exit: esworker"
	kindMemory     = "memory"
	kindReference  = "reference"
	kindHarness    = "harness"
)

// num is a float64 from esrun's report, where null stands for NaN or ±Inf;
// two nums are equal when their bits are.
type num float64

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = num(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*n = num(f)
	return err
}

func same(a, b num) bool { return math.Float64bits(float64(a)) == math.Float64bits(float64(b)) }

// report is the part of esrun's -report that the checks read.
type report struct {
	Config struct {
		StartGen int `json:"start_gen"`
	} `json:"config"`
	Generations []genRecord `json:"generations"`
	Stop        string      `json:"stop"`
	Error       string      `json:"error"`
	FailedTask  *failedTask `json:"failed_task"`
	Best        struct {
		F num   `json:"f"`
		X []num `json:"x"`
	} `json:"best"`
	Evals    int       `json:"evals"`
	NaNs     int       `json:"nans"`
	Schedule *schedule `json:"schedule"`
}

// genRecord is one generation of the report; it must not depend on how
// the run was evaluated.
type genRecord struct {
	Gen      int `json:"gen"`
	Evals    int `json:"evals"`
	Best     num `json:"best"`
	Mean     num `json:"mean"`
	BestEver num `json:"best_ever"`
	NaNs     int `json:"nans"`
}

func (g genRecord) equal(h genRecord) bool {
	return g.Gen == h.Gen && g.Evals == h.Evals && same(g.Best, h.Best) && same(g.Mean, h.Mean) &&
		same(g.BestEver, h.BestEver) && g.NaNs == h.NaNs
}

// schedule is the grid's account of the run in the report (sched.Report
// and grid.MasterStats, as cmd/esrun writes them).
type schedule struct {
	Originals   int   `json:"originals"`
	Resends     int   `json:"resends"`
	Replicas    int   `json:"replicas"`
	TasksSent   int64 `json:"tasks_sent"`
	Results     int64 `json:"results"`
	Generations []struct {
		Gen       int `json:"gen"`
		Tasks     int `json:"tasks"`
		Originals int `json:"originals"`
		Replicas  int `json:"replicas"`
	} `json:"generations"`
	PerWorker []struct {
		Accepted int `json:"accepted"`
	} `json:"per_worker"`
	// Masters is the split's account (esrun -split): the results its
	// child masters computed are accepted by no worker of the root's.
	Masters *struct {
		FromChildren int `json:"from_children"`
	} `json:"masters"`
}

// outcome is what a run leaves: its report, its last checkpoint and the
// per-generation lines its masters printed.
type outcome struct {
	rep   report
	ckpt  []byte
	lines []string
}

// readOutcome reads a run's report and checkpoint; lines are its
// masters' standard output lines.
func readOutcome(reportPath, ckptPath string, lines []string) (outcome, error) {
	o := outcome{lines: genLines(lines)}
	b, err := os.ReadFile(reportPath)
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(b, &o.rep); err != nil {
		return o, fmt.Errorf("report %s: %w", reportPath, err)
	}
	// No checkpoint is not an error here: a run that failed at its first
	// generation wrote none, and checkTrajectory flags a missing one.
	if o.ckpt, err = os.ReadFile(ckptPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return o, err
	}
	return o, nil
}

// readFailedTask returns the failed_task of the report at path: nil if
// it has none, or cannot be read (the check that follows says so).
func readFailedTask(path string) *failedTask {
	var rep report
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &rep) != nil {
		return nil
	}
	return rep.FailedTask
}

// genLine is esrun's line for a generation; its last fields, the time,
// the rate and the ETA, depend on the run and are left out, and so is the
// last generation after the slash ("gen    3/100"), which depends on the
// stopping flags of the process that printed it.
var genLine = regexp.MustCompile(`^gen +(\d+)(/\d+)? +evals +\d+ +best \S+ +mean \S+`)

// genLines keeps the per-generation lines of an esrun's output, without
// their times nor their last generation.
func genLines(lines []string) []string {
	var g []string
	for _, l := range lines {
		m := genLine.FindStringSubmatchIndex(l)
		switch {
		case m == nil:
		case m[4] >= 0:
			g = append(g, l[:m[4]]+l[m[5]:m[1]])
		default:
			g = append(g, l[:m[1]])
		}
	}
	return g
}

// lineGen is the generation of a line from genLines.
func lineGen(l string) int {
	m := genLine.FindStringSubmatch(l)
	if m == nil {
		return -1
	}
	g, _ := strconv.Atoi(m[1])
	return g
}

// maxDiffs bounds the differences one finding lists.
const maxDiffs = 3

// checkTrajectory compares a grid run with the in-process reference: every
// generation line its masters printed, the report's generations (from the
// one it started at), its end and the final checkpoint, bit for bit.
func checkTrajectory(got, want outcome) []finding {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	comparePrinted(got, want, add)
	g, w := got.rep, want.rep
	if g.Error != "" || g.Stop != w.Stop || g.Evals != w.Evals || g.NaNs != w.NaNs {
		add("ended with stop %q, error %q, %d evaluations, %d NaN; in process stop %q, %d evaluations, %d NaN",
			g.Stop, g.Error, g.Evals, g.NaNs, w.Stop, w.Evals, w.NaNs)
	}
	start := g.Config.StartGen
	if start < 0 || start > len(w.Generations) || len(g.Generations) != len(w.Generations)-start {
		add("report has %d generations from %d, in process %d from 0", len(g.Generations), start, len(w.Generations))
	} else {
		compareGenerations(got, want, add)
	}
	if !same(g.Best.F, w.Best.F) || !slices.EqualFunc(g.Best.X, w.Best.X, same) {
		add("final best %v, in process %v", float64(g.Best.F), float64(w.Best.F))
	}
	if !bytes.Equal(got.ckpt, want.ckpt) {
		add("final checkpoint differs (%d bytes, in process %d)", len(got.ckpt), len(want.ckpt))
	}
	if len(diffs) == 0 {
		return nil
	}
	return []finding{{kindTrajectory, summarise(diffs)}}
}

// comparePrinted adds a difference for each generation line got printed
// that is not want's line for that generation.
func comparePrinted(got, want outcome, add func(string, ...any)) {
	ref := map[int]string{}
	for _, l := range want.lines {
		ref[lineGen(l)] = l
	}
	for _, l := range got.lines {
		if w := ref[lineGen(l)]; l != w {
			add("printed %q, in process %q", l, w)
		}
	}
}

// compareGenerations adds a difference for each generation of got's
// report (from its start) that is not want's, as far as both go.
func compareGenerations(got, want outcome, add func(string, ...any)) {
	start := got.rep.Config.StartGen
	for i, r := range got.rep.Generations {
		if start < 0 || start+i >= len(want.rep.Generations) {
			add("report has generation %d from %d, in process %d from 0", i, start, len(want.rep.Generations))
			return
		}
		if w := want.rep.Generations[start+i]; !r.equal(w) {
			add("generation %d: %+v, in process %+v", w.Gen, r, w)
		}
	}
}

// checkPrefix checks a run that ended early, as designed (exhausted):
// its report says why, and every generation it printed and reported
// equals the in-process run's.
func checkPrefix(got, want outcome) []finding {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	if got.rep.Error == "" {
		add("esrun failed, but its report gives no error")
	}
	comparePrinted(got, want, add)
	compareGenerations(got, want, add)
	if len(diffs) == 0 {
		return nil
	}
	return []finding{{kindTrajectory, summarise(diffs)}}
}

// summarise joins the first differences and counts the others.
func summarise(diffs []string) string {
	s := strings.Join(diffs[:min(len(diffs), maxDiffs)], "; ")
	if len(diffs) > maxDiffs {
		s += fmt.Sprintf("; and %d more", len(diffs)-maxDiffs)
	}
	return s
}

// checkCounts checks the report's schedule against its ES: every
// generation has its tasks (μ, then λ), each sent once as an original
// (re-sends are replicas), and the totals agree: tasks sent = originals +
// replicas, results accepted (from the root's workers, and from its child
// masters when it split) = tasks.
func checkCounts(rep report, c esConfig) []finding {
	s := rep.Schedule
	if s == nil {
		return []finding{{kindSchedule, "the report has no schedule"}}
	}
	var out []finding
	if len(s.Generations) != len(rep.Generations) {
		out = append(out, finding{kindSchedule, fmt.Sprintf("%d generations scheduled, %d in the report", len(s.Generations), len(rep.Generations))})
	}
	var over, under, wrong []string
	tasks, originals := 0, 0
	for _, g := range s.Generations {
		want := c.Lambda
		if g.Gen == 0 {
			want = c.Mu
		}
		tasks += g.Tasks
		originals += g.Originals
		switch {
		case g.Tasks != want:
			wrong = append(wrong, fmt.Sprintf("generation %d has %d tasks, want %d", g.Gen, g.Tasks, want))
		case g.Originals > g.Tasks:
			over = append(over, fmt.Sprintf("generation %d: %d originals for %d tasks (%d replicas)", g.Gen, g.Originals, g.Tasks, g.Replicas))
		case g.Originals < g.Tasks:
			under = append(under, fmt.Sprintf("generation %d: %d originals for %d tasks (%d replicas)", g.Gen, g.Originals, g.Tasks, g.Replicas))
		}
	}
	if len(wrong) > 0 {
		out = append(out, finding{kindSchedule, summarise(wrong)})
	}
	if len(over) > 0 {
		out = append(out, finding{kindOrigOver, summarise(over)})
	}
	if len(under) > 0 {
		out = append(out, finding{kindOrigUnder, summarise(under)})
	}
	if s.TasksSent != int64(s.Originals+s.Resends+s.Replicas) || s.Originals != originals {
		out = append(out, finding{kindSent, fmt.Sprintf("%d sent, %d originals (%d over the generations) + %d resends + %d replicas",
			s.TasksSent, s.Originals, originals, s.Resends, s.Replicas)})
	}
	accepted, children := 0, 0
	for _, w := range s.PerWorker {
		accepted += w.Accepted
	}
	if s.Masters != nil {
		children = s.Masters.FromChildren
	}
	if accepted+children != tasks {
		out = append(out, finding{kindAccepted, fmt.Sprintf("%d results accepted from workers and %d from child masters for %d tasks",
			accepted, children, tasks)})
	}
	return out
}

// checkMemory checks each esrun's peak RSS against limit bytes.
func checkMemory(peaks []int64, limit int64) []finding {
	var out []finding
	for i, p := range peaks {
		if p > limit {
			out = append(out, finding{kindMemory, fmt.Sprintf("esrun #%d: peak RSS %s, over the bound %s", i+1, mib(p), mib(limit))})
		}
	}
	return out
}

// mib writes bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// failedTask is the report's failed_task: the task whose failures
// exhausted esrun's -max-retries, and each of them.
type failedTask struct {
	Gen        int `json:"gen"`
	Task       int `json:"task"`
	MaxRetries int `json:"max_retries"`
	Failures   []struct {
		Worker string `json:"worker"`
		Error  string `json:"error"`
	} `json:"failures"`
}

// injectedRE matches the error of one failure that the scenario
// injected: a soak plugin process that exited during an evaluation, or
// an esworker -fail-every failure.
var injectedRE = regexp.MustCompile(`^(?:plugin ` + pluginName + ` \(slot \d+\): plugin process exited during an evaluation|emulated failure of evaluation \d+ \(fails every \d+\))`)

// scenarioWorker matches the name of a scenario worker's process: its
// name, with -rN when it was restarted.
var scenarioWorker = regexp.MustCompile(`^(w\d+)(?:-r\d+)?$`)

// exhausted reports whether ft, the failed_task of the report of a run
// that failed, says that the run ended as designed under the faults sc
// injected: one task failed more often than -max-retries allows, and
// every one of its failures was injected by a worker of sc that injects
// that kind. The master cannot tell a plugin that crashes now and then
// from a task that crashes it every time, so such a run must fail with
// that error (the soak met it once in 870 runs: a worker alone whose
// plugin crashed at every 5th evaluation). It returns the reason, or ""
// when ft is nil (the run failed otherwise) or names another failure.
func exhausted(sc scenario, ft *failedTask) string {
	if ft == nil || len(ft.Failures) == 0 {
		return ""
	}
	spec := map[string]workerSpec{}
	for _, w := range sc.Workers {
		spec[w.Name] = w
	}
	for _, f := range ft.Failures {
		m := scenarioWorker.FindStringSubmatch(f.Worker)
		if m == nil || !injectedRE.MatchString(f.Error) {
			return ""
		}
		w, ok := spec[m[1]]
		crash := strings.Contains(f.Error, "plugin process exited")
		if !ok || (crash && w.PluginCrashEvery == 0) || (!crash && w.FailEvery == 0) {
			return ""
		}
	}
	return fmt.Sprintf("generation %d, task %d failed %d times, each failure injected", ft.Gen, ft.Task, len(ft.Failures))
}
