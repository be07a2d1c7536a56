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
