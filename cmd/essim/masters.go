package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sweep"
)

// essim masters: masters that split (docs/papers.md §2), simulated.
//
//	essim masters -fig paper   the paper's Fig. 5–7 in shape: P = 2…18,
//	                           one master vs splitting (plain rule and
//	                           gain rule), masters over time and per-worker
//	                           idle at P = 18
//	essim masters -fig scale   past the paper: 256, 1,024, 4,096 workers at
//	                           10 and 25 µs per message, throughput as a
//	                           fraction of linear
const mastersUsage = `Usage: essim masters [flags]

Simulates masters that split when overloaded (docs/papers.md §2): one master
against the paper's rule (paper) and the rule that weighs the worker a
split takes away (gain). Prints tables; -png DIR draws the figures.

  essim masters -fig paper   the paper's Fig. 5–7 in shape: P = 2…18, one
                             master vs splitting (plain rule and gain rule),
                             masters over time and per-worker idle at P = 18
  essim masters -fig scale   past the paper: -workers × -master-cost, the
                             throughput as a fraction of linear

Flags:
`

// mastersOptions are essim masters' flags.
type mastersOptions struct {
	fig       string
	png       string
	workers   []int
	costs     []time.Duration
	perWorker int
	grain     time.Duration
	latency   time.Duration
	noise     float64
	window    int
	policy    string
	seed      uint64
}

// maxMastersTasks bounds the tasks of one simulated bag: -workers ×
// -tasks-per-worker.
const maxMastersTasks = 1 << 24

// newMastersFlagSet declares essim masters' flags into o.
func newMastersFlagSet(o *mastersOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("essim masters", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.fig, "fig", "all", "`what` to simulate: paper (Fig. 5–7 in shape, P = 2…18), scale (-workers × -master-cost), or all")
	fs.StringVar(&o.png, "png", "", "draw the figures as PNG files into `DIR`")
	flagx.IntListVar(fs, &o.workers, "workers", []int{256, 1024, 4096}, 1, maxMastersTasks, "scale: worker counts, `list`")
	flagx.DurationListVar(fs, &o.costs, "master-cost", []time.Duration{10 * time.Microsecond, 25 * time.Microsecond}, 0, time.Second, time.Millisecond, "scale: a master's time per message, `list`")
	flagx.IntVar(fs, &o.perWorker, "tasks-per-worker", 100, 1, 10000, "scale: tasks in the bag per worker (`N`); the run's ideal length is N × -grain")
	flagx.BareDurationVar(fs, &o.grain, "grain", 10*time.Millisecond, time.Microsecond, time.Hour, time.Millisecond, "scale: mean task `time`")
	flagx.BareDurationVar(fs, &o.latency, "delay", 100*time.Microsecond, 0, time.Hour, time.Millisecond, "scale: one-way message `delay`")
	flagx.FloatVar(fs, &o.noise, "noise", 0.3, 0, 2, "scale: `sigma` of the log-normal task-time noise")
	flagx.IntVar(fs, &o.window, "overload-window", 0, 0, sched.MaxOverloadWindow, "the overload test's `n` (0: the paper's 2 × processors, at most 512)")
	fs.StringVar(&o.policy, "policy", "wq", "each master's `POLICY`: wq (the paper's), rwq, eft... (any of esrun -policy)")
	flagx.Uint64Var(fs, &o.seed, "seed", 1, 0, math.MaxUint64, "`seed` of the task-time noise")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "costs", "master-cost")
	flagx.Alias(fs, "latency", "delay")
	flagx.Alias(fs, "window", "overload-window")
	return fs
}

// runMasters is essim masters; it returns the exit status.
func runMasters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &mastersOptions{}
	fs := newMastersFlagSet(o)
	err := flagx.Parse(fs, args)
	if err == nil || errors.Is(err, flagx.ErrVersion) {
		for _, n := range flagx.Deprecated(fs) {
			fmt.Fprintf(stderr, "essim masters: %s\n", n)
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprint(stdout, mastersUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return flagx.ExitOK
		case errors.Is(err, flagx.ErrVersion):
			fmt.Fprintln(stdout, flagx.Version("essim"))
			return flagx.ExitOK
		}
		fmt.Fprintf(stderr, "essim masters: %v (essim masters -h for help)\n", err)
		return flagx.ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.fig != "paper" && o.fig != "scale" && o.fig != "all":
		err = fmt.Errorf("-fig %q: want paper, scale or all", o.fig)
	case !slices.Contains(sched.Names, o.policy):
		err = fmt.Errorf("-policy %q: want one of %s", o.policy, strings.Join(sched.Names, ", "))
	}
	for _, w := range o.workers {
		if w*o.perWorker > maxMastersTasks {
			err = fmt.Errorf("-workers %d × -tasks-per-worker %d: at most 2^24 tasks", w, o.perWorker)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "essim masters: %v\n", err)
		return flagx.ExitUsage
	}
	if o.png != "" {
		if err := os.MkdirAll(o.png, 0o755); err != nil {
			// A -png that is a file, or under one: the command line's.
			fmt.Fprintf(stderr, "essim masters: -png %s: %v\n", o.png, err)
			return flagx.ExitUsage
		}
	}
	if o.fig == "paper" || o.fig == "all" {
		if err := sweep.MastersPaper(ctx, o.masters(), stdout); err != nil {
			fmt.Fprintf(stderr, "essim masters: %v\n", err)
			return flagx.ExitFailure
		}
	}
	if o.fig == "scale" || o.fig == "all" {
		if err := sweep.MastersScale(ctx, o.masters(), stdout); err != nil {
			fmt.Fprintf(stderr, "essim masters: %v\n", err)
			return flagx.ExitFailure
		}
	}
	return 0
}

// masters is the experiments' configuration of the flags.
func (o *mastersOptions) masters() *sweep.Masters {
	return &sweep.Masters{PNG: o.png, Workers: o.workers, Costs: o.costs, PerWorker: o.perWorker, Grain: o.grain,
		Latency: o.latency, Noise: o.noise, Window: o.window, Policy: o.policy, Seed: o.seed}
}
