package report

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A report of a few hundred bytes that claims a worker of 2⁴⁰ slots (a
// hand-edited or hostile file) is refused on reading, in one line that
// names the field, before the timeline sizes its lanes by it (a panic,
// or terabytes, before).
func TestReadRefusesAbsurdSlots(t *testing.T) {
	const rep = `{"schedule": {"total": 1,
		"generations": [{"gen": 0, "start": 0, "end": 1}],
		"per_worker": [{"worker": 1, "name": "w", "slots": 1099511627776}],
		"timeline": {"instances": [{"worker": 1, "gen": 0, "kind": "result", "start": 0, "end": 1}]}}}`
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Read(path)
	if err == nil {
		_, err = panels(r)
	}
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "slots") || strings.Contains(err.Error(), "\n") {
		t.Errorf("got %v, want one line about the slots", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("a %d-byte report allocated %d MiB", len(rep), n>>20)
	}
}
