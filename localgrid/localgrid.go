package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/report"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// waitReport is how often esrun says that it is still waiting for
// workers.
const waitReport = 5 * time.Second

// agentStopGrace bounds how long the local agents get to exit after the
// master has told them the run is over, before they are stopped.
const agentStopGrace = 5 * time.Second

// clusterKey is the run's key, from -key, -key-file or ESGRID_KEY, and
// how a worker is told to get it. Without any of them a random key is
// made for the run (secret is then set): local agents get it directly,
// and remote workers from the file saveRunKey writes, which the command
// line esrun prints names. A key is never printed.
type clusterKey struct {
	key       *grid.Key
	secret    string // the generated key; "" when given
	workerArg string // what an esworker command line adds for the key
}

// saveRunKey writes the key made for this run to a new file readable by
// the user only (mode 0600), run-*.key in the user's configuration
// directory (~/.config/esgrid on Linux; the temporary directory if there
// is none), and returns its path. The run removes it when it ends.
func saveRunKey(secret string) (string, error) {
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

func loadClusterKey(o *options) (*clusterKey, error) {
	k, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	switch {
	case err == nil:
		arg := "-key-file " + o.keyFile
		if o.keyFile == "" {
			arg = "with the same key (-key, -key-file or " + grid.KeyEnv + ")"
		}
		return &clusterKey{key: k, workerArg: arg}, nil
	case errors.Is(err, grid.ErrNoKey) && o.key == "" && o.keyFile == "":
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
		secret := base64.StdEncoding.EncodeToString(b[:])
		if k, err = grid.NewKey(secret); err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
		// Until saveRunKey writes it somewhere, no other worker can have it.
		return &clusterKey{key: k, secret: secret, workerArg: "with this run's key (made for it and not saved: give esrun -key-file K to share one)"}, nil
	case errors.Is(err, grid.ErrWeakKey):
		// LoadKey's error names where the key came from.
		return nil, usagef("%v", err)
	case o.keyFile != "":
		return nil, usagef("-key-file: %v", err)
	default:
		return nil, usagef("-key: %v", err)
	}
}

// localGrid is a run's grid as seen from this process: the master, its
// gossip member and the worker agents started here. The agents find the
// master through gossip and connect to it over TCP exactly as esworker
// processes on other machines do.
type localGrid struct {
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
	// hint is the command line that starts a remote worker.
	hint string
	// keyFile is the file saveRunKey wrote for this run, if any.
	keyFile string
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

// startGrid starts the master on o.listen, its gossip on o.gossip and
// o.local agents with o.localSlots() slots each. The grid outlives ctx's
// cancellation on purpose: it is stopped by close, once the run has
// stopped using it.
//
// The master logs at log's level; the local agents only their warnings
// (the master's lines say when they join and leave). onGeneration, when
// set, receives each generation's final figures (the metrics), and
// onInstance, when set, each ended instance (the status page).
func startGrid(o *options, spec grid.ProblemSpec, key *grid.Key, log *slog.Logger, onGeneration func(sched.Generation), onInstance func(sched.Instance)) (*localGrid, error) {
	tl := report.NewInstances(report.MaxTimeline)
	instance := tl.Add
	if onInstance != nil {
		instance = func(in sched.Instance) { tl.Add(in); onInstance(in) }
	}
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: o.listen, Key: key, Policy: o.sched, Problem: spec, Logger: log,
		Ledger:      sched.LedgerConfig{OnGeneration: onGeneration, OnInstance: instance},
		Sched:       sched.Config{Adaptive: o.adaptive, Copies: o.copies},
		TaskTimeout: orNone(o.taskTimeout),
		MaxRetries:  orNone(o.maxRetries),
		MaxFrame:    o.maxFrame(spec.Dim),
		Verify:      o.verify,
		Plan:        o.planned,
		Split:       o.split.config(), // split.go
	})
	if err != nil {
		return nil, addrError("-listen", o.listen, err)
	}
	host, port, err := splitHostPort(o.gossip)
	if err != nil {
		m.Close()
		return nil, usagef("-gossip %q: %v", o.gossip, err)
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		BindAddr: host, BindPort: port, SecretKey: key.GossipKey(),
		Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: m.Addr()},
		OnEvent: m.HandleMemberEvent, Logger: log,
		LeaveTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		m.Close()
		return nil, addrError("-gossip", o.gossip, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &localGrid{master: m, gossip: ms, stopAgents: cancel, timeline: tl}
	g.agentExited, g.exit = context.WithCancelCause(context.Background())
	// The local agents offer, and may run, the plugins of -plugin too.
	build := worker.PluginBuild(o.catalog, worker.PluginOptions{Slots: o.localSlots(), Logger: log})
	agentLog := log
	if !o.verbose {
		agentLog = slog.New(minLevel{log.Handler(), slog.LevelWarn})
	}
	for i := range o.local {
		la := &localAgent{done: make(chan struct{})}
		a, err := worker.New(worker.Config{
			Join: []string{ms.Addr()},
			// Bound like the master's gossip, so that remote workers can
			// reach the local agents when the master is reachable.
			GossipBind: net.JoinHostPort(host, "0"),
			Key:        key,
			Name:       "local-" + strconv.Itoa(i+1),
			Slots:      o.planSlots("local-"+strconv.Itoa(i+1), o.localSlots()), // plan.go
			Logger:     agentLog,
			Problems:   worker.OfferedProblems(o.catalog),
			Build: func(spec grid.ProblemSpec) (problems.Problem, error) {
				la.welcomed.Store(true)
				return build(spec)
			},
		})
		if err != nil {
			g.close(false)
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

// orNone maps a flag's 0 ("none") to the negative value that a config
// struct reads as none (its 0 is "the default").
func orNone[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// splitHostPort splits a checked -gossip address.
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// addrError says in one line why the address given with flag cannot be
// used: the system's reason (address in use, not an address of this
// machine) rather than the whole chain of wrapping.
func addrError(flag, addr string, err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return fmt.Errorf("%s %s: cannot listen: %v", flag, addr, se)
	}
	// Gossip's errors arrive as text only.
	if i := strings.LastIndex(err.Error(), "bind: "); i >= 0 {
		return fmt.Errorf("%s %s: cannot listen: %s", flag, addr, err.Error()[i:])
	}
	return fmt.Errorf("%s %s: cannot listen: %w", flag, addr, err)
}

// joinCommand is the command line that starts a remote worker.
func (g *localGrid) joinCommand(k *clusterKey) string {
	return "esworker -join " + g.gossip.Addr() + " " + k.workerArg
}

// waitWorkers blocks until n workers (local or remote) are connected. It
// prints how many have joined every waitReport, and at once when announce
// is set (remote workers are expected, so the user has something to do).
func (g *localGrid) waitWorkers(ctx context.Context, n int, announce bool, con logx.Console) error {
	say := func() {
		joined := g.master.Workers()
		con.Say(slog.LevelInfo, fmt.Sprintf("esrun: waiting for workers: %d/%d joined; start %s", joined, n, g.hint),
			"waiting for workers", "workers", joined, "wanted", n, "command", g.hint)
	}
	if announce && g.master.Workers() < n {
		say()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, waitReport)
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

// close ends the run on the grid. final: the master tells every worker,
// local or remote, that the run is over and closes, and the local agents
// exit (or are stopped after agentStopGrace). Not final (the run was
// interrupted or failed): the master tells the workers it will be back,
// so that remote workers wait for a resumed run, and the local agents are
// stopped. Gossip leaves last. It returns the agents that failed otherwise
// than by being told the run was over.
func (g *localGrid) close(final bool) error {
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
	if g.keyFile != "" {
		os.Remove(g.keyFile)
	}
	return errors.Join(errs...)
}
