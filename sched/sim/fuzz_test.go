package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzParseSet feeds the machine-set parser arbitrary text, seeded with
// the shipped sets. It must never panic, and a set it accepts must be
// one the simulator can run: valid, with positive task times, and a
// small one simulated to its end (or to an error) within a bound on its
// events.
//
//	go test ./sched/sim -run X -fuzz FuzzParseSet -fuzztime 3m
func FuzzParseSet(f *testing.F) {
	for _, name := range BuiltinSets() {
		b, err := BuiltinText(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("machine A local speed=1 leave=1ns slow=0*1000000 count=3\nmachine B via=A-1 delay=1s speed=1e-3 t1h=1ns")
	f.Add("master cost=1ms\nmachine R speed=2 relay=1ms\nmachine S via=R speed=1\nmachine T via=S cpus=64 t1us=1h")
	f.Fuzz(func(t *testing.T, text string) {
		set, err := ParseSet("fuzz", strings.NewReader(text))
		if err != nil {
			if set != nil {
				t.Fatalf("a set and an error: %v", err)
			}
			return
		}
		if err := set.Validate(); err != nil {
			t.Fatalf("accepted a set that Validate refuses: %v", err)
		}
		for k := range set.Machines {
			if d := set.TaskTime(k, 100*time.Millisecond); d <= 0 {
				t.Fatalf("machine %s: task time %v", set.Machines[k].Name, d)
			}
			if d := set.RoundTrip(k, 0); d < 0 {
				t.Fatalf("machine %s: round trip %v", set.Machines[k].Name, d)
			}
		}
		if len(set.Machines) > 64 || set.Slots() > 256 {
			return
		}
		// A run is simulated tick by tick (every 250 ms of virtual
		// time): tasks of hours make millions of ticks, which is time,
		// not a defect of the parser.
		for k := range set.Machines {
			f := 1.0
			for _, sd := range set.Machines[k].Slowdowns {
				f = max(f, sd.Factor)
			}
			if float64(set.TaskTime(k, 10*time.Millisecond))*f > float64(time.Minute) || set.RoundTrip(k, 0) > time.Minute {
				return
			}
		}
		for _, policy := range []string{"wq", "r3q", "eft"} {
			cfg := Config{Set: set, Policy: policy, Workload: ES(2, 5, 2, 10*time.Millisecond), Noise: 0.1, Seed: 1}
			res, err := runLimited(context.Background(), cfg, 2_000_000)
			if err != nil {
				if strings.Contains(err.Error(), "still running") {
					t.Fatalf("%s: %v", policy, err)
				}
				continue
			}
			if res.End < 0 || res.End+time.Duration(len(cfg.Workload.Batches))*time.Microsecond < res.Optimum.LB {
				t.Fatalf("%s: the run ended at %v, the floor is %v", policy, res.End, res.Optimum.LB)
			}
		}
	})
}

// TestParseSetRefusesOverflowingTimes: the set's times are bounded, so
// that no sum of them overflows a time.Duration. Two relays' delays of
// two million hours each were accepted, and the round trip of the
// machine behind them came out negative.
func TestParseSetRefusesOverflowingTimes(t *testing.T) {
	for _, text := range []string{
		"machine R delay=2000000h speed=1\nmachine W via=R delay=2000000h speed=1",
		"master cost=2000000h\nmachine W speed=1",
		"machine W speed=1 send=2h",
		"machine W speed=1 recv=2h",
		"machine W speed=1 relay=2h",
		"machine W speed=1 leave=1000000h",
		"machine W speed=1 slow=1000000h*2",
	} {
		if _, err := ParseSet("big", strings.NewReader(text)); err == nil {
			t.Errorf("%q accepted", text)
		}
	}
	set, err := ParseSet("fine", strings.NewReader("master cost=1h\nmachine R delay=1h relay=1h send=1h recv=1h speed=1 leave=876000h slow=876000h*2\nmachine W via=R delay=1h speed=1"))
	if err != nil {
		t.Fatal(err)
	}
	if rt := set.RoundTrip(1, 0); rt != 8*time.Hour {
		t.Errorf("round trip %v, want 8h", rt)
	}
}

// TestTaskTimeOfAnAbsurdlySlowMachine: a machine of speed 1e-300 takes
// the longest task time there is, not the shortest. The old code turned
// its time, past what a time.Duration holds, into a negative one and so
// into a nanosecond: "TaskTime = 1ns".
func TestTaskTimeOfAnAbsurdlySlowMachine(t *testing.T) {
	set, err := ParseSet("slow", strings.NewReader("machine A speed=1e-300\nmachine B t1ns=2000000h"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range set.Machines {
		if d := set.TaskTime(k, 100*time.Millisecond); d != MaxSetTime {
			t.Errorf("machine %s: TaskTime = %v, want %v", set.Machines[k].Name, d, MaxSetTime)
		}
	}
}
