package soak

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sawMasterLog counts the faults a master's log shows.
func (r *runState) sawMasterLog(l string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case strings.Contains(l, `msg="evaluation failed`):
		// The master rate-limits these lines: one that passes says how
		// many it suppressed before it.
		n := 1 + suppressed(l)
		r.ob.Failures += n
		if strings.Contains(l, "emulated failure") {
			r.faults[failEvery] += n
		}
	case strings.Contains(l, `msg="worker is late`):
		r.ob.Lates++
	case strings.Contains(l, `msg="overloaded: promoting a worker`):
		r.ob.Splits++
		r.faults[split]++
	case strings.Contains(l, `msg="promoted worker never came back`):
		r.ob.NeverUp++
		r.faults[childLost]++
	case strings.Contains(l, `msg="promoted worker lost before its child master said hello`):
		r.ob.Unready++
		r.faults[childLost]++
	case strings.Contains(l, `msg="child master returned none of its tasks`):
		r.ob.CutOffs++ // counted lost as its link closes, next
	case strings.Contains(l, `msg="child master's link lost`):
		r.ob.ChildLosses++
		r.faults[childLost]++
	case strings.Contains(l, `msg="child master told to return did not end its link`),
		strings.Contains(l, `msg="child master told to return was lost`):
		r.ob.ChildLosses++
	case strings.Contains(l, `msg="child master told the run is over did not say`):
		r.ob.EndUnheard++
	}
}

// sawRootLog follows a root master's log: the faults it shows, and when
// each worker and the relay last joined and the relay was last lost.
func (r *runState) sawRootLog(l string) {
	r.sawMasterLog(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.line++
	switch {
	case strings.Contains(l, `msg="relay lost`), strings.Contains(l, `msg="gossip says a relay is gone`):
		r.relayLostAt = r.line
	default:
		if sub := joined.FindStringSubmatch(l); sub != nil {
			r.joinedAt[sub[1]] = r.line
		} else if sub := relayUp.FindStringSubmatch(l); sub != nil {
			r.joinedAt[sub[1]] = r.line
		}
	}
}

// sawWorkerLog follows a worker's log: its promotions to a child master
// and their ends, and the faults its child master's log shows.
func (r *runState) sawWorkerLog(name, l string) {
	switch {
	case strings.Contains(l, `msg="promoted to a child master"`):
		r.mu.Lock()
		r.promoted[name] = true
		close(r.promoCh)
		r.promoCh = make(chan struct{})
		r.mu.Unlock()
	case strings.Contains(l, `msg="child master done`), strings.Contains(l, `msg="child master stopped"`):
		r.mu.Lock()
		delete(r.promoted, name)
		r.mu.Unlock()
	case strings.Contains(l, " component=master"):
		r.sawMasterLog(l)
	}
}

// sawLine follows the generations a master prints.
func (r *runState) sawLine(l string) {
	g := lineGen(genLine.FindString(l))
	if g < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g > r.gen {
		r.gen = g
		close(r.genCh)
		r.genCh = make(chan struct{})
	}
}

func (r *runState) lastGen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// waitGen waits until generation g is printed (true), ctx ends or done
// closes (false).
func (r *runState) waitGen(ctx context.Context, g int, done <-chan struct{}) bool {
	for {
		r.mu.Lock()
		gen, ch := r.gen, r.genCh
		r.mu.Unlock()
		if gen >= g {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (r *runState) count(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[kind]++
}

// countEvents counts the plugin faults the plugins wrote down.
func (r *runState) countEvents() {
	b, err := os.ReadFile(filepath.Join(r.dir, "events"))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, pluginCrash+" "):
			r.count(pluginCrash)
		case strings.HasPrefix(l, pluginHang+" "):
			r.count(pluginHang)
		}
	}
}

// suppressed is the count a rate-limited log line gives of the lines
// suppressed before it (suppressed_since_last=N), or 0.
func suppressed(l string) int {
	_, v, ok := strings.Cut(l, " suppressed_since_last=")
	if !ok {
		return 0
	}
	v, _, _ = strings.Cut(v, " ")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
