package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
)

// The report is replaced whole: no temporary file is left behind, and
// the mode is the usual one.
func TestWriteReportAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, &Record{Stop: "generations", Generations: []GenRecord{{Gen: 0, Evals: 10}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := Read(path); err != nil || r.Stop != "generations" || len(r.Generations) != 1 || r.Generations[0].Evals != 10 {
		t.Errorf("read back: %+v, %v", r, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files: %v", entries)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if err := Write(filepath.Join(dir, "nodir", "r.json"), &Record{}); err == nil || !strings.Contains(err.Error(), "report "+filepath.Join(dir, "nodir", "r.json")) {
		t.Errorf("unwritable: %v", err)
	}
}

// A partial report goes beside the report's path, which keeps what it
// held, and the hint says where, or why not.
func TestWritePartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if hint := WritePartial(path, &Record{Stop: "interrupted", Generations: []GenRecord{{Gen: 0, Evals: 10}}}); hint != "partial report in "+path+PartialSuffix {
		t.Errorf("hint %q", hint)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
		t.Errorf("the report's path now holds %q, %v", b, err)
	}
	if r, err := Read(path + PartialSuffix); err != nil || r.Stop != "interrupted" {
		t.Errorf("partial: %+v, %v", r, err)
	}
	nodir := filepath.Join(dir, "nodir", "r.json")
	if hint := WritePartial(nodir, &Record{}); !strings.HasPrefix(hint, "report "+nodir+PartialSuffix+": ") {
		t.Errorf("hint %q", hint)
	}
}

// A run that failed because a task failed more often than -max-retries
// allows says so in its report's failed_task, for a program to read
// without parsing the error's text; a run that failed otherwise has none.
func TestFinishNamesTheFailedTask(t *testing.T) {
	eng, err := es.New(es.Config{Mu: 5, Lambda: 20, Dim: 8, Lower: 2, Upper: 2.5, InitSigma: 0.5, Seed: 9, Stop: es.Stop{Generations: 5}})
	if err != nil {
		t.Fatal(err)
	}
	rx := &grid.RetriesExhaustedError{Gen: 3, Task: 7, MaxRetries: 1,
		Failures: []grid.TaskFailure{{Worker: "w0", Err: "boom"}, {Worker: "w1-r1", Err: "plugin exited"}}}
	rep := NewRecorder(eng, RecordConfig{}).Finish(eng, "", fmt.Errorf("es: generation 3: %w", rx))
	path := filepath.Join(t.TempDir(), "r.json")
	WritePartial(path, rep)
	b, err := os.ReadFile(path + PartialSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Error      string          `json:"error"`
		FailedTask json.RawMessage `json:"failed_task"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	const want = `{"gen":3,"task":7,"max_retries":1,"failures":[{"worker":"w0","error":"boom"},{"worker":"w1-r1","error":"plugin exited"}]}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, got.FailedTask); err != nil {
		t.Fatalf("failed_task %q: %v", got.FailedTask, err)
	}
	if compact.String() != want || got.Error != "es: generation 3: "+rx.Error() {
		t.Errorf("failed_task %s, error %q; want %s", got.FailedTask, got.Error, want)
	}
	for _, e := range []error{errors.New("grid: no worker joined within 1m0s"), nil} {
		if rep := NewRecorder(eng, RecordConfig{}).Finish(eng, "", e); rep.FailedTask != nil {
			t.Errorf("%v: failed_task %+v", e, rep.FailedTask)
		}
	}
}

// An in-process evaluation that failed other than by a timeout fails the
// run at once, unretried: failed_task names it too, with its one
// failure, put down to "inprocess" and cut as a worker's error is.
func TestFinishNamesAnInProcessFailedTask(t *testing.T) {
	eng, err := es.New(es.Config{Mu: 5, Lambda: 20, Dim: 8, Lower: 2, Upper: 2.5, InitSigma: 0.5, Seed: 9, Stop: es.Stop{Generations: 5}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1000)
	tf := &problems.TaskFailedError{Gen: 2, Task: 4, MaxRetries: 3, Err: errors.New("plugin exited " + long)}
	rep := NewRecorder(eng, RecordConfig{}).Finish(eng, "", fmt.Errorf("es: generation 2: %w", tf))
	ft := rep.FailedTask
	if ft == nil || ft.Gen != 2 || ft.Task != 4 || ft.MaxRetries != 3 || len(ft.Failures) != 1 ||
		ft.Failures[0].Worker != InProcessWorker || !strings.HasPrefix(ft.Failures[0].Error, "plugin exited xxx") || len(ft.Failures[0].Error) > 300+len("…") {
		t.Fatalf("failed_task %+v, want generation 2, task 4, max retries 3 and its one failure, cut to 300 bytes", ft)
	}
}
