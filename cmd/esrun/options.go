package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/metrics"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// options are esrun's parsed flags.
type options struct {
	problem    string
	dim        int
	mu, lambda int
	gens       int
	seed       uint64
	comma      bool
	strategy   string
	restarts   string // -restarts: CMA-ES's restart strategy
	recombine  string
	sigmaRecom string
	rho        int
	sigma      float64
	target     float64
	maxEvals   int
	lu         int
	loadMS     float64

	sched      string // -policy (formerly -sched)
	adaptive   bool
	copies     int
	local      int
	slots      int
	minWorkers int
	maxConns   int // -max-workers: the connections the master holds at most
	listen     string
	gossip     string
	key        string
	keyFile    string
	keyAny     bool    // -key-file-insecure
	genkey     string  // -genkey FILE: write a fresh key and exit
	verify     float64 // -verify P: the fraction of results checked on a second host
	nonfinite  bool    // -nonfinite: NaN and ±Inf are the problem's answers, not errors
	inprocess  bool
	plan       string           // -plan FILE (plan.go)
	planned    *grid.Plan       // read from -plan
	excluded   []grid.Exclusion // hosts the -resume checkpoint keeps excluded (excluded.go)
	split      splitOptions     // -split, -overload-window, -master-cost (split.go)
	plugins    plugin.Entries   // -plugin NAME=PATH, repeatable (plugins.go)
	catalog    *plugin.Catalog  // checked -plugin, once a problem is built

	taskTimeout time.Duration
	maxRetries  int
	maxFrameMiB int

	checkpoint string
	resume     string
	report     string
	force      bool
	quiet      bool
	verbose    bool
	logJSON    bool

	metrics       string        // -metrics ADDR (metrics.go)
	metricsLinger time.Duration // -metrics-linger
	runName       string        // -run-name: the label run= of every series

	set        map[string]bool // the flags given on the command line
	deprecated []string        // notices for the deprecated names given
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

// Bounds of esrun's numeric flags (the others are the grid's and the
// load's own: grid.MaxMetaSlots, problems.MaxLoadN...). A run this large
// is refused here, in one line, rather than found out of memory or still
// running days later; the memory a run needs is checked too, once its
// shape is known (limits.go).
const (
	// maxWorkers bounds -min-workers: more workers than one master could
	// ever hold a connection to is a typing error, not a grid.
	maxWorkers = 1 << 16
	// maxLocal bounds -local: agents in this process.
	maxLocal = 1024
	// maxDim bounds -dim: 10⁷ coordinates are 80 MB a vector, and the
	// memory check then decides with -mu and -lambda.
	maxDim = 10_000_000
	// maxPopulation bounds -mu, -lambda and -rho: the paper's are 30 and 70.
	maxPopulation = 1_000_000
	// maxGens bounds -gens (0: no limit).
	maxGens = 100_000_000
	// maxEvals bounds -max-evals.
	maxEvals = 1_000_000_000_000
	// maxTaskTimeout bounds -task-timeout: a week for one evaluation.
	maxTaskTimeout = 7 * 24 * time.Hour
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
the esworker command line to use (see docs/grid.md in the
repository). However it is evaluated, the same seed gives the same run, bit
for bit.

Files are never lost. A -checkpoint or -report FILE that already exists
stops esrun before it starts, unless -force is given or the checkpoint is
the one -resume continues. The checkpoint is replaced whole after every
generation. The report is written when the run ends; a run that fails or
is interrupted writes its report to FILE.partial instead and leaves FILE
as it was. No file a run writes may be another it writes or reads
(FILE.partial included): such a command line is refused at once. A run that would need more memory than half of this machine's
(estimated from -mu, -lambda, -dim, the load and the slots) is refused.

Examples:
  esrun                                  the default run, on a local grid
  esrun -problem rastrigin -dim 10 -gens 300 -seed 7
  esrun -problem sphere -gens 0 -target 1e-8 -mu 10 -recombine intermediate -sigma-recombine intermediate
                                         the recommended ES: recombination of x and σ
  esrun -strategy cma -problem ellipsoid -target 1e-8
                                         CMA-ES, on the grid like any run, until the
                                         target or 10⁴·n evaluations
  esrun -strategy cma -restarts ipop -problem rastrigin -dim 10 -target 1e-8 -max-evals 200000
                                         CMA-ES restarted with larger populations:
                                         for multimodal functions
  esrun -load-ms 100 -gens 20            add an LU load of about 100 ms per evaluation
  esrun -policy wq -report wq.json       another scheduling policy, and a JSON report
  esrun -adaptive                        size remote queues from measured round trips
  esrun -inprocess                       evaluate with a goroutine pool instead (the reference)
  esrun -local 0 -min-workers 4 -key-file K
                                         wait for 4 esworker processes, then run on them
  esrun -checkpoint run.ckpt -report run.json
  esrun -resume run.ckpt -gens 200       continue a run, here up to generation 200
  esrun -checkpoint run.ckpt -force      start afresh, replacing an old run.ckpt

Exit status: 0 done, 1 the run failed, 2 a bad command line (nothing was
done). -version prints the build's version.
`

// flagGroups orders the help text; every flag is in exactly one group.
var flagGroups = []flagx.Group{
	{Title: "Evolution Strategy", Names: []string{"problem", "plugin", "dim", "strategy", "restarts", "mu", "lambda", "gens", "seed", "comma", "recombine", "sigma-recombine", "rho", "sigma", "target", "max-evals"}},
	{Title: "Load (extra work per evaluation)", Names: []string{"lu", "load-ms"}},
	{Title: "Grid", Names: []string{"policy", "adaptive", "copies", "local", "slots", "min-workers", "max-workers", "listen", "gossip", "key", "key-file", "key-file-insecure", "genkey", "verify", "nonfinite", "plan", "split", "overload-window", "master-cost", "inprocess"}},
	{Title: "Faults (hung, failing and oversized tasks)", Names: []string{"task-timeout", "max-retries", "max-frame"}},
	{Title: "Output", Names: []string{"checkpoint", "resume", "report", "force", "quiet", "v", "log-json", "metrics", "metrics-linger", "run-name", "version"}},
	{Title: "Deprecated", Names: []string{"sched"}},
}

// gridFlags are the flags that only mean something for the grid, so
// that -inprocess refuses them.
var gridFlags = []string{"policy", "adaptive", "copies", "local", "min-workers", "max-workers", "listen", "gossip", "key", "key-file", "key-file-insecure", "verify", "plan", "split", "overload-window", "master-cost", "max-frame", "metrics", "metrics-linger", "run-name"}

// newFlagSet declares esrun's flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esrun", flag.ContinueOnError)
	fs.StringVar(&o.problem, "problem", "ridge", "the fitness function `NAME` to minimise: "+strings.Join(problems.Names(), ", ")+", or a plugin's NAME given with -plugin")
	fs.Var(&o.plugins, "plugin", "the problem plugin `NAME=PATH`: the executable PATH evaluates the problem NAME (repeatable; see docs/plugins.md); local workers get it too, remote ones list it themselves")
	flagx.IntVar(fs, &o.dim, "dim", 30, 1, maxDim, "number of dimensions `n`")
	flagx.IntVar(fs, &o.mu, "mu", 30, 1, maxPopulation, "μ, the number `N` of parents")
	flagx.IntVar(fs, &o.lambda, "lambda", 70, 1, maxPopulation, "λ, the number `N` of offspring per generation (the tasks of a generation)")
	flagx.IntVar(fs, &o.gens, "gens", 100, 0, maxGens, "last generation `G` to run (generation 0 evaluates the μ initial parents); 0 = no limit; with -target or -strategy cma and no -gens, none: the run goes on until the target or the evaluation budget")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "random `seed`; the same seed gives the same run")
	fs.BoolVar(&o.comma, "comma", false, "use (μ,λ) selection instead of (μ+λ)")
	fs.StringVar(&o.strategy, "strategy", "es", "the `STRATEGY` to run: es, the paper's self-adaptive Evolution Strategy (with the recombination flags below), or cma, CMA-ES (Hansen and Ostermeier); with cma, -mu and -lambda default to ⌊λ/2⌋ and 4 + ⌊3 ln n⌋, -sigma to 0.3 × the box width, and -comma, -recombine, -sigma-recombine and -rho do not apply")
	fs.StringVar(&o.restarts, "restarts", "none", "with -strategy cma: `HOW` to restart a run that has converged or stalls (the stopping criteria of Auger and Hansen 2005): none, ipop (λ doubled at each restart) or bipop (large and small populations in turn, budgets balanced); for multimodal functions such as rastrigin")
	fs.StringVar(&o.recombine, "recombine", "none", "how a child's object variables are made from its ρ parents: `HOW` is none (copy one parent: the paper's ES), discrete (each coordinate from one of the ρ parents) or intermediate (their mean)")
	fs.StringVar(&o.sigmaRecom, "sigma-recombine", "none", "how a child's step sizes are made from its ρ parents: `HOW` is none (copy one parent's) or intermediate (their mean); recommended: -mu 10 -recombine intermediate -sigma-recombine intermediate")
	flagx.IntVar(fs, &o.rho, "rho", 0, 0, maxPopulation, "ρ, the number of parents each child is recombined from (`N`, 2..μ); 0 = all μ when -recombine or -sigma-recombine is set, else 1")
	flagx.FloatVar(fs, &o.sigma, "sigma", 0, 0, math.MaxFloat64, "initial step size `S`, at most the box width; 0 = a tenth of the box width (with -strategy cma: 0.3 × the box width)")
	flagx.FloatVar(fs, &o.target, "target", 0, -math.MaxFloat64, math.MaxFloat64, "stop once the best fitness is ≤ `F` (unset: no target)")
	flagx.IntVar(fs, &o.maxEvals, "max-evals", 0, 0, maxEvals, "evaluation budget `N`: do not start a generation that would exceed it; 0 = none, unless -gens is not given and -target or -strategy cma is: then "+strconv.Itoa(es.BudgetPerDim)+" × -dim")

	flagx.IntVar(fs, &o.lu, "lu", 0, 0, problems.MaxLoadN, "add an `N`×N LU decomposition to every evaluation; 0 = no load")
	flagx.FloatVar(fs, &o.loadMS, "load-ms", 0, 0, 60_000, "add an LU load sized so one evaluation takes about `MS` milliseconds on this machine (calibrated at start, then sent to every worker)")

	fs.StringVar(&o.sched, "policy", "r3q", "scheduling `POLICY`: "+strings.Join(sched.Names, ", "))
	flagx.IntVar(fs, &o.copies, "copies", 0, 0, sched.MaxCopies, "eft: most live instances `N` of a task, the original and its replicas (0: "+strconv.Itoa(sched.DefaultCopies)+"; 1: no replicas)")
	fs.BoolVar(&o.adaptive, "adaptive", false, "rwq, r3q: size each worker's remote queue from its measured round trip and task time (at least 2 tasks per slot, at most "+strconv.Itoa(sched.DefaultAdaptiveMax)+"), instead of the paper's fixed 2")
	flagx.IntVar(fs, &o.local, "local", runtime.NumCPU(), 0, maxLocal, "start `N` worker agents in this process, by default one per CPU; 0 = only remote workers")
	flagx.IntVar(fs, &o.slots, "slots", 0, 0, grid.MaxMetaSlots, "`N` evaluations at once in each local worker, or with -inprocess in the pool; 0 = share out the CPUs: CPUs ÷ -local, at least 1")
	flagx.IntVar(fs, &o.minWorkers, "min-workers", 0, 0, maxWorkers, "wait until `N` workers, local and remote, have joined before generation 0; 0 = the local ones (at least 1)")
	flagx.IntVar(fs, &o.maxConns, "max-workers", 0, 0, maxWorkers, "refuse connections past `N` at once, workers and relays, each told why (\"master full\"), so that a key holder cannot open them by the thousand; 0 = three quarters of the open-file limit, at most 16384")
	fs.StringVar(&o.listen, "listen", "", "the master's data address `HOST:PORT`, which workers connect to; default "+localListen+" for a purely local grid, "+remoteListen+" when remote workers are expected")
	fs.StringVar(&o.gossip, "gossip", "", "the master's gossip address `HOST:PORT` (TCP and UDP), which workers -join; default "+localGossip+" for a purely local grid, "+remoteGossip+" when remote workers are expected")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY`, shared by master and workers (visible in ps: prefer -key-file or "+grid.KeyEnv+"); none of the three: a random key for this run, in a file of mode 0600 under the user's configuration directory when remote workers may join")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.BoolVar(&o.keyAny, grid.InsecureKeyFileFlag, false, "accept a -key-file that group or others may read or write (refused by default, as ssh refuses such a key)")
	fs.StringVar(&o.genkey, "genkey", "", "write a fresh cluster key (32 random bytes, base64) to `FILE`, readable by you only, and exit; FILE must not exist")
	flagx.FloatVar(fs, &o.verify, "verify", 0, 0, 1, "check a fraction `P` of the results by evaluating the task again on a worker on another host and comparing bit for bit; hosts (IP addresses; a relay and its workers are one) vote, a host whose value differs from the majority is excluded from the run (kept across -resume) and its results of the generation evaluated again; a tie no third host breaks within 30 s fails the run (0 = none, 1 = all)")
	fs.BoolVar(&o.nonfinite, "nonfinite", false, "the problem may return NaN or ±Inf: take them as its answers (by default a non-finite value from a worker is an evaluation error, retried on another worker; -inprocess fails on it)")
	fs.StringVar(&o.plan, "plan", "", "act on the esplan plan `FILE`: each worker it names gets its slots, and a worker it sets aside gets no tasks (start the workers with esworker -plan FILE too)")
	addSplitFlags(fs, &o.split) // split.go
	fs.BoolVar(&o.inprocess, "inprocess", false, "evaluate with a pool of goroutines in this process instead of a grid (the reference a grid run equals)")

	flagx.DurationVar(fs, &o.taskTimeout, "task-timeout", 10*time.Minute, 0, maxTaskTimeout, "hard limit on one evaluation: a worker running a task longer than `D` is dropped and its tasks go elsewhere (a task is already cancelled and run again, elsewhere if a worker is free, once it runs 4× its worker's usual time, at least 1 s); with -inprocess the evaluation is cancelled (a plugin's process killed) and tried again; either way it counts as failed towards -max-retries; 0 = none")
	flagx.IntVar(fs, &o.maxRetries, "max-retries", 3, 0, 1000, "retry a failed evaluation on another worker up to `N` times before the run fails (with -inprocess, an evaluation past -task-timeout is retried; any other error fails the run at once)")
	flagx.IntVar(fs, &o.maxFrameMiB, "max-frame", 0, 0, grid.MaxFrameLimit>>20, "cap on one message, in `MiB`; workers take the master's cap; 0 = 4 MiB, or room for two tasks of -dim numbers if more")

	fs.StringVar(&o.checkpoint, "checkpoint", "", "write the state to `FILE` after every generation")
	fs.StringVar(&o.resume, "resume", "", "continue the run saved in checkpoint `FILE`, the hosts -verify excluded still excluded (and keep checkpointing to it unless -checkpoint is given)")
	fs.StringVar(&o.report, "report", "", "write a JSON report to `FILE` when the run ends: config, per-generation best, mean and wall time, final best, schedule; a run that fails or is interrupted writes what it has to FILE"+report.PartialSuffix+" instead and leaves FILE as it was")
	fs.BoolVar(&o.force, "force", false, "overwrite the -checkpoint and -report files even if they exist (without it, a run refuses to start rather than replace a file it did not write; -resume FILE may always rewrite FILE)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the final summary")
	fs.BoolVar(&o.verbose, "v", false, "log the grid's debug detail on standard error (by default: workers joining and leaving, refused connections, warnings; nothing per task)")
	fs.BoolVar(&o.logJSON, "log-json", false, "write every line on standard error as JSON, one object per line, for machines; the line per generation goes there too, as the record \"generation\"")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (e.g. :9464, or 127.0.0.1:0 for any free port): the time accounting per generation, tasks, cancels, results, workers, the master's inbox (see docs/metrics.md)")
	flagx.DurationVar(fs, &o.metricsLinger, "metrics-linger", 0, 0, time.Hour, "with -metrics: keep serving the metrics for `D` after the run ends, so that Prometheus scrapes its final figures (e.g. 2 scrape intervals)")
	fs.StringVar(&o.runName, "run-name", "", "with -metrics: the run's `NAME`, the label run= of every series it exports (a dashboard picks runs by it); default the problem and the first 8 hex digits of the run's random id, e.g. ridge-3f9a2c1b")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "sched", "policy")
	return fs
}

// resumeFixed lists the flags that a checkpoint fixes.
var resumeFixed = []string{"problem", "dim", "strategy", "restarts", "mu", "lambda", "seed", "comma", "recombine", "sigma-recombine", "rho", "sigma"}

// parseOptions parses args. -h yields flag.ErrHelp, -version
// flagx.ErrVersion (with the options, for their deprecation notices);
// anything else wrong is a *usageError.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		if errors.Is(err, flagx.ErrVersion) {
			o.deprecated = flagx.Deprecated(fs)
			return o, err
		}
		return nil, usagef("%v", err)
	}
	o.deprecated = flagx.Deprecated(fs)
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	switch {
	case o.lu > 0 && o.loadMS > 0:
		return nil, usagef("-lu and -load-ms both set the load; give one")
	case !slices.Contains(sched.Names, o.sched):
		return nil, usagef("-policy %q is not a policy (known: %s)", o.sched, strings.Join(sched.Names, ", "))
	case o.adaptive && o.sched != "rwq" && o.sched != "r3q":
		return nil, usagef("-adaptive applies to -policy rwq and r3q only, not %s", o.sched)
	case o.copies > 0 && o.sched != "eft":
		return nil, usagef("-copies applies to -policy eft only, not %s", o.sched)
	case o.maxConns > 0 && o.wantWorkers() > o.maxConns:
		return nil, usagef("-max-workers %d is fewer than the %d workers the run waits for (-min-workers, or -local)", o.maxConns, o.wantWorkers())
	case o.metricsLinger > 0 && o.metrics == "":
		return nil, usagef("-metrics-linger needs -metrics")
	case o.set["run-name"] && o.metrics == "":
		return nil, usagef("-run-name needs -metrics")
	case o.set["run-name"] && !metrics.ValidRunName(o.runName):
		return nil, usagef("-run-name %q: give 1 to %d letters, digits or . _ - : characters", o.runName, metrics.MaxRunName)
	case o.key != "" && o.keyFile != "":
		return nil, usagef("-key and -key-file both give the key; give one")
	case o.genkey != "" && len(o.set) > 1:
		return nil, usagef("-genkey FILE writes a key and exits: give it alone")
	case !o.inprocess && o.dim > worker.MaxDim:
		return nil, usagef("-dim %d: a worker evaluates at most %d dimensions (a task's vector must fit in a frame); more runs only -inprocess", o.dim, worker.MaxDim)
	}
	if err := checkStrategyFlags(o); err != nil {
		return nil, err
	}
	if err := o.split.check(); err != nil { // split.go
		return nil, err
	}
	for _, a := range []struct{ name, addr string }{{"listen", o.listen}, {"gossip", o.gossip}, {"metrics", o.metrics}} {
		if a.addr == "" && !o.set[a.name] {
			continue
		}
		if err := flagx.CheckHostPort(a.addr, 0); err != nil {
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
	if err := checkFileSet(o); err != nil { // files.go
		return nil, err
	}
	if o.plan != "" {
		p, err := grid.ReadPlan(o.plan)
		if err != nil {
			return nil, usagef("-plan: %v", err)
		}
		o.planned = p
		if err := o.checkPlanLeavesWorkers(); err != nil { // plan.go
			return nil, err
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

// maxFrame is the frame cap in bytes: -max-frame, or by default 4 MiB or
// room for two tasks of dimension dim, whichever is more (at most
// grid.MaxFrameLimit).
func (o *options) maxFrame(dim int) int {
	if o.maxFrameMiB > 0 {
		return o.maxFrameMiB << 20
	}
	return min(max(grid.DefaultMaxFrame, 2*grid.TaskFrameSize(dim)), grid.MaxFrameLimit)
}

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
	fmt.Fprint(w, usageText)
	flagx.PrintGroups(w, newFlagSet(&options{}), flagGroups, "POLICY")
}

// checkStrategyFlags checks -strategy and the recombination flags, and
// that none is given where it does not apply.
func checkStrategyFlags(o *options) error {
	switch {
	case !slices.Contains(es.Strategies, es.Strategy(o.strategy)):
		return usagef("-strategy %q is not a strategy (known: es, cma)", o.strategy)
	case !slices.Contains(es.Recombinations, es.Recombination(o.recombine)):
		return usagef("-recombine %q is not a recombination (known: none, discrete, intermediate)", o.recombine)
	case o.sigmaRecom != string(es.RecombineNone) && o.sigmaRecom != string(es.RecombineIntermediate):
		return usagef("-sigma-recombine %q is not a recombination of step sizes (known: none, intermediate)", o.sigmaRecom)
	}
	if !slices.Contains(es.Restarts, es.Restart(o.restarts)) {
		return usagef("-restarts %q is not a restart strategy (known: none, ipop, bipop)", o.restarts)
	}
	if o.strategy != string(es.StrategyCMA) && o.set["restarts"] && o.resume == "" {
		return usagef("-restarts applies to -strategy cma only")
	}
	if o.strategy == string(es.StrategyCMA) {
		for _, name := range []string{"comma", "recombine", "sigma-recombine", "rho"} {
			if o.set[name] {
				return usagef("-%s does not apply to -strategy cma", name)
			}
		}
		if !o.set["mu"] {
			o.mu = 0
		}
		if !o.set["lambda"] {
			o.lambda = 0
		}
	}
	return nil
}
