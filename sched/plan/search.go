package plan

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// Choice is how one group is used: Machines of its machines, with Slots
// slots each; Machines 0 leaves the group out.
type Choice struct {
	Group    string `json:"group"`
	Machines int    `json:"machines"`
	Slots    int    `json:"slots"`
}

// Candidate is one configuration and its prediction.
type Candidate struct {
	Choices []Choice // one per group, in the order of Request.Groups
	P       int      // tasks the grid runs at once: Σ machines × slots
	// TaskTime and How are, per group used, the predicted time of one task
	// (seconds) and the model that gave it.
	TaskTime map[string]float64
	How      map[string]string
	// Batch is the predicted time of one batch of Request.Tasks tasks
	// (seconds): see Makespan.
	Batch float64
}

// String is the configuration in the paper's notation, group by group:
// "fast 2×3, slow 0" (machines × slots).
func (c *Candidate) String() string {
	var b []string
	for _, ch := range c.Choices {
		if ch.Machines == 0 {
			b = append(b, ch.Group+" 0")
		} else {
			b = append(b, fmt.Sprintf("%s %d×%d", ch.Group, ch.Machines, ch.Slots))
		}
	}
	return strings.Join(b, ", ")
}

// Request is what to plan for.
type Request struct {
	N      float64 // task size
	Tasks  int     // tasks per batch (the ES's λ)
	Groups []Group // the machines
	// Slots lists the slot counts to consider per machine; empty: every
	// M the group has an N–T model alone for.
	Slots []int
	// Replicate models replication of the last tasks onto idle slots
	// (rr, r3q, eft): see Makespan. Default false: list scheduling alone.
	Replicate bool
	// Top is how many of the best configurations to return. Default 5.
	Top int
	// MaxConfigs bounds the configurations searched. Default 1e6.
	MaxConfigs int
}

// Result is a search's outcome.
type Result struct {
	Best []Candidate // best first
	// Baseline is every machine with slots = its CPUs, as the grid runs
	// without a plan; nil when the models cannot predict it (BaselineErr).
	Baseline    *Candidate
	BaselineErr error
	Considered  int
	// Refused counts the configurations the models could not predict
	// (a missing model, or one the guard refused), by reason.
	Refused map[string]int
}

// Search predicts the batch time of every configuration (for each group:
// 0 to all of its machines, each with one of the slot counts) and returns
// the best few, and the baseline.
func Search(ms *Models, req Request) (*Result, error) {
	if req.Tasks < 1 {
		return nil, fmt.Errorf("plan: %d tasks per batch", req.Tasks)
	}
	if !(req.N > 0) {
		return nil, fmt.Errorf("plan: task size N = %v", req.N)
	}
	if len(req.Groups) == 0 {
		return nil, errors.New("plan: no machines")
	}
	top := req.Top
	if top <= 0 {
		top = 5
	}
	maxConfigs := req.MaxConfigs
	if maxConfigs <= 0 {
		maxConfigs = 1_000_000
	}
	// Each group's options.
	opts := make([][]Choice, len(req.Groups))
	total := 1.0
	for i, g := range req.Groups {
		opts[i] = []Choice{{Group: g.Name}}
		gm := ms.Groups[g.Name]
		var slots []int
		switch {
		case gm == nil:
		case len(req.Slots) > 0:
			slots = req.Slots
		default:
			slots = slices.Sorted(maps.Keys(gm.Alone))
		}
		for k := 1; k <= len(g.Machines); k++ {
			for _, s := range slots {
				opts[i] = append(opts[i], Choice{Group: g.Name, Machines: k, Slots: s})
			}
		}
		total *= float64(len(opts[i]))
	}
	if total-1 > float64(maxConfigs) {
		return nil, fmt.Errorf("plan: %.0f configurations to search, more than %d: give fewer slot counts", total-1, maxConfigs)
	}
	res := &Result{Refused: map[string]int{}}
	cur := make([]Choice, len(req.Groups))
	var best []Candidate
	var walk func(i int)
	walk = func(i int) {
		if i == len(cur) {
			c, err := evaluate(ms, req, cur)
			if c == nil && err == nil {
				return // nothing used
			}
			res.Considered++
			if err != nil {
				res.Refused[reason(err)]++
				return
			}
			best = insertBest(best, *c, top)
			return
		}
		for _, o := range opts[i] {
			cur[i] = o
			walk(i + 1)
		}
	}
	walk(0)
	res.Best = best
	base := make([]Choice, len(req.Groups))
	for i, g := range req.Groups {
		base[i] = Choice{Group: g.Name, Machines: len(g.Machines), Slots: g.CPUs}
	}
	res.Baseline, res.BaselineErr = evaluate(ms, req, base)
	if res.Considered == 0 {
		// No group had a model to choose slots from: nothing was refused,
		// and the error used to end in an empty list of reasons ("no
		// configuration could be predicted: ").
		return res, errors.New("plan: no configuration could be predicted: no group has a fitted model (esplan models says why)")
	}
	if len(best) == 0 {
		var why []string
		for r, n := range res.Refused {
			why = append(why, fmt.Sprintf("%d× %s", n, r))
		}
		sort.Strings(why)
		return res, fmt.Errorf("plan: no configuration could be predicted: %s", strings.Join(why, "; "))
	}
	return res, nil
}

// reason shortens an error to what configurations refused for it share.
func reason(err error) string {
	s := err.Error()
	if i := strings.Index(s, " (model "); i > 0 {
		s = s[:i]
	}
	return s
}

// evaluate predicts one configuration; nil, nil when it uses nothing.
func evaluate(ms *Models, req Request, choices []Choice) (*Candidate, error) {
	p := 0
	for _, ch := range choices {
		p += ch.Machines * ch.Slots
	}
	if p == 0 {
		return nil, nil
	}
	c := &Candidate{Choices: slices.Clone(choices), P: p, TaskTime: map[string]float64{}, How: map[string]string{}}
	var times []float64
	for _, ch := range choices {
		if ch.Machines == 0 {
			continue
		}
		t, how, err := ms.Predict(ch.Group, req.N, p, ch.Slots)
		if err != nil {
			return nil, err
		}
		c.TaskTime[ch.Group], c.How[ch.Group] = t, how
		for range ch.Machines * ch.Slots {
			times = append(times, t)
		}
	}
	c.Batch = Makespan(req.Tasks, times, req.Replicate)
	return c, nil
}

// insertBest keeps the top best candidates, fastest first; ties go to the
// configuration with fewer tasks at once, then to the one found first.
func insertBest(best []Candidate, c Candidate, top int) []Candidate {
	i := sort.Search(len(best), func(i int) bool {
		b := best[i]
		return b.Batch > c.Batch || b.Batch == c.Batch && b.P > c.P
	})
	if i >= top {
		return best
	}
	best = slices.Insert(best, i, c)
	if len(best) > top {
		best = best[:top]
	}
	return best
}

// Makespan is the time n tasks take on slots whose task times are times
// (seconds per task, one entry per slot), all free at 0, when each slot
// that frees takes the next task (list scheduling, as every policy does
// while the master queue holds tasks). With replicate, once the queue is
// empty a slot that frees takes a copy of the unfinished task expected
// last, when its copy would finish earlier (at most two copies of a task;
// the first to finish wins and frees the other's slot): the tail that rr,
// r3q and eft cut. Communication is left out: held tasks hide it.
func Makespan(n int, times []float64, replicate bool) float64 {
	if n <= 0 || len(times) == 0 {
		return 0
	}
	type run struct {
		finish float64
		slots  [2]int
		copies int
	}
	runs := make([]run, 0, n)
	ver := make([]int, len(times))
	on := make([]int, len(times)) // the task a slot runs, -1 none
	h := &slotHeap{}
	for k := range times {
		on[k] = -1
		heap.Push(h, slotFree{at: 0, slot: k})
	}
	end := 0.0
	for h.Len() > 0 {
		f := heap.Pop(h).(slotFree)
		k := f.slot
		if f.ver != ver[k] {
			continue
		}
		tau := f.at
		end = max(end, tau)
		on[k] = -1
		if len(runs) < n {
			runs = append(runs, run{finish: tau + times[k], slots: [2]int{k, -1}, copies: 1})
			on[k] = len(runs) - 1
			heap.Push(h, slotFree{at: tau + times[k], slot: k, ver: ver[k]})
			continue
		}
		if !replicate {
			continue
		}
		// The unfinished task expected last.
		late, lateAt := -1, tau
		for i := range runs {
			r := &runs[i]
			if r.finish > lateAt && r.copies < 2 {
				late, lateAt = i, r.finish
			}
		}
		if late < 0 || tau+times[k] >= lateAt {
			continue // nothing this slot could finish earlier: it idles
		}
		r := &runs[late]
		r.finish = tau + times[k]
		r.slots[1], r.copies = k, 2
		on[k] = late
		heap.Push(h, slotFree{at: r.finish, slot: k, ver: ver[k]})
		// The original is cancelled when the copy wins: its slot frees then.
		j := r.slots[0]
		ver[j]++
		heap.Push(h, slotFree{at: r.finish, slot: j, ver: ver[j]})
	}
	for _, r := range runs {
		end = max(end, r.finish)
	}
	if math.IsInf(end, 0) {
		return math.Inf(1)
	}
	return end
}

type slotFree struct {
	at   float64
	slot int
	ver  int
}

type slotHeap []slotFree

func (h slotHeap) Len() int { return len(h) }
func (h slotHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].slot < h[j].slot
}
func (h slotHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *slotHeap) Push(x any)   { *h = append(*h, x.(slotFree)) }
func (h *slotHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
