package sched

import "math"

// A worker's slots as an event: the seam through which a plan (which
// machines to use, with how many slots each; docs/papers.md §4) and a
// calibration that varies a worker's concurrency reach a policy. A worker
// announces its slots when it joins (WorkerJoined, which is ignored for a
// known worker); SlotsChanged changes them afterwards:
//
//	SlotsChanged{W, s ≥ 1}  W has s slots: its capacity is depth × s (or
//	                        the adaptive or eft depth for s slots); a
//	                        worker set aside takes work again
//	SlotsChanged{W, 0}      W is set aside: it takes no new work, its held
//	                        instances are withdrawn (Cancel, Held) and go
//	                        back to the head of Q in send order, and the
//	                        ones it runs stay live until their results come
//
// Nothing running is ever cancelled: a worker whose slots shrink keeps
// every instance it has (of them, the first s in send order count as
// running) and gets nothing new until it is below its new capacity, as a
// worker whose adaptive depth shrinks. A worker set aside keeps the slots
// it had for that belief, so the instances it runs stay the running ones.
// SlotsChanged for an unknown or departed worker is ignored; Slots above
// MaxSlots counts as MaxSlots and below 0 as 0. A late or draining worker
// stays so: new slots do not make it answer.

// changeSlots handles SlotsChanged.
func (p *policy) changeSlots(id WorkerID, slots int, out []Action) []Action {
	wi, ok := p.idx[id]
	if !ok || !p.workers[wi].alive {
		return out
	}
	w := &p.workers[wi]
	slots = min(max(slots, 0), MaxSlots)
	if slots == 0 {
		if w.aside {
			return out
		}
		w.aside, w.inFree = true, false
		// Withdraw what it holds, last sent first, so the held tasks come
		// back to the head of Q in send order (as Overdue does).
		for k := w.count() - 1; k >= w.slots; k-- {
			hi := w.inst[w.lo+k]
			out = append(out, Action{Kind: Cancel, Worker: id, Task: hi, Held: true})
			w.remove(k)
			p.tasks[hi].on = removeWorker(p.tasks[hi].on, wi)
			p.requeue(hi)
		}
		return out
	}
	if !w.aside && slots == w.slots {
		return out
	}
	w.aside = false
	w.slots = slots
	p.setCap(wi)
	p.markFree(wi)
	return out
}

// setCap sets worker wi's capacity for its slots, as its policy sizes it.
func (p *policy) setCap(wi int32) {
	w := &p.workers[wi]
	switch {
	case p.static:
		w.cap = math.MaxInt
	case p.eft != nil:
		w.cap = p.depth * w.slots
		p.eftSetCap(wi)
	case p.adaptive && w.exec > 0:
		d := int(min(max(1+math.Ceil(w.rtt/w.exec), float64(p.depth)), float64(p.maxDepth)))
		w.cap = d * w.slots
	default:
		w.cap = p.depth * w.slots
	}
}
