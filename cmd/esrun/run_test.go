package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// esrun runs the command in-process and returns its exit status and output.
func esrun(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the message
	}{
		{[]string{"-nosuch"}, "flag provided but not defined: -nosuch"},
		{[]string{"-lambda", "x"}, `invalid value "x" for flag -lambda`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-mu", "0"}, "-mu must be ≥ 1, got 0"},
		{[]string{"-lambda", "0"}, "-lambda must be ≥ 1"},
		{[]string{"-dim", "0"}, "-dim 0"},
		{[]string{"-problem", "rosenbrock", "-dim", "1"}, "-dim 1"},
		{[]string{"-problem", "nosuch"}, `-problem "nosuch" is not known`},
		{[]string{"-gens", "-1"}, "-gens must be ≥ 0"},
		{[]string{"-gens", "0"}, "-gens is 0"},
		{[]string{"-max-evals", "10"}, "-max-evals must be ≥ Mu (30)"},
		{[]string{"-comma", "-lambda", "10"}, "-lambda must be ≥ Mu (30) for comma selection"},
		{[]string{"-target", "NaN"}, "-target must be finite"},
		{[]string{"-sigma", "-1"}, "-sigma must be finite and ≥ 0"},
		{[]string{"-sigma", "500"}, "-sigma must be ≤ Upper − Lower (200)"},
		{[]string{"-lu", "-3"}, "-lu must be ≥ 0"},
		{[]string{"-load-ms", "-1"}, "-load-ms must be in [0, 60000]"},
		{[]string{"-lu", "5", "-load-ms", "10"}, "-lu and -load-ms both"},
		{[]string{"-slots", "-1"}, "-slots must be ≥ 0"},
		{[]string{"-resume", "x.ckpt", "-mu", "5"}, "-mu cannot be given with -resume"},
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
	for _, want := range []string{"Usage: esrun", "Examples:", "-load-ms", "-resume FILE", "ridge, rosenbrock"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
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

// readReport decodes a -report file into the shape the README documents.
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
		Slots    int `json:"slots"`
		StartGen int `json:"start_gen"`
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
	Evals int `json:"evals"`
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
	path := filepath.Join(t.TempDir(), "run.json")
	code, stdout, stderr := esrun(context.Background(), "-dim", "5", "-gens", "6", "-seed", "3", "-slots", "2", "-report", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	// A header, generations 0..6, the summary.
	if len(lines) != 9 || !strings.HasPrefix(lines[1], "gen    0") || !strings.HasPrefix(lines[8], "best ") {
		t.Fatalf("output:\n%s", stdout)
	}
	r := readReport(t, path)
	if r.Config.Problem != "ridge" || r.Config.Mu != 30 || r.Config.Lambda != 70 || r.Config.Dim != 5 || r.Config.Seed != 3 || r.Config.Slots != 2 {
		t.Errorf("config: %+v", r.Config)
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

	code, stdout, _ = esrun(context.Background(), "-dim", "5", "-gens", "6", "-quiet")
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.HasPrefix(stdout, "best ") {
		t.Errorf("-quiet: exit %d, output %q", code, stdout)
	}
}

// A run stopped at generation 4 and resumed from its checkpoint ends as the
// uninterrupted run does.
func TestResumeFromFlags(t *testing.T) {
	dir := t.TempDir()
	ckpt, whole, resumed := filepath.Join(dir, "run.ckpt"), filepath.Join(dir, "whole.json"), filepath.Join(dir, "resumed.json")
	common := []string{"-dim", "8", "-seed", "11", "-quiet"}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "12", "-report", whole)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(context.Background(), append(common, "-gens", "4", "-checkpoint", ckpt)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "12", "-report", resumed, "-quiet"); code != 0 {
		t.Fatal(stderr)
	}
	w, r := readReport(t, whole), readReport(t, resumed)
	if r.Config.StartGen != 5 || len(r.Generations) != 8 || r.Config.Seed != 11 {
		t.Fatalf("resumed run: start %d, %d generations, seed %d", r.Config.StartGen, len(r.Generations), r.Config.Seed)
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
