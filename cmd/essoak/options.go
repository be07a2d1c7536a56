package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/soak"
)

// options are essoak's flags.
type options struct {
	duration time.Duration
	runs     int
	seed     uint64
	bin      string
	keep     string
	slack    float64
	maxRSS   int // MiB
	limits   limits
	set      map[string]string // the flags given, with their values
}

// limits bound the scenarios drawn (soak.Limits).
type limits = soak.Limits

// defaultLimits keep one run to a few seconds of work on a 2-core machine.
var defaultLimits = soak.DefaultLimits

// usageError is a bad command line: essoak prints it on one line and
// exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usageText = `Usage: essoak [flags]

essoak is esgrid's soak test. Until -duration has passed (or -runs runs
are done) it runs run after run of real esrun and esworker processes on
127.0.0.1 (ports chosen by the system), on the problem plugin "soak" (the
Rastrigin function in a plugin process that crashes or hangs when told),
with seeded chaos. Run i draws its whole scenario from the seed -seed + i:
the policy, the workers (slots, -delay, -slowdown, -hang-every,
-fail-every, -silent, plugin crashes and hangs), the ES, and the faults
injected while it runs: workers killed with SIGKILL (a replacement joins), workers
stopped with SIGSTOP and continued with SIGCONT, and the master killed
with SIGKILL and restarted with esrun -resume from its checkpoint. Some
runs (-split) have a master made slow (-master-cost) that splits
(esrun -split paper or gain), and the worker it promotes to a child
master, found from its log, is killed or stopped; some (-relay) have
workers that reach the master through a relay (esworker -relay), which
is killed (and started again at its address) or stopped.

After every run it checks:
  bound       the run ended within a bound computed from the deadlines and
              timeouts in force (the formula is printed with each run);
              a run past it is killed and recorded as a stall
  trajectory  the per-generation lines, the report's generations, the
              final best and the final checkpoint equal esrun -inprocess
              with the same ES flags, bit for bit
  counts      in the report's schedule, every generation's originals equal
              its tasks, tasks sent = originals + replicas, and results
              accepted (from workers and from child masters) = tasks
  exits       esrun exits 0, and every worker that joined exits 0 when
              the run ends (-once) or when sent SIGTERM (but a worker
              behind a relay the master lost, not back by the end: the
              word never reached it, and it waits for the next master);
              one still running is sent SIGQUIT, its goroutines kept
  memory      each esrun's peak RSS (getrusage) stays under -max-rss

One end other than success is by design: a task that failed more often
than esrun's -max-retries allows, every failure injected (a plugin crash,
-fail-every). The master cannot tell a plugin that crashes now and then
from a task that crashes it every time, so esrun must then fail with
that error. Such a run is counted as "failed as designed", not a defect,
when the generations it completed equal the in-process run's and its
workers, told the master will be back, drain when sent SIGTERM.

It prints one line per run, then a summary: runs, faults injected by
kind, defects by kind, and for each defect the command that replays its
scenario and the directory where its logs are kept. Every process it
starts is killed when it stops, Ctrl-C included. Exit status: 0 without
defects, 1 with, 2 for a bad command line.

Examples:
  essoak                          five minutes of runs, seed from the clock
  essoak -duration 1h -seed 7
  essoak -seed 12 -runs 1         replay the scenario of seed 12

Flags:
`

// newFlagSet defines the flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("essoak", flag.ContinueOnError)
	flagx.DurationVar(fs, &o.duration, "duration", 5*time.Minute, time.Second, 30*24*time.Hour, "start runs until `D` has passed (the run under way finishes)")
	flagx.IntVar(fs, &o.runs, "runs", 0, 0, 1_000_000, "stop after `N` runs; 0 = as many as -duration allows")
	flagx.Uint64Var(fs, &o.seed, "seed", 0, 0, math.MaxUint64, "run i draws its scenario from seed `S`+i; 0 = from the clock (printed)")
	fs.StringVar(&o.bin, "bin", "", "`DIR` holding esrun, esworker and soakplugin; default: build them with the go tool into a temporary directory (run essoak inside the esgrid module)")
	fs.StringVar(&o.keep, "keep", "essoak-defects", "`DIR` where the logs of runs with defects are kept (one directory per run)")
	flagx.FloatVar(fs, &o.slack, "slack", 2, 1, 100, "the bound on a run is `K` × the sum of its terms (K ≥ 1), for the load of a shared machine")
	flagx.IntVar(fs, &o.maxRSS, "max-rss", 256, 1, 1<<20, "the bound on each esrun's peak resident memory, in `MiB`")
	flagx.IntVar(fs, &o.limits.Workers, "max-workers", defaultLimits.Workers, 1, 16, "at most `N` esworker processes at the start of a run")
	flagx.IntVar(fs, &o.limits.Gens, "max-gens", defaultLimits.Gens, 4, 1000, "at most `N` generations per run (at least 4)")
	flagx.IntVar(fs, &o.limits.Lambda, "max-lambda", defaultLimits.Lambda, 4, 1000, "at most `N` offspring per generation (at least 4); a run whose master splits draws 2-6 × N")
	flagx.FloatVar(fs, &o.limits.Silent, "silent", defaultLimits.Silent, 0, 1, "the chance `P` that a worker other than the first runs esworker -silent (takes tasks, never answers)")
	flagx.FloatVar(fs, &o.limits.Split, "split", defaultLimits.Split, 0, 1, "the chance `P` that a run's master splits: esrun -split paper or gain with -master-cost 200us-2ms, 4-10 workers and fine tasks, and faults on the workers promoted to child masters (killed, stopped)")
	flagx.FloatVar(fs, &o.limits.Relay, "relay", defaultLimits.Relay, 0, 1, "the chance `P` that some of a run's workers reach the master through a relay (esworker -relay), with faults on the relay (killed, stopped)")
	flagx.VersionFlag(fs)
	fs.Usage = func() {
		out := fs.Output()
		io.WriteString(out, usageText)
		fs.PrintDefaults()
	}
	return fs
}

// parseOptions parses args; -h yields flag.ErrHelp, anything else wrong a
// *usageError.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, flagx.ErrVersion) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]string{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = f.Value.String() })
	switch {
	case o.keep == "":
		return nil, usagef("-keep needs a directory")
	}
	// The logs are kept only when a run finds a defect, maybe hours in:
	// a -keep that cannot hold them is said now, not then ("(not kept:
	// mkdir …: not a directory)").
	if fi, err := os.Stat(o.keep); err == nil && !fi.IsDir() {
		return nil, usagef("-keep %s is not a directory", o.keep)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, usagef("-keep %s: %v", o.keep, err)
	} else if err != nil {
		if fi, err := os.Stat(filepath.Dir(o.keep)); err != nil || !fi.IsDir() {
			return nil, usagef("-keep %s: there is no directory %s to make it in", o.keep, filepath.Dir(o.keep))
		}
	}
	if o.bin != "" {
		if fi, err := os.Stat(o.bin); err != nil || !fi.IsDir() {
			return nil, usagef("-bin %s is not a directory (it holds esrun, esworker and soakplugin)", o.bin)
		}
	}
	return o, nil
}

// replayed are the flags that shape a scenario or its checks, in the
// order a replay gives them.
var replayed = []string{"max-workers", "max-gens", "max-lambda", "silent", "split", "relay", "slack", "max-rss"}

// replay is the command line that runs the scenario of seed again: -runs
// 1 and the flags of replayed that were given.
func (o *options) replay(seed uint64) string {
	args := []string{"essoak", "-seed", strconv.FormatUint(seed, 10), "-runs", "1"}
	for _, name := range replayed {
		if v, ok := o.set[name]; ok {
			args = append(args, "-"+name, v)
		}
	}
	return strings.Join(args, " ")
}
