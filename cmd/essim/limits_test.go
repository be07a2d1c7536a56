package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/sched/sim"
)

// Every numeric flag with a hostile value is a usage error: exit status 2,
// one line on stderr, before any simulation, and never a Go panic, an
// out-of-memory trace or a run that does not end. The sizes asked for
// exceed any machine's memory, so the test does not depend on this one's.
func TestHostileFlags(t *testing.T) {
	dir := t.TempDir()
	machines := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := machines("huge.txt", "machine M1 speed=1\n"+strings.Repeat("# padding\n", sim.MaxSetFile/10+1))
	nanSpeed := machines("nan.txt", "machine M1 speed=NaN\n")
	infSpeed := machines("inf.txt", "machine M1 speed=+Inf\n")
	slow := machines("slow.txt", "machine M1 speed=1e-300\n")
	manyCPUs := machines("cpus.txt", "machine M1 speed=1 cpus=4096 count=65536\n")
	tooManyCPUs := machines("cpus2.txt", "machine M1 speed=1 cpus=1000000000000\n")
	// A task of 1000 h slowed 10⁶ times by the set itself, not by
	// -slowdown: 10⁹ h, past what a time.Duration holds; it ran in 0 s.
	setSlow := machines("setslow.txt", "machine M1 local speed=0.001 slow=0*1000000\n")
	setSlowLater := machines("setslow2.txt", "machine M1 local speed=1\nmachine M2 speed=0.001 slow=1h*1000000 slow=2h*1\n")

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-trials", "1000000000"}, "-trials 1000000000: must be an integer between 1 and 10000"},
		{[]string{"-trials", "1e9"}, "-trials 1e9: must be an integer between 1 and 10000"},
		{[]string{"-trials", "0"}, "-trials 0: must be an integer between 1 and 10000"},
		{[]string{"-trials", "100000"}, "-trials 100000: must be an integer between 1 and 10000"},
		{[]string{"-trials", "10000", "-gens", "100000", "-lambda", "1"}, "54 settings × 10000 trials"},
		{[]string{"-lambda", "1000000000"}, "-lambda 1000000000: must be 1 to 1000000, or Fx with F above 0 and up to 1000000"},
		{[]string{"-lambda", "-1"}, "-lambda -1: must be 1 to 1000000, or Fx with F above 0 and up to 1000000"},
		{[]string{"-mu", "2000000000"}, "-mu 2000000000: must be an integer between 0 and 1000000"},
		{[]string{"-mu", "-1"}, "-mu -1: must be an integer between 0 and 1000000"},
		{[]string{"-gens", "1000000000"}, "-gens 1000000000: must be an integer between 1 and 10000000"},
		{[]string{"-gens", "1000000"}, "one run would have 70000030 tasks"},
		{[]string{"-gens", "0"}, "-gens 0: must be an integer between 1 and 10000000"},
		{[]string{"-workload", "bag", "-tasks", "1000000000"}, "-tasks 1000000000: must be an integer between 1 and 1000000"},
		{[]string{"-workload", "bag", "-tasks", "-5"}, "-tasks -5: must be an integer between 1 and 1000000"},
		{[]string{"-lambda", "1000000", "-gens", "9"}, "cyclic's simulation cost grows with the square of a batch"},
		{[]string{"-noise", "NaN"}, "-noise NaN: must be a number between 0 and 2"},
		{[]string{"-noise", "Inf"}, "-noise Inf: must be a number between 0 and 2"},
		{[]string{"-noise", "-1"}, "-noise -1: must be a number between 0 and 2"},
		{[]string{"-grain", "NaN"}, "-grain NaN: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "Inf"}, "-grain Inf: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "1e300"}, "-grain 1e300: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "-5"}, "-grain -5: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "0"}, "-grain 0: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "2h"}, "-grain 2h: must be a duration between 1µs and 1h"},
		{[]string{"-grain", "9999999999h"}, "-grain 9999999999h: must be a duration between 1µs and 1h"},
		{[]string{"-delay", "-1"}, "-delay -1: must be a duration between 0s and 1h"},
		{[]string{"-delay", "1e300"}, "-delay 1e300: must be a duration between 0s and 1h"},
		{[]string{"-delay", "90m"}, "-delay 90m: must be a duration between 0s and 1h"},
		{[]string{"-engine-cost", "2h"}, "-engine-cost 2h: must be a duration between 0s and 1h"},
		{[]string{"-master-cost", "1e300"}, "-master-cost 1e300: must be a duration between 0s and 1h"},
		{[]string{"-send-cost", "NaN"}, "-send-cost NaN: must be a duration between 0s and 1h"},
		{[]string{"-recv-cost", "2h"}, "-recv-cost 2h: must be a duration between 0s and 1h"},
		{[]string{"-slowdown", "L1@1s*Inf"}, "-slowdown L1@1s*Inf: factor \"Inf\" must be a number above 0 and up to 1000000"},
		{[]string{"-slowdown", "L1@1s*NaN"}, "-slowdown L1@1s*NaN: factor \"NaN\" must be a number above 0 and up to 1000000"},
		{[]string{"-slowdown", "L1@1s*0"}, "-slowdown L1@1s*0: factor \"0\" must be a number above 0 and up to 1000000"},
		{[]string{"-slowdown", "L1@1s*1e7"}, "-slowdown L1@1s*1e7: factor \"1e7\" must be a number above 0 and up to 1000000"},
		{[]string{"-slowdown", "L1@-1s*2"}, "-slowdown L1@-1s*2: time \"-1s\": must be a duration between 0s and 876000h"},
		{[]string{"-slowdown", "L1@1e300*2"}, "-slowdown L1@1e300*2: time \"1e300\": must be a duration between 0s and 876000h"},
		{[]string{"-depth", "100000"}, "-depth 100000: must be an integer between 0 and 1024"},
		{[]string{"-depth", "-1"}, "-depth -1: must be an integer between 0 and 1024"},
		{[]string{"-parallel", "1000000000"}, "-parallel 1000000000: must be an integer between 0 and 1024"},
		{[]string{"-parallel", "-1"}, "-parallel -1: must be an integer between 0 and 1024"},
		{[]string{"-seed", "-1"}, "-seed -1: must be an integer between 0 and 18446744073709551615"},
		{[]string{"-grain", "1h", "-gens", "10000000", "-lambda", "1", "-mu", "0", "-policy", "r3q"}, "years of simulated time"},
		{[]string{"-machines", huge}, "is larger than 1048576 bytes"},
		{[]string{"-machines", "/dev/zero"}, "-machines: "},
		{[]string{"-machines", nanSpeed}, "machine M1: speed: must be a positive number"},
		{[]string{"-machines", infSpeed}, "machine M1: speed: must be a positive number"},
		{[]string{"-machines", slow}, "years of simulated time"},
		{[]string{"-machines", setSlow, "-grain", "1h", "-gens", "1", "-mu", "0", "-lambda", "1"}, "years of simulated time"},
		{[]string{"-machines", setSlowLater, "-grain", "1h", "-gens", "1", "-mu", "0", "-lambda", "1"}, "years of simulated time"},
		{[]string{"-machines", manyCPUs}, "needs about"},
		{[]string{"-machines", tooManyCPUs}, "cpus: must be 1 to 4096"},
		{[]string{"-copies", "-1"}, "-copies -1: must be an integer between 0 and 64"},
		{[]string{"-lambda", "0.5y"}, "-lambda 0.5y: must be 1 to 1000000, or Fx with F above 0 and up to 1000000"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			if tt.args[1] == "/dev/zero" {
				if _, err := os.Stat("/dev/zero"); err != nil {
					t.Skip("no /dev/zero")
				}
			}
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "essim: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.want)
			}
			for _, bad := range []string{"goroutine", "panic"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr has %q", bad)
				}
			}
		})
	}
}

// Settings within the bounds still run, and the machine-set file is read
// whole up to the cap.
func TestWithinBounds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "set.txt")
	text := "master cost=10us\nmachine M1 local speed=1 cpus=2\nmachine L1 delay=1ms speed=0.5\n"
	pad := sim.MaxSetFile - len(text)
	text += strings.Repeat("# padding\n", pad/10) + strings.Repeat("#", pad%10)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// Tasks of an hour need a task timeout longer than that.
	code, out, errs := runCmd(t, "-machines", p, "-grain", "1h", "-delay", "1h", "-gens", "2", "-trials", "1", "-policy", "r3q,cyclic", "-quiet", "-task-timeout", "3h")
	if code != 0 || !strings.Contains(out, " r3q ") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if !strings.Contains(out, "cyclic") {
		t.Errorf("no cyclic row:\n%s", out)
	}
}

// A set whose only machine takes 10⁴ times the grain: the default ES at
// 1 s tasks is at least 814 days of simulated time, 2.8·10⁸ ticks. It
// was accepted, and its first run alone went on past two minutes of
// real time (killed then); now it is refused at once.
func TestRefusesRunsOfTooManyTicks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slow.txt")
	if err := os.WriteFile(p, []byte("machine A local speed=0.0001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "-machines", p, "-policy", "wq", "-trials", "1", "-grain", "1000", "-delay", "0", "-quiet")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "of the master's ticks") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and the ticks' bound", code, stdout, stderr)
	}
}

// Odd machine sets: one machine runs and its table has a row per
// policy; a set whose every machine leaves before the end fails with
// exit 1 and one line that says so (the old code, with a slowdown set
// far ahead, ticked up to it: hours); an optimum that is only a floor
// says how far above it the best schedule found is.
func TestOddSets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one.txt", "machine A local speed=1\n")
	code, out, errs := runCmd(t, "-machines", one, "-grain", "100", "-delay", "0", "-gens", "2", "-trials", "2", "-quiet")
	if code != 0 || strings.Count(out, "\n   100      0 ") != 6 {
		t.Errorf("one machine: exit %d, stderr %q:\n%s", code, errs, out)
	}
	gone := write("gone.txt", "machine A local cpus=2 speed=1 leave=2s slow=800000h*2\n")
	code, out, errs = runCmd(t, "-machines", gone, "-grain", "100", "-delay", "0", "-trials", "2", "-policy", "wq,eft", "-quiet")
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "every machine had left by 2s") {
		t.Errorf("every machine leaves: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCmd(t, "-machines", "hetero9", "-grain", "100", "-delay", "0", "-gens", "3", "-trials", "2", "-policy", "wq", "-quiet")
	if code != 0 || !strings.Contains(out, "opt: a proven lower bound; a clairvoyant schedule found is at most") {
		t.Errorf("an optimum not exact: exit %d, stderr %q:\n%s", code, errs, out)
	}
}

// -task-timeout is the master's: tasks of 7 minutes end under the
// default 10 (cut short at the deadlines' ceiling, 5 minutes, once, then
// run to the end), and tasks of an hour fail the run naming the timeout,
// unless the timeout is longer or none (0).
func TestTaskTimeoutFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "set.txt")
	if err := os.WriteFile(p, []byte("machine M1 local speed=1 cpus=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(grain string, more ...string) (int, string, string) {
		return runCmd(t, append([]string{"-machines", p, "-grain", grain, "-delay", "1ms", "-gens", "1", "-mu", "0", "-lambda", "4",
			"-trials", "1", "-noise", "0", "-policy", "wq", "-quiet"}, more...)...)
	}
	if code, out, errs := run("7m"); code != 0 || !strings.Contains(out, " wq ") {
		t.Errorf("tasks of 7m, default timeout: exit %d: %s\n%s", code, errs, out)
	}
	if code, _, errs := run("1h"); code != 1 || !strings.Contains(errs, "past the task timeout of 10m0s") {
		t.Errorf("tasks of 1h, default timeout: exit %d, stderr %q; want 1 and the timeout named", code, errs)
	}
	for _, timeout := range []string{"3h", "0"} {
		if code, out, errs := run("1h", "-task-timeout", timeout); code != 0 || !strings.Contains(out, " wq ") {
			t.Errorf("tasks of 1h, -task-timeout %s: exit %d: %s\n%s", timeout, code, errs, out)
		}
	}
}
