package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"

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

// PluginBuild returns a Config.Build that builds a built-in problem (as
// BuildProblem does) or a plugin listed in cat, and nothing else: the
// master's spec names a problem, and only this machine's own list turns a
// name into a program. A plugin runs up to slots processes (the agent's
// slots; 0 = runtime.NumCPU()), logs to log, and is closed, with its
// processes, when the session ends (the problem is an io.Closer).
func PluginBuild(cat *plugin.Catalog, slots int, log *slog.Logger) func(grid.ProblemSpec) (problems.Problem, error) {
	if slots <= 0 {
		slots = runtime.NumCPU()
	}
	if log == nil {
		log = slog.Default()
	}
	return func(spec grid.ProblemSpec) (problems.Problem, error) {
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
		p, err := plugin.Open(context.Background(), plugin.Config{
			Name: e.Name, Path: e.Path, Dim: spec.Dim, Procs: slots, Logger: log,
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
