package main

// planSlots is the slots of the local agent called name: the plan's, when
// -plan names it (or its group) with slots ≥ 1, else def. An agent the
// plan sets aside keeps def: the master, given the plan, sends it nothing.
func (o *options) planSlots(name string, def int) int {
	if s, ok := o.planned.SlotsFor(name); ok && s > 0 {
		return s
	}
	return def
}
