package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeFile writes s to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, s string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// unchanged fails the test if path does not hold want.
func unchanged(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want {
		t.Errorf("%s now holds %q (%v), want it left as %q", path, b, err, want)
	}
}

// A run refuses, before any work, to replace a checkpoint or a report that
// it did not write, unless -force says so or the checkpoint is the one
// -resume continues; and a file it could not write at all is refused
// at once too.
func TestOutputFilesNotClobbered(t *testing.T) {
	dir := t.TempDir()
	// A real checkpoint of another run, to continue.
	ckpt := filepath.Join(dir, "run.ckpt")
	if code, _, stderr := esrun(context.Background(), "-inprocess", "-dim", "4", "-gens", "2", "-quiet", "-checkpoint", ckpt); code != 0 {
		t.Fatal(stderr)
	}
	saved, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	report := writeFile(t, dir, "run.json", `{"a good": "report"}`)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	// Not regular files: a named pipe (as /dev/null is a device) and a
	// loop of links. The old code, given -force, renamed its file over
	// them: the pipe became a regular file (and /dev/null, as root, too),
	// and the loop "existed" ("-checkpoint loop: the file exists").
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop2", loop)
	os.Symlink("loop", filepath.Join(dir, "loop2"))

	small := []string{"-inprocess", "-dim", "4", "-gens", "3", "-quiet"}
	tests := []struct {
		name string
		args []string
		want string // in the one-line message
	}{
		{"fresh run over a checkpoint", []string{"-checkpoint", ckpt}, "-checkpoint " + ckpt + ": the file exists"},
		{"the hint names the flags", []string{"-checkpoint", ckpt}, "-resume " + ckpt + ", or give -force"},
		{"fresh run over a report", []string{"-report", report}, "-report " + report + ": the file exists"},
		{"resume into another run's checkpoint", []string{"-resume", ckpt, "-checkpoint", report}, "-checkpoint " + report + ": the file exists"},
		{"resume over a report", []string{"-resume", ckpt, "-report", report}, "-report " + report + ": the file exists"},
		{"no directory", []string{"-checkpoint", filepath.Join(dir, "nodir", "x.ckpt")}, "there is no directory " + filepath.Join(dir, "nodir")},
		{"report in no directory", []string{"-report", filepath.Join(report, "x.json")}, "there is no directory " + report},
		{"checkpoint is a directory", []string{"-checkpoint", sub, "-force"}, "-checkpoint " + sub + " is a directory"},
		{"report is a directory", []string{"-report", sub, "-force"}, "-report " + sub + " is a directory"},
		{"checkpoint is a named pipe", []string{"-checkpoint", fifo, "-force"}, "-checkpoint " + fifo + " is a named pipe, not a regular file"},
		{"report is a named pipe", []string{"-report", fifo, "-force"}, "-report " + fifo + " is a named pipe, not a regular file"},
		{"checkpoint is a loop of links", []string{"-checkpoint", loop}, "-checkpoint " + loop + ": too many levels of symbolic links"},
		{"report is a loop of links", []string{"-report", loop, "-force"}, "-report " + loop + ": too many levels of symbolic links"},
		{"report is the checkpoint", []string{"-checkpoint", ckpt, "-report", ckpt, "-force"}, "-checkpoint " + ckpt + " and -report " + ckpt + " are the same file"},
		{"report is the resumed checkpoint", []string{"-resume", ckpt, "-report", ckpt, "-force"}, "-resume " + ckpt + " (the checkpoint this run keeps) and -report " + ckpt + " are the same file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if !strings.Contains(strings.Join(args, " "), "-resume") {
				args = append(append([]string{}, small...), args...)
			}
			code, stdout, stderr := esrun(context.Background(), args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line with %q", code, stdout, stderr, tt.want)
			}
			unchanged(t, ckpt, string(saved))
			unchanged(t, report, `{"a good": "report"}`)
			if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				t.Fatalf("the named pipe was replaced: %v, %v", fi.Mode(), err)
			}
		})
	}

	// No file the run writes is another it writes or needs, in any
	// spelling: -report R writes R.partial when the run fails.
	partialCkpt := filepath.Join(dir, "R.partial")
	if err := os.WriteFile(partialCkpt, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	r := filepath.Join(dir, "R")
	linkDir := filepath.Join(dir, "linkdir")
	symlinks := os.Symlink(dir, linkDir) == nil && os.Symlink(ckpt, filepath.Join(dir, "ckpt-link")) == nil
	hard := filepath.Join(dir, "hard.ckpt")
	hardlinks := os.Link(ckpt, hard) == nil
	same := "are the same file: name another"
	clashes := []struct {
		name string
		args []string
		want string
		skip bool
	}{
		{"checkpoint is the partial report", []string{"-checkpoint", partialCkpt, "-report", r, "-force"}, "-checkpoint " + partialCkpt + " and the partial report " + partialCkpt + " of -report " + r + " " + same, false},
		{"resumed checkpoint is the partial report", []string{"-resume", partialCkpt, "-report", r}, "-resume " + partialCkpt + " (the checkpoint this run keeps) and the partial report " + partialCkpt + " of -report " + r + " " + same, false},
		{"resumed elsewhere, the partial report over the resumed", []string{"-resume", partialCkpt, "-checkpoint", filepath.Join(dir, "new.ckpt"), "-report", r}, "the partial report " + partialCkpt + " of -report " + r + " and -resume " + partialCkpt + " " + same, false},
		{"checkpoint is the report", []string{"-checkpoint", r, "-report", r, "-force"}, same, false},
		{"report is the checkpoint, spelt otherwise", []string{"-checkpoint", ckpt, "-report", filepath.Join(dir, ".", "sub", "..", "run.ckpt"), "-force"}, same, false},
		{"through a linked directory", []string{"-checkpoint", filepath.Join(linkDir, "x.partial"), "-report", filepath.Join(dir, "x"), "-force"}, same, !symlinks},
		{"report is a link to the checkpoint", []string{"-checkpoint", ckpt, "-report", filepath.Join(dir, "ckpt-link"), "-force"}, same, !symlinks},
		{"report is a hard link to the resumed checkpoint", []string{"-resume", ckpt, "-report", hard}, same, !hardlinks},
		{"report is the key file", []string{"-resume", ckpt, "-key-file", report, "-report", report, "-force"}, "-report " + report + " and -key-file " + report + " " + same, false},
	}
	for _, tt := range clashes {
		t.Run(tt.name, func(t *testing.T) {
			if tt.skip {
				t.Skip("no links here")
			}
			args := tt.args
			if !strings.Contains(strings.Join(args, " "), "-resume") {
				args = append(append([]string{}, small...), args...)
			}
			code, stdout, stderr := esrun(context.Background(), args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line with %q", code, stdout, stderr, tt.want)
			}
			unchanged(t, ckpt, string(saved))
			unchanged(t, partialCkpt, string(saved))
			if _, err := os.Lstat(r); err == nil {
				t.Errorf("%s was written", r)
			}
		})
	}

	// Allowed: -resume rewrites the checkpoint it continues; -force
	// replaces both files.
	if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "3", "-quiet"); code != 0 {
		t.Fatalf("-resume: exit %d: %s", code, stderr)
	}
	if code, _, stderr := esrun(context.Background(), append(small, "-checkpoint", ckpt, "-report", report, "-force")...); code != 0 {
		t.Fatalf("-force: exit %d: %s", code, stderr)
	}
	if r := readReport(t, report); r.Stop != "generations" || len(r.Generations) != 4 {
		t.Errorf("-force: report stop %q, %d generations", r.Stop, len(r.Generations))
	}
	// A second path to the checkpoint is still the checkpoint resumed.
	link := filepath.Join(dir, "link.ckpt")
	if err := os.Symlink(ckpt, link); err == nil {
		if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-checkpoint", link, "-gens", "4", "-quiet"); code != 0 {
			t.Errorf("-resume through a link: exit %d: %s", code, stderr)
		}
	}
}

// cancelAt is a stdout that cancels the run once the progress line of a
// generation has been printed: Ctrl-C in the middle of a run.
type cancelAt struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	line   string
	cancel context.CancelFunc
}

func (c *cancelAt) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.line) {
		c.cancel()
	}
	return len(p), nil
}

// An interrupted run leaves an existing report as it was, even with
// -force, and writes its own beside it as FILE.partial; the hint to
// continue names the checkpoint it wrote, which is there.
func TestInterruptedRunKeepsReport(t *testing.T) {
	for _, tt := range []struct {
		name         string
		mode         []string
		ckpt, report string
	}{
		{"inprocess", []string{"-inprocess"}, "run.ckpt", "run.json"},
		{"grid", []string{"-local", "2", "-policy", "wq"}, "run.ckpt", "run.json"},
		// A .partial name is a checkpoint like any other, once it is
		// not the report's partial one.
		{"partial names", []string{"-inprocess"}, "R.partial", "R.partial.json"},
	} {
		mode := tt.mode
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			report := writeFile(t, dir, tt.report, `{"a good": "report"}`)
			ckpt := filepath.Join(dir, tt.ckpt)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := &cancelAt{line: "gen    3/", cancel: cancel}
			var errb bytes.Buffer
			args := append([]string{"-dim", "4", "-gens", "50", "-checkpoint", ckpt, "-report", report, "-force"}, mode...)
			code := run(ctx, args, out, &errb)
			stderr := errb.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, stderr)
			}
			unchanged(t, report, `{"a good": "report"}`)
			last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]
			for _, want := range []string{"interrupted", "(continue with -resume " + ckpt + "; partial report in " + report + ".partial)"} {
				if !strings.Contains(last, want) {
					t.Errorf("last line %q lacks %q", last, want)
				}
			}
			if _, err := os.Stat(ckpt); err != nil {
				t.Errorf("the hint names %s: %v", ckpt, err)
			}
			r := readReport(t, report+".partial")
			if r.Stop != "" || len(r.Generations) < 4 || r.Generations[3].Gen != 3 {
				t.Errorf("partial report: stop %q, %d generations", r.Stop, len(r.Generations))
			}
			var raw map[string]any
			b, _ := os.ReadFile(report + ".partial")
			if json.Unmarshal(b, &raw) != nil || !strings.Contains(raw["error"].(string), "interrupted") {
				t.Errorf("partial report's error: %v", raw["error"])
			}
			// The checkpoint continues the run.
			if code, _, stderr := esrun(context.Background(), "-resume", ckpt, "-gens", "6", "-quiet", "-inprocess"); code != 0 {
				t.Errorf("resume: exit %d: %s", code, stderr)
			}
		})
	}
}

// A run that stops before it has written a checkpoint names none, and a
// run without -report writes no report anywhere.
func TestNoHintWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "run.ckpt")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr := esrun(ctx, "-inprocess", "-dim", "4", "-quiet", "-checkpoint", ckpt)
	if code != 1 || strings.Contains(stderr, "-resume") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and no -resume hint", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
}

func TestResumableCheckpoint(t *testing.T) {
	dir := t.TempDir()
	there := writeFile(t, dir, "there.ckpt", "x")
	other := writeFile(t, dir, "other.ckpt", "x")
	gone := filepath.Join(dir, "gone.ckpt")
	tests := []struct {
		checkpoint, resume string
		wrote              bool
		want               string
	}{
		{there, "", true, there},
		{there, "", false, ""},       // this run wrote nothing: the file is another run's
		{gone, "", true, ""},         // written, then lost: name nothing
		{there, other, false, other}, // interrupted before a generation: the one resumed
		{there, other, true, there},
		{gone, other, true, other},
		{dir, "", true, ""}, // not a file
		{"", "", true, ""},
	}
	for _, tt := range tests {
		o := &options{checkpoint: tt.checkpoint, resume: tt.resume}
		if got := resumableCheckpoint(o, tt.wrote); got != tt.want {
			t.Errorf("checkpoint %q resume %q wrote %v: %q, want %q", tt.checkpoint, tt.resume, tt.wrote, got, tt.want)
		}
	}
}

// A plan that sets aside every local worker of a run that waits for no
// other is refused before any work: the old esrun started, logged "the
// plan sets this worker aside" for both workers, gave no worker a task and
// waited for ever in generation 0 (here: until the test cancelled it). A
// plan that leaves one local worker goes on.
func TestPlanSettingAsideEveryWorker(t *testing.T) {
	dir := t.TempDir()
	aside := writeFile(t, dir, "aside.json", `{"version": 1, "groups": [{"group": "local", "slots": 0}]}`)
	one := writeFile(t, dir, "one.json", `{"version": 1, "workers": [{"name": "local-1", "slots": 0}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, wait := esrunAsync(ctx, "-local", "2", "-gens", "1", "-quiet", "-plan", aside)
	exit := make(chan int, 1)
	go func() { exit <- wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for code := -1; code < 0; {
		select {
		case code = <-exit:
			want := "-plan " + aside + " sets aside every local worker (local-1 to local-2), and the run waits for no other"
			if code != 2 || stdout.String() != "" || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
			}
		case <-tick.C:
			if strings.Count(stderr.String(), "the plan sets this worker aside") == 2 {
				cancel()
				t.Fatalf("esrun started with every worker set aside (exit %d once cancelled):\n%s", <-exit, stderr)
			}
		}
	}
	if code, _, stderr := esrun(context.Background(), "-local", "2", "-gens", "1", "-quiet", "-plan", one); code != 0 {
		t.Errorf("a plan that leaves local-2: exit %d, %s", code, stderr)
	}
}
