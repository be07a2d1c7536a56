package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/internal/testplugin"
	"github.com/esgrid/esgrid/report"
)

// trajectory reads a -report file: the evolution (every generation's
// figures, the best individual) without the times.
func trajectory(t *testing.T, path string) (gens []map[string]any, best any, cfg map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Config      map[string]any   `json:"config"`
		Generations []map[string]any `json:"generations"`
		Best        any              `json:"best"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Generations {
		delete(g, "wall_seconds")
	}
	return rep.Generations, rep.Best, rep.Config
}

// esrun -problem NAME -plugin NAME=PATH runs the plugin in-process and on
// the local grid, and both runs equal the built-in's, bit for bit.
func TestPluginRunsEqualBuiltin(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plug := "rastrigin-go=" + testplugin.MustBuild(t, dir)
	common := []string{"-dim", "6", "-mu", "4", "-lambda", "9", "-gens", "12", "-seed", "5", "-quiet"}
	runs := []struct {
		name string
		args []string
	}{
		{"builtin", []string{"-inprocess", "-problem", "rastrigin"}},
		{"plugin-inprocess", []string{"-inprocess", "-problem", "rastrigin-go", "-plugin", plug, "-slots", "2"}},
		{"plugin-grid", []string{"-problem", "rastrigin-go", "-plugin", plug, "-local", "2", "-slots", "1"}},
	}
	var want []map[string]any
	var wantBest any
	for _, r := range runs {
		report := filepath.Join(dir, r.name+".json")
		args := append(append(r.args, common...), "-report", report)
		code, out, errOut := esrun(context.Background(), args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", r.name, code, out, errOut)
		}
		gens, best, _ := trajectory(t, report)
		if want == nil {
			want, wantBest = gens, best
			continue
		}
		if !reflect.DeepEqual(gens, want) || !reflect.DeepEqual(best, wantBest) {
			t.Errorf("%s differs from the built-in run:\n%v\n%v", r.name, gens, want)
		}
	}
}

// pythonFixedDim writes a copy of the Python example that accepts only
// dimension 4, under another name, beside a copy of the Python SDK, or
// skips.
func pythonFixedDim(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 not found: the Python example needs it")
	}
	b, err := os.ReadFile("../../examples/plugins/sphere-py/sphere.py")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.NewReplacer(`dim=(1, 0)`, `dim=4`, `name="sphere-py"`, `name="sphere4"`).Replace(string(b))
	if !strings.Contains(src, `dim=4`) || !strings.Contains(src, `name="sphere4"`) {
		t.Fatal("the Python example's serve() call changed; update this test")
	}
	sdk, err := os.ReadFile("../../sdk/python/esgrid_plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sphere4.py")
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "esgrid_plugin.py"), sdk, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A plugin that accepts one dimension sets -dim's default; another -dim
// is a usage error naming what it accepts.
func TestPluginDimensionFromHello(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plug := "sphere4=" + pythonFixedDim(t, dir)
	report := filepath.Join(dir, "r.json")
	code, out, errOut := esrun(context.Background(), "-inprocess", "-problem", "sphere4", "-plugin", plug, "-gens", "3", "-quiet", "-report", report)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, _, cfg := trajectory(t, report); cfg["dim"] != 4.0 || cfg["lower"] != -5.12 || cfg["upper"] != 5.12 {
		t.Errorf("config %v: want dim 4 and the plugin's bounds", cfg)
	}
	code, _, errOut = esrun(context.Background(), "-inprocess", "-problem", "sphere4", "-plugin", plug, "-dim", "5")
	if code != 2 || !strings.Contains(errOut, "-dim 5: plugin sphere4 accepts dimension 4") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

func TestBadPlugins(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	dies := filepath.Join(dir, "dies")
	os.WriteFile(dies, []byte("#!/bin/sh\necho 'cannot open model.dat' >&2\nexit 4\n"), 0o755)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-problem", "sim", "-plugin", "sim=" + dir + "/none"}, 2, "no such file"},
		{[]string{"-problem", "sim", "-plugin", "sim"}, 2, "want NAME=PATH"},
		{[]string{"-problem", "ridge", "-plugin", "ridge=" + dies}, 2, "built-in problem"},
		{[]string{"-problem", "sim", "-plugin", "other=" + dies}, 2, "a plugin needs -plugin sim=PATH"},
		{[]string{"-problem", "sim", "-plugin", "sim=" + dies}, 1, "cannot open model.dat"},
	}
	for _, c := range cases {
		code, _, errOut := esrun(context.Background(), append([]string{"-inprocess"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want %d and one line with %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// A checkpointed plugin run resumes with the same -plugin, and says what
// is missing without it.
func TestPluginResume(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plug := "rastrigin-go=" + testplugin.MustBuild(t, dir)
	ckpt := filepath.Join(dir, "run.ckpt")
	code, out, errOut := esrun(context.Background(), "-inprocess", "-problem", "rastrigin-go", "-plugin", plug, "-dim", "4", "-gens", "3", "-quiet", "-checkpoint", ckpt)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = esrun(context.Background(), "-inprocess", "-resume", ckpt, "-gens", "6", "-quiet")
	if code == 0 || !strings.Contains(errOut, "-plugin rastrigin-go=PATH") {
		t.Errorf("resume without -plugin: exit %d, %q", code, errOut)
	}
	code, out, errOut = esrun(context.Background(), "-inprocess", "-resume", ckpt, "-plugin", plug, "-gens", "6", "-quiet")
	if code != 0 || !strings.Contains(out, "after generation 6") {
		t.Errorf("resume: exit %d\n%s%s", code, out, errOut)
	}
}

// pythonSDKPlugin writes the plugin NAME, any dimension in [-5, 5], whose
// f is the Python expression body of x, beside a copy of the Python SDK,
// or skips.
func pythonSDKPlugin(t *testing.T, dir, name, body string) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 not found: the plugin needs it")
	}
	sdk, err := os.ReadFile("../../sdk/python/esgrid_plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "esgrid_plugin.py"), sdk, 0o644); err != nil {
		t.Fatal(err)
	}
	src := "#!/usr/bin/python3\nfrom esgrid_plugin import serve\n" +
		"serve(lambda x: " + body + ", dim=(1, 0), bounds=(-5, 5), name=\"" + name + "\")\n"
	path := filepath.Join(dir, name+".py")
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A plugin that returns NaN without saying so in its hello fails an
// in-process run, as it fails a grid run (the master takes NaN for an
// evaluation error): the three generations in-process that check a
// plugin before a long run on a grid must not pass where the grid run
// then fails. With -nonfinite both take the NaN, and agree.
func TestPluginNonFiniteInProcessAsOnGrid(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plug := "nanny=" + pythonSDKPlugin(t, dir, "nanny", `float("nan") if x[0] > 1 else sum(v * v for v in x)`)
	common := []string{"-problem", "nanny", "-plugin", plug, "-dim", "3", "-mu", "3", "-lambda", "8", "-gens", "3", "-seed", "2", "-quiet"}
	where := map[string][]string{"in-process": {"-inprocess"}, "grid": {"-local", "1", "-slots", "1"}}
	for name, args := range where {
		code, out, errOut := esrun(context.Background(), append(args, common...)...)
		if code != 1 || !strings.Contains(errOut, "non-finite fitness NaN") {
			t.Errorf("%s: exit %d, want 1 with the NaN an error\n%s%s", name, code, out, errOut)
		}
		// In-process, the check of a plugin, the error names it.
		if name == "in-process" && !strings.Contains(errOut, "problem nanny: non-finite fitness NaN") {
			t.Errorf("in-process: the error does not name the plugin:\n%s", errOut)
		}
	}
	var want []map[string]any
	for _, name := range []string{"in-process", "grid"} {
		report := filepath.Join(dir, name+".json")
		code, out, errOut := esrun(context.Background(), append(append(where[name], common...), "-nonfinite", "-report", report)...)
		if code != 0 || !regexp.MustCompile(`, [1-9][0-9]* NaN,`).MatchString(out) {
			t.Fatalf("%s -nonfinite: exit %d\n%s%s", name, code, out, errOut)
		}
		gens, _, _ := trajectory(t, report)
		if want == nil {
			want = gens
		} else if !reflect.DeepEqual(gens, want) {
			t.Errorf("%s -nonfinite differs from in-process:\n%v\n%v", name, gens, want)
		}
	}
}

// -task-timeout and -max-retries bound an in-process evaluation as they
// bound a grid's: a plugin that never answers is killed at the timeout
// and its evaluation tried again, so that a hang once costs a retry and
// leaves the run's evolution as it is, and a hang at every try fails the
// run, naming the timeout, instead of hanging it for ever.
func TestInProcessTaskTimeout(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "hung")
	// It hangs on its first evaluation with x[0] > 0 (once: the marker
	// is made then), or, as "hangs", on every x[0] > 1.
	once := pythonSDKPlugin(t, dir, "hangonce", `(__import__("time").sleep(3600) if x[0] > 0 and not __import__("os").path.exists(`+strconv.Quote(marker)+`) and open(`+strconv.Quote(marker)+`, "w") else 0) or sum(v * v for v in x)`)
	always := pythonSDKPlugin(t, dir, "hangs", `(__import__("time").sleep(3600) if x[0] > 1 else 0) or sum(v * v for v in x)`)
	common := []string{"-inprocess", "-problem", "hangonce", "-plugin", "hangonce=" + once, "-dim", "3", "-mu", "3", "-lambda", "6", "-gens", "3", "-seed", "4", "-slots", "2", "-quiet"}

	want := filepath.Join(dir, "want.json")
	os.WriteFile(marker, nil, 0o644) // no hang: the reference
	if code, out, errOut := esrun(context.Background(), append(common, "-report", want)...); code != 0 {
		t.Fatalf("without a hang: exit %d\n%s%s", code, out, errOut)
	}
	os.Remove(marker)
	got := filepath.Join(dir, "got.json")
	// The timeout also bounds a fresh Python process's start with its
	// evaluation (a retry starts one): 6 s, not the 1 s a test would
	// like, so that a loaded machine's slow start is not taken for a hang.
	code, out, errOut := esrun(context.Background(), append(common, "-task-timeout", "6s", "-max-retries", "1", "-report", got)...)
	if code != 0 || !strings.Contains(errOut, "evaluation ran past the task timeout; it is tried again") {
		t.Fatalf("a hang once, one retry allowed: exit %d, want 0 with the timeout logged\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the plugin never hung")
	}
	wantGens, wantBest, _ := trajectory(t, want)
	gotGens, gotBest, _ := trajectory(t, got)
	if !reflect.DeepEqual(gotGens, wantGens) || !reflect.DeepEqual(gotBest, wantBest) {
		t.Errorf("the run with a retried timeout differs from the run without:\n%v %v\n%v %v", gotGens, gotBest, wantGens, wantBest)
	}

	code, out, errOut = esrun(context.Background(), "-inprocess", "-problem", "hangs", "-plugin", "hangs="+always, "-dim", "3", "-mu", "3", "-lambda", "6", "-gens", "3", "-seed", "4", "-quiet",
		"-slots", "2", "-task-timeout", "6s", "-max-retries", "1")
	if code != 1 || !strings.Contains(errOut, "failed 2 times (max retries 1): each ran past the task timeout of 6s") {
		t.Errorf("a hang at every try: exit %d, want 1 naming the timeout\n%s%s", code, out, errOut)
	}
}

// esrun's /metrics counts its plugins' processes: a plugin that crashes
// once, on a local grid, is seen there as one crash, beside its starts,
// the other events at 0.
func TestPluginMetricsCountACrash(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	marker := strconv.Quote(filepath.Join(dir, "crashed"))
	// It exits with status 3 on its first evaluation with x[0] > 0 (once:
	// the marker is made then).
	path := pythonSDKPlugin(t, dir, "crashonce", `(__import__("os")._exit(3) if x[0] > 0 and not __import__("os").path.exists(`+marker+`) and open(`+marker+`, "w").close() is None else 0) or sum(v * v for v in x)`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u := esrunSaying(t, ctx, []string{"-problem", "crashonce", "-plugin", "crashonce=" + path, "-dim", "3", "-gens", "1000000", "-local", "2", "-slots", "1",
		"-metrics", "127.0.0.1:0", "-quiet"}, `metrics on (http://\S+/metrics)`, "where its metrics are")
	series := regexp.MustCompile(`(?m)^esgrid_plugin_process_events_total\{([^}]*)\} (\S+)$`)
	events := map[string]float64{}
	var body []byte
	for events["crashed"] == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no crash counted; the plugin's series: %v; /metrics:\n%s", events, body)
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		clear(events)
		for _, m := range series.FindAllStringSubmatch(string(body), -1) {
			ev := regexp.MustCompile(`event="([a-z_]+)"`).FindStringSubmatch(m[1])
			if ev == nil || !strings.Contains(m[1], `plugin="crashonce"`) || strings.Contains(m[1], "worker=") {
				t.Fatalf("a series %s", m[0])
			}
			events[ev[1]], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if len(events) != 5 || events["crashed"] != 1 || events["started"] < 2 || events["start_failed"] != 0 || events["protocol_error"] != 0 {
		t.Errorf("after one crash: %v; want crashed 1, started at least 2 (the hello's process and a worker's), start_failed and protocol_error 0, killed there", events)
	}
}

// An in-process run that fails because an evaluation ran past
// -task-timeout more often than -max-retries allows says so in its
// partial report's failed_task, as a grid run does, for a program to
// read. -lu makes every evaluation look at its context, and a timeout of
// 1 ns has passed before it does: every try times out.
func TestInProcessTimeoutsNameTheFailedTask(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "run.json")
	code, out, errOut := esrun(context.Background(), "-inprocess", "-problem", "sphere", "-dim", "3", "-lu", "8", "-gens", "2", "-seed", "1", "-quiet",
		"-slots", "1", "-task-timeout", "1ns", "-max-retries", "1", "-report", path)
	if code != 1 || !strings.Contains(errOut, "task 0: failed 2 times (max retries 1): each ran past the task timeout of 1ns") {
		t.Fatalf("exit %d, want 1 naming the timeout\n%s%s", code, out, errOut)
	}
	ft, b := partialFailedTask(t, path)
	if ft == nil || ft.Gen != 0 || ft.Task != 0 || ft.MaxRetries != 1 || len(ft.Failures) != 2 {
		t.Fatalf("failed_task %+v, want generation 0, task 0, max retries 1 and 2 failures; the report:\n%s", ft, b)
	}
	for _, f := range ft.Failures {
		if f.Worker != "inprocess" || f.Error != "ran past the task timeout of 1ns: context deadline exceeded" {
			t.Errorf("failure %+v", f)
		}
	}
}

// A plugin that crashes on some x fails an in-process run at once (there
// is no other machine to try it on), and the partial report's
// failed_task names the task and the crash, as a grid run's does: the
// three generations in process that check a plugin tell a program which
// task broke it. Before, failed_task was absent.
func TestInProcessCrashNamesTheFailedTask(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	plug := "crashy=" + pythonSDKPlugin(t, dir, "crashy", `__import__("os")._exit(3) if x[0] > 1 else sum(v * v for v in x)`)
	path := filepath.Join(dir, "run.json")
	code, out, errOut := esrun(context.Background(), "-inprocess", "-problem", "crashy", "-plugin", plug, "-dim", "3", "-mu", "3", "-lambda", "8",
		"-gens", "3", "-seed", "2", "-quiet", "-slots", "1", "-report", path)
	if code != 1 || !strings.Contains(errOut, "plugin process exited during an evaluation (exit status 3)") {
		t.Fatalf("exit %d, want 1 naming the crash\n%s%s", code, out, errOut)
	}
	ft, _ := partialFailedTask(t, path)
	if ft == nil || len(ft.Failures) != 1 || ft.Failures[0].Worker != "inprocess" ||
		!strings.Contains(ft.Failures[0].Error, "exit status 3") ||
		!strings.Contains(errOut, fmt.Sprintf("generation %d: task %d: ", ft.Gen, ft.Task)) {
		t.Fatalf("failed_task %+v, want the task the error names, with its one crash; the error:\n%s", ft, errOut)
	}
}

// partialFailedTask reads the failed_task of the partial report a failed
// run left at path, and the report's bytes, to show.
func partialFailedTask(t *testing.T, path string) (*report.FailedTask, []byte) {
	t.Helper()
	b, err := os.ReadFile(path + report.PartialSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		FailedTask *report.FailedTask `json:"failed_task"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep.FailedTask, b
}

// A plugin slower to start than -task-timeout (three times, here) runs on
// a local grid: the tasks sent while its processes start wait for them,
// and their clocks start once the worker serves. They ran from their send,
// and the run failed with no faulty evaluation ("task 0 failed 3 times
// (max retries 2): … ran past the task timeout of 1s").
func TestPluginSlowerToStartThanTheTaskTimeout(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	slow := filepath.Join(dir, "slowstart")
	script := "#!/bin/sh\nsleep 3\nexec " + strconv.Quote(testplugin.MustBuild(t, dir)) + "\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := esrun(context.Background(), "-problem", "rastrigin-go", "-plugin", "rastrigin-go="+slow, "-local", "1", "-slots", "1",
		"-dim", "3", "-mu", "2", "-lambda", "4", "-gens", "2", "-seed", "3", "-quiet", "-task-timeout", "1s", "-max-retries", "2")
	if code != 0 {
		t.Fatalf("a plugin 3 s to start under a task timeout of 1 s: exit %d, want 0\n%s%s", code, out, errOut)
	}
}
