package main

import "strconv"

// planSlots is the slots of the local agent called name: the plan's, when
// -plan names it (or its group) with slots ≥ 1, else def. An agent the
// plan sets aside keeps def: the master, given the plan, sends it nothing.
func (o *options) planSlots(name string, def int) int {
	if s, ok := o.planned.SlotsFor(name); ok && s > 0 {
		return s
	}
	return def
}

// checkPlanLeavesWorkers refuses a plan that sets aside every local agent
// of a run that waits for no other worker: the master would give no
// worker a task, and generation 0 would wait for ever ("generation in
// progress … done=0").
func (o *options) checkPlanLeavesWorkers() error {
	if o.inprocess || o.local == 0 || o.remoteExpected() {
		return nil
	}
	for i := range o.local {
		if s, ok := o.planned.SlotsFor("local-" + strconv.Itoa(i+1)); !ok || s > 0 {
			return nil
		}
	}
	return usagef("-plan %s sets aside every local worker (local-1 to local-%d), and the run waits for no other: give -min-workers for the workers that are to evaluate, or a plan that gives the local ones slots", o.plan, o.local)
}
