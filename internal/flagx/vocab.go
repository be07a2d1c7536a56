package flagx

import (
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
)

// The commands' exit statuses, one rule for all (esworker adds 78, below).
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the run failed (a worker, a network, a data file such
	// as a report or a calibration that cannot be read).
	ExitFailure = 1
	// ExitUsage: the command line is wrong (an unknown flag, a value out
	// of range, flags that do not go together) or so is a configuration
	// it names (a key file, a plan, a machine set). Nothing was done.
	ExitUsage = 2
	// ExitConfig is esworker's status for a bad command line or
	// configuration (EX_CONFIG of sysexits.h): its systemd unit does not
	// restart it (RestartPreventExitStatus=78), where 2 is a Go crash,
	// which a restart gets round.
	ExitConfig = 78
)

// Term is one concept of the vocabulary: the name every command gives
// the flag, and the names some command gave it before, which still work
// as deprecated aliases.
type Term struct {
	Name  string
	Old   []string
	Means string
}

// Vocabulary is the flag vocabulary shared by the commands: a command
// that has the concept names it so, and a flag under an old name is only
// an Alias of the new one (flagxtest checks both).
var Vocabulary = []Term{
	{"policy", []string{"sched"}, "the scheduling policy: wq, rr, rwq, r3q, cyclic or eft (a list in essim, to compare)"},
	{"quiet", []string{"q"}, "print only the result"},
	{"v", nil, "log debug detail"},
	{"version", nil, "print the build's version and exit"},
	{"seed", nil, "the random seed (the first of several runs' seeds)"},
	{"trials", []string{"seeds"}, "seeded runs per setting, seeds -seed, -seed+1, …"},
	{"problem", []string{"problems"}, "the fitness function (a list in esbench)"},
	{"dim", []string{"dims"}, "the problem's dimension (a list in esbench)"},
	{"gens", nil, "the last generation"},
	{"parallel", []string{"j"}, "runs or simulations at once"},
	{"mu", nil, "μ, the parents"},
	{"lambda", nil, "λ, the offspring per generation"},
	{"lu", []string{"n"}, "the LU load's size N per task"},
	{"load-ms", []string{"task-ms"}, "a task's time in milliseconds on one machine"},
	{"grain", []string{"gran"}, "a task's time on the reference machine (a list in essim)"},
	{"delay", []string{"latency"}, "the one-way delay added to every message: a duration, a bare number is milliseconds"},
	{"slowdown", nil, "the factor F by which a machine is slower (essim: of machine M from time T, M@T*F or M*F)"},
	{"copies", nil, "eft: the most live instances of a task"},
	{"adaptive", nil, "rwq, r3q: remote queues sized from measurements"},
	{"slots", nil, "tasks at once on one machine (a list where several are measured)"},
	{"min-workers", nil, "wait for N workers before starting"},
	{"master-cost", []string{"costs"}, "a master's time per message (a list in essim masters)"},
	{"overload-window", []string{"window"}, "the overload test's n"},
	{"listen", nil, "the master's data address; loopback unless workers on other machines are expected"},
	{"gossip", nil, "the gossip address workers -join; loopback unless other machines take part"},
	{"key", nil, "the cluster key (or -key-file, or ESGRID_KEY)"},
	{"key-file", nil, "the file holding the cluster key"},
	{"key-file-insecure", nil, "accept a key file others may read"},
	{"inprocess", nil, "evaluate in this process, no grid"},
	{"plugin", nil, "a problem plugin NAME=PATH (repeatable)"},
	{"plan", nil, "an esplan plan file"},
	{"metrics", nil, "serve Prometheus metrics at ADDR"},
	{"log-json", nil, "write the log as JSON lines"},
	{"report", nil, "write a JSON report to FILE"},
	{"png", nil, "draw a PNG picture to FILE"},
}

// Canonical is the name that replaced the old flag name old, or "".
func Canonical(old string) string {
	for _, t := range Vocabulary {
		if slices.Contains(t.Old, old) {
			return t.Name
		}
	}
	return ""
}

// AliasValue is the value of a deprecated flag name: what is given to it
// goes to the flag of the new name, once Parse has parsed the line (so
// that the new flag counts as given: fs.Visit and fs.Lookup see it).
type AliasValue struct {
	fs       *flag.FlagSet
	old, new string
	values   []string
}

// Alias declares old, in fs, as a deprecated name of the flag named new,
// which must be declared already. Its help says so; Deprecated gives the
// notice for a command to print when it is used.
func Alias(fs *flag.FlagSet, old, new string) {
	f := fs.Lookup(new)
	if f == nil {
		panic("flagx.Alias: no flag -" + new)
	}
	arg, _ := flag.UnquoteUsage(f)
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		arg = ""
	}
	text := "deprecated, use -" + new
	if arg != "" && arg != "value" {
		text += " `" + arg + "`"
	}
	fs.Var(&AliasValue{fs: fs, old: old, new: new}, old, text)
}

// New is the name the alias stands for.
func (a *AliasValue) New() string { return a.new }

// Old is the alias's own, deprecated name.
func (a *AliasValue) Old() string { return a.old }

// String is empty: an alias has no default of its own (the help shows
// the new flag's).
func (a *AliasValue) String() string { return "" }

// Set keeps s for the new flag.
func (a *AliasValue) Set(s string) error {
	a.values = append(a.values, s)
	return nil
}

// IsBoolFlag is the new flag's: -q works as -quiet does.
func (a *AliasValue) IsBoolFlag() bool {
	if a == nil || a.fs == nil {
		return false
	}
	if f := a.fs.Lookup(a.new); f != nil {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
			return b.IsBoolFlag()
		}
	}
	return false
}

// apply sets the new flag to the values given to the alias, and words a
// refused one with the name the user typed.
func (a *AliasValue) apply() error {
	for _, v := range a.values {
		if err := a.fs.Set(a.new, v); err != nil {
			if r, ok := a.fs.Lookup(a.new).Value.(refuser); ok {
				if _, rerr := r.Refused(); rerr != nil {
					return fmt.Errorf("-%s %s: %w", a.old, v, rerr)
				}
			}
			return fmt.Errorf("invalid value %q for flag -%s: %w", v, a.old, err)
		}
	}
	return nil
}

// Deprecated lists, for the deprecated names given on the command line
// fs parsed, the notice a command prints on standard error: "-q is
// deprecated, use -quiet".
func Deprecated(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if a, ok := f.Value.(*AliasValue); ok {
			out = append(out, fmt.Sprintf("-%s is deprecated, use -%s", a.old, a.new))
		}
	})
	return out
}

// ErrVersion is what Parse returns when -version was given (and nothing
// on the line was wrong): the command prints Version and exits 0.
var ErrVersion = errors.New("flagx: -version")

// versionFlag is -version.
type versionFlag bool

func (v *versionFlag) String() string { return "false" }
func (v *versionFlag) Set(s string) error {
	b, err := parseBool(s)
	*v = versionFlag(b)
	return err
}
func (v *versionFlag) IsBoolFlag() bool { return true }
func (v *versionFlag) Get() any         { return bool(*v) }

func parseBool(s string) (bool, error) {
	switch s {
	case "1", "t", "T", "true", "TRUE", "True":
		return true, nil
	case "0", "f", "F", "false", "FALSE", "False":
		return false, nil
	}
	return false, errors.New("not a boolean")
}

// VersionFlag declares -version into fs.
func VersionFlag(fs *flag.FlagSet) {
	fs.Var(new(versionFlag), "version", "print the version of this build (module version, VCS revision and time) and exit")
}

// Version is the line -version prints: the command, the module's version
// and, when the build recorded them, its VCS revision, time and whether
// the tree was modified, and the Go version.
//
//	esrun github.com/esgrid/esgrid v1.4.0 (revision 4a7781c1d2e3, 2026-11-26T17:02:11Z, modified) go1.26.8
func Version(command string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return command + " (no build information)"
	}
	return command + " " + versionOf(info)
}

// versionOf words info as Version does, without the command.
func versionOf(info *debug.BuildInfo) string {
	path, version := info.Main.Path, info.Main.Version
	if path == "" {
		path = "github.com/esgrid/esgrid"
	}
	if version == "" {
		version = "(devel)"
	}
	var vcs []string
	s := map[string]string{}
	for _, kv := range info.Settings {
		s[kv.Key] = kv.Value
	}
	if r := s["vcs.revision"]; r != "" {
		vcs = append(vcs, "revision "+r[:min(len(r), 12)])
	}
	if t := s["vcs.time"]; t != "" {
		vcs = append(vcs, t)
	}
	if s["vcs.modified"] == "true" {
		vcs = append(vcs, "modified")
	}
	line := path + " " + version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	if info.GoVersion != "" {
		line += " " + info.GoVersion
	}
	return line
}
