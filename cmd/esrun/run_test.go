package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
)

// esrun runs the command in-process and returns its exit status and output.
func esrun(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// esrunSaying starts the command in-process with args, until the test
// ends (then it is interrupted and waited for), and returns the first
// submatch of pattern in its log: where it serves a page, say. what names
// the line in the test's failure if it never comes before ctx ends.
func esrunSaying(t *testing.T, ctx context.Context, args []string, pattern, what string) string {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	ran := make(chan int, 1)
	go func() {
		ran <- run(runCtx, args, io.Discard, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		stop()
		<-ran // interrupted: it says so and exits 1
	})
	said := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(pattern)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				said <- m[1]
				break
			}
		}
		io.Copy(io.Discard, pr) // the rest of the log, until run ends
	}()
	select {
	case s := <-said:
		return s
	case <-ctx.Done():
		t.Fatalf("esrun never said %s", what)
		return ""
	}
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the message
	}{
		{[]string{"-nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"-lambda", "x"}, "-lambda x: must be an integer between 1 and 1000000"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-mu", "0"}, "-mu 0: must be an integer between 1 and 1000000"},
		{[]string{"-lambda", "0"}, "-lambda 0: must be an integer between 1 and 1000000"},
		{[]string{"-dim", "0"}, "-dim 0"},
		{[]string{"-problem", "rosenbrock", "-dim", "1"}, "-dim 1"},
		{[]string{"-problem", "nosuch"}, `-problem "nosuch" is not known`},
		{[]string{"-gens", "-1"}, "-gens -1: must be an integer between 0 and 100000000"},
		{[]string{"-gens", "0"}, "-gens is 0"},
		{[]string{"-max-evals", "10"}, "-max-evals must be ≥ Mu (30)"},
		{[]string{"-comma", "-lambda", "10"}, "-lambda must be ≥ Mu (30) for comma selection"},
		{[]string{"-target", "NaN"}, "-target NaN: must be a finite number"},
		{[]string{"-sigma", "-1"}, "-sigma -1: must be a finite number ≥ 0"},
		{[]string{"-sigma", "500"}, "-sigma must be ≤ Upper − Lower (200)"},
		{[]string{"-lu", "-3"}, "-lu -3: must be an integer between 0 and 4096"},
		{[]string{"-load-ms", "-1"}, "-load-ms -1: must be a number between 0 and 60000"},
		{[]string{"-lu", "5", "-load-ms", "10"}, "-lu and -load-ms both"},
		{[]string{"-slots", "-1"}, "-slots -1: must be an integer between 0 and 65536"},
		{[]string{"-resume", "x.ckpt", "-mu", "5"}, "-mu cannot be given with -resume"},
		{[]string{"-policy", "fifo"}, `-policy "fifo" is not a policy (known: ` + strings.Join(sched.Names, ", ") + `)`},
		{[]string{"-local", "-1"}, "-local -1: must be an integer between 0 and 1024"},
		{[]string{"-min-workers", "-2"}, "-min-workers -2: must be an integer between 0 and 65536"},
		{[]string{"-slots", "100000"}, "-slots 100000: must be an integer between 0 and 65536"},
		{[]string{"-listen", "localhost"}, `-listen "localhost": address localhost: missing port`},
		{[]string{"-listen", ""}, `-listen "": missing port`},
		{[]string{"-gossip", "127.0.0.1:http"}, `-gossip "127.0.0.1:http": port "http" is not a number`},
		{[]string{"-gossip", "127.0.0.1:70000"}, `port "70000" is not a number in [0, 65535]`},
		{[]string{"-gossip", "localhost:7946"}, `-gossip "localhost:7946": the host must be an IP address`},
		{[]string{"-key", "a", "-key-file", "b"}, "-key and -key-file both"},
		{[]string{"-inprocess", "-policy", "wq"}, "-policy has no effect with -inprocess"},
		{[]string{"-inprocess", "-local", "3"}, "-local has no effect with -inprocess"},
		{[]string{"-inprocess", "-key", "k"}, "-key has no effect with -inprocess"},
		{[]string{"-inprocess", "-adaptive"}, "-adaptive has no effect with -inprocess"},
		{[]string{"-adaptive", "-policy", "wq"}, "-adaptive applies to -policy rwq and r3q only, not wq"},
		{[]string{"-dim", "1048577"}, "a worker evaluates at most 1048576 dimensions"},
		{[]string{"-key-file", "/nonexistent/esgrid.key"}, "-key-file: grid: key file: open /nonexistent/esgrid.key"},
		{[]string{"-run-name", "a"}, "-run-name needs -metrics"},
		{[]string{"-metrics", "127.0.0.1:0", "-run-name", "a b"}, `-run-name "a b": give 1 to 64 letters, digits or . _ - : characters`},
		{[]string{"-metrics", "127.0.0.1:0", "-run-name", ""}, `-run-name "": give 1 to 64`},
		{[]string{"-metrics", "127.0.0.1:0", "-run-name", strings.Repeat("r", 65)}, `give 1 to 64`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := esrun(context.Background(), tt.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "esrun: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	code, stdout, stderr := esrun(context.Background(), "-h")
	if code != 0 || stderr != "" {
		t.Fatalf("-h: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"Usage: esrun", "Examples:", "-load-ms", "-resume FILE", "ridge, rosenbrock",
		"Grid flags:", "-policy POLICY", "-adaptive", "wq, rr, rwq, r3q, cyclic", "-local N", "-min-workers N",
		"-listen HOST:PORT", "-gossip HOST:PORT", "-key KEY", "-key-file FILE", "-inprocess", "0.0.0.0:7946", "0.0.0.0:7947"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// The groups come in order, and every flag is in one of them.
	last := -1
	for _, title := range []string{"Evolution Strategy flags:", "Load (extra work per evaluation) flags:", "Grid flags:", "Output flags:"} {
		i := strings.Index(stdout, title)
		if i <= last {
			t.Errorf("group %q missing or out of order", title)
		}
		last = i
	}
	seen := map[string]int{}
	for _, g := range flagGroups {
		for _, name := range g.Names {
			seen[name]++
		}
	}
	newFlagSet(&options{}).VisitAll(func(f *flag.Flag) {
		if seen[f.Name] != 1 {
			t.Errorf("flag -%s is in %d help groups, want 1", f.Name, seen[f.Name])
		}
		delete(seen, f.Name)
	})
	if len(seen) > 0 {
		t.Errorf("help groups name flags that do not exist: %v", seen)
	}
}

func TestRunFailures(t *testing.T) {
	code, _, stderr := esrun(context.Background(), "-resume", filepath.Join(t.TempDir(), "missing.ckpt"))
	if code != 1 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("missing checkpoint: exit %d, stderr %q", code, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr = esrun(ctx, "-quiet")
	if code != 1 || !strings.Contains(stderr, "interrupted") {
		t.Errorf("cancelled run: exit %d, stderr %q", code, stderr)
	}
}

// readReport decodes a -report file into the shape docs/report.md documents.
type reportFile struct {
	Config struct {
		Problem string `json:"problem"`
		Mu      int    `json:"mu"`
		Lambda  int    `json:"lambda"`
		Dim     int    `json:"dim"`
		Seed    uint64 `json:"seed"`
		Stop    struct {
			Generations int `json:"generations"`
		} `json:"stop"`
		Slots     int    `json:"slots"`
		StartGen  int    `json:"start_gen"`
		Evaluator string `json:"evaluator"`
		Grid      *struct {
			Sched      string `json:"sched"`
			Adaptive   bool   `json:"adaptive"`
			Local      int    `json:"local"`
			LocalSlots int    `json:"local_slots"`
			MinWorkers int    `json:"min_workers"`
			Listen     string `json:"listen"`
			Gossip     string `json:"gossip"`
		} `json:"grid"`
	} `json:"config"`
	Generations []struct {
		Gen         int      `json:"gen"`
		Evals       int      `json:"evals"`
		Best        *float64 `json:"best"`
		Mean        *float64 `json:"mean"`
		WallSeconds *float64 `json:"wall_seconds"`
	} `json:"generations"`
	Stop string `json:"stop"`
	Best struct {
		F *float64  `json:"f"`
		X []float64 `json:"x"`
	} `json:"best"`
	Evals    int              `json:"evals"`
	Restarts int              `json:"restarts"`
	Schedule *report.Schedule `json:"schedule"`
}

func readReport(t *testing.T, path string) reportFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r reportFile
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("report is not valid JSON: %v", err)
	}
	return r
}

func TestRunWritesReport(t *testing.T) {
	leaktest.Check(t)
	path := filepath.Join(t.TempDir(), "run.json")
	code, stdout, stderr := esrun(t.Context(), "-dim", "5", "-gens", "6", "-seed", "3", "-local", "2", "-slots", "2", "-report", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	// A header, generations 0..6, two lines of schedule, the summary.
	if len(lines) != 11 || !strings.HasPrefix(lines[1], "gen    0") || !strings.HasPrefix(lines[8], "schedule r3q on 2 workers (4 slots): total ") ||
		!strings.HasPrefix(lines[9], "tasks: 450 originals, ") || !strings.HasPrefix(lines[10], "best ") {
		t.Fatalf("output:\n%s", stdout)
	}
	if !strings.Contains(lines[0], "grid r3q: 2 local workers × 2 slots") {
		t.Errorf("header %q", lines[0])
	}
	r := readReport(t, path)
	if r.Config.Problem != "ridge" || r.Config.Mu != 30 || r.Config.Lambda != 70 || r.Config.Dim != 5 || r.Config.Seed != 3 || r.Config.Slots != 4 {
		t.Errorf("config: %+v", r.Config)
	}
	if r.Config.Evaluator != "grid" || r.Config.Grid == nil || r.Config.Grid.Sched != "r3q" || r.Config.Grid.Local != 2 ||
		r.Config.Grid.LocalSlots != 2 || r.Config.Grid.MinWorkers != 2 ||
		!strings.HasPrefix(r.Config.Grid.Listen, "127.0.0.1:") || strings.HasSuffix(r.Config.Grid.Listen, ":0") ||
		!strings.HasPrefix(r.Config.Grid.Gossip, "127.0.0.1:") || strings.HasSuffix(r.Config.Grid.Gossip, ":0") {
		t.Errorf("grid config: %q %+v", r.Config.Evaluator, r.Config.Grid)
	}
	if len(r.Generations) != 7 || r.Stop != "generations" || r.Evals != 30+6*70 {
		t.Fatalf("%d generations, stop %q, %d evals", len(r.Generations), r.Stop, r.Evals)
	}
	for i, g := range r.Generations {
		if g.Gen != i || g.Best == nil || g.Mean == nil || g.WallSeconds == nil || *g.Best > *g.Mean {
			t.Errorf("generation record %d: %+v", i, g)
		}
	}
	last := r.Generations[len(r.Generations)-1]
	if r.Best.F == nil || *r.Best.F != *last.Best || len(r.Best.X) != 5 {
		t.Errorf("best: %+v", r.Best)
	}
	s := r.Schedule
	switch {
	case s == nil:
		t.Fatal("no schedule in the report")
	case s.Policy != "r3q" || s.Workers != 2 || len(s.PerWorker) != 2:
		t.Errorf("schedule: policy %q, %d workers, %d per worker", s.Policy, s.Workers, len(s.PerWorker))
	case s.Originals != r.Evals || s.TasksSent != int64(s.Originals+s.Resends+s.Replicas) || s.Total <= 0:
		t.Errorf("schedule: %d originals, %d resends, %d replicas, %d sent, total %v", s.Originals, s.Resends, s.Replicas, s.TasksSent, s.Total)
	case len(s.Generations) != 7 || s.Generations[0].Gen != 0 || s.Generations[0].Tasks != 30 || s.Generations[6].Tasks != 70:
		t.Errorf("schedule generations: %+v", s.Generations)
	}

	code, stdout, _ = esrun(t.Context(), "-dim", "5", "-gens", "6", "-quiet", "-inprocess")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "best ") {
		t.Errorf("-quiet: exit %d, output %q", code, stdout)
	}
}

// A run stopped at generation 4 and resumed from its checkpoint ends as the
// uninterrupted run does, whatever evaluated each part.
func TestResumeFromFlags(t *testing.T) {
	dir := t.TempDir()
	ckpt, whole, resumed := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "whole.json"), filepath.Join(dir, "resumed.json")
	common := []string{"-dim", "8", "-seed", "11", "-quiet"}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "12", "-report", whole, "-inprocess")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "4", "-checkpoint", ckpt, "-policy", "wq")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "12", "-report", resumed, "-quiet"); code != 0 {
		t.Fatal(stderr)
	}
	w, r := readReport(t, whole), readReport(t, resumed)
	if r.Config.StartGen != 5 || len(r.Generations) != 8 || r.Config.Seed != 11 {
		t.Fatalf("resumed run: start %d, %d generations, seed %d", r.Config.StartGen, len(r.Generations), r.Config.Seed)
	}
	if s := r.Schedule; s == nil || len(s.Generations) != 8 || s.Generations[0].Gen != 5 || s.Generations[7].Gen != 12 {
		t.Errorf("resumed run's schedule: %+v", s)
	}
	for i, g := range r.Generations {
		if wg := w.Generations[5+i]; g.Gen != wg.Gen || *g.Best != *wg.Best || *g.Mean != *wg.Mean {
			t.Fatalf("generation %d: resumed %v/%v, whole %v/%v", g.Gen, *g.Best, *g.Mean, *wg.Best, *wg.Mean)
		}
	}
	if *r.Best.F != *w.Best.F || len(r.Best.X) != len(w.Best.X) {
		t.Fatalf("final best %v vs %v", *r.Best.F, *w.Best.F)
	}
	for i := range r.Best.X {
		if r.Best.X[i] != w.Best.X[i] {
			t.Fatalf("final best vectors differ at %d", i)
		}
	}
}
