// Package flagxtest checks, in a command's tests, the rules every
// command's flags keep:
//
//   - every numeric flag is bounded (a flagx value), and the command
//     refuses NaN, ±Inf, huge, negative and just-out-of-range values of
//     each with its usage exit status (2 unless it says otherwise) and one
//     line naming the flag, before it does any work;
//   - an unknown flag is refused the same way;
//   - the names are the vocabulary's (flagx.Vocabulary): a flag under an
//     old name is a flagx.Alias of the new one, which prints a notice;
//   - -version is there and prints one line, exit status 0;
//   - -h prints a usage text that names every flag, exit status 0; every
//     flag has help text, and every flag that takes a value names it;
//   - no default address listens on every interface: a command's
//     defaults are for one machine, loopback.
package flagxtest

import (
	"bytes"
	"flag"
	"fmt"
	"net"
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

// Check runs the checks on every command, one subtest per command.
func Check(t *testing.T, cmds []Command) {
	t.Helper()
	for _, c := range cmds {
		t.Run(c.Name, func(t *testing.T) { check(t, c) })
	}
}

// Problems runs the checks on c and returns what they found, a line each
// (flagxtest's own tests).
func Problems(c Command) []string {
	var r collect
	check(&r, c)
	return r.lines
}

// reporter is what the checks report to: a *testing.T, or collect.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// collect keeps the problems reported.
type collect struct{ lines []string }

func (c *collect) Helper()                         {}
func (c *collect) Logf(format string, args ...any) {}
func (c *collect) Errorf(format string, args ...any) {
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
}

// check runs every check on c.
func check(t reporter, c Command) {
	t.Helper()
	fs := c.Flags()
	checkNames(t, c, fs)
	checkHelp(t, c, fs)
	checkVersion(t, c, fs)
	checkRefused(t, c, "no-such-flag", "")
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*flagx.AliasValue); ok {
			return // checked through its new name, and by checkNames
		}
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
}

// checkRefused runs c with -name v and wants its usage exit status,
// nothing on stdout and one line on stderr that names the flag.
func checkRefused(t reporter, c Command, name, v string) {
	t.Helper()
	want := c.Status
	if want == 0 {
		want = 2
	}
	var stdout, stderr bytes.Buffer
	args := append(append([]string{}, c.Prefix...), "-"+name, v)
	if v == "" {
		args = args[:len(args)-1]
	}
	code := c.Run(args, &stdout, &stderr)
	line := stderr.String()
	switch {
	case code != want:
		t.Errorf("%s %s: exit status %d, want %d; stderr: %s", c.Name, strings.Join(args, " "), code, want, line)
	case stdout.Len() > 0:
		t.Errorf("%s %s: wrote %q to stdout, want nothing", c.Name, strings.Join(args, " "), stdout.String())
	case strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n"):
		t.Errorf("%s %s: stderr is not one line: %q", c.Name, strings.Join(args, " "), line)
	case !strings.Contains(line, "-"+name+" ") && !strings.HasSuffix(line, "-"+name+"\n") && !strings.Contains(line, "-"+name+" ("):
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

// checkNames checks fs against the vocabulary: an old name is an alias of
// its new one, and using it prints the notice.
func checkNames(t reporter, c Command, fs *flag.FlagSet) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		a, alias := f.Value.(*flagx.AliasValue)
		want := flagx.Canonical(f.Name)
		switch {
		case !alias && want != "":
			t.Errorf("-%s is the old name of -%s (flagx.Vocabulary): name the flag -%s and declare -%s with flagx.Alias", f.Name, want, want, f.Name)
		case alias && a.New() != want:
			t.Errorf("-%s is an alias of -%s, but flagx.Vocabulary has it as the old name of %q", f.Name, a.New(), want)
		case alias:
			checkAliasNotice(t, c, fs, a)
		}
	})
}

// checkAliasNotice runs c with the alias set to its new flag's default,
// and -version: it must work and say the name is deprecated.
func checkAliasNotice(t reporter, c Command, fs *flag.FlagSet, a *flagx.AliasValue) {
	t.Helper()
	def := fs.Lookup(a.New()).DefValue
	if def == "" {
		return
	}
	args := append(append([]string{}, c.Prefix...), "-"+a.Old()+"="+def, "-version")
	var stdout, stderr bytes.Buffer
	code := c.Run(args, &stdout, &stderr)
	notice := "-" + a.Old() + " is deprecated, use -" + a.New()
	if code != 0 || !strings.Contains(stderr.String(), notice) {
		t.Errorf("%s %s: exit status %d, stderr %q; want 0 and %q", c.Name, strings.Join(args, " "), code, stderr.String(), notice)
	}
}

// checkHelp checks each flag's help text, and -h.
func checkHelp(t reporter, c Command, fs *flag.FlagSet) {
	t.Helper()
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		switch {
		case strings.TrimSpace(usage) == "":
			t.Errorf("-%s has no help text", f.Name)
		case arg != "" && f.Usage == usage:
			// The flag takes a value the help does not name:
			// "-listen string" says nothing.
			t.Errorf("-%s: its help text names no argument (put it in backquotes: `HOST:PORT`)", f.Name)
		}
		checkAddress(t, f)
	})
	var stdout, stderr bytes.Buffer
	args := append(append([]string{}, c.Prefix...), "-h")
	code := c.Run(args, &stdout, &stderr)
	help := stdout.String()
	if code != 0 || stderr.Len() > 0 || !strings.Contains(help, "Usage") {
		t.Errorf("%s: exit status %d, stderr %q; want 0 and a usage text on stdout", strings.Join(args, " "), code, stderr.String())
		return
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "-"+f.Name+" ") && !strings.Contains(help, "-"+f.Name+"\n") && !strings.Contains(help, "-"+f.Name+"\t") {
			t.Errorf("%s: the help does not name -%s", strings.Join(args, " "), f.Name)
		}
	})
}

// checkAddress refuses a default address on every interface.
func checkAddress(t reporter, f *flag.Flag) {
	t.Helper()
	host, port, err := net.SplitHostPort(f.DefValue)
	if err != nil {
		return
	}
	if _, err := strconv.Atoi(port); err != nil {
		return
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		t.Errorf("-%s listens on every interface by default (%s): a default is for one machine, loopback (127.0.0.1)", f.Name, f.DefValue)
	}
}

// checkVersion wants -version, printing one line that begins with the
// command's name.
func checkVersion(t reporter, c Command, fs *flag.FlagSet) {
	t.Helper()
	if fs.Lookup("version") == nil {
		t.Errorf("%s has no -version (flagx.VersionFlag)", c.Name)
		return
	}
	var stdout, stderr bytes.Buffer
	args := append(append([]string{}, c.Prefix...), "-version")
	code := c.Run(args, &stdout, &stderr)
	cmd, _, _ := strings.Cut(c.Name, " ")
	out := stdout.String()
	if code != 0 || stderr.Len() > 0 || !strings.HasPrefix(out, cmd+" ") || strings.Count(out, "\n") != 1 {
		t.Errorf("%s: exit status %d, stdout %q, stderr %q; want 0 and one line %q", strings.Join(args, " "), code, out, stderr.String(), cmd+" …")
	}
}
