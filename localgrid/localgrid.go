// Package localgrid runs a grid from one process, as esrun does: the
// master, its gossip member and any number of worker agents beside it,
// which find the master through gossip and connect to it over TCP exactly
// as esworker processes on other machines do. Remote workers join the
// same gossip. The grid keeps the run's task instances for its report.
package localgrid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// Master is the grid's master: the run's evaluator.
func (g *Grid) Master() *grid.Master { return g.master }

// Gossip is the master's gossip member, which remote workers join.
func (g *Grid) Gossip() *grid.Membership { return g.gossip }

// Catalog is the plugins the local agents offer and may run, whose
// counters count their processes (nil: none).
func (g *Grid) Catalog() *plugin.Catalog { return g.catalog }

// Timeline is the run's task instances, for its report.
func (g *Grid) Timeline() *report.Instances { return g.timeline }

// Agents are the worker agents of this process.
func (g *Grid) Agents() []*worker.Agent {
	out := make([]*worker.Agent, len(g.agents))
	for i, a := range g.agents {
		out[i] = a.agent
	}
	return out
}

// agentStopGrace bounds how long the local agents get to exit after the
// master has told them the run is over, before they are stopped.
const agentStopGrace = 5 * time.Second

// Grid is a run's grid as seen from this process: the master, its
// gossip member and the worker agents started here. The agents find the
// master through gossip and connect to it over TCP exactly as esworker
// processes on other machines do.
type Grid struct {
	master *grid.Master
	gossip *grid.Membership
	agents []*localAgent
	// stopAgents cancels the agents' context: they stop at once.
	stopAgents context.CancelFunc
	// agentExited is cancelled, with the reason as its cause, when a
	// local agent's Run returns.
	agentExited context.Context
	exit        context.CancelCauseFunc
	closed      bool
	// timeline collects the run's task instances for the report.
	timeline *report.Instances
	catalog  *plugin.Catalog // the plugins the local agents may run
}

// localAgent is one in-process agent's Run in progress.
type localAgent struct {
	name  string
	agent *worker.Agent
	// welcomed is set once the master has accepted the agent: from then
	// on the master's Shutdown ends its Run.
	welcomed atomic.Bool
	done     chan struct{} // closed when Run has returned
	err      error         // Run's result, once done
}

// Config is a grid whose master runs in this process, with Local worker
// agents beside it.
type Config struct {
	// Master is the master's configuration (Listen, Key, Policy,
	// Problem...). Its Ledger.OnInstance, if set, is called after the
	// grid's Timeline has taken each ended instance.
	Master grid.MasterConfig
	// Gossip is the HOST:PORT of the master's gossip member, which remote
	// workers join; the local agents bind their gossip on its host.
	Gossip string
	// Local is how many worker agents run in this process, named
	// local-1, local-2...
	Local int
	// Slots is the slots of the local agent name; nil: 1 each.
	Slots func(name string) int
	// PluginSlots is the slots the plugins of Catalog are built for.
	PluginSlots int
	// Catalog lists the plugins the local agents offer, and may run.
	Catalog *plugin.Catalog
	// AgentLogger is the local agents' logger; nil: the master's, at
	// warning level only (the master's lines say when they join and
	// leave).
	AgentLogger *slog.Logger
}

// AddrError is an address the grid cannot listen on: What is "listen"
// (the master's) or "gossip".
type AddrError struct {
	What, Addr string
	Err        error
}

// Error says which address, and why.
func (e *AddrError) Error() string { return e.What + " " + e.Addr + ": " + e.Err.Error() }

// Unwrap is the system's reason.
func (e *AddrError) Unwrap() error { return e.Err }

// Start starts the master on cfg.Master.Listen, its gossip on cfg.Gossip
// and cfg.Local agents. The grid outlives no context: Close stops it, once
// the run has stopped using it.
func Start(cfg Config) (*Grid, error) {
	log := cfg.Master.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		cfg.Master.Logger = log
	}
	key := cfg.Master.Key
	tl := report.NewInstances(report.MaxTimeline)
	instance := tl.Add
	if onInstance := cfg.Master.Ledger.OnInstance; onInstance != nil {
		instance = func(in sched.Instance) { tl.Add(in); onInstance(in) }
	}
	cfg.Master.Ledger.OnInstance = instance
	m, err := grid.NewMaster(context.Background(), cfg.Master)
	if err != nil {
		return nil, &AddrError{"listen", cfg.Master.Listen, err}
	}
	host, p, err := net.SplitHostPort(cfg.Gossip)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("gossip %q: %w", cfg.Gossip, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("gossip %q: %w", cfg.Gossip, err)
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		BindAddr: host, BindPort: port, SecretKey: key.GossipKey(),
		Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()},
		OnEvent: m.HandleMemberEvent, Logger: log,
		LeaveTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		m.Close()
		return nil, &AddrError{"gossip", cfg.Gossip, err}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Grid{master: m, gossip: ms, stopAgents: cancel, timeline: tl, catalog: cfg.Catalog}
	g.agentExited, g.exit = context.WithCancelCause(context.Background())
	// The local agents offer, and may run, the listed plugins too.
	plugins := worker.PluginOptions{Slots: cfg.PluginSlots, Logger: log}
	build := worker.PluginBuild(cfg.Catalog, plugins)
	agentLog := cfg.AgentLogger
	if agentLog == nil {
		agentLog = slog.New(minLevel{log.Handler(), slog.LevelWarn})
	}
	for i := range cfg.Local {
		name := "local-" + strconv.Itoa(i+1)
		slots := 1
		if cfg.Slots != nil {
			slots = cfg.Slots(name)
		}
		la := &localAgent{done: make(chan struct{})}
		a, err := worker.New(worker.Config{
			Join: []string{ms.Addr()},
			// Bound like the master's gossip, so that remote workers can
			// reach the local agents when the master is reachable.
			GossipBind: net.JoinHostPort(host, "0"),
			Key:        key,
			Name:       name,
			Slots:      slots,
			Logger:     agentLog,
			Problems:   worker.OfferedProblems(cfg.Catalog),
			StartBound: plugins.StartBound(), // a plugin's start does not count against the task timeout
			Build: func(spec grid.ProblemSpec) (problems.Problem, error) {
				la.welcomed.Store(true)
				return build(spec)
			},
		})
		if err != nil {
			g.Close(false)
			return nil, fmt.Errorf("local worker %d: %w", i+1, err)
		}
		la.name, la.agent = a.Name(), a
		go func() {
			defer close(la.done)
			la.err = a.Run(ctx)
			g.exit(fmt.Errorf("local worker %s stopped: %w", la.name, la.err))
		}()
		g.agents = append(g.agents, la)
	}
	return g, nil
}

// minLevel is a slog.Handler that passes on only records of at least
// level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}
func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level}
}

// WaitReport is how often WaitWorkers says that it is still waiting.
const WaitReport = 5 * time.Second

// WaitWorkers blocks until n workers (local or remote) are connected, ctx
// is done or a local agent has stopped. It calls waiting with how many
// have joined every WaitReport, and at once when announce is set (remote
// workers are expected, so the user has something to do).
func (g *Grid) WaitWorkers(ctx context.Context, n int, announce bool, waiting func(joined int)) error {
	say := func() { waiting(g.master.Workers()) }
	if announce && g.master.Workers() < n {
		say()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, WaitReport)
		stop := context.AfterFunc(g.agentExited, cancel)
		err := g.master.WaitWorkers(wctx, n)
		stop()
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while waiting for workers (%d/%d joined): %w", g.master.Workers(), n, ctx.Err())
		case g.agentExited.Err() != nil:
			return context.Cause(g.agentExited)
		case errors.Is(err, context.DeadlineExceeded):
			say()
		default:
			return err
		}
	}
}

// Close ends the run on the grid. final: the master tells every worker,
// local or remote, that the run is over and closes, and the local agents
// exit (or are stopped after agentStopGrace). Not final (the run was
// interrupted or failed): the master tells the workers it will be back,
// so that remote workers wait for a resumed run, and the local agents are
// stopped. Gossip leaves last. It returns the agents that failed otherwise
// than by being told the run was over.
func (g *Grid) Close(final bool) error {
	if g.closed {
		return nil
	}
	g.closed = true
	if final {
		g.master.Close()
	} else {
		g.master.Interrupt()
	}
	// The agents the master has welcomed got its Shutdown and leave by
	// themselves; the others are still looking for the master, and are
	// stopped.
	grace := time.After(agentStopGrace)
	for _, a := range g.agents {
		if !a.welcomed.Load() || !final {
			continue
		}
		select {
		case <-a.done:
		case <-grace:
		}
	}
	g.stopAgents()
	var errs []error
	for _, a := range g.agents {
		<-a.done
		if a.err != nil && !errors.Is(a.err, worker.ErrShutdown) && !errors.Is(a.err, context.Canceled) {
			errs = append(errs, fmt.Errorf("local worker %s: %w", a.name, a.err))
		}
	}
	g.exit(nil)
	g.gossip.Close()
	return errors.Join(errs...)
}

// SaveRunKey writes the key made for this run to a new file readable by
// the user only (mode 0600), run-*.key in the user's configuration
// directory (~/.config/esgrid on Linux; the temporary directory if there
// is none), and returns its path. The caller removes it when the run ends.
func SaveRunKey(secret string) (string, error) {
	dir, err := os.UserConfigDir()
	if err == nil {
		dir = filepath.Join(dir, "esgrid")
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "run-*.key") // mode 0600
	if err != nil {
		return "", fmt.Errorf("cluster key for the run: %w", err)
	}
	err = f.Chmod(0o600) // the umask may only have taken bits away: be sure
	if err == nil {
		_, err = f.WriteString(secret + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("cluster key for the run: %w", err)
	}
	return f.Name(), nil
}

// Schedule is the run's schedule for its report, once Close has ended
// the run: the master's report and counters, the timeline from the first
// generation, the workers' names and the masters' splits under rule (as
// the run names it: off, paper or gain). startGen is the run's first
// generation (a resumed run's).
func (g *Grid) Schedule(startGen int, rule string) *report.Schedule {
	sr := g.master.Report()
	s := report.NewSchedule(g.master.Policy(), sr, g.master.Stats(), startGen)
	var t0 time.Duration
	if len(sr.Generations) > 0 {
		t0 = sr.Generations[0].Start
		s.Timeline = g.timeline.Record(t0, startGen)
	}
	s.NameWorkers(g.master.WorkerInfo)
	// The overload test and the splits.
	s.Masters = report.NewMasters(rule, g.master.Stats(), t0)
	return s
}
