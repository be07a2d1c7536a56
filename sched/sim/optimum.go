package sim

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Optimum is the clairvoyant floor of a run: what a scheduler that knew
// every task's time in advance (noise included) could at best achieve on
// the same machines, links and costs.
//
// The model. Each batch starts when the previous one ends plus the
// engine's cost (Workload.EngineCost). A slot of machine k can start its
// first task of a batch one way down after the batch starts (the master's
// cost to send, the links and relays, the worker's cost to receive), runs
// its tasks back to back, and each result reaches the master one way up
// later (the worker's cost to send, the links and relays, the master's cost
// to receive). The master handles one message at a time, so a batch of n
// tasks also lasts at least 2·n·MasterCost (n tasks out, n results in),
// and at least n·MasterCost plus the shortest down–run–up path of one task
// (the last task sent). Slowdowns and leaves apply at the times they
// happen; for the floor a machine is, at each moment, as fast as it will
// ever be again (a slowdown that is later undone counts from when it is
// undone), which keeps the floor a floor whenever the batch really starts.
//
// Per batch, LB is the largest of the master's two bounds and a lower bound
// of the best makespan of the slots: the smallest T at which, for every k,
// the k longest tasks fit, both in number (a slot that can run tasks for W
// in the batch holds at most ⌊W / (k-th longest)⌋ of them) and in work (no
// more than W, nor more than the longest ones it could hold). For tasks all
// alike (no noise, one grain) this is exactly the optimum: greedy earliest
// finish, which is optimal for identical tasks on uniform machines. UB is
// the makespan of a clairvoyant schedule in the same model: longest task
// first, each to the slot where it finishes (and its result arrives)
// earliest. A batch is exact when its UB meets its LB (within a
// microsecond); the optimum of the model then is LB.
//
// The model charges the master's cost once per message path and in total,
// not its queueing (a real master sends a batch's first tasks one after the
// other), so LB is a lower bound of what any schedule can do in the
// simulator, clairvoyant or not, and efficiency against it (LB / total)
// never flatters a policy.
type Optimum struct {
	// LB is the floor of the run's total: Σ over batches of their LB,
	// plus the engine's cost between batches.
	LB time.Duration
	// UB is the total of the clairvoyant schedule (on the same timeline).
	UB time.Duration
	// Exact says every batch's clairvoyant schedule met its floor: LB is
	// the optimum of the model, not only a bound.
	Exact bool
	// Nominal is the exact optimum of the same run with every task at its
	// mean time (no noise): greedy earliest finish. It is what a scheduler
	// that knows the machines but not the tasks' times can aim at; with
	// noise the clairvoyant floor is usually a few percent below it, since
	// knowing the times lets a schedule fill the ends of the slots.
	Nominal time.Duration
	// Batches are the figures of each batch.
	Batches []OptimumBatch
}

// OptimumBatch is the floor of one batch.
type OptimumBatch struct {
	// Start is when the batch starts on the floor's timeline.
	Start time.Duration
	// LB and UB are the floor of the batch's makespan and the clairvoyant
	// schedule's; Slots is the slots' part of LB alone, Master the
	// master's bound (the larger of 2·n·MasterCost and n·MasterCost plus
	// one task's shortest path).
	LB, UB, Slots, Master time.Duration
	// Exact: UB − LB is at most a microsecond.
	Exact bool
}

// optMachine is what the optimum needs of one machine.
type optMachine struct {
	slots    int
	down, up time.Duration
	leave    time.Duration // 0: never
	// Pace changes, sorted by time: from at[i] on, tasks take f[i] times
	// their time (before at[0]: 1). fmin is the suffix minimum of the pace
	// from each breakpoint on (with fmin0 before the first): the pace the
	// floor assumes.
	at       []time.Duration
	f, fmin  []float64
	fmin0    float64
	minPace  float64 // smallest pace it ever has
	machine  int
	classKey int // machines with the same key have the same figures for the floor
}

// ComputeOptimum computes the clairvoyant floor of cfg (see Optimum). It
// assumes cfg is valid (Run checks it).
func ComputeOptimum(cfg Config) Optimum {
	set := cfg.Set
	idx := set.indexByName()
	ms := make([]optMachine, len(set.Machines))
	slows := slices.Clone(cfg.Slowdowns)
	for _, m := range set.Machines {
		slows = append(slows, m.Slowdowns...)
	}
	perMachine := make([][]Slowdown, len(set.Machines))
	for _, s := range slows {
		if k, ok := idx[s.Machine]; ok {
			perMachine[k] = append(perMachine[k], s)
		}
	}
	leaves := make([]time.Duration, len(set.Machines))
	for _, l := range leavesOf(&cfg) {
		if k, ok := idx[l.Machine]; ok && (leaves[k] == 0 || l.At < leaves[k]) {
			leaves[k] = max(l.At, 1) // a leave at 0: gone from the start
		}
	}
	for k := range set.Machines {
		o := &ms[k]
		o.slots, o.machine, o.leave = set.Machines[k].CPUs, k, leaves[k]
		o.down, o.up = set.legs(k, set.route(k, cfg.AddedDelay, idx))
		sd := perMachine[k]
		slices.SortStableFunc(sd, func(a, b Slowdown) int { return cmp.Compare(a.At, b.At) })
		for _, s := range sd {
			if n := len(o.at); n > 0 && o.at[n-1] == s.At {
				o.f[n-1] = s.Factor // the later one wins, as in the engine
				continue
			}
			o.at = append(o.at, s.At)
			o.f = append(o.f, s.Factor)
		}
		o.fmin = make([]float64, len(o.f))
		lo := math.Inf(1)
		for i := len(o.f) - 1; i >= 0; i-- {
			lo = min(lo, o.f[i])
			o.fmin[i] = lo
		}
		o.fmin0 = min(1, lo)
		o.minPace = o.fmin0
	}
	classOf(ms)

	var opt Optimum
	opt.Exact = true
	if cfg.Noise > 0 {
		nominal := cfg
		nominal.Noise = 0
		opt.Nominal = ComputeOptimum(nominal).LB
	}
	var t time.Duration
	var b optBatch
	for bi := range cfg.Workload.Batches {
		if bi > 0 {
			t += cfg.Workload.EngineCost
			opt.LB += cfg.Workload.EngineCost
			opt.UB += cfg.Workload.EngineCost
		}
		b.load(&cfg, int32(bi))
		ob := b.floor(&cfg, ms, t)
		opt.Batches = append(opt.Batches, ob)
		opt.LB += ob.LB
		opt.UB += ob.UB
		opt.Exact = opt.Exact && ob.Exact
		t += ob.LB
	}
	if cfg.Noise == 0 {
		opt.Nominal = opt.LB
	}
	return opt
}

// classOf gives machines that the floor cannot tell apart one class key.
func classOf(ms []optMachine) {
	type key struct {
		down, up, leave time.Duration
		machine         int // for machines with pace changes: their own
	}
	seen := map[key]int{}
	for i := range ms {
		o := &ms[i]
		k := key{down: o.down, up: o.up, leave: o.leave, machine: -1}
		if len(o.at) > 0 {
			k.machine = o.machine
		}
		if c, ok := seen[k]; ok {
			o.classKey = c
		} else {
			o.classKey = len(seen)
			seen[k] = o.classKey
		}
	}
}

// optBatch holds one batch's tasks for the floor.
type optBatch struct {
	n      int
	grains []time.Duration
	factor []float64
	single bool // one grain for every task
}

func (b *optBatch) load(cfg *Config, bi int32) {
	bt := &cfg.Workload.Batches[bi]
	b.n = bt.N
	b.grains = b.grains[:0]
	b.factor = b.factor[:0]
	b.single = bt.Grains == nil
	for i := 0; i < bt.N; i++ {
		b.grains = append(b.grains, bt.grain(i))
		b.factor = append(b.factor, NoiseFactor(cfg.Seed, bi, int32(i), cfg.Noise))
	}
}

// paceAt is machine o's pace at time x, and when it next changes (or +inf
// as a duration).
func (o *optMachine) paceAt(x time.Duration, floor bool) (float64, time.Duration) {
	i, found := slices.BinarySearch(o.at, x)
	if found {
		i++
	}
	// Entries before i are at or before x.
	next := time.Duration(math.MaxInt64)
	if i < len(o.at) {
		next = o.at[i]
	}
	if i == 0 {
		if floor {
			return o.fmin0, next
		}
		return 1, next
	}
	if floor {
		return o.fmin[i-1], next
	}
	return o.f[i-1], next
}

// capacity is how much time-at-pace-1 a slot of o can run between a and b
// (floor: at its floor pace).
func (o *optMachine) capacity(a, b time.Duration) float64 {
	if o.leave > 0 {
		b = min(b, o.leave)
	}
	if b <= a {
		return 0
	}
	if len(o.at) == 0 {
		return float64(b-a) / o.fmin0
	}
	w := 0.0
	for x := a; x < b; {
		f, next := o.paceAt(x, true)
		end := min(next, b)
		w += float64(end-x) / f
		x = end
	}
	return w
}

// finish is when a task of time d (at pace 1) started at s on o ends at
// its real pace, and false if o leaves before.
func (o *optMachine) finish(s time.Duration, d float64) (time.Duration, bool) {
	var end time.Duration
	if len(o.at) == 0 {
		end = s + time.Duration(math.Round(d))
	} else {
		x, rem := s, d
		for {
			f, next := o.paceAt(x, false)
			need := rem * f
			if next == time.Duration(math.MaxInt64) || float64(next-x) >= need {
				end = x + time.Duration(math.Round(need))
				break
			}
			rem -= float64(next-x) / f
			x = next
		}
	}
	if o.leave > 0 && end > o.leave {
		return 0, false
	}
	return end, true
}

// floor computes one batch's figures, the batch starting at t.
func (b *optBatch) floor(cfg *Config, ms []optMachine, t time.Duration) OptimumBatch {
	set := cfg.Set
	n := b.n
	// Each machine's time for each task at pace 1: ratio × size, with
	// size = grain × noise and ratio the machine's time per grain. For
	// the bound a machine's ratio is its smallest over the batch's grains
	// (uniform machines; exact with one grain).
	sizes := make([]float64, n)
	for i := range sizes {
		sizes[i] = float64(b.grains[i]) * b.factor[i]
	}
	ratios := make([]float64, len(ms))
	for k := range ms {
		ratios[k] = b.ratio(set, k)
	}
	ub, ubOK := b.clairvoyant(set, ms, sizes, t)
	lb := b.bound(ms, ratios, sizes, t, ub, ubOK)
	if ubOK && ub > lb {
		ub = b.pack(set, ms, sizes, t, lb, ub)
	}
	if ubOK && ub > lb {
		ub = min(ub, b.improve(set, ms, sizes, t, lb))
	}

	// The master: 2n messages one at a time, and the last task sent still
	// has to go down, run and come back.
	m := set.MasterCost
	master := 2 * time.Duration(n) * m
	if n > 0 && m > 0 {
		smin := slices.Min(sizes)
		best := time.Duration(math.MaxInt64)
		for k := range ms {
			o := &ms[k]
			if o.leave > 0 && o.leave <= t {
				continue
			}
			d := o.down - m + time.Duration(ratios[k]*smin*o.minPace) + o.up
			best = min(best, d)
		}
		if best < time.Duration(math.MaxInt64) {
			master = max(master, time.Duration(n)*m+best)
		}
	}
	ob := OptimumBatch{Start: t, Slots: lb, Master: master, LB: max(lb, master), UB: max(ub, master)}
	ob.Exact = ubOK && ub-lb <= time.Microsecond
	if !ubOK {
		ob.UB = ob.LB
	}
	return ob
}

// ratio is machine k's time per unit of grain for this batch: its
// smallest over the batch's grains.
func (b *optBatch) ratio(set *Set, k int) float64 {
	m := &set.Machines[k]
	if len(m.Times) == 0 || b.single {
		g := b.grains[0]
		return float64(set.TaskTime(k, g)) / float64(g)
	}
	r := math.Inf(1)
	last := time.Duration(-1)
	for _, g := range b.grains {
		if g != last {
			r = min(r, float64(set.TaskTime(k, g))/float64(g))
			last = g
		}
	}
	return r
}

// clairvoyant schedules the batch longest task first, each on the slot
// where its result would reach the master first, and returns the makespan
// (false when no machine can run some task).
func (b *optBatch) clairvoyant(set *Set, ms []optMachine, sizes []float64, t time.Duration) (time.Duration, bool) {
	n := len(sizes)
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	sortLongestFirst(order, sizes)
	// Each machine's slots as a min-heap of ready times; its slots are
	// alike, so only the earliest ready one is a candidate.
	ready := make([][]time.Duration, len(ms))
	live := make([]int, 0, len(ms))
	for k := range ms {
		o := &ms[k]
		if o.leave > 0 && o.leave <= t+o.down {
			continue
		}
		r := make([]time.Duration, o.slots)
		for i := range r {
			r[i] = t + o.down
		}
		ready[k] = r
		live = append(live, k)
	}
	if len(live) == 0 {
		return 0, n == 0
	}
	taskTime := func(k int, i int32) float64 {
		return float64(set.TaskTime(k, b.grains[i])) * b.factor[i]
	}
	var end time.Duration
	if n*len(live) <= 4_000_000 {
		for _, i := range order {
			best, bestK, bestF := time.Duration(math.MaxInt64), -1, time.Duration(0)
			for _, k := range live {
				o := &ms[k]
				f, ok := o.finish(ready[k][0], taskTime(k, i))
				if !ok {
					continue
				}
				if f+o.up < best {
					best, bestK, bestF = f+o.up, k, f
				}
			}
			if bestK < 0 {
				return 0, false
			}
			ready[bestK][0] = bestF
			siftDown(ready[bestK])
			end = max(end, best)
		}
		return end - t, true
	}
	// Many machines: a heap of machines keyed by when a task of the
	// batch's median size would come back from each; exact for tasks all
	// alike, a feasible schedule (so a valid UB) otherwise.
	mid := order[n/2]
	h := machineHeap{key: make([]time.Duration, len(ms))}
	keyOf := func(k int) (time.Duration, bool) {
		f, ok := ms[k].finish(ready[k][0], taskTime(k, mid))
		return f + ms[k].up, ok
	}
	for _, k := range live {
		if key, ok := keyOf(k); ok {
			h.key[k] = key
			h.push(k)
		}
	}
	for _, i := range order {
		for {
			if len(h.ks) == 0 {
				return 0, false
			}
			k := h.ks[0]
			f, ok := ms[k].finish(ready[k][0], taskTime(k, i))
			if !ok {
				h.pop()
				continue
			}
			ready[k][0] = f
			siftDown(ready[k])
			end = max(end, f+ms[k].up)
			if key, ok := keyOf(k); ok {
				h.key[k] = key
				h.fix0()
			} else {
				h.pop()
			}
			break
		}
	}
	return end - t, true
}

// pack looks for a shorter clairvoyant schedule than the list schedule's
// hi: the smallest deadline T in [lo, hi] found by bisection at which
// best-fit decreasing packs every task into the slots (a slot takes tasks
// while their times fit between its first possible start and T less its
// way up). Each packing is a schedule, so the result is a valid UB.
// Batches of more than 200,000 task-slot pairs keep hi (a bisection of
// full best-fit passes would cost seconds a run).
func (b *optBatch) pack(set *Set, ms []optMachine, sizes []float64, t, lo, hi time.Duration) time.Duration {
	slots := 0
	for k := range ms {
		slots += ms[k].slots
	}
	n := len(sizes)
	if n*slots > 200_000 {
		return hi
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	sortLongestFirst(order, sizes)
	type bin struct {
		k     int
		ready time.Duration // when its next task could start
		end   time.Duration // its tasks must end by then
	}
	bins := make([]bin, 0, slots)
	fits := func(T time.Duration) bool {
		bins = bins[:0]
		for k := range ms {
			o := &ms[k]
			end := t + T - o.up
			if o.leave > 0 {
				end = min(end, o.leave)
			}
			if end <= t+o.down {
				continue
			}
			for range o.slots {
				bins = append(bins, bin{k: k, ready: t + o.down, end: end})
			}
		}
		for _, i := range order {
			best, bestLeft, bestF := -1, time.Duration(math.MaxInt64), time.Duration(0)
			for j := range bins {
				bn := &bins[j]
				f, ok := ms[bn.k].finish(bn.ready, float64(set.TaskTime(bn.k, b.grains[i]))*b.factor[i])
				if !ok || f > bn.end {
					continue
				}
				if left := bn.end - f; left < bestLeft {
					best, bestLeft, bestF = j, left, f
				}
			}
			if best < 0 {
				return false
			}
			bins[best].ready = bestF
		}
		return true
	}
	if fits(lo) {
		return lo
	}
	for hi-lo > time.Microsecond/2 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// improve is a clairvoyant schedule found by local search: from longest
// first to the slot that then ends first, it moves a task off the slot
// that ends last, or swaps it with a shorter one elsewhere, while that
// makes the makespan shorter, and stops at lo or when no move helps. Too
// large batches are not searched (the result is then not below the list
// schedule's).
func (b *optBatch) improve(set *Set, ms []optMachine, sizes []float64, t, lo time.Duration) time.Duration {
	type slotRec struct {
		k     int
		load  float64 // Σ time at pace 1 of its tasks
		end   time.Duration
		tasks []int32
	}
	var sl []slotRec
	for k := range ms {
		o := &ms[k]
		if o.leave > 0 && o.leave <= t+o.down {
			continue
		}
		for range o.slots {
			sl = append(sl, slotRec{k: k})
		}
	}
	n := len(sizes)
	if len(sl) == 0 || n*len(sl) > 200_000 {
		return time.Duration(math.MaxInt64)
	}
	const never = time.Duration(math.MaxInt64)
	endOf := func(k int, load float64) time.Duration {
		o := &ms[k]
		if load == 0 {
			return 0
		}
		f, ok := o.finish(t+o.down, load)
		if !ok {
			return never
		}
		return f + o.up - t
	}
	tt := func(k int, i int32) float64 { return float64(set.TaskTime(k, b.grains[i])) * b.factor[i] }
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	sortLongestFirst(order, sizes)
	for _, i := range order {
		best, bestEnd := -1, never
		for j := range sl {
			if e := endOf(sl[j].k, sl[j].load+tt(sl[j].k, i)); e < bestEnd {
				best, bestEnd = j, e
			}
		}
		if best < 0 {
			return never
		}
		s := &sl[best]
		s.load += tt(s.k, i)
		s.end = bestEnd
		s.tasks = append(s.tasks, i)
	}
	makespan := func() (time.Duration, int) {
		m, c := time.Duration(0), -1
		for j := range sl {
			if sl[j].end > m {
				m, c = sl[j].end, j
			}
		}
		return m, c
	}
	for iter := 0; iter < 20*n; iter++ {
		m, c := makespan()
		if m <= lo {
			return m
		}
		cs := &sl[c]
		improved := false
		// Moves, then swaps; the first that lowers slot c below m while
		// the other stays below m.
		for x := 0; x < len(cs.tasks) && !improved; x++ {
			i := cs.tasks[x]
			cEnd := endOf(cs.k, cs.load-tt(cs.k, i))
			if cEnd >= m {
				continue
			}
			for j := range sl {
				if j == c {
					continue
				}
				s := &sl[j]
				if e := endOf(s.k, s.load+tt(s.k, i)); e < m {
					cs.load -= tt(cs.k, i)
					cs.end = cEnd
					cs.tasks = slices.Delete(cs.tasks, x, x+1)
					s.load += tt(s.k, i)
					s.end = e
					s.tasks = append(s.tasks, i)
					improved = true
					break
				}
			}
		}
		for x := 0; x < len(cs.tasks) && !improved; x++ {
			i := cs.tasks[x]
			for j := range sl {
				if j == c || improved {
					continue
				}
				s := &sl[j]
				for y, q := range s.tasks {
					if sizes[q] >= sizes[i] && cs.k == s.k {
						continue
					}
					cEnd := endOf(cs.k, cs.load-tt(cs.k, i)+tt(cs.k, q))
					if cEnd >= m {
						continue
					}
					sEnd := endOf(s.k, s.load-tt(s.k, q)+tt(s.k, i))
					if sEnd >= m {
						continue
					}
					cs.load += tt(cs.k, q) - tt(cs.k, i)
					cs.end = cEnd
					cs.tasks[x] = q
					s.load += tt(s.k, i) - tt(s.k, q)
					s.end = sEnd
					s.tasks[y] = i
					improved = true
					break
				}
			}
		}
		if !improved {
			return m
		}
	}
	m, _ := makespan()
	return m
}

// bound is the slots' lower bound of the batch's makespan (see Optimum),
// found by bisection below hi (the clairvoyant makespan, when ok).
func (b *optBatch) bound(ms []optMachine, ratios, sizes []float64, t, hi time.Duration, ok bool) time.Duration {
	n := len(sizes)
	if n == 0 {
		return 0
	}
	desc := slices.Clone(sizes)
	slices.Sort(desc)
	slices.Reverse(desc)
	prefix := make([]float64, n+1) // prefix[k]: the k longest together
	for i, s := range desc {
		prefix[i+1] = prefix[i] + s
	}
	// Machines that share a class and a ratio count as one with their
	// slots added up.
	type class struct {
		o     *optMachine
		ratio float64
		slots float64
	}
	var classes []class
	byKey := map[[2]uint64]int{}
	for k := range ms {
		key := [2]uint64{uint64(ms[k].classKey), math.Float64bits(ratios[k])}
		if c, ok := byKey[key]; ok {
			classes[c].slots += float64(ms[k].slots)
			continue
		}
		byKey[key] = len(classes)
		classes = append(classes, class{o: &ms[k], ratio: ratios[k], slots: float64(ms[k].slots)})
	}
	// The k checked: all of them when cheap, else a spread that always
	// includes the first 64 and n.
	var ks []int
	if n*len(classes) <= 1<<16 {
		for k := 1; k <= n; k++ {
			ks = append(ks, k)
		}
	} else {
		step := max(1, n/1024)
		for k := 1; k <= n; k++ {
			if k <= 64 || k%step == 0 || k == n {
				ks = append(ks, k)
			}
		}
	}
	work := make([]float64, len(classes))
	feasible := func(T time.Duration) bool {
		for c := range classes {
			o := classes[c].o
			work[c] = o.capacity(t+o.down, t+T-o.up) / classes[c].ratio
		}
		for _, k := range ks {
			s := desc[k-1]
			count, fit := 0.0, 0.0
			for c, cl := range classes {
				a := math.Floor(work[c] / s * (1 + 1e-12))
				if a <= 0 {
					continue
				}
				count += cl.slots * a
				fit += cl.slots * min(work[c], prefix[min(int(a), k)])
			}
			if count < float64(k) || fit < prefix[k]*(1-1e-12) {
				return false
			}
		}
		return true
	}
	if !ok {
		// No clairvoyant schedule (machines gone): find some feasible T.
		hi = time.Second
		for !feasible(hi) {
			if hi > time.Duration(math.MaxInt64/4) {
				return 0
			}
			hi *= 2
		}
	} else if !feasible(hi) {
		return hi // rounding at the edge: the schedule itself is the bound
	}
	// To the nanosecond for small batches (the smallest feasible T, as
	// the schedule's own times are whole nanoseconds); to 100 ns for large
	// ones, each step being a pass over the k checked, returning the
	// largest T found infeasible, which stays below the bound.
	step := time.Duration(1)
	if n*len(classes) > 1<<16 {
		step = 100
	}
	lo := time.Duration(0)
	for hi-lo > step {
		mid := lo + (hi-lo)/2
		if feasible(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if step > 1 {
		return lo
	}
	return hi
}

// sortLongestFirst sorts task indexes by size, longest first, ties by
// index.
func sortLongestFirst(order []int32, sizes []float64) {
	slices.SortFunc(order, func(a, c int32) int {
		if x := cmp.Compare(sizes[c], sizes[a]); x != 0 {
			return x
		}
		return cmp.Compare(a, c)
	})
}

// siftDown restores the min-heap h after h[0] grew.
func siftDown(h []time.Duration) {
	i, n := 0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[m] >= h[i] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// machineHeap is a min-heap of machine indexes by key (ties by index).
type machineHeap struct {
	ks  []int
	key []time.Duration
}

func (h *machineHeap) less(a, b int) bool {
	ka, kb := h.key[h.ks[a]], h.key[h.ks[b]]
	return ka < kb || ka == kb && h.ks[a] < h.ks[b]
}

func (h *machineHeap) push(k int) {
	h.ks = append(h.ks, k)
	for i := len(h.ks) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.ks[i], h.ks[p] = h.ks[p], h.ks[i]
		i = p
	}
}

func (h *machineHeap) pop() {
	n := len(h.ks) - 1
	h.ks[0] = h.ks[n]
	h.ks = h.ks[:n]
	h.fix0()
}

func (h *machineHeap) fix0() {
	for i, n := 0, len(h.ks); ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.ks[i], h.ks[m] = h.ks[m], h.ks[i]
		i = m
	}
}
