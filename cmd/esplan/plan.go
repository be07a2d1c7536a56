package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/esgrid/esgrid/calibrate"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/plan"
)

// sortedSet is l sorted, each value once.
func sortedSet(l []int) []int {
	l = slices.Clone(l)
	slices.Sort(l)
	return slices.Compact(l)
}

// fitFlags declares the flags of the fit, which models and plan share.
func fitFlags(fs *flag.FlagSet, o *plan.Options) {
	flagx.IntVar(fs, &o.MinSizes, "min-sizes", plan.MinSizes, 4, maxFitPoints, "fewest distinct sizes `N` an N–T model is fitted from")
	flagx.IntVar(fs, &o.MinPs, "min-ps", plan.MinPs, 3, maxFitPoints, "fewest distinct `P` > M a group's own P–T model is fitted from; fewer: substituted")
}

// Bounds of esplan's numeric flags.
const (
	// maxFitPoints bounds -min-sizes and -min-ps: more points than any
	// calibration measures.
	maxFitPoints = 1000
	// maxTasks bounds plan -tasks: the ES's λ (esrun -lambda's bound).
	maxTasks = 1_000_000
	// maxTaskMS bounds plan -load-ms: an hour a task.
	maxTaskMS = 3_600_000
	// maxTop bounds plan -top.
	maxTop = 1000
)

// modelsOptions are esplan models' flags.
type modelsOptions struct {
	cal string
	fit plan.Options
}

const modelsUsage = `Usage: esplan models -cal FILE [flags]

Fits the execution-time models of a calibration (esplan calibrate -o) and
prints them: per group, the N–T model of one machine alone with M slots
(a cubic in the LU size N) and the P–T models of P tasks in the whole
grid; a group with too few points takes another's, and says so.

Flags:
`

// newModelsFlagSet declares esplan models' flags into o.
func newModelsFlagSet(o *modelsOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("esplan models", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.cal, "cal", "", "the calibration `FILE` (esplan calibrate -o)")
	fitFlags(fs, &o.fit)
	flagx.VersionFlag(fs)
	return fs
}

func runModels(args []string, stdout, stderr io.Writer) error {
	o := &modelsOptions{}
	fs := newModelsFlagSet(o)
	if err := parseCommand(fs, args, modelsUsage, stdout, stderr); err != nil { // main.go
		return err
	}
	if o.cal == "" {
		return usagef("give -cal FILE")
	}
	cal, err := calibrate.ReadCalibration(o.cal)
	if err != nil {
		return err
	}
	ms, err := plan.Fit(cal, o.fit)
	if err != nil {
		return err
	}
	calibrate.PrintModels(stdout, cal, ms)
	return nil
}

// planOptions are esplan plan's flags.
type planOptions struct {
	cal     string
	n       int
	taskMS  float64
	ref     string
	tasks   int
	policy  string
	slots   []int
	top     int
	out     string
	fit     plan.Options
	verbose bool
}

const planUsage = `Usage: esplan plan -cal FILE (-lu N | -load-ms MS) [flags]

Searches the configurations of a calibration's machines (which to use,
with how many slots each) with the fitted models, for batches of -tasks
tasks of the LU load size -lu N (or of -load-ms milliseconds), prints the
-top best with their predicted times and, with -o, writes the best as a
plan file for esrun -plan and esworker -plan.

Flags:
`

// newPlanFlagSet declares esplan plan's flags into o.
func newPlanFlagSet(o *planOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("esplan plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.cal, "cal", "", "the calibration `FILE` (esplan calibrate -o)")
	flagx.IntVar(fs, &o.n, "lu", 0, 0, problems.MaxLoadN, "plan for tasks of LU load size `N` (as esrun -lu N)")
	flagx.FloatVar(fs, &o.taskMS, "load-ms", 0, 0, maxTaskMS, "or for tasks of `MS` milliseconds on one machine of the -ref group, alone with one slot (as esrun -load-ms)")
	fs.StringVar(&o.ref, "ref", "", "the reference `GROUP` of -load-ms (default the fastest)")
	flagx.IntVar(fs, &o.tasks, "tasks", 70, 1, maxTasks, "tasks `N` per batch (the ES's λ)")
	fs.StringVar(&o.policy, "policy", "r3q", "the run's `POLICY`: rr, r3q and eft replicate the last tasks (modelled), wq, rwq and cyclic do not")
	flagx.IntListVar(fs, &o.slots, "slots", nil, 1, grid.MaxMetaSlots, "slot counts `M,...` to consider per machine (default: every M measured)")
	flagx.IntVar(fs, &o.top, "top", 5, 1, maxTop, "print the `K` best configurations")
	fs.StringVar(&o.out, "o", "", "write the best configuration as a plan `FILE` for esrun -plan and esworker -plan (- = standard output)")
	fitFlags(fs, &o.fit)
	fs.BoolVar(&o.verbose, "v", false, "print the models too")
	flagx.VersionFlag(fs)
	flagx.Alias(fs, "n", "lu")
	flagx.Alias(fs, "task-ms", "load-ms")
	return fs
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	o := &planOptions{}
	fs := newPlanFlagSet(o)
	if err := parseCommand(fs, args, planUsage, stdout, stderr); err != nil { // main.go
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q", fs.Arg(0))
	case o.cal == "":
		return usagef("give -cal FILE")
	case (o.n > 0) == (o.taskMS > 0):
		return usagef("give one of -lu N and -load-ms MS")
	case !slices.Contains(sched.Names, o.policy):
		return usagef("-policy %q is not a policy (known: %s)", o.policy, strings.Join(sched.Names, ", "))
	}
	if err := flagx.CheckFiles(
		flagx.File{What: "-o " + o.out, Path: o.out, Write: true},
		flagx.File{What: "-cal " + o.cal, Path: o.cal},
	); err != nil {
		return usagef("%v", err)
	}
	cal, err := calibrate.ReadCalibration(o.cal)
	if err != nil {
		return err
	}
	p, err := calibrate.Search(stdout, cal, calibrate.Request{N: o.n, TaskMS: o.taskMS, Ref: o.ref, Tasks: o.tasks, Policy: o.policy,
		Slots: sortedSet(o.slots), Top: o.top, Fit: o.fit, Models: o.verbose})
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := calibrate.WriteJSON(o.out, p, stdout); err != nil {
			return err
		}
		if o.out != "-" {
			fmt.Fprintf(stdout, "plan written to %s: esrun -plan %s, and esworker -plan %s on every worker\n", o.out, o.out, o.out)
		}
	}
	return nil
}
