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
	"strings"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/worker"
)

// options are esworker's parsed flags.
type options struct {
	join     string
	master   string
	gossip   string
	slots    int
	name     string
	key      string
	keyFile  string
	slowdown float64
	delay    time.Duration
	verbose  bool
}

const usageText = `Usage: esworker -join HOST[:PORT] [flags]

esworker evaluates fitness for an esgrid run. It joins the cluster through
the master's gossip address, finds the master's data address there, and
runs the tasks it is sent, one per slot (one slot per CPU by default). It
reconnects when the connection drops or the master restarts. On SIGTERM or
Ctrl-C it drains: it stops taking tasks, gives the held ones back, finishes
the running ones and sends their results, then exits; a second signal exits
at once.

Every node of a run needs the same cluster key: -key, -key-file, or the
ESGRID_KEY environment variable. A node with another key or none is
refused, and both sides log why.

Examples:
  ESGRID_KEY=s3cret esworker -join master.lab:7946
  esworker -join master.lab -key-file ~/.esgrid-key -slots 4
  esworker -master 127.0.0.1:7950 -key s3cret -slowdown 4 -delay 20ms
                      emulate a machine 4x slower behind a 20 ms link

Flags:
`

// usageError is a bad command line: printed on one line, exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("esworker", flag.ContinueOnError)
	fs.StringVar(&o.join, "join", "", "gossip address `HOST[:PORT]` of the master (default port "+strconv.Itoa(grid.DefaultGossipPort)+"); several may be given, comma-separated")
	fs.StringVar(&o.master, "master", "", "the master's data address `HOST:PORT`, to connect without asking gossip")
	fs.StringVar(&o.gossip, "gossip", "0.0.0.0:0", "`HOST:PORT` this worker's gossip listens on; port 0 = any free port (fix it when a firewall sits between the machines)")
	fs.IntVar(&o.slots, "slots", 0, "run `N` tasks at once; 0 = one per CPU")
	fs.StringVar(&o.name, "name", "", "this worker's unique `NAME` (default hostname-pid)")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY` (visible to other users in ps: prefer -key-file or ESGRID_KEY)")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.Float64Var(&o.slowdown, "slowdown", 1, "emulate a slower machine: every task takes `F` times as long (F ≥ 1)")
	fs.DurationVar(&o.delay, "delay", 0, "emulate a slow link: add `D` to every message each way, e.g. 20ms")
	fs.BoolVar(&o.verbose, "v", false, "log debug detail")
	return fs
}

// parseOptions parses args: -h yields flag.ErrHelp, anything else wrong a
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
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	case o.join == "" && o.master == "":
		return nil, usagef("give -join HOST[:PORT] (the master's gossip address) or -master HOST:PORT")
	case o.slots < 0:
		return nil, usagef("-slots must be ≥ 0, got %d", o.slots)
	case !(o.slowdown >= 1) || o.slowdown > 1e6:
		return nil, usagef("-slowdown must be in [1, 1e6], got %v", o.slowdown)
	case o.delay < 0:
		return nil, usagef("-delay must be ≥ 0, got %v", o.delay)
	}
	if o.master != "" {
		if _, _, err := net.SplitHostPort(o.master); err != nil {
			return nil, usagef("-master %q: %v", o.master, err)
		}
	}
	if _, _, err := net.SplitHostPort(o.gossip); err != nil {
		return nil, usagef("-gossip %q: %v", o.gossip, err)
	}
	return o, nil
}

// joinAddrs splits -join and gives a bare host the default gossip port.
func joinAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(strings.Trim(a, "[]"), strconv.Itoa(grid.DefaultGossipPort))
		}
		out = append(out, a)
	}
	return out
}

func printUsage(w io.Writer) {
	fs := newFlagSet(&options{})
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
}

// run is esworker without the process around it; it returns the exit
// status. Closing drain starts a graceful drain; cancelling ctx stops at once.
func run(ctx context.Context, args []string, drain <-chan struct{}, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "esworker: %v (esworker -h for help)\n", err)
		return 2
	}
	key, err := grid.LoadKey(o.key, o.keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "esworker: %v\n", err)
		return 2
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	agent, err := worker.New(worker.Config{
		Master:     o.master,
		Join:       joinAddrs(o.join),
		GossipBind: o.gossip,
		Key:        key,
		Name:       o.name,
		Slots:      o.slots,
		Slowdown:   o.slowdown,
		Delay:      o.delay,
		Logger:     log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "esworker: %v\n", err)
		return 2
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
		case <-drain:
			log.Info("signal: draining (a second signal exits at once)")
			agent.Drain()
		case <-ctx.Done():
		}
	}()
	log.Info("esworker starting", "name", agent.Name(), "join", o.join, "master", o.master,
		"slots", o.slots, "slowdown", o.slowdown, "delay", o.delay)
	switch err := agent.Run(ctx); {
	case err == nil:
		return 0
	case errors.Is(err, worker.ErrShutdown):
		log.Info("the run is over")
		return 0
	default:
		log.Error("esworker stopped", "err", err)
		return 1
	}
}
