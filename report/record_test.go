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
