package bag

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/esgrid/esgrid/internal/fulldisk"
)

// A reference is written whole or not at all: a disk that fills up
// halfway leaves the reference that was there. The old code wrote it in
// place (os.WriteFile) and left its first 64 bytes ("ref.json: 64 bytes
// ... want the old file").
func TestReferenceOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ref.json")
	if err := os.WriteFile(path, []byte("the last reference"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := &Reference{Name: Name(40, 100, 480), Strips: 40, Values: make([]int64, 40), Seconds: 1, NsPerIter: 2}
	fulldisk.After(t, 64)
	if err := ref.Write(path); err == nil {
		t.Error("the reference was written on a full disk")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "the last reference" {
		t.Errorf("ref.json: %d bytes (%.20q), %v; want the old file", len(b), b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left: %v", entries)
	}
}
