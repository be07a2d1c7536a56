// Package flagxtest checks, in a command's tests, that every numeric flag
// of the command is bounded (a flagx value) and that the command refuses
// NaN, ±Inf, huge, negative and just-out-of-range values of each with its
// usage exit status (2 unless it says otherwise) and one line naming the
// flag, before it does any work.
package flagxtest

import (
	"bytes"
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
)

// Command is one command or subcommand under test.
type Command struct {
	// Name is how the tests name it: "esplan plan".
	Name string
	// Flags returns a fresh FlagSet with every flag the command parses:
	// the one it parses itself, so that a flag added later is checked.
	Flags func() *flag.FlagSet
	// Run runs the command with args (Prefix, then one flag) and returns
	// its exit status; its context should be cancelled, so that a value
	// that slipped through makes it fail rather than work for long.
	Run func(args []string, stdout, stderr *bytes.Buffer) int
	// Prefix comes before the flag: the subcommand, or flags the command
	// needs before it looks at the others (none should be needed).
	Prefix []string
	// Status is the exit status of a refused flag; 0 means 2, the flag
	// package's (esworker's is 78, which its systemd unit does not
	// restart).
	Status int
}

// Check runs the checks on every command, one subtest per command and
// flag.
func Check(t *testing.T, cmds []Command) {
	t.Helper()
	for _, c := range cmds {
		t.Run(c.Name, func(t *testing.T) {
			fs := c.Flags()
			n := 0
			fs.VisitAll(func(f *flag.Flag) {
				b, ok := f.Value.(flagx.Bounded)
				if !ok {
					if Numeric(f) {
						t.Errorf("-%s (default %q) is numeric but not bounded: declare it with flagx", f.Name, f.DefValue)
					}
					return
				}
				n++
				if arg, _ := flag.UnquoteUsage(f); arg == "value" {
					t.Errorf("-%s: its help text names no argument (`N`, `D`…)", f.Name)
				}
				if !strings.Contains(f.Usage, b.Range()) {
					t.Errorf("-%s: its help text does not give its range %q", f.Name, b.Range())
				}
				for _, v := range b.Outside() {
					checkRefused(t, c, f.Name, v)
				}
			})
			if n == 0 {
				t.Logf("%s has no numeric flag", c.Name)
			}
		})
	}
}

// checkRefused runs c with -name v and wants its usage exit status,
// nothing on stdout and one line on stderr that names the flag.
func checkRefused(t *testing.T, c Command, name, v string) {
	t.Helper()
	want := c.Status
	if want == 0 {
		want = 2
	}
	var stdout, stderr bytes.Buffer
	args := append(append([]string{}, c.Prefix...), "-"+name, v)
	code := c.Run(args, &stdout, &stderr)
	line := stderr.String()
	switch {
	case code != want:
		t.Errorf("%s %s: exit status %d, want %d; stderr: %s", c.Name, strings.Join(args, " "), code, want, line)
	case stdout.Len() > 0:
		t.Errorf("%s %s: wrote %q to stdout, want nothing", c.Name, strings.Join(args, " "), stdout.String())
	case strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n"):
		t.Errorf("%s %s: stderr is not one line: %q", c.Name, strings.Join(args, " "), line)
	case !strings.Contains(line, "-"+name+" "):
		t.Errorf("%s %s: the error does not name -%s: %q", c.Name, strings.Join(args, " "), name, line)
	}
}

// Numeric says whether f holds a number: its value is a Go number or
// duration, or a string whose default reads as numbers or durations
// ("70", "100,500,1000", "10us").
func Numeric(f *flag.Flag) bool {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64, float64, time.Duration, []int, []time.Duration:
			return true
		case bool:
			return false
		}
	}
	return numericText(f.DefValue)
}

// numericText says whether s is a list of numbers or durations.
func numericText(s string) bool {
	if strings.TrimSpace(s) == "" {
		return false
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if _, err := strconv.ParseFloat(item, 64); err == nil {
			continue
		}
		if _, err := time.ParseDuration(item); err == nil {
			continue
		}
		return false
	}
	return true
}
