package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// Problem plugins in esrun: -plugin NAME=PATH lists one (repeatable).
// -problem NAME is a built-in if there is one of that name (a plugin may
// not take a built-in's name), else a listed plugin. A plugin problem is
// started once here, to read its hello: the ES needs its bounds, and its
// dimension when it accepts only one. With -inprocess it is the pool's
// problem; on a grid, the local agents get the same list, and remote
// workers must list the plugin under the same name themselves.

// catalogOf checks -plugin once and keeps the catalog in o.
func catalogOf(o *options) (*plugin.Catalog, error) {
	if o.catalog != nil || len(o.plugins) == 0 {
		return o.catalog, nil
	}
	cat, err := plugin.NewCatalog(o.plugins...)
	if err != nil {
		return nil, usagef("-plugin: %v", err)
	}
	o.catalog = cat
	return cat, nil
}

// openProblem builds -problem with -dim. For a plugin whose hello accepts
// a single dimension, that dimension is the default of -dim (o.dim is set
// to it).
func openProblem(o *options) (problems.Problem, error) {
	cat, err := catalogOf(o)
	if err != nil {
		return nil, err
	}
	if _, listed := cat.Lookup(o.problem); !listed {
		if !slices.Contains(problems.Names(), o.problem) {
			return nil, usagef("-problem %q is not known (built in: %s; a plugin needs -plugin %s=PATH)",
				o.problem, strings.Join(problems.Names(), ", "), o.problem)
		}
		p, err := problems.New(o.problem, o.dim)
		if err != nil {
			return nil, usagef("-dim %d: %v", o.dim, err)
		}
		return p, nil
	}
	p, err := openPlugin(o, o.problem, 0)
	if err != nil {
		return nil, err
	}
	h := p.Hello()
	if !o.set["dim"] && h.MinDim == h.MaxDim {
		o.dim = h.MinDim
	}
	if !h.Accepts(o.dim) {
		p.Close()
		return nil, usagef("-dim %d: plugin %s accepts dimension %s", o.dim, o.problem, h.Dims())
	}
	return p, nil
}

// newProblem builds the problem name of dimension dim, a built-in or a
// listed plugin (for -resume, whose checkpoint names both).
func newProblem(o *options, name string, dim int) (problems.Problem, error) {
	cat, err := catalogOf(o)
	if err != nil {
		return nil, err
	}
	if slices.Contains(problems.Names(), name) {
		return problems.New(name, dim)
	}
	if _, listed := cat.Lookup(name); !listed {
		return nil, fmt.Errorf("problem %q is neither built in nor a plugin given with -plugin %s=PATH", name, name)
	}
	return openPlugin(o, name, dim)
}

// openPlugin starts the listed plugin name; dim 0 accepts any.
func openPlugin(o *options, name string, dim int) (*plugin.Problem, error) {
	p, err := o.catalog.Start(context.Background(), name, dim, poolSlots(o)) // limits.go
	if err != nil {
		return nil, fmt.Errorf("-plugin %w", err)
	}
	return p, nil
}

// finiteOnly makes a NaN or ±Inf fitness an evaluation error, as the
// master does unless the problem says it may return one (-nonfinite, or
// a plugin's hello): an in-process run, the check of a plugin before a
// grid run, must fail where the grid run would, not rank NaN instead.
type finiteOnly struct{ problems.Problem }

// Eval is the problem's, with a non-finite value made an error.
func (p finiteOnly) Eval(ctx context.Context, x []float64) (float64, error) {
	f, err := p.Problem.Eval(ctx, x)
	if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, fmt.Errorf("problem %s: non-finite fitness %v, and the problem does not say it may return one (esrun -nonfinite, or a plugin's hello \"nonfinite\": true; an x it cannot evaluate is an error answer)", p.Name(), f)
	}
	return f, err
}

// closeProblem stops a plugin problem's processes; built-ins hold none.
func closeProblem(p problems.Problem) {
	if c, ok := p.(io.Closer); ok {
		c.Close()
	}
}

// pluginHint is what the esworker command line that esrun suggests
// needs when the run's problem is a plugin.
func pluginHint(o *options, problem string) string {
	if _, listed := o.catalog.Lookup(problem); !listed {
		return ""
	}
	return " -plugin " + problem + "=PATH"
}
