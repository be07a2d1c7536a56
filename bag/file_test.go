package bag

import (
	"os"
	"path/filepath"
	"strings"
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

// A reference that is not one is refused in one line, before it costs
// memory: the old code read -reference /dev/zero until the memory ran out
// ("fatal error: out of memory" under a 2 GB limit), and took negative or
// absurd costs as the simulator's grains.
func TestReadReferenceRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	name := Name(2, 100, 40)
	file := func(base, text string) string {
		p := filepath.Join(dir, base)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := filepath.Join(dir, "huge.json")
	big := make([]byte, maxReferenceBytes+1)
	copy(big, `{"name": "`+name+`", "values": [`)
	for i := len(`{"name": "` + name + `", "values": [`); i < len(big); i++ {
		big[i] = ' '
	}
	if err := os.WriteFile(huge, big, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{"/dev/zero", "reference /dev/zero is not a regular file"},
		{dir, "reference " + dir + " is not a regular file"},
		{huge, "reference " + huge + " is larger than 33554432 bytes: not a reference"},
		{file("neg.json", `{"name": "`+name+`", "values": [5, -1], "ns_per_iter": 2}`), "strip 1 costs -1 iterations of 2 ns"},
		{file("zero.json", `{"name": "`+name+`", "values": [5, 1], "ns_per_iter": 0}`), "ns_per_iter 0, want above 0"},
		{file("long.json", `{"name": "`+name+`", "values": [5, 9000000000000000000], "ns_per_iter": 1}`), "strip 1 costs 9000000000000000000 iterations of 1 ns"},
	} {
		_, err := ReadReference(tt.path, name, 2)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", filepath.Base(tt.path), err, tt.want)
		}
	}
}

// The prediction takes the workers whatever they call themselves and
// however many slots they claim: the old code named each machine of the
// simulated set by its worker's name, and a name with "#", "a b" beside
// "a_b", or more slots than a simulated machine has, failed the run once
// the bag was done ("machine x: needs speed=F or task times", "machine
// a_b defined twice", "cpus: must be 1 to 4096").
func TestPredictAnyWorkerNames(t *testing.T) {
	ref := &Reference{Name: Name(4, 100, 40), Strips: 4, Values: []int64{10, 20, 30, 40}, NsPerIter: 1e6}
	for _, tt := range []struct {
		names [2]string
		slots int
		rtt   float64
	}{{[2]string{"a", "b=c"}, 1, 0}, {[2]string{"x#y", "z"}, 1, 0}, {[2]string{"a b", "a_b"}, 1, 0}, {[2]string{"a", "b"}, 100000, 0},
		// A round trip of three hours: half of it is more than a set's
		// delay may be.
		{[2]string{"a", "b"}, 1, 3 * 3600}} {
		ws := []WorkerFigures{{Name: tt.names[0], Slots: 1, Speed: 1}, {Name: tt.names[1], Slots: tt.slots, Speed: 2, RoundTrip: tt.rtt}}
		if total, _, err := Predict("wq", 0, 0, ref, ws); err != nil || total <= 0 {
			t.Errorf("workers %q of %d slots: total %v, %v", tt.names, tt.slots, total, err)
		}
	}
}
