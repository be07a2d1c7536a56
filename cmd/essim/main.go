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
	"encoding/csv"
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
	copies     int
	engineCost time.Duration
	slowdowns  []sim.Slowdown
	policyList policyList // -policy
	lambdaFlag lambdaFlag // -lambda
	slowFlag   slowFlag   // -slowdown
	parallel   int
	csvPath    string
	pngPath    string
	showSet    bool
	quiet      bool
	deprecated []string // notices for the deprecated names given
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
slowdown factors up to 1e6, and a sweep whose results fit in half of this
machine's memory (MemTotal, or the cgroup's limit).
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
	flagx.DurationListVar(fs, &o.grains, "grain", []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second}, time.Microsecond, maxFlagTime, time.Millisecond,
		"task grain(s): time of one task on the reference machine (M1), `list`")
	flagx.DurationListVar(fs, &o.delays, "delay", []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 50 * time.Millisecond}, 0, maxFlagTime, time.Millisecond,
		"added one-way delay(s) on every link from the master (not to M1), `list`")
	fs.StringVar(&o.machines, "machines", "lan", "machine set: "+strings.Join(sim.BuiltinSets(), ", ")+", or a set `file` (format: -show-machines)")
	flagx.IntVar(fs, &o.trials, "trials", 10, 1, maxTrials, "seeded `trials` per setting (averaged)")
	flagx.IntVar(fs, &o.gens, "gens", 100, 1, maxRunTasks, "ES `generations` (workload es)")
	o.lambdaFlag.n = 70
	fs.Var(&o.lambdaFlag, "lambda", "offspring per generation: tasks per batch (workload es); `N`, or Fx for F per slot of the set (2x: two per CPU) ("+o.lambdaFlag.Range()+")")
	flagx.IntVar(fs, &o.mu, "mu", 30, 0, maxBatchTasks, "parents: size `N` of the initial batch, generation 0 (workload es; 0: none)")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "base `seed` of the trials")
	fs.StringVar(&o.workload, "workload", "es", "the `workload`: es (generations behind a barrier) or bag (one batch)")
	flagx.IntVar(fs, &o.tasks, "tasks", 1000, 1, maxBatchTasks, "`tasks` in the bag (workload bag)")
	fs.StringVar(&o.shape, "shape", "uniform", "the `shape` of the bag's task grains: uniform, or mandelbrot (Clop's strips, mean = -grain)")
	flagx.FloatVar(fs, &o.noise, "noise", 0.1, 0, 2, "`sigma` of log-normal noise on each task's time (0: none)")
	flagx.IntVar(fs, &o.depth, "depth", 0, 0, sched.MaxDepth, "instances `N` per slot a worker may hold (0: policy default, 1 for wq/rr, 2 for rwq/r3q, 1 for eft: its least)")
	fs.BoolVar(&o.adaptive, "adaptive", false, "rwq, r3q: size each worker's remote queue from measured round trip and task time (-depth is then the floor)")
	flagx.IntVar(fs, &o.copies, "copies", 0, 0, sched.MaxCopies, "eft: most live instances `N` of a task, original and replicas (0: 2; 1: no replicas)")
	flagx.BareDurationVar(fs, &o.engineCost, "engine-cost", 0, 0, maxFlagTime, time.Millisecond, "master's own `time` between generations (selection, mutation)")
	fs.Var(&o.slowFlag, "slowdown", "`M@T*F`: machine M runs F times slower from time T on, or M*F from the start (repeatable, e.g. L1@60s*4; as esworker -slowdown F, for one machine of the set; "+o.slowFlag.Range()+")")
	flagx.BareDurationVar(fs, &c.master, "master-cost", 0, 0, maxFlagTime, time.Millisecond, "override the set's master `time` per message")
	flagx.BareDurationVar(fs, &c.send, "send-cost", 0, 0, maxFlagTime, time.Millisecond, "override every machine's `time` to send a message")
	flagx.BareDurationVar(fs, &c.recv, "recv-cost", 0, 0, maxFlagTime, time.Millisecond, "override every machine's `time` to receive a message (the paper's SOAP: 20ms)")
	flagx.IntVar(fs, &o.parallel, "parallel", 0, 0, maxParallel, "`N` simulations run at once (0: GOMAXPROCS)")
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
	if o.set, err = loadSet(o.machines); err != nil {
		return nil, usageError{fmt.Errorf("-machines: %w", err)}
	}
	for _, s := range o.slowdowns {
		if o.set.Index(s.Machine) < 0 {
			return nil, badf("-slowdown: no machine %q in set %s", s.Machine, o.set.Name)
		}
	}
	if f := o.lambdaFlag.perSlot; f > 0 {
		o.lambda = max(1, int(math.Round(f*float64(slots(o.set)))))
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
		if err != nil || !(x > 0 && x <= maxPerSlot) {
			return l.Refuse(v, fmt.Errorf("must be %s", l.Range()))
		}
		l.n, l.perSlot = 1, x
		l.Accept()
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxBatchTasks {
		return l.Refuse(v, fmt.Errorf("must be %s", l.Range()))
	}
	l.n, l.perSlot = n, 0
	l.Accept()
	return nil
}

// Range is what Set takes.
func (l *lambdaFlag) Range() string {
	return fmt.Sprintf("1 to %d, or Fx with F above 0 and up to %.0f", maxBatchTasks, float64(maxPerSlot))
}

// Outside lists values Set refuses.
func (l *lambdaFlag) Outside() []string {
	return []string{"NaN", "Inf", "NaNx", "Infx", "0x", "-1x", "1e7x", "0", "-1", strconv.Itoa(maxBatchTasks + 1), "9223372036854775807", "1e300"}
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
		d, err := (&flagx.Duration{Max: maxVirtualTime, Bare: time.Millisecond}).Check(at)
		if err != nil {
			return s.Refuse(v, fmt.Errorf("time %q: %w", at, err))
		}
		f, err := strconv.ParseFloat(factor, 64)
		if err != nil || !(f > 0 && f <= maxSlowdown) {
			return s.Refuse(v, fmt.Errorf("factor %q must be a number above 0 and up to %.0f", factor, float64(maxSlowdown)))
		}
		s.list = append(s.list, sim.Slowdown{Machine: name, At: d, Factor: f})
	}
	s.Accept()
	return nil
}

// Range is what Set takes.
func (s *slowFlag) Range() string {
	return fmt.Sprintf("T up to %s, F above 0 and up to %.0f", flagx.FormatDuration(maxVirtualTime), float64(maxSlowdown))
}

// Outside lists values Set refuses.
func (s *slowFlag) Outside() []string {
	return []string{"L1@1s*NaN", "L1@1s*Inf", "L1@1s*0", "L1@1s*-1", "L1@1s*1e300", "L1@NaN*2", "L1@-1s*2", "L1@1e300*2", "L1@1000000h*2"}
}

// setting is one point of the sweep: a grain and an added delay.
type setting struct {
	grain, delay time.Duration
}

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
		showSet(stdout, o)
		return 0
	}
	if err := sweep(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "essim: %v\n", err)
		return flagx.ExitFailure
	}
	return flagx.ExitOK
}

// workloadFor builds the workload of one grain.
func workloadFor(o *options, grain time.Duration) sim.Workload {
	var w sim.Workload
	switch {
	case o.workload == "bag" && o.shape == "mandelbrot":
		w = sim.Bag(sim.MandelbrotGrains(o.tasks, grain))
		w.Name = fmt.Sprintf("bag of %d Mandelbrot strips, mean %v", o.tasks, grain)
	case o.workload == "bag":
		w = sim.BagUniform(o.tasks, grain)
	default:
		w = sim.ES(o.mu, o.lambda, o.gens, grain)
	}
	w.EngineCost = o.engineCost
	return w
}

func sweep(ctx context.Context, o *options, stdout io.Writer) error {
	var settings []setting
	var cfgs []sim.Config
	for _, g := range o.grains {
		wl := workloadFor(o, g)
		for _, d := range o.delays {
			settings = append(settings, setting{g, d})
			for _, p := range o.policies {
				cfgs = append(cfgs, sim.Config{
					Set:          o.set,
					Policy:       p,
					PolicyConfig: sched.Config{Depth: o.depth, Adaptive: o.adaptive, Copies: o.copies},
					Workload:     wl,
					AddedDelay:   d,
					Noise:        o.noise,
					Slowdowns:    o.slowdowns,
					Seed:         o.seed,
				})
			}
		}
	}
	if !o.quiet {
		describe(stdout, o)
	}
	start := time.Now()
	sums, err := sim.RunTrials(ctx, cfgs, o.trials, o.parallel)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	printTable(stdout, o, settings, sums)
	if !o.quiet {
		printShape(stdout, o, settings, sums)
	}
	if o.csvPath != "" {
		if err := writeCSV(o.csvPath, o, settings, sums); err != nil {
			return err
		}
	}
	if o.pngPath != "" {
		if err := drawChart(o.pngPath, o, settings, sums); err != nil {
			return err
		}
	}
	var tasks, inst, events int
	for _, s := range sums {
		tasks += s.Tasks
		inst += s.Instances
		events += s.Events
	}
	sec := elapsed.Seconds()
	fmt.Fprintf(stdout, "\nsimulated %d runs, %d tasks (%d instances, %d events) in %.2f s real: %.0f tasks/s, %.0f events/s\n",
		len(cfgs)*o.trials, tasks, inst, events, sec, float64(tasks)/sec, float64(events)/sec)
	return nil
}

func describe(w io.Writer, o *options) {
	s := o.set
	fmt.Fprintf(w, "machines %s: %d machines, %d slots, master cost %v/msg; speed sum",
		s.Name, len(s.Machines), slots(s), s.MasterCost)
	for _, g := range o.grains {
		fmt.Fprintf(w, " %.2f@%v", s.SpeedSum(g), g)
	}
	fmt.Fprintln(w)
	wl := workloadFor(o, o.grains[0])
	name := wl.Name
	if len(o.grains) > 1 {
		name = strings.Replace(name, o.grains[0].String(), "{grain}", 1)
	}
	fmt.Fprintf(w, "workload %s, %d tasks; %d trials, noise sigma %.2f, seed %d", name, wl.Tasks(), o.trials, o.noise, o.seed)
	if o.depth > 0 {
		fmt.Fprintf(w, ", depth %d", o.depth)
	}
	if o.adaptive {
		fmt.Fprintf(w, ", adaptive depth (rwq, r3q; cap %d)", sched.DefaultAdaptiveMax)
	}
	if o.copies > 0 {
		fmt.Fprintf(w, ", eft copies %d", o.copies)
	}
	for _, sd := range o.slowdowns {
		fmt.Fprintf(w, ", %s x%g from %v", sd.Machine, sd.Factor, sd.At)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "times are means over trials; comm counts only time outside the sync wait, so compute = total - sync - comm;")
	fmt.Fprintln(w, "effLB = LB/total, effBar = barrier-bound/total; opt = the clairvoyant optimum of each trial's actual task times")
	fmt.Fprintln(w, "(noise included) on these slots, delays and costs (a proven floor, see below), effOpt = opt/total, effNom =")
	fmt.Fprintln(w, "the exact optimum of the same tasks at their mean time / total; counts are per run, msg/t and rep/t per task")
	fmt.Fprintln(w)
}

func slots(s *sim.Set) int {
	n := 0
	for _, m := range s.Machines {
		n += m.CPUs
	}
	return n
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

func printTable(w io.Writer, o *options, settings []setting, sums []sim.Summary) {
	fmt.Fprintf(w, "%6s %6s %-6s %9s %8s %8s %9s %9s %6s %6s %6s %6s %7s %6s %6s %6s %5s %5s\n",
		"grain", "delay", "policy", "total s", "sync s", "comm s", "compute s", "opt s", "effLB", "effBar", "effOpt", "effNom",
		"replica", "c.held", "c.run", "stop", "msg/t", "rep/t")
	i := 0
	exact, gap := true, 0.0
	for si, st := range settings {
		if si > 0 {
			fmt.Fprintln(w)
		}
		for range o.policies {
			s := sums[i]
			i++
			exact = exact && s.OptExact
			if s.Opt > 0 {
				gap = max(gap, float64(s.OptUB-s.Opt)/float64(s.Opt))
			}
			fmt.Fprintf(w, "%6s %6s %-6s %9s %8s %8s %9s %9s %5.1f%% %5.1f%% %5.1f%% %5.1f%% %7.0f %6.0f %6.0f %6.0f %5.2f %5.2f\n",
				ms(st.grain), ms(st.delay), s.Config.Policy, secs(s.Total), secs(s.SyncWait), secs(s.Comm), secs(s.Compute), secs(s.Opt),
				100*s.EfficiencyLB, 100*s.EfficiencyBarrier, 100*s.EfficiencyOpt, 100*s.EfficiencyNominal,
				s.Replicas, s.CancelsHeld, s.CancelsRunning, s.Aborted, s.MessagesPerTask, s.ReplicasPerTask)
		}
	}
	fmt.Fprintln(w, "\nreplica: replicas sent; c.held/c.run: cancels of instances the master believed held/running; stop: instances actually stopped while running")
	if exact {
		fmt.Fprintln(w, "opt: exact (the clairvoyant schedule meets the floor in every batch of every trial)")
	} else {
		fmt.Fprintf(w, "opt: a proven lower bound; a clairvoyant schedule found is at most %.2f%% above it (so the true optimum is too)\n", 100*gap)
	}
}

// printShape checks the paper's qualitative results setting by setting.
func printShape(w io.Writer, o *options, settings []setting, sums []sim.Summary) {
	idx := func(p string) int { return slices.Index(o.policies, p) }
	if idx("wq") < 0 || idx("rr") < 0 || idx("rwq") < 0 || idx("r3q") < 0 {
		return
	}
	n := len(o.policies)
	var r3qBest, rwqComm, queueComm, rrSync int
	for si := range settings {
		row := sums[si*n : (si+1)*n]
		best, comm := idx("wq"), idx("wq")
		for j, s := range row {
			if p := s.Config.Policy; p != "wq" && p != "rr" && p != "rwq" && p != "r3q" {
				continue // the paper's shape is about its four policies
			}
			if s.Total < row[best].Total {
				best = j
			}
			if s.Comm < row[comm].Comm {
				comm = j
			}
		}
		if row[best].Config.Policy == "r3q" {
			r3qBest++
		}
		if row[comm].Config.Policy == "rwq" {
			rwqComm++
		}
		if row[idx("rr")].SyncWait < row[idx("wq")].SyncWait {
			rrSync++
		}
		if max(row[idx("rwq")].Comm, row[idx("r3q")].Comm) < min(row[idx("wq")].Comm, row[idx("rr")].Comm) {
			queueComm++
		}
	}
	fmt.Fprintf(w, "\npaper's shape (among wq, rr, rwq, r3q), settings where it holds out of %d:\n", len(settings))
	fmt.Fprintf(w, "  r3q lowest total %d, rwq lowest comm %d, rwq and r3q comm below wq's and rr's %d, rr less sync wait than wq %d\n",
		r3qBest, rwqComm, queueComm, rrSync)
	for _, g := range o.grains {
		fmt.Fprintf(w, "  total vs delay at %v:", g)
		for _, p := range []string{"wq", "rr", "rwq", "r3q"} {
			fmt.Fprintf(w, "  %s", p)
			for si, st := range settings {
				if st.grain == g {
					fmt.Fprintf(w, " %s", secs(sums[si*n+idx(p)].Total))
				}
			}
		}
		fmt.Fprintln(w)
	}
}

func writeCSV(path string, o *options, settings []setting, sums []sim.Summary) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("csv: %w", cerr)
		}
	}()
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"machines", "workload", "grain_ms", "delay_ms", "policy", "trials",
		"total_s", "sync_s", "comm_s", "compute_s", "busy_s", "lb_s", "barrier_s", "eff_lb", "eff_barrier",
		"opt_s", "opt_ub_s", "opt_exact", "eff_opt", "eff_opt_min", "nominal_s", "eff_nominal",
		"originals", "replicas", "cancels_held", "cancels_running", "stopped_running", "wasted_s",
		"duplicates", "held_dropped", "late_cancels", "messages_per_task", "replicas_per_task", "copies", "noise", "seed"})
	n := len(o.policies)
	f64 := func(x float64, p int) string { return strconv.FormatFloat(x, 'f', p, 64) }
	sec := func(d time.Duration) string { return f64(d.Seconds(), 4) }
	for i, s := range sums {
		st := settings[i/n]
		_ = cw.Write([]string{o.set.Name, o.workload, ms(st.grain), ms(st.delay), s.Config.Policy, strconv.Itoa(s.Trials),
			sec(s.Total), sec(s.SyncWait), sec(s.Comm), sec(s.Compute), sec(s.Busy), sec(s.LB), sec(s.BarrierBound),
			f64(s.EfficiencyLB, 4), f64(s.EfficiencyBarrier, 4),
			sec(s.Opt), sec(s.OptUB), strconv.FormatBool(s.OptExact), f64(s.EfficiencyOpt, 4), f64(s.MinEfficiencyOpt, 4),
			sec(s.Nominal), f64(s.EfficiencyNominal, 4),
			f64(s.Originals, 1), f64(s.Replicas, 1), f64(s.CancelsHeld, 1), f64(s.CancelsRunning, 1), f64(s.Aborted, 1),
			sec(s.Wasted), f64(s.Duplicates, 1), f64(s.HeldDropped, 1), f64(s.LateCancels, 1),
			f64(s.MessagesPerTask, 3), f64(s.ReplicasPerTask, 3), strconv.Itoa(o.copies),
			f64(o.noise, 3), strconv.FormatUint(o.seed, 10)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

func showSet(w io.Writer, o *options) {
	if b, err := sim.BuiltinText(o.machines); err == nil {
		w.Write(b)
		return
	}
	s := o.set
	fmt.Fprintf(w, "# %s: %d machines, master cost %v per message\n", s.Name, len(s.Machines), s.MasterCost)
	for k, m := range s.Machines {
		fmt.Fprintf(w, "%-8s cpus=%d path=%v roundtrip=%v", m.Name, m.CPUs, s.PathDelay(k, 0), s.RoundTrip(k, 0))
		for _, g := range o.grains {
			fmt.Fprintf(w, " t%v=%v", g, s.TaskTime(k, g))
		}
		fmt.Fprintln(w)
	}
}
