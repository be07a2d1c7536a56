package main

import (
	"log/slog"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/worker"
)

// applyPlan takes this worker's slots from the -plan file (esplan plan -o):
// its entry by name, else its group's. A plan that sets it aside (slots 0)
// leaves its slots alone: it joins, and the master, given the same plan,
// sends it nothing. Without -name the default name is fixed here, so that
// the name looked up is the name the worker gives.
func (o *options) applyPlan(log *slog.Logger) error {
	if o.plan == "" {
		return nil
	}
	p, err := grid.ReadPlan(o.plan)
	if err != nil {
		return err
	}
	if o.name == "" {
		o.name = worker.DefaultName()
	}
	slots, ok := p.SlotsFor(o.name)
	switch {
	case !ok:
		log.Warn("the plan does not name this worker nor its group; it keeps its slots", "plan", o.plan, "worker", o.name, "group", grid.GroupOf(o.name))
	case slots == 0:
		log.Info("the plan sets this worker aside: the master gives it no tasks", "plan", o.plan, "worker", o.name)
	default:
		log.Info("slots from the plan", "plan", o.plan, "worker", o.name, "slots", slots, "was", o.slots)
		o.slots = slots
	}
	return nil
}
