package flagxtest

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/internal/flagx"
)

// fake is a command built as the rules say, with knobs that break them
// one at a time.
type fake struct {
	oldName     bool // -sched declared as a flag of its own, not an alias
	noVersion   bool
	noHelpArg   bool // -listen's help names no argument
	anyAddress  bool // -listen defaults to every interface
	unbounded   bool // -reps a plain int
	usageStatus int  // the status of a bad command line (0: 2)
	bareHelp    bool // -h prints the flags without a usage line
	quietAlias  bool // the -q alias prints no notice
}

func (f fake) flags(o *struct {
	policy, listen string
	reps           int
	quiet          bool
}) *flag.FlagSet {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.policy, "policy", "r3q", "scheduling `POLICY`")
	if f.oldName {
		fs.StringVar(&o.policy, "sched", "r3q", "scheduling `POLICY`")
	} else {
		flagx.Alias(fs, "sched", "policy")
	}
	listen, help := "127.0.0.1:0", "the data address `HOST:PORT`"
	if f.anyAddress {
		listen = "0.0.0.0:7947"
	}
	if f.noHelpArg {
		help = "the data address"
	}
	fs.StringVar(&o.listen, "listen", listen, help)
	if f.unbounded {
		fs.IntVar(&o.reps, "reps", 3, "repetitions `R`")
	} else {
		flagx.IntVar(fs, &o.reps, "reps", 3, 1, 10, "repetitions `R`")
	}
	fs.BoolVar(&o.quiet, "quiet", false, "print only the result")
	flagx.Alias(fs, "q", "quiet")
	if !f.noVersion {
		flagx.VersionFlag(fs)
	}
	return fs
}

func (f fake) command() Command {
	return Command{
		Name: "fake",
		Flags: func() *flag.FlagSet {
			var o struct {
				policy, listen string
				reps           int
				quiet          bool
			}
			return f.flags(&o)
		},
		Run: f.run,
	}
}

func (f fake) run(args []string, stdout, stderr *bytes.Buffer) int {
	var o struct {
		policy, listen string
		reps           int
		quiet          bool
	}
	fs := f.flags(&o)
	err := flagx.Parse(fs, args)
	if err == nil || errors.Is(err, flagx.ErrVersion) {
		for _, n := range flagx.Deprecated(fs) {
			if !f.quietAlias || !strings.HasPrefix(n, "-q ") {
				fmt.Fprintf(stderr, "fake: %s\n", n)
			}
		}
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		if !f.bareHelp {
			fmt.Fprintln(stdout, "Usage: fake [flags]")
		}
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	case errors.Is(err, flagx.ErrVersion):
		fmt.Fprintln(stdout, flagx.Version("fake"))
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "fake: %v\n", err)
		if f.usageStatus != 0 {
			return f.usageStatus
		}
		return 2
	}
	return 0
}

// Each rule is checked: a command that keeps them all passes, and one
// that breaks one is told which.
func TestProblems(t *testing.T) {
	if p := Problems(fake{}.command()); len(p) > 0 {
		t.Fatalf("a command that keeps the rules: %q", p)
	}
	for _, tt := range []struct {
		f    fake
		want string
	}{
		{fake{oldName: true}, "-sched is the old name of -policy"},
		{fake{noVersion: true}, "fake has no -version"},
		{fake{noHelpArg: true}, "-listen: its help text names no argument"},
		{fake{anyAddress: true}, "-listen listens on every interface by default"},
		{fake{unbounded: true}, "-reps (default \"3\") is numeric but not bounded"},
		{fake{usageStatus: 1}, "fake -no-such-flag: exit status 1, want 2"},
		{fake{bareHelp: true}, "want 0 and a usage text"},
		{fake{quietAlias: true}, `want 0 and "-q is deprecated, use -quiet"`},
	} {
		p := Problems(tt.f.command())
		if !strings.Contains(strings.Join(p, "\n"), tt.want) {
			t.Errorf("%+v: problems %q, want one with %q", tt.f, p, tt.want)
		}
	}
}
