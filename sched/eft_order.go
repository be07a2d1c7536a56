package sched

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// The order of a step's sends. A master hands its messages over one at a
// time, m apart, so a burst of s sends (a batch's start) takes s·m before
// its last one leaves. eft decides where each task goes; the order in
// which the sends leave decides how much of that wait lands on the
// barrier. Each send starts a chain: down, the instances its slot then
// runs back to back, up. A step's latest end is smallest when the longest
// chains leave first (Jackson's rule: one server, jobs with tails, largest
// tail first), so eftOrder sorts each run of consecutive sends of
// originals by their chain, longest first. A worker's own sends keep their
// order (its chains shrink along its queue, and the sort is stable), so
// that the worker runs and holds what the books say it does; replicas
// (which come once Q is empty, after the originals) and other actions keep
// their places. When sends to the slowest machines leave last, as the plan's
// order of expected finish would have them, their one long task ends a
// burst's length later than it need; at 4,608 sends of 25 µs that is
// 115 ms on a 230 ms generation.

// eftSendKey is one send of a step, for the sort: small, so that the sort
// moves little (the sends themselves are moved once, after it).
type eftSendKey struct {
	chain float64 // r + e·(instances its slot runs from this one on)
	pos   int32   // its place among the step's sends, as sent
	k     int32   // its index in the run
	wi    int32   // its worker's place (−1: none)
}

// eftOrder reorders the sends of out (this step's actions) as described
// above, and moves the model's figures of each send to its new place
// (eftMoved).
func (p *policy) eftOrder(out []Action) {
	e := p.eft
	original := func(a Action) bool { return a.Kind == Send && !a.Replica }
	for i := 0; i < len(out); {
		if !original(out[i]) {
			i++
			continue
		}
		j := i
		for j < len(out) && original(out[j]) {
			j++
		}
		if j-i > 1 {
			p.eftOrderRun(out[i:j], e.stepSends-sendsIn(out[j:]))
		}
		i = j
	}
}

// sendsIn counts the sends in out.
func sendsIn(out []Action) int {
	n := 0
	for _, a := range out {
		if a.Kind == Send {
			n++
		}
	}
	return n
}

// eftOrderRun sorts run, a run of consecutive sends whose last has place
// end−1 in the step's burst.
func (p *policy) eftOrderRun(run []Action, end int) {
	e := p.eft
	first := end - len(run)
	keys := e.orderKeys[:0]
	// How many of each worker's instances come from this run: the k-th
	// of them is its instance number count − left.
	left := e.orderLeft
	if len(left) < len(p.workers) {
		left = make([]int32, len(p.workers))
		e.orderLeft = left
	}
	for k, a := range run {
		key := eftSendKey{pos: int32(first + k), k: int32(k), wi: p.sentTo(a)}
		if key.wi >= 0 {
			left[key.wi]++
		}
		keys = append(keys, key)
	}
	sorted, nan := true, false
	for k := range keys {
		key := &keys[k]
		if wi := key.wi; wi >= 0 {
			ex, r, c := p.model(wi)
			n := p.workers[wi].count()
			i := n - int(left[wi]) // its instance number on the worker
			left[wi]--
			// Its slot runs it and every c-th instance after it.
			key.chain = r + ex*float64((n-i+c-1)/max(c, 1))
		}
		nan = nan || key.chain != key.chain
		sorted = sorted && (k == 0 || cmp.Compare(key.chain, keys[k-1].chain) <= 0)
	}
	e.orderKeys = keys
	if sorted {
		return // in order already (places ascend): nothing moves
	}
	// Stable: ties keep their order (sortChains; with a NaN chain,
	// pdqsort with the place as the tie breaker).
	if nan {
		slices.SortFunc(keys, func(x, y eftSendKey) int {
			if c := cmp.Compare(y.chain, x.chain); c != 0 {
				return c
			}
			return cmp.Compare(x.pos, y.pos)
		})
	} else {
		e.sortChains(keys)
	}
	acts := append(e.orderActs[:0], run...)
	e.orderActs = acts
	for k, key := range keys {
		run[k] = acts[key.k]
		p.eftMoved(run[k], key.wi, int(key.pos), first+k)
	}
}

// sentTo is the place of the worker that send a of this step went to
// (−1: none): as eftSend noted it, else by the worker's id.
func (p *policy) sentTo(a Action) int32 {
	e := p.eft
	if t := int(a.Task); t >= 0 && t < len(e.sent) {
		if wi := e.sent[t].to - 1; wi >= 0 && int(wi) < len(p.workers) && p.workers[wi].id == a.Worker {
			return wi
		}
	}
	if wi, ok := p.idx[a.Worker]; ok {
		return wi
	}
	return -1
}

// eftMoved moves the model's figures of send a from place from to place
// to of the step's burst, (to − from)·m later or earlier: when it reaches
// its worker (eftSend noted that as now + r/2 + the wait behind the
// master's queued sends), the start of the instance if it went to an idle
// slot (noted at the same time; a held one has no start yet), and the
// place its round trip is judged by. wi is its worker's place (−1: none).
func (p *policy) eftMoved(a Action, wi int32, from, to int) {
	e := p.eft
	t := int(a.Task)
	if from == to || wi < 0 || e.msgCost == 0 || t >= len(e.sent) || e.sent[t].to != wi+1 {
		return
	}
	e.gen++ // a held instance's arrival moves, and maybe a start
	sn := &e.sent[t]
	old := sn.arrive
	shift := time.Duration(float64(to-from) * e.msgCost)
	sn.arrive += shift
	sn.place += int32(to - from)
	if !sn.idle || int(wi) >= len(e.ew) {
		return
	}
	// Its start is one of the worker's equal values; which one moves is
	// all the same to a sorted list of start times.
	x := &e.ew[wi]
	if k, found := slices.BinarySearch(x.run, old); found {
		x.run = slices.Delete(x.run, k, k+1)
		x.insertRun(old + shift)
	}
}

// sortChains sorts keys, which come in place order and whose chains are
// not NaN, longest chain first, ties in place order: the order of the
// comparison sort above (a total order, so any sort that keeps it gives
// the same result), by insertion for a short run and else by a stable
// radix sort of the chains' bits, without a comparison's call per pair
// (a batch's burst is thousands of sends).
func (e *eftState) sortChains(keys []eftSendKey) {
	if len(keys) <= 64 {
		for i := 1; i < len(keys); i++ {
			k := keys[i]
			j := i
			for ; j > 0 && keys[j-1].chain < k.chain; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = k
		}
		return
	}
	// A chain's bits as a uint64 that ascends as the chain descends
	// (−0 as 0, which compares equal to it).
	n := len(keys)
	e.orderRadix = grown(e.orderRadix, 2*n)
	a, b := e.orderRadix[:n], e.orderRadix[n:2*n]
	var count [8][256]int32
	for i, k := range keys {
		var u uint64 // +0's bits, for −0 too
		if k.chain != 0 {
			u = math.Float64bits(k.chain)
		}
		if u>>63 != 0 {
			u = ^u
		} else {
			u |= 1 << 63
		}
		u = ^u
		a[i] = eftRadix{u: u, i: int32(i)}
		for d := range 8 {
			count[d][byte(u>>(8*d))]++
		}
	}
	for d := range 8 {
		c := &count[d]
		if c[byte(a[0].u>>(8*d))] == int32(n) {
			continue // one digit for all: nothing moves
		}
		var at int32
		for v := range c {
			c[v], at = at, at+c[v]
		}
		for _, r := range a {
			v := byte(r.u >> (8 * d))
			b[c[v]] = r
			c[v]++
		}
		a, b = b, a
	}
	tmp := append(e.orderTmp[:0], keys...)
	e.orderTmp = tmp
	for i, r := range a {
		keys[i] = tmp[r.i]
	}
}

// eftRadix is a send's chain as sortChains orders it, and its index.
type eftRadix struct {
	u uint64
	i int32
}
