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
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"

	"github.com/esgrid/esgrid/bag"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/sched"
)

func main() {
	// Run by esworker as a plugin: serve the strips the name describes.
	if name := os.Getenv("ESGRID_PLUGIN_NAME"); name != "" {
		p, err := bag.Plugin(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "esbag plugin: %v\n", err)
			os.Exit(1)
		}
		plugin.Main(p, plugin.Dims(1, 1))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
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
			fmt.Fprintf(stdout, "-plugin %s=%s ", bag.Name(n, o.maxIter, o.size), self)
		}
		fmt.Fprintln(stdout)
		return nil, flag.ErrHelp
	}
	if len(list) != 1 {
		return nil, errors.New("-strips: one count per run (a list only with -plugins)")
	}
	o.strips = list[0]
	if err := bag.Image(o.strips, o.maxIter, o.size).Validate(); err != nil {
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

func runInProcess(ctx context.Context, o *options, stdout io.Writer) error {
	ref, err := bag.NewReference(ctx, o.strips, o.maxIter, o.size)
	if err != nil {
		return err
	}
	if err := ref.Write(o.reference); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d strips, %d iterations, %.2f s here (%.2f ns an iteration); wrote %s\n",
		ref.Name, o.strips, ref.Iterations(), ref.Seconds, ref.NsPerIter, o.reference)
	return nil
}

func runGrid(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	ref, err := bag.ReadReference(o.reference, bag.Name(o.strips, o.maxIter, o.size), o.strips)
	if err != nil {
		return err
	}
	key, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	if err != nil {
		return usageError{err}
	}
	// A bad -gossip is a bad command line (status 2), not a failed run.
	if _, port, err := net.SplitHostPort(o.gossip); err != nil {
		return usageError{fmt.Errorf("-gossip: %w", err)}
	} else if _, err := strconv.Atoi(port); err != nil {
		return usageError{fmt.Errorf("-gossip: %w", err)}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fig, err := bag.Run(ctx, bag.Config{Policy: o.policy, Copies: o.copies, MinWorkers: o.minWorkers,
		Listen: o.listen, Gossip: o.gossip, Key: key, Noise: o.noise, Logger: log}, ref)
	if fig != nil {
		for i, v := range fig.Values {
			if v != float64(ref.Values[i]) {
				fmt.Fprintf(stderr, "esbag: strip %d: %v on the grid, %d in the reference\n", i, v, ref.Values[i])
			}
		}
	}
	if err != nil {
		return err
	}
	fig.Print(stdout)
	if o.report != "" {
		b, err := json.MarshalIndent(fig, "", " ")
		if err != nil {
			return err
		}
		return atomicfile.WriteBytes(o.report, 0o644, b)
	}
	return nil
}
