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
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/worker"
)

// options are esworker's parsed flags.
type options struct {
	join     string
	master   string
	gossip   string
	child    int // -child-port
	slots    int
	name     string
	key      string
	keyFile  string
	keyAny   bool // -key-file-insecure
	slowdown float64
	delay    time.Duration
	verbose  bool
	logJSON  bool
	metrics  string        // -metrics ADDR
	linger   time.Duration // -metrics-linger
	once     bool
	idle     time.Duration
	hello    time.Duration // -plugin-start-timeout
	memShare float64       // -mem-share
	faults   worker.Faults
	config   string          // -config FILE (config.go)
	plan     string          // -plan FILE (plan.go)
	plugins  plugin.Entries  // -plugin NAME=PATH, repeatable
	catalog  *plugin.Catalog // the plugins allowed, from -plugin and -config
	relay    relayOptions    // -relay, -relay-only (relay.go)
}

const usageText = `Usage: esworker -join HOST[:PORT] [flags]

esworker evaluates fitness for an esgrid run. It joins the cluster through
the master's gossip address, finds the master's data address there, and
runs the tasks it is sent, one per slot (one slot per CPU by default). It
is a lab agent: it reconnects when the connection drops or the master
restarts, and when a run is over it waits for the next one (-once exits
instead). On SIGTERM or Ctrl-C it drains: it stops taking tasks, gives the
held ones back, finishes the running ones and sends their results, then
exits; a second signal kills its plugins' processes and exits at once.

Every node of a run needs the same cluster key: -key-file, -key, or the
ESGRID_KEY environment variable. Make one with esrun -genkey FILE (a key
must carry 128 bits: at least 24 characters, such as 16 random bytes in
base64). A key file must be readable by its owner only (chmod 600), as
ssh requires of a private key. A node with another key or none is
refused, and both sides log why.

Examples:
  ESGRID_KEY="$(cat ~/.esgrid-key)" esworker -join master.lab:7946
  esworker -join master.lab -key-file ~/.esgrid-key -slots 4
  esworker -master 127.0.0.1:7950 -key-file K -slowdown 4 -delay 20ms
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
	fs.StringVar(&o.master, "master", "", "the master's data address `HOST:PORT`, to connect without asking gossip; or a relay's (esworker -relay); several, comma-separated, are tried in turn (another path when one is gone)")
	addRelayFlags(fs, &o.relay) // relay.go
	fs.StringVar(&o.gossip, "gossip", "", "`HOST:PORT` this worker's gossip listens on; default "+loopbackGossip+" when every -join and -master address is on this machine (loopback), else "+anyGossip+"; port 0 = any free port (fix it when a firewall sits between the machines)")
	flagx.IntVar(fs, &o.child, "child-port", 0, 0, 65535, "the TCP `PORT` a child master listens on if the master splits (esrun -split) and promotes this worker; the workers moved to it connect there: fix it and open it where a firewall sits between the machines; 0 = any free port")
	flagx.IntVar(fs, &o.slots, "slots", 0, 0, grid.MaxMetaSlots, "run `N` tasks at once; 0 = one per CPU")
	fs.StringVar(&o.name, "name", "", "this worker's unique `NAME`, at most 255 bytes (default hostname-pid)")
	fs.StringVar(&o.key, "key", "", "the cluster `KEY` (visible to other users in ps: prefer -key-file or ESGRID_KEY)")
	fs.StringVar(&o.keyFile, "key-file", "", "read the cluster key from `FILE`")
	fs.BoolVar(&o.keyAny, grid.InsecureKeyFileFlag, false, "accept a -key-file that group or others may read or write (refused by default, as ssh refuses such a key)")
	flagx.FloatVar(fs, &o.slowdown, "slowdown", 1, 1, 1e6, "emulate a slower machine: every task takes `F` times as long (F ≥ 1): F times its CPU time for a built-in problem, so that workers sharing this machine's cores keep their speeds; F times its wall time for a plugin")
	flagx.BareDurationVar(fs, &o.delay, "delay", 0, 0, maxDelay, time.Millisecond, "emulate a slow link: add `D` to every message each way, e.g. 20ms (as essim -delay)")
	flagx.IntVar(fs, &o.faults.FailEvery, "fail-every", 0, 0, maxEvery, "emulate a faulty machine: every `K`-th evaluation fails; 0 = none")
	flagx.IntVar(fs, &o.faults.HangEvery, "hang-every", 0, 0, maxEvery, "emulate a stuck fitness function: every `K`-th evaluation hangs, deaf to cancels, until esworker exits; 0 = none")
	fs.BoolVar(&o.faults.Silent, "silent", false, "emulate a wedged machine: accept tasks and never answer them, while the connection stays alive")
	fs.BoolVar(&o.once, "once", false, "exit when the master ends its run, instead of waiting for the next one")
	flagx.DurationVar(fs, &o.idle, "idle-timeout", 0, 0, maxIdle, "exit (status 0: not a failure) after `D` without a working session: no master reachable, refused by it, or its problem does not build here (a plugin that does not start); 0 = wait for ever")
	fs.BoolVar(&o.verbose, "v", false, "log debug detail")
	fs.BoolVar(&o.logJSON, "log-json", false, "write every line on standard error as JSON, one object per line, for machines")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (e.g. :9465): slots busy, tasks held, tasks run, idle slot-seconds, labelled with the worker's name")
	flagx.DurationVar(fs, &o.linger, "metrics-linger", DefaultMetricsLinger, 0, time.Hour, "with -metrics: once the work ends by itself (-once, -idle-timeout), keep serving the metrics for `D`, so that Prometheus scrapes the final counts (a signal ends it at once); 0 = stop at once")
	fs.StringVar(&o.plan, "plan", "", "take this worker's slots from the esplan plan `FILE` (by its -name, or its group); the master, given the same -plan, sets aside a worker the plan leaves out")
	fs.StringVar(&o.config, "config", "", "read settings from the JSON `FILE` (join, master, gossip, child_port, key_file, slots, name, plugins, plugin_start_timeout, once, idle_timeout, mem_share; see docs/install.md); flags on the command line win")
	flagx.DurationVar(fs, &o.hello, "plugin-start-timeout", plugin.DefaultStartTimeout, time.Millisecond, maxPluginStart, "how long a plugin process has `D` to say hello: at the start-up check and at every start (and how long its first evaluation goes unanswered before a warning)")
	flagx.FloatVar(fs, &o.memShare, "mem-share", worker.DefaultMemShare, 0.01, worker.MaxMemShare, "refuse a master's problem that needs more than the share `F` of this machine's memory (its problem, LU load, vectors and frames on every slot)")
	fs.Var(&o.plugins, "plugin", "allow the problem plugin `NAME=PATH` (repeatable): a master that names the problem NAME gets the executable PATH run; nothing else is ever run; refused if anyone but root and this user could change PATH (its mode, owner, directories)")
	flagx.VersionFlag(fs)
	return fs
}

// The default gossip addresses: a worker whose master is on this machine
// listens on loopback only, one that joins another machine on every
// interface (the master's gossip must reach it).
const (
	loopbackGossip = "127.0.0.1:0"
	anyGossip      = "0.0.0.0:0"
)

// parseOptions parses args: -h yields flag.ErrHelp, -version
// flagx.ErrVersion, anything else wrong a *usageError.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	fs.SetOutput(io.Discard)
	if err := flagx.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) || errors.Is(err, flagx.ErrVersion) {
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	if o.key != "" && o.keyFile != "" {
		return nil, usagef("-key and -key-file both give the key; give one")
	}
	if err := o.applyConfig(fs); err != nil { // config.go
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	case o.join == "" && o.master == "":
		return nil, usagef("give -join HOST[:PORT] (the master's gossip address) or -master HOST:PORT")
	case len(o.name) > grid.MaxWorkerName:
		// A master refuses the name at every connection, and the worker
		// would retry for ever.
		return nil, usagef("-name: %d bytes, more than the %d a master takes", len(o.name), grid.MaxWorkerName)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["metrics-linger"] && o.metrics == "" {
		return nil, usagef("-metrics-linger needs -metrics")
	}
	if o.metrics != "" {
		if err := flagx.CheckHostPort(o.metrics, 0); err != nil {
			return nil, usagef("-metrics %q: %v", o.metrics, err)
		}
	}
	if o.master != "" {
		if err := checkMasters(o.master); err != nil { // relay.go: a list
			return nil, err
		}
	}
	if err := o.relay.check(given); err != nil { // relay.go
		return nil, err
	}
	if o.gossip == "" {
		o.gossip = anyGossip
		if flagx.AllLoopback(flagx.HostPorts(o.join, grid.DefaultGossipPort)) && flagx.AllLoopback(strings.Split(o.master, ",")) {
			o.gossip = loopbackGossip
		}
	}
	if err := flagx.CheckHostPort(o.gossip, 0); err != nil {
		return nil, usagef("-gossip %q: %v", o.gossip, err)
	}
	if host, _, _ := net.SplitHostPort(o.gossip); host != "" && net.ParseIP(host) == nil {
		// Gossip binds to an address, and would take a name for "any".
		return nil, usagef("-gossip %q: the host must be an IP address, such as 0.0.0.0", o.gossip)
	}
	if o.join != "" {
		addrs := flagx.HostPorts(o.join, grid.DefaultGossipPort)
		if len(addrs) == 0 {
			return nil, usagef("-join %q names no address", o.join)
		}
		for _, a := range addrs {
			if err := flagx.CheckHostPort(a, 1); err != nil {
				return nil, usagef("-join %q: %v", a, err)
			}
		}
	}
	return o, nil
}

// Bounds of esworker's numeric flags (and of the same settings in a
// -config file).
const (
	// maxDelay bounds -delay: a one-way delay longer than the connection's
	// own timeouts (10 s to write a frame or to finish a handshake) is a
	// link the grid cannot use, not a slow one.
	maxDelay = 10 * time.Second
	// maxEvery bounds -fail-every and -hang-every.
	maxEvery = 1_000_000_000
	// maxIdle bounds -idle-timeout (0: wait for ever): a week.
	maxIdle = 7 * 24 * time.Hour
	// maxPluginStart bounds -plugin-start-timeout: a plugin that takes
	// longer to say hello is stuck.
	maxPluginStart = 10 * time.Minute
)

// DefaultMetricsLinger is -metrics-linger's default: three of the
// example prometheus.yml's 5 s scrape intervals, so that one scrape of
// the final counts succeeds even when another is lost.
const DefaultMetricsLinger = 15 * time.Second

func printUsage(w io.Writer) {
	fs := newFlagSet(&options{})
	fs.SetOutput(w)
	fmt.Fprint(w, usageText)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+exitTable)
}

// linger keeps the metrics served for d once the work has ended by
// itself (-once, -idle-timeout), so that Prometheus scrapes the final
// counts; a signal (drain closed, or ctx done) ends it, or skips it.
func linger(ctx context.Context, drain <-chan struct{}, d time.Duration, log *slog.Logger) {
	select {
	case <-drain:
		return
	default:
	}
	if d <= 0 || ctx.Err() != nil {
		return
	}
	log.Info("serving the final metrics (a signal ends it)", "linger", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-drain:
	case <-ctx.Done():
	}
}

// run is esworker without the process around it; it returns the exit
// status. Closing drain starts a graceful drain; cancelling ctx stops at once.
func run(ctx context.Context, args []string, drain <-chan struct{}, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return exitOK
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("esworker"))
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "esworker: %v (esworker -h for help)\n", err)
		return exitConfig
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := logx.New(stderr, o.logJSON, level)
	con := &logx.Console{W: stderr, Log: log, JSON: o.logJSON}
	signalConsole.Store(con) // main.go
	if subreapErr != nil {
		log.Warn("a plugin's descendants that leave its process group (setsid) may outlive it", "err", subreapErr)
	}
	// A refusal is one line: "esworker: why" in text, a record under
	// -log-json.
	refuse := func(err error) {
		con.Say(slog.LevelError, fmt.Sprintf("esworker: %v", err), "esworker cannot start", "err", err)
	}
	key, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	if err != nil {
		refuse(err)
		return exitConfig
	}
	if err := worker.ProbePlugins(ctx, o.catalog, o.hello, log); err != nil {
		log.Error("esworker cannot start: a listed plugin does not work", "err", err)
		return exitFailure
	}

	if err := o.applyPlan(log); err != nil { // plan.go
		refuse(err)
		return exitConfig
	}
	// -relay: the relay first; this esworker's agent works behind it
	// (relay.go).
	relay, err := startRelay(ctx, o, key, log, stderr, o.logJSON)
	if err != nil {
		log.Error("esworker cannot start the relay", "err", err)
		return exitFailure
	}
	if relay != nil {
		defer relay.Stop()
		if o.relay.only {
			return relayOnly(ctx, drain, relay, log)
		}
		o.master, o.join = relay.Addr(), ""
	}
	plugins := worker.PluginOptions{Slots: o.slots, StartTimeout: o.hello, Logger: log}
	agent, err := worker.New(worker.Config{
		Master:      o.master,
		Join:        flagx.HostPorts(o.join, grid.DefaultGossipPort),
		GossipBind:  o.gossip,
		Key:         key,
		Name:        o.name,
		Slots:       o.slots,
		Slowdown:    o.slowdown,
		Delay:       o.delay,
		ChildPort:   o.child,
		Faults:      o.faults,
		Serve:       !o.once,
		IdleTimeout: o.idle,
		Limits:      worker.Limits{MemShare: o.memShare},
		Logger:      log,
		// Built-ins and the listed plugins, and nothing else (config.go).
		Problems:     worker.OfferedProblems(o.catalog),
		BuildContext: worker.PluginBuildContext(o.catalog, plugins),
		StartBound:   plugins.StartBound(), // a plugin's start does not count against the task timeout
	})
	if err != nil {
		refuse(err)
		return exitConfig
	}
	if o.metrics != "" {
		mctx, stop := context.WithCancel(context.Background())
		addr, done, err := serveMetrics(mctx, o.metrics, agent, o.catalog, log)
		if err != nil {
			stop()
			refuse(fmt.Errorf("-metrics %s: %w", o.metrics, err))
			return exitFailure
		}
		defer func() {
			linger(ctx, drain, o.linger, log)
			stop()
			<-done
		}()
		log.Info("serving metrics", "url", "http://"+addr+"/metrics")
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
	// With -once, a relay told that the run is over ends, and the agent
	// behind it, between two connections to it then, would look for it
	// for ever (the soak, seed 94000044: a relay restarted at its address
	// heard the end before its own agent's handshake went through): the
	// relay's end is the agent's too.
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	var relayOver atomic.Bool
	if relay != nil && o.once {
		go func() {
			select {
			case <-relay.Ended():
				if errors.Is(relay.Err(), grid.ErrRelayRunOver) {
					relayOver.Store(true)
					stopAgent()
				}
			case <-finished:
			}
		}()
	}
	log.Info("esworker starting", "worker", agent.Name(), "join", o.join, "master", o.master,
		"slots", o.slots, "slowdown", o.slowdown, "delay", o.delay)
	switch err := agent.Run(actx); {
	case err == nil:
		return exitOK
	case relayOver.Load() && ctx.Err() == nil:
		log.Info("the run is over (the relay heard it)")
		return exitOK
	case errors.Is(err, worker.ErrShutdown):
		if relay != nil {
			// The workers behind the relay are told after this one:
			// let the relay pass the word on and end.
			relay.Await(ctx, relayGrace)
		}
		log.Info("the run is over")
		return exitOK
	case errors.Is(err, worker.ErrIdle):
		return exitOK // not a failure: the unit must not restart it
	default:
		log.Error("esworker stopped", "err", err)
		return exitFailure
	}
}
