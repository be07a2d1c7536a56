// Command essim simulates esgrid's scheduling policies on a machine set and
// prints where the time goes: the R3Q paper's sweep by default, any single
// setting with a few flags.
//
// By default it runs granularity 100/500/1000 ms × added delay 10/30/50 ms ×
// {wq, rr, rwq, r3q, cyclic, eft} on the paper's LAN set, a (30+70)-ES for
// 100 generations, 10 seeded trials each, and prints the mean total, sync
// wait, comm and compute times, the efficiency against LB, against the
// barrier bound and against the clairvoyant optimum, and the replication,
// cancel and message counts. -csv writes the table, -png draws it as
// stacked bars like the paper's Fig. 5.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
	"github.com/esgrid/esgrid/sweep"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "masters" {
		os.Exit(runMasters(ctx, os.Args[2:], os.Stdout, os.Stderr)) // masters.go
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad flag or flag value: one line on stderr, exit 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }

func badf(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// options are the parsed flags.
type options struct {
	policies   []string
	grains     []time.Duration
	delays     []time.Duration
	machines   string
	set        *sim.Set
	trials     int
	gens       int
	lambda, mu int
	seed       uint64
	workload   string
	tasks      int
	shape      string
	noise      float64
	depth      int
	adaptive   bool
	policyCost time.Duration
	copies     int
	engineCost time.Duration
	// taskTimeout is the master's (esrun -task-timeout; 0: none).
	taskTimeout time.Duration
	slowdowns   []sim.Slowdown
	policyList  policyList // -policy
	lambdaFlag  lambdaFlag // -lambda
	slowFlag    slowFlag   // -slowdown
	parallel    int
	csvPath     string
	pngPath     string
	showSet     bool
	quiet       bool
	deprecated  []string // notices for the deprecated names given
}

const usageHead = `essim simulates esgrid's scheduling policies on a virtual clock.

With no flags it runs the R3Q paper's sweep: granularity 100/500/1000 ms ×
added delay 10/30/50 ms × {wq, rr, rwq, r3q, cyclic, eft} on the paper's
LAN set (M1 master and worker, L1-L6), a (30+70)-ES for 100 generations, 10
seeded trials per setting, and prints the mean times and efficiencies,
against the clairvoyant optimum too.

Usage:
  essim [flags]           the sweep (flags below)
  essim masters [flags]   masters that split when overloaded, one master
                          against the paper's rule and the gain rule
                          (essim masters -h for its flags)

Examples:
  essim -policy r3q -grain 500 -delay 50            one setting
  essim -policy rwq,r3q -grain 100 -adaptive        remote queues sized from measurements
  essim -machines wan -delay 0 -png wan.png         the WAN set, no added delay
  essim -workload bag -tasks 480 -shape mandelbrot  Clop's Mandelbrot strips
  essim -policy eft,r3q -machines hetero9 -copies 3  eft with up to 3 copies of a task
  essim -machines scale4096 -policy eft -gens 10     4,096 workers
  essim -machines my.txt -show-machines             check a machine file

Lists take commas (-grain 100,500); a bare number is milliseconds.
Bounds: at most 1000000 tasks a batch and 10000000 a run, times up to 1h,
slowdown factors up to 1e6, a run that needs at most 1e8 of the master's
250 ms ticks (about 290 days of simulated time), and a sweep whose results
fit in half of this machine's memory (MemTotal, or the cgroup's limit).
Ctrl-C stops a sweep, within a run too.
Exit status: 0 done, 1 failed, 2 a bad command line.

Flags:
`

// newFlagSet declares essim's flags into o; the costs that override the
// machine set's are in c.
func newFlagSet(o *options, c *costFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("essim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.policyList = policyList(sched.Names)
	fs.Var(&o.policyList, "policy", "policies to compare: `list` of "+strings.Join(sched.Names, ", "))
	flagx.DurationListVar(fs, &o.grains, "grain", []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second}, time.Microsecond, sweep.MaxTime, time.Millisecond,
		"task grain(s): time of one task on the reference machine (M1), `list`")
	flagx.DurationListVar(fs, &o.delays, "delay", []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond}, 0, sweep.MaxTime, time.Millisecond,
		"added one-way delay(s) on every link from the master (not to M1), `list`")
	fs.StringVar(&o.machines, "machines", "lan", "machine set: "+strings.Join(sim.BuiltinSets(), ", ")+", or a set `file` (format: -show-machines)")
	flagx.IntVar(fs, &o.trials, "trials", 10, 1, sweep.MaxTrials, "seeded `trials` per setting (averaged)")
	flagx.IntVar(fs, &o.gens, "gens", 100, 1, sweep.MaxRunTasks, "ES `generations` (workload es)")
	o.lambdaFlag.n = 70
	fs.Var(&o.lambdaFlag, "lambda", "offspring per generation: tasks per batch (workload es); `N`, or Fx for F per slot of the set (2x: two per CPU) ("+o.lambdaFlag.Range()+")")
	flagx.IntVar(fs, &o.mu, "mu", 30, 0, sweep.MaxBatchTasks, "parents: size `N` of the initial batch, generation 0 (workload es; 0: none)")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "base `seed` of the trials")
	fs.StringVar(&o.workload, "workload", "es", "the `workload`: es (generations behind a barrier) or bag (one batch)")
	flagx.IntVar(fs, &o.tasks, "tasks", 1000, 1, sweep.MaxBatchTasks, "`tasks` in the bag (workload bag)")
	fs.StringVar(&o.shape, "shape", "uniform", "the `shape` of the bag's task grains: uniform, or mandelbrot (Clop's strips, mean = -grain)")
	flagx.FloatVar(fs, &o.noise, "noise", 0.1, 0, 2, "`sigma` of log-normal noise on each task's time (0: none)")
	flagx.IntVar(fs, &o.depth, "depth", 0, 0, sched.MaxDepth, "instances `N` per slot a worker may hold (0: policy default, 1 for wq/rr, 2 for rwq/r3q, 1 for eft: its least)")
	fs.BoolVar(&o.adaptive, "adaptive", false, "rwq, r3q: size each worker's remote queue from measured round trip and task time (-depth is then the floor)")
	flagx.IntVar(fs, &o.copies, "copies", 0, 0, sched.MaxCopies, "eft: most live instances `N` of a task, original and replicas (0: 2; 1: no replicas)")
	flagx.BareDurationVar(fs, &o.engineCost, "engine-cost", 0, 0, sweep.MaxTime, time.Millisecond, "master's own `time` between generations (selection, mutation)")
	fs.Var(&o.slowFlag, "slowdown", "`M@T*F`: machine M runs F times slower from time T on, or M*F from the start (repeatable, e.g. L1@60s*4; as esworker -slowdown F, for one machine of the set; "+o.slowFlag.Range()+")")
	flagx.BareDurationVar(fs, &c.master, "master-cost", 0, 0, sweep.MaxTime, time.Millisecond, "override the set's master `time` per message")
	flagx.BareDurationVar(fs, &o.policyCost, "policy-cost", 0, 0, sweep.MaxTime, time.Millisecond, "the master's `time` per step of its policy, besides its messages (0: the policy's measured cost at the set's size, when the master has a cost per message)")
	flagx.BareDurationVar(fs, &c.send, "send-cost", 0, 0, sweep.MaxTime, time.Millisecond, "override every machine's `time` to send a message")
	flagx.BareDurationVar(fs, &c.recv, "recv-cost", 0, 0, sweep.MaxTime, time.Millisecond, "override every machine's `time` to receive a message (the paper's SOAP: 20ms)")
	flagx.DurationVar(fs, &o.taskTimeout, "task-timeout", 10*time.Minute, 0, 24*time.Hour,
		"the master's task `timeout`, as esrun's: a task's deadlines double up to half of it, ten times at most, an instance of a task cut short there runs to it, and one that runs past it fails the run (0: none, the deadlines double ten times)")
	flagx.IntVar(fs, &o.parallel, "parallel", 0, 0, sweep.MaxParallel, "`N` simulations run at once (0: GOMAXPROCS)")
	fs.StringVar(&o.csvPath, "csv", "", "write the table as CSV to `file`")
	fs.StringVar(&o.pngPath, "png", "", "draw stacked bars of compute/sync/comm to PNG `file`")
	fs.BoolVar(&o.showSet, "show-machines", false, "print the machine set (built-in text, or a summary of a file) and exit")
	fs.BoolVar(&o.quiet, "quiet", false, "print only the table")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "gran", "grain")
	flagx.Alias(fs, "q", "quiet")
	fs.Usage = func() {} // parse errors are one line; -h prints the help below
	return fs
}

// costFlags are -master-cost, -send-cost and -recv-cost: given, they
// override the machine set's.
type costFlags struct{ master, send, recv time.Duration }

func parseFlags(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	var costs costFlags
	fs := newFlagSet(o, &costs)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprint(stdout, "\nMachine set files:\n"+machineFormat)
			fmt.Fprintf(stdout, "  Built-in sets: %s.\n", strings.Join(sim.BuiltinSets(), ", "))
			return nil, err
		}
		if errors.Is(err, flagx.ErrVersion) {
			return &options{deprecated: flagx.Deprecated(fs)}, err
		}
		return nil, usageError{err}
	}
	o.deprecated = flagx.Deprecated(fs)
	if fs.NArg() > 0 {
		return nil, badf("unexpected argument %q", fs.Arg(0))
	}
	if err := flagx.CheckFiles(
		flagx.File{What: "-csv " + o.csvPath, Path: o.csvPath, Write: true},
		flagx.File{What: "-png " + o.pngPath, Path: o.pngPath, Write: true},
		flagx.File{What: "-machines " + o.machines, Path: machinesFile(o.machines)},
	); err != nil {
		return nil, usageError{err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.policies = o.policyList
	o.lambda = o.lambdaFlag.n
	var err error
	switch {
	case o.workload != "es" && o.workload != "bag":
		return nil, badf("-workload must be es or bag, not %q", o.workload)
	case o.shape != "uniform" && o.shape != "mandelbrot":
		return nil, badf("-shape must be uniform or mandelbrot, not %q", o.shape)
	}
	o.slowdowns = o.slowFlag.list
	if o.set, err = sim.LoadSet(o.machines); err != nil {
		return nil, usageError{fmt.Errorf("-machines: %w", err)}
	}
	for _, s := range o.slowdowns {
		if o.set.Index(s.Machine) < 0 {
			return nil, badf("-slowdown: no machine %q in set %s", s.Machine, o.set.Name)
		}
	}
	if f := o.lambdaFlag.perSlot; f > 0 {
		o.lambda = max(1, int(math.Round(f*float64(o.set.Slots()))))
	}
	if set["master-cost"] {
		o.set.MasterCost = costs.master
	}
	for i := range o.set.Machines {
		if set["send-cost"] {
			o.set.Machines[i].SendCost = costs.send
		}
		if set["recv-cost"] {
			o.set.Machines[i].RecvCost = costs.recv
		}
	}
	if err := checkLimits(o); err != nil {
		return nil, err
	}
	return o, nil
}

const machineFormat = `  # comment
  master cost=10us                   time the master spends per message
  machine NAME [fields]              one line per machine, in worker order
    cpus=N        execution slots (default 1)
    speed=F       speed ratio to the reference machine, or
    tG=D          task time D for tasks of grain G (t100ms=42ms; several allowed)
    delay=D       one-way delay of its own link (to the master, or to its relay)
    via=NAME      reached through relay machine NAME
    local         the master's own host (no delay; -delay does not apply)
    send=D recv=D time to send / receive one message
    relay=D       time to forward one message when acting as a relay
    slow=T*F      from time T on its tasks take F times as long (repeatable)
    leave=T       it leaves the run at time T (what it holds is lost)
    count=N       N machines alike, named NAME-1 ... NAME-N
  Each field once (slow= and tG= of other grains repeat); speed= or tG=, not both.
  Delays and costs up to 1h, slow= and leave= times up to 876000h (a century).
  essim -show-machines -machines lan prints the built-in LAN set.
`

// machinesFile is the file -machines reads, "" for a built-in set.
func machinesFile(nameOrPath string) string {
	if _, err := sim.BuiltinText(nameOrPath); err == nil {
		return ""
	}
	return nameOrPath
}

// policyList is -policy: a list of policies, each once.
type policyList []string

func (p *policyList) String() string { return strings.Join(*p, ",") }

func (p *policyList) Set(v string) error {
	var out []string
	for _, name := range strings.Split(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if !slices.Contains(sched.Names, name) {
			return fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(sched.Names, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	*p = out
	return nil
}

// lambdaFlag is -lambda: n tasks a batch, or perSlot (Fx) tasks per slot
// of the machine set.
type lambdaFlag struct {
	flagx.Memo
	n       int
	perSlot float64
}

func (l *lambdaFlag) String() string {
	if l.perSlot > 0 {
		return strconv.FormatFloat(l.perSlot, 'g', -1, 64) + "x"
	}
	return strconv.Itoa(l.n)
}

func (l *lambdaFlag) Set(v string) error {
	if f, ok := strings.CutSuffix(v, "x"); ok {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !(x > 0 && x <= sweep.MaxPerSlot) {
			return l.Refuse(v, fmt.Errorf("must be %s", l.Range()))
		}
		l.n, l.perSlot = 1, x
		l.Accept()
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > sweep.MaxBatchTasks {
		return l.Refuse(v, fmt.Errorf("must be %s", l.Range()))
	}
	l.n, l.perSlot = n, 0
	l.Accept()
	return nil
}

// Range is what Set takes.
func (l *lambdaFlag) Range() string {
	return fmt.Sprintf("1 to %d, or Fx with F above 0 and up to %.0f", sweep.MaxBatchTasks, float64(sweep.MaxPerSlot))
}

// Outside lists values Set refuses.
func (l *lambdaFlag) Outside() []string {
	return []string{"NaN", "Inf", "NaNx", "Infx", "0x", "-1x", "1e7x", "0", "-1", strconv.Itoa(sweep.MaxBatchTasks + 1), "9223372036854775807", "1e300"}
}

// slowFlag collects -slowdown M@T*F values.
type slowFlag struct {
	flagx.Memo
	list []sim.Slowdown
}

func (s *slowFlag) String() string { return "" }

func (s *slowFlag) Set(v string) error {
	for _, one := range strings.Split(v, ",") {
		name, rest, ok1 := strings.Cut(one, "@")
		if !ok1 {
			// M*F: from the start.
			name, rest, ok1 = strings.Cut(one, "*")
			rest = "0*" + rest
		}
		at, factor, ok2 := strings.Cut(rest, "*")
		if !ok1 || !ok2 || name == "" {
			return s.Refuse(v, fmt.Errorf("want MACHINE@TIME*FACTOR or MACHINE*FACTOR, got %q", one))
		}
		d, err := (&flagx.Duration{Max: sweep.MaxVirtualTime, Bare: time.Millisecond}).Check(at)
		if err != nil {
			return s.Refuse(v, fmt.Errorf("time %q: %w", at, err))
		}
		f, err := strconv.ParseFloat(factor, 64)
		if err != nil || !(f > 0 && f <= sweep.MaxSlowdown) {
			return s.Refuse(v, fmt.Errorf("factor %q must be a number above 0 and up to %.0f", factor, float64(sweep.MaxSlowdown)))
		}
		s.list = append(s.list, sim.Slowdown{Machine: name, At: d, Factor: f})
	}
	s.Accept()
	return nil
}

// Range is what Set takes.
func (s *slowFlag) Range() string {
	return fmt.Sprintf("T up to %s, F above 0 and up to %.0f", flagx.FormatDuration(sweep.MaxVirtualTime), float64(sweep.MaxSlowdown))
}

// Outside lists values Set refuses.
func (s *slowFlag) Outside() []string {
	return []string{"L1@1s*NaN", "L1@1s*Inf", "L1@1s*0", "L1@1s*-1", "L1@1s*1e300", "L1@NaN*2", "L1@-1s*2", "L1@1e300*2", "L1@1000000h*2"}
}

// setting is one point of the sweep: a grain and an added delay.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return flagx.ExitOK
	}
	if o != nil {
		for _, n := range o.deprecated {
			fmt.Fprintf(stderr, "essim: %s\n", n)
		}
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("essim"))
		return flagx.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "essim: %v (essim -h for help)\n", err)
		return flagx.ExitUsage
	}
	if o.showSet {
		sweep.ShowSet(stdout, o.machines, o.sweep())
		return 0
	}
	if err := runSweep(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "essim: %v\n", err)
		return flagx.ExitFailure
	}
	return flagx.ExitOK
}

// sweep is the sweep's configuration of the flags.
func (o *options) sweep() *sweep.Config {
	return &sweep.Config{Set: o.set, Policies: o.policies, Grains: o.grains, Delays: o.delays, Workload: o.workload,
		Shape: o.shape, Tasks: o.tasks, Mu: o.mu, Lambda: o.lambda, Gens: o.gens, EngineCost: o.engineCost,
		Depth: o.depth, Adaptive: o.adaptive, Copies: o.copies, PolicyCost: o.policyCost, Noise: o.noise, Slowdowns: o.slowdowns, Seed: o.seed,
		Trials: o.trials, Parallel: o.parallel, TaskTimeout: o.timeout()}
}

// timeout is -task-timeout as sweep.Config.TaskTimeout has it.
func (o *options) timeout() time.Duration {
	if o.taskTimeout == 0 {
		return -1 // none
	}
	return o.taskTimeout
}

// runSweep runs the sweep and prints it: the setting (unless -quiet), the
// table, the paper's shape (unless -quiet), the CSV and chart files, and
// the simulator's own speed.
func runSweep(ctx context.Context, o *options, stdout io.Writer) error {
	c := o.sweep()
	if !o.quiet {
		sweep.Describe(stdout, c)
	}
	start := time.Now()
	res, err := sweep.Run(ctx, c)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	res.PrintTable(stdout)
	if !o.quiet {
		res.PrintShape(stdout)
	}
	if o.csvPath != "" {
		if err := res.WriteCSV(o.csvPath); err != nil {
			return err
		}
	}
	if o.pngPath != "" {
		if err := res.DrawChart(o.pngPath); err != nil {
			return err
		}
	}
	res.PrintSpeed(stdout, elapsed)
	return nil
}
