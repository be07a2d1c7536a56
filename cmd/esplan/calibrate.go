package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/esgrid/esgrid/calibrate"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched/plan"
)

const calibrateUsage = `Usage: esplan calibrate -workers W [flags] -o FILE
       esplan calibrate [flags] -o FILE REPORT.json...

Measures how long one task of the LU load takes on every machine of the
live grid, at several sizes N, with several slot counts M per machine and
several numbers P of tasks running in the whole grid, through the grid's
own protocol: esplan is the master (workers join it as they join esrun),
each task is the built-in sphere of dimension 1 with an N×N LU load, and
the policy is wq, whose slots esplan sets per worker between batches
(sched.SlotsChanged; 0 sets a worker aside). Per size N, for each M: every
group's first machine alone with M slots (the N–T model alone, P = M),
then the first k machines in turn over the groups with M slots each (or
their CPUs, if fewer), k = 2, 3, ..., all (the N–T models of P > M, from
which the P–T models are fitted). The time of a task is what the worker
reports it executed (esworker -slowdown included). Workers must stay for
the whole calibration: a new master listens on the same address for every
N, and the workers (even -once) wait for it in between.

With REPORT files (esrun -report) instead, each report gives one sample
per worker: the run's load_n, its slots, the slots of the whole run and
its mean execution time.

A machine's group is its name without trailing "-<number>" parts
(esworker -name fast-1 and fast-2 are group fast; the default hostname-pid
is group hostname); -group-by worker makes every worker its own group.

By default esplan listens on loopback, for workers on this machine; for
workers on other machines give -listen 0.0.0.0:PORT -gossip 0.0.0.0:PORT
(or this machine's address), as esrun does when it expects them.

Flags:
`

type calOptions struct {
	workers int
	listen  string
	gossip  string
	key     string
	keyFile string
	keyAny  bool // -key-file-insecure
	sizes   []int
	slots   []int
	reps    int
	wait    time.Duration
	groupBy string
	out     string
	verbose bool
	reports []string
}

// newCalibrateFlagSet declares esplan calibrate's flags into o.
func newCalibrateFlagSet(o *calOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("esplan calibrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flagx.IntVar(fs, &o.workers, "workers", 0, 0, maxWorkers, "wait for `W` workers, and measure them")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:"+strconv.Itoa(grid.DefaultDataPort), "the data address `HOST:PORT` workers connect to (port 0: any, then kept for every size); loopback: workers on this machine only, 0.0.0.0:"+strconv.Itoa(grid.DefaultDataPort)+" for workers on others")
	fs.StringVar(&o.gossip, "gossip", "127.0.0.1:"+strconv.Itoa(grid.DefaultGossipPort), "the gossip address `HOST:PORT` workers -join; empty: none (workers give -master); loopback: workers on this machine only, 0.0.0.0:"+strconv.Itoa(grid.DefaultGossipPort)+" for workers on others")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY` (visible in ps: prefer -key-file or "+grid.KeyEnv+")")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.BoolVar(&o.keyAny, grid.InsecureKeyFileFlag, false, "accept a -key-file that group or others may read or write (refused by default, as ssh refuses such a key)")
	flagx.IntListVar(fs, &o.sizes, "sizes", []int{50, 100, 150, 200, 300, 400}, 1, problems.MaxLoadN, "LU sizes `N,...` to measure: at least 5, well spread (docs/papers.md §4)")
	flagx.IntListVar(fs, &o.slots, "slots", []int{1, 2, 4}, 1, grid.MaxMetaSlots, "slot counts `M,...` per machine (capped at each machine's CPUs, which are always measured too)")
	flagx.IntVar(fs, &o.reps, "reps", 3, 1, maxReps, "tasks per busy slot in each batch (`R`)")
	flagx.DurationVar(fs, &o.wait, "wait", 5*time.Minute, time.Second, 24*time.Hour, "how long `D` to wait for the workers, at each size")
	fs.StringVar(&o.groupBy, "group-by", "prefix", "a machine's group: `prefix` (its name without trailing -<number> parts) or worker (each its own)")
	fs.StringVar(&o.out, "o", "", "write the calibration to `FILE` (- = standard output)")
	fs.BoolVar(&o.verbose, "v", false, "log the grid's events")
	flagx.VersionFlag(fs)
	return fs
}

// Bounds of esplan calibrate's numeric flags.
const (
	// maxWorkers bounds -workers: more than a master holds connections to.
	maxWorkers = 1 << 16
	// maxReps bounds -reps: a batch is reps × the busy slots of the grid.
	maxReps = 1000
)

func runCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := &calOptions{}
	fs := newCalibrateFlagSet(o)
	if err := parseCommand(fs, args, calibrateUsage, stdout, stderr); err != nil { // main.go
		return err
	}
	o.reports = fs.Args()
	o.sizes, o.slots = sortedSet(o.sizes), sortedSet(o.slots)
	files := []flagx.File{{What: "-o " + o.out, Path: o.out, Write: true}, {What: "-key-file " + o.keyFile, Path: o.keyFile}}
	for _, r := range o.reports {
		files = append(files, flagx.File{What: "the report " + r, Path: r})
	}
	if err := flagx.CheckFiles(files...); err != nil {
		return usagef("%v", err)
	}
	switch {
	case o.out == "":
		return usagef("give -o FILE")
	case o.key != "" && o.keyFile != "":
		return usagef("-key and -key-file both give the key; give one")
	case o.groupBy != "prefix" && o.groupBy != "worker":
		return usagef("-group-by must be prefix or worker")
	case len(o.reports) > 0:
		cal, err := calibrate.FromReports(o.reports, o.groupBy)
		if err != nil {
			return err
		}
		return calibrate.WriteJSON(o.out, cal, stdout)
	case o.workers < 1:
		return usagef("give -workers W (the workers to measure), or esrun -report files")
	case len(o.sizes) < plan.MinSizes:
		return usagef("-sizes: %d sizes, at least %d needed (well spread: a narrow range gives absurd cubics)", len(o.sizes), plan.MinSizes)
	}
	key, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	if err != nil {
		return usagef("%v", err)
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := checkGossip(o.gossip); err != nil {
		return err
	}
	cal, err := calibrate.Grid(ctx, calibrate.Config{Workers: o.workers, Listen: o.listen, Gossip: o.gossip, Key: key,
		Sizes: o.sizes, Slots: o.slots, Reps: o.reps, Wait: o.wait, GroupBy: o.groupBy, Logger: log, Progress: stderr})
	if cal != nil && len(cal.Samples) > 0 {
		if werr := calibrate.WriteJSON(o.out, cal, stdout); werr != nil {
			return errors.Join(err, werr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "esplan: the calibration stopped early; what was measured is in %s\n", o.out)
		}
	}
	return err
}

// checkGossip refuses a -gossip address that is not HOST:PORT (empty: no
// gossip) as a bad command line.
func checkGossip(addr string) error {
	if addr == "" {
		return nil
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("-gossip %q: %v", addr, err)
	}
	if _, err := strconv.Atoi(p); err != nil {
		return usagef("-gossip %q: bad port", addr)
	}
	return nil
}
