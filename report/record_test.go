package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
