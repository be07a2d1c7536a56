package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseSet(t *testing.T) {
	ms := time.Millisecond
	s := mustSet(t, `
# comment line
master cost=20us   # trailing comment
machine M local t100ms=101ms t1000ms=1000ms
machine R delay=15ms relay=50us speed=3 cpus=2 send=1ms recv=2ms
machine W via=R delay=1ms speed=2.5
`)
	if s.MasterCost != 20*time.Microsecond {
		t.Errorf("master cost = %v", s.MasterCost)
	}
	if len(s.Machines) != 3 {
		t.Fatalf("%d machines", len(s.Machines))
	}
	m, r, w := s.Machines[0], s.Machines[1], s.Machines[2]
	if !m.Local || m.CPUs != 1 || len(m.Times) != 2 || m.Times[0] != (GrainTime{100 * ms, 101 * ms}) {
		t.Errorf("M = %+v", m)
	}
	if r.CPUs != 2 || r.Speed != 3 || r.Delay != 15*ms || r.RelayCost != 50*time.Microsecond || r.SendCost != ms || r.RecvCost != 2*ms {
		t.Errorf("R = %+v", r)
	}
	if w.Via != "R" || w.Delay != ms || w.Speed != 2.5 {
		t.Errorf("W = %+v", w)
	}
}

func TestParseSetErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"empty", "# nothing\n", "no machines"},
		{"unknown directive", "worker A speed=1", `test:1: unknown directive "worker"`},
		{"no name", "machine speed=1", "test:1: machine: missing name"},
		{"duplicate", "machine A speed=1\nmachine A speed=2", "test:2: machine A defined twice"},
		{"no speed", "machine A delay=1ms", "machine A: needs speed=F or task times"},
		{"bad speed", "machine A speed=-1", "test:1: machine A: speed: must be a positive number"},
		{"bad cpus", "machine A speed=1 cpus=0", "cpus: must be 1 to 4096"},
		{"bad count", "machine A speed=1 count=0", "count: must be 1 to"},
		{"bad slow", "machine A speed=1 slow=5s", "slow: want TIME*FACTOR"},
		{"bad slow factor", "machine A speed=1 slow=5s*0", "factor must be"},
		{"bad leave", "machine A speed=1 leave=0s", "leave: must be after the start"},
		{"count clash", "machine A-2 speed=1\nmachine A speed=1 count=3", "machine A-2 defined twice"},
		{"bad duration", "machine A speed=1 delay=5", "test:1: machine A: delay:"},
		{"negative duration", "machine A speed=1 delay=-5ms", "negative duration"},
		{"unknown field", "machine A speed=1 colour=red", `unknown field "colour"`},
		{"bad grain", "machine A tfoo=5ms", `unknown field "tfoo"`},
		{"zero task time", "machine A t100ms=0s", "task time must be positive"},
		{"grain twice", "machine A t100ms=1ms t100ms=2ms", "grain given twice"},
		{"bare word", "machine A speed=1 fast", `field "fast": want key=value`},
		{"missing relay", "machine A speed=1 via=B", `relay "B" is not in the set`},
		{"relay cycle", "machine A speed=1 via=B\nmachine B speed=1 via=A", "cycle"},
		{"self relay", "machine A speed=1 via=A", "cycle"},
		{"local with delay", "machine A local delay=1ms speed=1", "a local machine has no delay"},
		{"two masters", "master cost=1ms\nmaster cost=2ms\nmachine A speed=1", "test:2: second master line"},
		{"master field", "master speed=1\nmachine A speed=1", `master: unknown field "speed=1"`},
		// A field given twice, or a speed beside task times, was taken
		// silently (the last cpus=, the task times): now refused.
		{"cpus twice", "machine A speed=1 cpus=1 cpus=2", "test:1: machine A: cpus given twice"},
		{"speed twice", "machine A speed=1 speed=2", "test:1: machine A: speed given twice"},
		{"local twice", "machine A speed=1 local local", "test:1: machine A: local given twice"},
		{"speed and times", "machine A speed=2 t100ms=50ms", "test:1: machine A: speed= and task times tG= both given: give one"},
		{"master cost twice", "master cost=1ms cost=2ms\nmachine A speed=1", "test:1: master: cost given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSet("test", strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestBuiltinSets checks the paper's two sets against Table 1: the speed
// ratio totals (17.23 / 18.85 / 21.33 for all eleven machines) and the
// relay path of W1-W3.
func TestBuiltinSets(t *testing.T) {
	if got := strings.Join(BuiltinSets(), ","); got != "hetero9,lan,leave,relay,scale1024,scale4096,slowdown,spread20,wan" {
		t.Fatalf("built-in sets = %s", got)
	}
	lan, err := LoadSet("lan")
	if err != nil {
		t.Fatal(err)
	}
	wan, err := LoadSet("wan")
	if err != nil {
		t.Fatal(err)
	}
	if len(lan.Machines) != 7 || len(wan.Machines) != 11 {
		t.Fatalf("lan %d machines, wan %d", len(lan.Machines), len(wan.Machines))
	}
	if !lan.Machines[0].Local || lan.Machines[0].Name != "M1" {
		t.Errorf("lan's first machine should be the master's host M1: %+v", lan.Machines[0])
	}
	// The paper's ratios are against M1's own time, ours against the
	// grain, so scale by M1's time/grain.
	for _, tc := range []struct {
		grain time.Duration
		total float64
	}{{100 * time.Millisecond, 17.23}, {500 * time.Millisecond, 18.85}, {1000 * time.Millisecond, 21.33}} {
		m1 := float64(wan.TaskTime(0, tc.grain)) / float64(tc.grain)
		if got := wan.SpeedSum(tc.grain) * m1; math.Abs(got-tc.total) > 0.01*tc.total { // the paper rounds each ratio
			t.Errorf("wan speed sum at %v = %.2f, paper %.2f", tc.grain, got, tc.total)
		}
	}
	w1 := wan.Index("W1")
	if d := wan.PathDelay(w1, 30*time.Millisecond); d != (10+30)*time.Millisecond+100*time.Microsecond {
		t.Errorf("W1 path delay = %v", d)
	}
	if d := lan.PathDelay(0, 30*time.Millisecond); d != 0 {
		t.Errorf("M1 path delay = %v, want 0", d)
	}
}

func TestLoadSetFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "two.txt")
	if err := os.WriteFile(p, []byte("machine A speed=1\nmachine B speed=2 cpus=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSet(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SpeedSum(time.Second); got != 9 {
		t.Errorf("speed sum = %v, want 9", got)
	}
	if _, err := LoadSet(filepath.Join(t.TempDir(), "missing.txt")); err == nil {
		t.Error("missing file: no error")
	}
}

// TestTaskTimeInterpolation: between table entries the time/grain ratio is
// interpolated; outside, the nearest entry's ratio scales.
func TestTaskTimeInterpolation(t *testing.T) {
	ms := time.Millisecond
	s := mustSet(t, "machine A t100ms=50ms t300ms=300ms")
	for _, tc := range []struct{ grain, want time.Duration }{
		{100 * ms, 50 * ms},
		{300 * ms, 300 * ms},
		{50 * ms, 25 * ms},   // ratio 0.5
		{200 * ms, 150 * ms}, // ratio 0.75
		{600 * ms, 600 * ms}, // ratio 1
	} {
		if got := s.TaskTime(0, tc.grain); got != tc.want {
			t.Errorf("TaskTime(%v) = %v, want %v", tc.grain, got, tc.want)
		}
	}
}

// A machine set file is read up to MaxSetFile bytes, no further.
func TestLoadSetBounded(t *testing.T) {
	dir := t.TempDir()
	text := "machine M1 speed=1\n"
	ok := filepath.Join(dir, "ok.txt")
	if err := os.WriteFile(ok, []byte(text+strings.Repeat("#\n", (MaxSetFile-len(text))/2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadSet(ok); err != nil || len(s.Machines) != 1 {
		t.Fatalf("a set of MaxSetFile bytes: %v", err)
	}
	huge := filepath.Join(dir, "huge.txt")
	if err := os.WriteFile(huge, []byte(text+strings.Repeat("#\n", MaxSetFile/2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSet(huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a set past MaxSetFile: %v", err)
	}
}

// A machine so fast that a task rounds to no time takes the clock's tick,
// and the run, its optimum included, ends: the old code panicked
// ("index out of range [-9223372036854775808]" in optBatch.bound) for
// speed=1e9 at 100 ms, as for speed=1e6 at the smallest -grain, 1µs.
func TestFastMachineTakesATick(t *testing.T) {
	for _, tc := range []struct {
		text  string
		grain time.Duration
	}{
		{"machine A speed=1e9\nmachine B speed=1", 100 * time.Millisecond},
		{"machine A speed=1e6", time.Microsecond},
		{"machine A t1s=1ns", time.Microsecond},
	} {
		s := mustSet(t, tc.text)
		if got := s.TaskTime(0, tc.grain); got != 1 {
			t.Errorf("%q at %v: a task takes %v, want 1ns", tc.text, tc.grain, got)
		}
		res, err := Run(Config{Set: s, Policy: "r3q", Workload: ES(2, 4, 2, tc.grain), Seed: 1})
		if err != nil || res.End <= 0 {
			t.Errorf("%q at %v: end %v, %v", tc.text, tc.grain, res.End, err)
		}
	}
}
