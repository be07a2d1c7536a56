package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// OfferedProblems is what an agent that may run the plugins in cat
// offers a master (Config.Problems): every built-in problem, then every
// listed plugin.
func OfferedProblems(cat *plugin.Catalog) []string {
	return append(problems.Names(), cat.Names()...)
}

// PluginOptions tunes the plugins that PluginBuild runs. Zero fields take
// the defaults named in their comments.
type PluginOptions struct {
	// Slots is the most processes one plugin runs at once (the agent's
	// slots). Default runtime.NumCPU().
	Slots int
	// StartTimeout bounds the wait for every process's hello: the same
	// for the first start of a session and for every restart, as for a
	// start-up check (plugin.Probe) given it. Default
	// plugin.DefaultStartTimeout.
	StartTimeout time.Duration
	// RetryMin and RetryMax bound the back-off after failed starts
	// (plugin.Config's). Defaults 1 s and 1 min.
	RetryMin, RetryMax time.Duration
	// CancelGrace bounds how long a cancelled evaluation may go on
	// before its process is killed (plugin.Config's). Default 1 s.
	CancelGrace time.Duration
	// Logger receives the plugins' logs. Default slog.Default().
	Logger *slog.Logger
}

// StartBound is how long a plugin's start in PluginBuild may take, for
// Config.StartBound: its first process's, then the others' at once, each
// within StartTimeout, and a second for the rest of the build.
func (o PluginOptions) StartBound() time.Duration {
	st := o.StartTimeout
	if st <= 0 {
		st = plugin.DefaultStartTimeout
	}
	return 2*st + time.Second
}

// PluginBuild returns a Config.Build that builds a built-in problem (as
// BuildProblem does) or a plugin listed in cat, and nothing else: the
// master's spec names a problem, and only this machine's own list turns a
// name into a program. A plugin runs up to o.Slots processes and is
// closed, with its processes, when the session ends (the problem is an
// io.Closer). Each plugin's failed starts back off across sessions (one
// plugin.Starts per plugin): a plugin that fails at every start is not
// started again at each session, and the session is refused at once
// while the back-off lasts.
func PluginBuild(cat *plugin.Catalog, o PluginOptions) func(grid.ProblemSpec) (problems.Problem, error) {
	build := PluginBuildContext(cat, o)
	return func(spec grid.ProblemSpec) (problems.Problem, error) { return build(context.Background(), spec) }
}

// PluginBuildContext is PluginBuild for Config.BuildContext: a plugin's
// start ends with ctx (its processes killed), so that a drain or an exit
// does not wait for a plugin that starts slowly, or says nothing, up to
// its start timeout.
func PluginBuildContext(cat *plugin.Catalog, o PluginOptions) func(context.Context, grid.ProblemSpec) (problems.Problem, error) {
	if o.Slots <= 0 {
		o.Slots = runtime.NumCPU()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	starts := make(map[string]*plugin.Starts)
	for _, e := range cat.Entries() {
		starts[e.Name] = new(plugin.Starts)
	}
	return func(ctx context.Context, spec grid.ProblemSpec) (problems.Problem, error) {
		if slices.Contains(problems.Names(), spec.Name) {
			return BuildProblem(spec)
		}
		e, ok := cat.Lookup(spec.Name)
		if !ok {
			return nil, fmt.Errorf("problem %q: %w on this worker (its plugins: %v)", spec.Name, plugin.ErrNotListed, cat.Names())
		}
		if spec.Dim < 1 {
			return nil, fmt.Errorf("plugin %s: dimension %d", e.Name, spec.Dim)
		}
		p, err := plugin.Open(ctx, plugin.Config{
			Name: e.Name, Path: e.Path, Dim: spec.Dim, Procs: o.Slots, StartAll: true, Logger: o.Logger,
			StartTimeout: o.StartTimeout, RetryMin: o.RetryMin, RetryMax: o.RetryMax, CancelGrace: o.CancelGrace, Starts: starts[e.Name],
			Counters: cat.Counters(e.Name),
		})
		if err != nil {
			return nil, err
		}
		if spec.LoadN <= 0 {
			return p, nil
		}
		return closing{Problem: problems.WithLoad(p, spec.LoadN), closer: p}, nil
	}
}

// closing is a wrapped problem that still closes what it wraps.
type closing struct {
	problems.Problem
	closer io.Closer
}

func (c closing) Close() error { return c.closer.Close() }

// closeProblem closes p if it holds anything (a plugin's processes).
func closeProblem(p problems.Problem) {
	if c, ok := p.(io.Closer); ok {
		c.Close()
	}
}
