// Command esbag runs a bag of independent tasks over the grid as one batch,
// not an ES generation: the Mandelbrot strips of the Clop paper (docs/papers.md
// §5), under any scheduling policy, and prints each worker's
// compute total beside the simulator's prediction for the speeds it
// measured.
//
// One invocation is one bag on one master. Each worker's speed is measured
// on the strips it returned: the reference's cost of those strips over the
// time they took there. Workers are esworker processes that offer the
// strips as a plugin: esbag itself, run by esworker with the problem name
// mandel-STRIPS-MAXITER-SIZE (see -h).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
)

func main() {
	// Run by esworker as a plugin: serve the strips the name describes.
	if name := os.Getenv("ESGRID_PLUGIN_NAME"); name != "" {
		m, err := parseName(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "esbag plugin: %v\n", err)
			os.Exit(1)
		}
		p, err := m.Problem()
		if err != nil {
			fmt.Fprintf(os.Stderr, "esbag plugin: %v\n", err)
			os.Exit(1)
		}
		plugin.Main(named{p, name}, plugin.Dims(1, 1))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// named renames a problem to the plugin name a master asks for.
type named struct {
	problems.Problem
	name string
}

func (n named) Name() string { return n.name }

// The bag's image: the paper's region and size, with a cap on iterations
// that fits a shared machine (the paper's 300,000 makes one image hours of
// CPU; 10,000 makes it seconds, with strips through the set still costing
// hundreds of times the others).
func bagOf(strips, maxIter, size int) problems.Mandelbrot {
	m := problems.PaperMandelbrot(strips)
	m.MaxIter, m.Width, m.Height = maxIter, size, size
	return m
}

// nameOf is the plugin name of a bag: mandel-STRIPS-MAXITER-SIZE.
func nameOf(strips, maxIter, size int) string {
	return fmt.Sprintf("mandel-%d-%d-%d", strips, maxIter, size)
}

func parseName(name string) (problems.Mandelbrot, error) {
	f := strings.Split(name, "-")
	if len(f) != 4 || f[0] != "mandel" {
		return problems.Mandelbrot{}, fmt.Errorf("plugin name %q: want mandel-STRIPS-MAXITER-SIZE", name)
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil || v < 1 || v > 1_000_000 {
			return problems.Mandelbrot{}, fmt.Errorf("plugin name %q: %q is not a count in [1, 1000000]", name, f[i+1])
		}
		n[i] = v
	}
	m := bagOf(n[0], n[1], n[2])
	return m, m.Validate()
}

type options struct {
	stripList             []int // -strips
	strips, maxIter, size int
	policy                string
	copies                int
	minWorkers            int
	listen, gossip        string
	key, keyFile          string
	keyAny                bool // -key-file-insecure
	reference             string
	report                string
	noise                 float64
	inprocess             bool
	plugins               bool
	deprecated            []string // notices for the deprecated names given
}

const usage = `esbag runs the Mandelbrot strips of the Clop paper (docs/papers.md §5) as one
bag of independent tasks over the grid, under any policy.

Usage:
  esbag -inprocess -strips 40 -reference ref40.json   each strip's value and time here (the reference)
  esbag -strips 40 -policy eft -min-workers 4 -key-file K -gossip 127.0.0.1:7946 -reference ref40.json
  esbag -plugins -strips 40,120                        the -plugin flags an esworker needs

Workers offer the strips as a plugin, esbag itself:
  esworker -join HOST:PORT -key-file K -plugin mandel-40-10000-480=/path/to/esbag ...

A grid run prints the bag's total, each worker's compute total, whether
every strip's value equals the reference's (exact integers), and the
simulator's prediction for the speeds and round trips it measured
(sched/sim, as essim: the bag's grains are the reference's strip costs,
each worker a machine with the speed it showed on the strips it returned:
their reference cost over the time they took there).

Exit status: 0 done, 1 the run failed, 2 a bad command line (or key).

Flags:
`

// Bounds of esbag's numeric flags. The paper's image is 480×480 pixels
// of at most 300,000 iterations, hours of CPU; a larger image is refused
// rather than left to run for days.
const (
	maxMaxIter = 300_000             // -maxiter: the paper's
	maxSize    = 4800                // -size: ten times the paper's
	maxWork    = 480 * 480 * 300_000 // -size² × -maxiter: the paper's image
	maxStrips  = 1_000_000           // -strips: at most -size anyway
)

// newFlagSet declares esbag's flags into o.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esbag", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagx.IntListVar(fs, &o.stripList, "strips", []int{40}, 1, maxStrips, "strips (tasks) of the image, at most -size; with -plugins a `list`")
	flagx.IntVar(fs, &o.maxIter, "maxiter", 10000, 1, maxMaxIter, "iterations `N` per pixel at most (the paper: 300000)")
	flagx.IntVar(fs, &o.size, "size", 480, 1, maxSize, "image size `N`×N pixels (the paper: 480); -size² × -maxiter at most the paper's 480² × 300000")
	fs.StringVar(&o.policy, "policy", "eft", "scheduling `POLICY`: "+strings.Join(sched.Names, ", "))
	flagx.IntVar(fs, &o.copies, "copies", 0, 0, sched.MaxCopies, "eft: most live instances `N` of a task (0: the default)")
	flagx.IntVar(fs, &o.minWorkers, "min-workers", 1, 1, 1024, "wait for `N` workers before the bag starts")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "the master's data `HOST:PORT` (loopback: workers on this machine; 0.0.0.0:PORT for others)")
	fs.StringVar(&o.gossip, "gossip", "127.0.0.1:7946", "the master's gossip `HOST:PORT`, which workers -join (loopback: workers on this machine; 0.0.0.0:PORT for others)")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY` (visible in ps: prefer -key-file or "+grid.KeyEnv+")")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.BoolVar(&o.keyAny, grid.InsecureKeyFileFlag, false, "accept a -key-file that group or others may read or write (refused by default, as ssh refuses such a key)")
	fs.StringVar(&o.reference, "reference", "", "the reference `FILE`: -inprocess writes it, a grid run checks against it and takes the strips' costs from it")
	fs.StringVar(&o.report, "report", "", "write the run's figures as JSON to `FILE`")
	flagx.FloatVar(fs, &o.noise, "noise", 0.05, 0, 1, "the prediction's noise `sigma` on task times")
	fs.BoolVar(&o.inprocess, "inprocess", false, "compute every strip here, one at a time, and write -reference")
	fs.BoolVar(&o.plugins, "plugins", false, "print the -plugin flags that offer these strips and exit")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "sched", "policy")
	return fs
}

func parseFlags(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		if errors.Is(err, flagx.ErrVersion) {
			return &options{deprecated: flagx.Deprecated(fs)}, err
		}
		return nil, err
	}
	o.deprecated = flagx.Deprecated(fs)
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	list := o.stripList
	for _, n := range list {
		if n > o.size {
			return nil, fmt.Errorf("-strips: %d is not in [1, -size %d]", n, o.size)
		}
	}
	if float64(o.size)*float64(o.size)*float64(o.maxIter) > maxWork {
		return nil, fmt.Errorf("-size %d and -maxiter %d: an image of %d² pixels of up to %d iterations is more work than the paper's 480² × 300000; lower one", o.size, o.maxIter, o.size, o.maxIter)
	}
	if err := flagx.CheckFiles(
		flagx.File{What: "-reference " + o.reference, Path: o.reference, Write: o.inprocess},
		flagx.File{What: "-report " + o.report, Path: o.report, Write: true},
		flagx.File{What: "-key-file " + o.keyFile, Path: o.keyFile},
	); err != nil {
		return nil, err
	}
	if o.plugins {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		for _, n := range list {
			fmt.Fprintf(stdout, "-plugin %s=%s ", nameOf(n, o.maxIter, o.size), self)
		}
		fmt.Fprintln(stdout)
		return nil, flag.ErrHelp
	}
	if len(list) != 1 {
		return nil, errors.New("-strips: one count per run (a list only with -plugins)")
	}
	o.strips = list[0]
	if err := bagOf(o.strips, o.maxIter, o.size).Validate(); err != nil {
		return nil, err
	}
	switch {
	case !slices.Contains(sched.Names, o.policy):
		return nil, fmt.Errorf("-policy %q is not a policy (known: %s)", o.policy, strings.Join(sched.Names, ", "))
	case o.reference == "":
		return nil, errors.New("-reference FILE is required")
	case o.key != "" && o.keyFile != "":
		return nil, errors.New("-key and -key-file both give the key; give one")
	}
	return o, nil
}

// usageError is a bad setting found once the flags are parsed (a key, an
// address): exit status 2, as a bad flag.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return flagx.ExitOK
	}
	if o != nil {
		for _, n := range o.deprecated {
			fmt.Fprintf(stderr, "esbag: %s\n", n)
		}
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("esbag"))
		return flagx.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "esbag: %v (esbag -h for help)\n", err)
		return flagx.ExitUsage
	}
	if o.inprocess {
		err = runInProcess(ctx, o, stdout)
	} else {
		err = runGrid(ctx, o, stdout, stderr)
	}
	var ue usageError
	switch {
	case err == nil:
		return flagx.ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "esbag: %v (esbag -h for help)\n", err)
		return flagx.ExitUsage
	default:
		fmt.Fprintf(stderr, "esbag: %v\n", err)
		return flagx.ExitFailure
	}
}

// Reference is each strip's exact value and cost, computed here one at a
// time: the value a grid run must reproduce, and the grains of the
// simulator's bag.
type Reference struct {
	Name    string  `json:"name"`
	Strips  int     `json:"strips"`
	Values  []int64 `json:"values"`  // iteration counts, exact
	Seconds float64 `json:"seconds"` // the whole image, here
	// NsPerIter is Seconds over Σ Values: each strip's cost is its value
	// times this, a deterministic measure of its work.
	NsPerIter float64 `json:"ns_per_iter"`
}

// grain is strip i's cost on the machine that computed the reference.
func (r *Reference) grain(i int) time.Duration {
	return max(time.Duration(float64(r.Values[i])*r.NsPerIter), time.Microsecond)
}

func runInProcess(ctx context.Context, o *options, stdout io.Writer) error {
	m := bagOf(o.strips, o.maxIter, o.size)
	ref := Reference{Name: nameOf(o.strips, o.maxIter, o.size), Strips: o.strips, Values: make([]int64, o.strips)}
	start := time.Now()
	var sum int64
	for i := range o.strips {
		v, err := m.Strip(ctx, i)
		if err != nil {
			return err
		}
		ref.Values[i] = v
		sum += v
	}
	ref.Seconds = time.Since(start).Seconds()
	ref.NsPerIter = ref.Seconds * 1e9 / float64(max(sum, 1))
	b, err := json.MarshalIndent(ref, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.reference, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d strips, %d iterations, %.2f s here (%.2f ns an iteration); wrote %s\n",
		ref.Name, o.strips, sum, ref.Seconds, ref.NsPerIter, o.reference)
	return nil
}

// WorkerFigures is one worker's part of a run.
type WorkerFigures struct {
	Name      string  `json:"name"`
	Slots     int     `json:"slots"`
	Compute   float64 `json:"compute_s"`  // Σ execution time of its slots in the bag, replicas that lost included
	Strips    int     `json:"strips"`     // results of the bag accepted from it
	RoundTrip float64 `json:"round_trip"` // smallest round trip measured
	Speed     float64 `json:"speed"`      // reference cost of its accepted strips / their time there
}

// Figures are a run's results.
type Figures struct {
	Name      string          `json:"name"`
	Policy    string          `json:"policy"`
	Strips    int             `json:"strips"`
	Total     float64         `json:"total_s"` // the bag, from its start to its last result
	Predicted float64         `json:"predicted_s"`
	Optimum   float64         `json:"optimum_s"` // the clairvoyant floor for the measured speeds
	Replicas  int             `json:"replicas"`
	Identical bool            `json:"identical"` // every value equals the reference's
	Workers   []WorkerFigures `json:"workers"`
	Imbalance float64         `json:"imbalance"` // max / mean of the workers' compute per slot
}

func runGrid(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	b, err := os.ReadFile(o.reference)
	if err != nil {
		return fmt.Errorf("reference: %w (make it with -inprocess)", err)
	}
	var ref Reference
	if err := json.Unmarshal(b, &ref); err != nil {
		return fmt.Errorf("reference %s: %w", o.reference, err)
	}
	name := nameOf(o.strips, o.maxIter, o.size)
	if ref.Name != name || len(ref.Values) != o.strips {
		return fmt.Errorf("reference %s is of %s, not %s", o.reference, ref.Name, name)
	}
	key, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	if err != nil {
		return usageError{err}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Who returned each strip, and how long it took there.
	type accepted struct {
		worker string
		exec   time.Duration
	}
	var mu sync.Mutex
	got := make([]accepted, o.strips)
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: o.listen, Key: key, Policy: o.policy, Logger: log,
		Problem: grid.ProblemSpec{Name: name, Dim: 1},
		Sched:   sched.Config{Copies: o.copies},
		OnAccept: func(gen, task int, worker string, exec time.Duration) {
			if gen == 0 && task >= 0 && task < len(got) {
				mu.Lock()
				got[task] = accepted{worker, exec}
				mu.Unlock()
			}
		},
	})
	if err != nil {
		return err
	}
	defer m.Close()
	host, portText, err := net.SplitHostPort(o.gossip)
	if err != nil {
		return usageError{fmt.Errorf("-gossip: %w", err)}
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return usageError{fmt.Errorf("-gossip: %w", err)}
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		BindAddr: host, BindPort: port, SecretKey: key.GossipKey(),
		Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()},
		OnEvent: m.HandleMemberEvent, Logger: log, LeaveTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer ms.Close()
	if err := m.WaitWorkers(ctx, o.minWorkers); err != nil {
		return err
	}

	// The bag.
	xs := make([][]float64, o.strips)
	for i := range xs {
		xs[i] = []float64{float64(i)}
	}
	vals, err := m.Evaluate(ctx, 0, xs)
	if err != nil {
		return fmt.Errorf("bag: %w", err)
	}
	rep := m.Report()
	fig := Figures{Name: name, Policy: o.policy, Strips: o.strips, Identical: true}
	for i, v := range vals {
		if v != float64(ref.Values[i]) {
			fig.Identical = false
			fmt.Fprintf(stderr, "esbag: strip %d: %v on the grid, %d in the reference\n", i, v, ref.Values[i])
		}
	}
	bag := rep.Generations[len(rep.Generations)-1]
	fig.Total = bag.Total.Seconds()
	fig.Replicas = bag.Replicas
	mu.Lock()
	work, took := map[string]time.Duration{}, map[string]time.Duration{}
	for i, a := range got {
		work[a.worker] += ref.grain(i)
		took[a.worker] += a.exec
	}
	mu.Unlock()
	for _, w := range rep.Workers {
		info, _ := m.WorkerInfo(w.Worker)
		wf := WorkerFigures{Name: info.Name, Slots: w.Slots, Compute: w.Busy.Seconds(), Strips: w.Accepted, RoundTrip: w.RoundTrip.Seconds()}
		if took[info.Name] > 0 {
			wf.Speed = work[info.Name].Seconds() / took[info.Name].Seconds()
		}
		fig.Workers = append(fig.Workers, wf)
	}
	slices.SortFunc(fig.Workers, func(a, b WorkerFigures) int { return strings.Compare(a.Name, b.Name) })
	fig.Imbalance = imbalance(fig.Workers)
	fig.Predicted, fig.Optimum, err = predict(o, &ref, fig.Workers)
	if err != nil {
		return fmt.Errorf("prediction: %w", err)
	}
	printFigures(stdout, &fig)
	if o.report != "" {
		b, err := json.MarshalIndent(fig, "", " ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.report, b, 0o644)
	}
	return nil
}

// imbalance is the largest worker's compute time per slot over the mean
// (1: every slot worked as long).
func imbalance(ws []WorkerFigures) float64 {
	var sum, hi float64
	n := 0
	for _, w := range ws {
		if w.Slots == 0 {
			continue
		}
		per := w.Compute / float64(w.Slots)
		sum += per * float64(w.Slots)
		n += w.Slots
		hi = max(hi, per)
	}
	if sum == 0 {
		return 0
	}
	return hi / (sum / float64(n))
}

// predict simulates the bag on the workers as measured: each a machine
// with its slots, its measured speed against the reference and half its
// round trip each way; the bag's grains are the reference's strip costs.
// It returns the simulated total and the clairvoyant floor.
func predict(o *options, ref *Reference, ws []WorkerFigures) (total, floor float64, err error) {
	var sb strings.Builder
	sb.WriteString("master cost=25us\n") // the real master's cost per message, as measured (issue 16)
	for _, w := range ws {
		if w.Speed <= 0 || math.IsInf(w.Speed, 0) || math.IsNaN(w.Speed) {
			// It returned no strip: as slow as the slowest that did.
			w.Speed = math.Inf(1)
			for _, v := range ws {
				if v.Speed > 0 {
					w.Speed = min(w.Speed, v.Speed)
				}
			}
			if math.IsInf(w.Speed, 1) {
				return 0, 0, errors.New("no worker returned a strip")
			}
		}
		fmt.Fprintf(&sb, "machine %s cpus=%d speed=%g delay=%s\n", strings.ReplaceAll(w.Name, " ", "_"), w.Slots, w.Speed,
			time.Duration(w.RoundTrip/2*float64(time.Second)))
	}
	set, err := sim.ParseSet("measured", strings.NewReader(sb.String()))
	if err != nil {
		return 0, 0, err
	}
	grains := make([]time.Duration, ref.Strips)
	for i := range grains {
		grains[i] = ref.grain(i)
	}
	res, err := sim.Run(sim.Config{Set: set, Policy: o.policy, PolicyConfig: sched.Config{Copies: o.copies},
		Workload: sim.Bag(grains), Noise: o.noise, Seed: 1})
	if err != nil {
		return 0, 0, err
	}
	return res.Report.Total.Seconds(), res.Optimum.LB.Seconds(), nil
}

func printFigures(w io.Writer, f *Figures) {
	same := "every strip equals the reference"
	if !f.Identical {
		same = "STRIPS DIFFER from the reference"
	}
	fmt.Fprintf(w, "%s %s: %d strips in %.2f s (simulated for the measured speeds: %.2f s, %+.1f%%; floor %.2f s, eff %.1f%%), %d replicas; %s\n",
		f.Name, f.Policy, f.Strips, f.Total, f.Predicted, 100*(f.Predicted/f.Total-1), f.Optimum, 100*f.Optimum/f.Total, f.Replicas, same)
	fmt.Fprintf(w, "  %-8s %5s %10s %7s %9s %8s %9s\n", "worker", "slots", "compute s", "strips", "speed", "rtt ms", "per slot")
	for _, x := range f.Workers {
		fmt.Fprintf(w, "  %-8s %5d %10.2f %7d %9.3f %8.1f %9.2f\n", x.Name, x.Slots, x.Compute, x.Strips, x.Speed, 1000*x.RoundTrip, x.Compute/float64(max(x.Slots, 1)))
	}
	fmt.Fprintf(w, "  imbalance (largest compute per slot / mean): %.2f\n", f.Imbalance)
}
