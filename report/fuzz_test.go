package report

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds esreport's reader arbitrary files, seeded with a report
// of the repository: it must never panic, and a report it accepts must
// be summarised and drawn (a small SVG) without a panic or a hang.
//
//	go test ./report -run X -fuzz FuzzRead -fuzztime 3m
func FuzzRead(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "leaver.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"generations":[{"gen":0,"evals":1,"best":1,"mean":1}]}`))
	f.Add([]byte(`{"schedule":{"per_worker":[{"worker":1,"slots":2,"joined":0}],"generations":[{"gen":0,"start":0,"end":1e300}]}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "r.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Read(p)
		if err != nil {
			return
		}
		_ = Summary(rep)
		if err := Draw(rep, filepath.Join(dir, "r.svg"), SVG, 200, 200); err != nil {
			return
		}
	})
}
