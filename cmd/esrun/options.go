package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
)

// options are esrun's parsed flags.
type options struct {
	problem    string
	dim        int
	mu, lambda int
	gens       int
	seed       uint64
	comma      bool
	sigma      float64
	target     float64
	maxEvals   int
	lu         int
	loadMS     float64

	sched      string
	adaptive   bool
	local      int
	slots      int
	minWorkers int
	listen     string
	gossip     string
	key        string
	keyFile    string
	inprocess  bool

	checkpoint string
	resume     string
	report     string
	quiet      bool
	verbose    bool

	set map[string]bool // the flags given on the command line
}

// Default addresses. A purely local grid listens on loopback with ports
// chosen by the OS, so that any number of runs can share a machine and
// nothing is reachable from outside; a grid that expects remote workers
// listens on every interface at the well-known ports, which are what the
// esworker command line and the firewall rules name.
var (
	localListen  = "127.0.0.1:0"
	localGossip  = "127.0.0.1:0"
	remoteListen = net.JoinHostPort("0.0.0.0", strconv.Itoa(grid.DefaultDataPort))
	remoteGossip = net.JoinHostPort("0.0.0.0", strconv.Itoa(grid.DefaultGossipPort))
)

// usageError is a bad command line: esrun prints it on one line and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usageText = `Usage: esrun [flags]

esrun runs a (μ+λ) Evolution Strategy: by default the paper's experiment
shape, a (30+70)-ES on the 30-dimensional Ridge function for 100
generations. It prints one line per generation, a schedule summary and the
best fitness found.

The fitness evaluations of each generation are scheduled over a grid: a
master in this process, plus worker agents that join it through gossip. By
default the workers are -local agents started in this process, one per
CPU, which speak the same protocol over loopback as esworker processes on
other machines. Remote workers are expected when -local is 0 or
-min-workers exceeds -local: the master then listens on every interface at
the usual ports, waits for them, and, given no key, makes one and prints
the esworker command line to use (see "Run on several machines" in the
README). However it is evaluated, the same seed gives the same run, bit
for bit.

Examples:
  esrun                                  the default run, on a local grid
  esrun -problem rastrigin -dim 10 -gens 300 -seed 7
  esrun -load-ms 100 -gens 20            add an LU load of about 100 ms per evaluation
  esrun -sched wq -report wq.json        another scheduling policy, and a JSON report
  esrun -adaptive                        size remote queues from measured round trips
  esrun -inprocess                       evaluate with a goroutine pool instead (the reference)
  esrun -local 0 -min-workers 4 -key-file K
                                         wait for 4 esworker processes, then run on them
  esrun -checkpoint run.ckpt -report run.json
  esrun -resume run.ckpt -gens 200       continue a run, here up to generation 200
`

// flagGroups orders the help text; every flag is in exactly one group.
var flagGroups = []struct {
	title string
	names []string
}{
	{"Evolution Strategy", []string{"problem", "dim", "mu", "lambda", "gens", "seed", "comma", "sigma", "target", "max-evals"}},
	{"Load (extra work per evaluation)", []string{"lu", "load-ms"}},
	{"Grid", []string{"sched", "adaptive", "local", "slots", "min-workers", "listen", "gossip", "key", "key-file", "inprocess"}},
	{"Output", []string{"checkpoint", "resume", "report", "quiet", "v"}},
}

// gridFlags are the flags that only mean something for the grid, so
// that -inprocess refuses them.
var gridFlags = []string{"sched", "adaptive", "local", "min-workers", "listen", "gossip", "key", "key-file"}

// newFlagSet declares esrun's flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esrun", flag.ContinueOnError)
	fs.StringVar(&o.problem, "problem", "ridge", "fitness function to minimise: "+strings.Join(problems.Names(), ", "))
	fs.IntVar(&o.dim, "dim", 30, "number of dimensions n")
	fs.IntVar(&o.mu, "mu", 30, "μ, the number of parents")
	fs.IntVar(&o.lambda, "lambda", 70, "λ, the number of offspring per generation (the tasks of a generation)")
	fs.IntVar(&o.gens, "gens", 100, "last generation to run (generation 0 evaluates the μ initial parents); 0 = no limit")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed; the same seed gives the same run")
	fs.BoolVar(&o.comma, "comma", false, "use (μ,λ) selection instead of (μ+λ)")
	fs.Float64Var(&o.sigma, "sigma", 0, "initial step size; 0 = a tenth of the box width")
	fs.Float64Var(&o.target, "target", 0, "stop once the best fitness is ≤ this value (unset: no target)")
	fs.IntVar(&o.maxEvals, "max-evals", 0, "evaluation budget: do not start a generation that would exceed it; 0 = none")

	fs.IntVar(&o.lu, "lu", 0, "add an `N`×N LU decomposition to every evaluation; 0 = no load")
	fs.Float64Var(&o.loadMS, "load-ms", 0, "add an LU load sized so one evaluation takes about `MS` milliseconds on this machine (calibrated at start, then sent to every worker)")

	fs.StringVar(&o.sched, "sched", "r3q", "scheduling `POLICY`: "+strings.Join(sched.Names, ", "))
	fs.BoolVar(&o.adaptive, "adaptive", false, "rwq, r3q: size each worker's remote queue from its measured round trip and task time (at least 2 tasks per slot, at most "+strconv.Itoa(sched.DefaultAdaptiveMax)+"), instead of the paper's fixed 2")
	fs.IntVar(&o.local, "local", runtime.NumCPU(), "start `N` worker agents in this process, by default one per CPU; 0 = only remote workers")
	fs.IntVar(&o.slots, "slots", 0, "`N` evaluations at once in each local worker, or with -inprocess in the pool; 0 = share out the CPUs: CPUs ÷ -local, at least 1")
	fs.IntVar(&o.minWorkers, "min-workers", 0, "wait until `N` workers, local and remote, have joined before generation 0; 0 = the local ones (at least 1)")
	fs.StringVar(&o.listen, "listen", "", "the master's data address `HOST:PORT`, which workers connect to; default "+localListen+" for a purely local grid, "+remoteListen+" when remote workers are expected")
	fs.StringVar(&o.gossip, "gossip", "", "the master's gossip address `HOST:PORT` (TCP and UDP), which workers -join; default "+localGossip+" for a purely local grid, "+remoteGossip+" when remote workers are expected")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY`, shared by master and workers (visible in ps: prefer -key-file or "+grid.KeyEnv+"); none of the three: a random key for this run")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.BoolVar(&o.inprocess, "inprocess", false, "evaluate with a pool of goroutines in this process instead of a grid (the reference a grid run equals)")

	fs.StringVar(&o.checkpoint, "checkpoint", "", "write the state to `FILE` after every generation")
	fs.StringVar(&o.resume, "resume", "", "continue the run saved in checkpoint `FILE` (and keep checkpointing to it unless -checkpoint is given)")
	fs.StringVar(&o.report, "report", "", "write a JSON report to `FILE`: config, per-generation best, mean and wall time, final best, schedule")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the final summary")
	fs.BoolVar(&o.verbose, "v", false, "log the grid's events (joins, leaves, connections) on standard error")
	return fs
}

// resumeFixed lists the flags that a checkpoint fixes.
var resumeFixed = []string{"problem", "dim", "mu", "lambda", "seed", "comma", "sigma"}

// parseOptions parses args. -h yields flag.ErrHelp; anything else wrong is a
// *usageError.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	switch {
	case o.lu < 0:
		return nil, usagef("-lu must be ≥ 0, got %d", o.lu)
	case o.loadMS < 0 || o.loadMS > 60_000 || o.loadMS != o.loadMS:
		return nil, usagef("-load-ms must be in [0, 60000], got %v", o.loadMS)
	case o.lu > 0 && o.loadMS > 0:
		return nil, usagef("-lu and -load-ms both set the load; give one")
	case o.slots < 0:
		return nil, usagef("-slots must be ≥ 0, got %d", o.slots)
	case o.slots > grid.MaxMetaSlots:
		return nil, usagef("-slots must be ≤ %d, got %d", grid.MaxMetaSlots, o.slots)
	case !slices.Contains(sched.Names, o.sched):
		return nil, usagef("-sched %q is not a policy (known: %s)", o.sched, strings.Join(sched.Names, ", "))
	case o.adaptive && o.sched != "rwq" && o.sched != "r3q":
		return nil, usagef("-adaptive applies to -sched rwq and r3q only, not %s", o.sched)
	case o.local < 0:
		return nil, usagef("-local must be ≥ 0, got %d", o.local)
	case o.local > 1024:
		return nil, usagef("-local must be ≤ 1024, got %d", o.local)
	case o.minWorkers < 0:
		return nil, usagef("-min-workers must be ≥ 0, got %d", o.minWorkers)
	case o.key != "" && o.keyFile != "":
		return nil, usagef("-key and -key-file both give the key; give one")
	}
	for _, a := range []struct{ name, addr string }{{"listen", o.listen}, {"gossip", o.gossip}} {
		if a.addr == "" && !o.set[a.name] {
			continue
		}
		if err := checkHostPort(a.addr); err != nil {
			return nil, usagef("-%s %q: %v", a.name, a.addr, err)
		}
	}
	if o.gossip != "" {
		// Gossip binds to an address, and would take a name for "any".
		if host, _, _ := net.SplitHostPort(o.gossip); host != "" && net.ParseIP(host) == nil {
			return nil, usagef("-gossip %q: the host must be an IP address, such as 127.0.0.1 or 0.0.0.0", o.gossip)
		}
	}
	if o.inprocess {
		for _, name := range gridFlags {
			if o.set[name] {
				return nil, usagef("-%s has no effect with -inprocess", name)
			}
		}
	}
	if o.resume != "" {
		for _, name := range resumeFixed {
			if o.set[name] {
				return nil, usagef("-%s cannot be given with -resume: the checkpoint fixes it", name)
			}
		}
		if o.checkpoint == "" {
			o.checkpoint = o.resume
		}
	}
	if !o.inprocess {
		if o.listen == "" {
			o.listen = localListen
			if o.remoteExpected() {
				o.listen = remoteListen
			}
		}
		if o.gossip == "" {
			o.gossip = localGossip
			if o.remoteExpected() {
				o.gossip = remoteGossip
			}
		}
	}
	return o, nil
}

// checkHostPort accepts host:port with a numeric port (the host may be
// empty: every interface).
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number in [0, 65535]", port)
	}
	return nil
}

// wantWorkers is the number of workers to wait for before generation 0:
// -min-workers, or by default every local agent (and at least one, so
// that a grid of remote workers only does not start empty).
func (o *options) wantWorkers() int {
	if o.minWorkers > 0 {
		return o.minWorkers
	}
	return max(o.local, 1)
}

// remoteExpected says the run cannot start on local agents alone.
func (o *options) remoteExpected() bool { return o.wantWorkers() > o.local }

// localSlots is the number of slots of each local agent.
func (o *options) localSlots() int {
	if o.slots > 0 {
		return o.slots
	}
	return max(1, runtime.NumCPU()/max(o.local, 1))
}

// printUsage writes the help text with the flags in groups, in the
// order of flagGroups, formatted as flag.PrintDefaults does.
func printUsage(w io.Writer) {
	all := newFlagSet(&options{})
	fmt.Fprint(w, usageText)
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s flags:\n", g.title)
		for _, name := range g.names {
			printFlag(w, all.Lookup(name))
		}
	}
}

// printFlag writes one flag's help.
func printFlag(w io.Writer, f *flag.Flag) {
	arg, usage := flag.UnquoteUsage(f)
	line := "  -" + f.Name
	if arg != "" {
		line += " " + arg
	}
	if len(line) <= 4 {
		line += "\t"
	} else {
		line += "\n    \t"
	}
	line += strings.ReplaceAll(usage, "\n", "\n    \t")
	switch d := f.DefValue; {
	case d == "" || d == "0" || d == "false":
	case arg == "string" || arg == "POLICY":
		line += fmt.Sprintf(" (default %q)", d)
	default:
		line += fmt.Sprintf(" (default %s)", d)
	}
	fmt.Fprintln(w, line)
}
