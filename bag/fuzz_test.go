package bag

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzReadReference feeds esbag's -reference reader arbitrary files,
// seeded with a reference made here: it must never panic, and a
// reference it accepts has a strip of every index with a cost the
// simulator takes (a positive grain of at most an hour).
//
//	go test ./bag -run X -fuzz FuzzReadReference -fuzztime 3m
func FuzzReadReference(f *testing.F) {
	ref, err := NewReference(f.Context(), 4, 50, 16)
	if err != nil {
		f.Fatal(err)
	}
	b, err := json.Marshal(ref)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"name":"mandel-4-50-16","strips":4,"values":[0,1,9223372036854775807,3],"ns_per_iter":1e-300}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "ref.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadReference(path, Name(4, 50, 16), 4)
		if err != nil {
			return
		}
		if len(got.Values) != 4 {
			t.Fatalf("%d strips accepted for 4", len(got.Values))
		}
		for i := range got.Values {
			if g := got.Grain(i); g <= 0 || g > time.Hour {
				t.Fatalf("strip %d: grain %v", i, g)
			}
		}
	})
}
