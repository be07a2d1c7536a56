package soak

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// startWorker starts an esworker for w under name.
func (r *runState) startWorker(w workerSpec, name string) (*proc, error) {
	s := r.s
	w.Name = name
	args := append(w.args(s.bin.plugin), "-join", r.gossip)
	if r.once {
		args = append(args, "-once")
	}
	env := append(w.env(filepath.Join(r.dir, "events")), s.keyEnv)
	return s.procs.start(r.dir, name, s.bin.esworker, env, watch{}, args...)
}

// chaos injects the scenario's faults on the workers, each once its
// generation is printed, until ctx ends.
func (r *runState) chaos(ctx context.Context) {
	for _, f := range r.sc.Faults {
		if !r.waitGen(ctx, f.AtGen, nil) {
			return
		}
		r.mu.Lock()
		p := r.workers[f.Worker]
		r.mu.Unlock()
		if p.exited() {
			continue
		}
		switch f.Kind {
		case killWorker:
			if p.signal(syscall.SIGKILL) != nil || !p.wait(ctx) {
				return
			}
			r.count(killWorker)
			r.mu.Lock()
			r.ob.Kills++
			r.killed[p] = true
			r.mu.Unlock()
			// A lab replaces a dead machine: a new worker joins.
			if !sleep(ctx, 500*time.Millisecond) {
				return
			}
			r.mu.Lock()
			r.spares++
			name := fmt.Sprintf("%s-r%d", r.sc.Workers[f.Worker].Name, r.spares)
			r.mu.Unlock()
			q, err := r.startWorker(r.sc.Workers[f.Worker], name)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.workers[f.Worker] = q
			r.mu.Unlock()
		case stopWorker:
			if p.signal(syscall.SIGSTOP) != nil {
				return
			}
			r.count(stopWorker)
			r.mu.Lock()
			r.stopped[p] = true
			r.ob.Stops++
			r.ob.Stopped += f.Stop
			r.mu.Unlock()
			sleep(ctx, f.Stop)
			r.mu.Lock()
			delete(r.stopped, p)
			r.mu.Unlock()
			if p.signal(syscall.SIGCONT) != nil || ctx.Err() != nil {
				return
			}
		}
	}
}

// continueAll continues the workers still stopped when the run ended:
// they are not judged (the master's word that the run was over could not
// reach them; they wait for it to come back, as after a crash).
func (r *runState) continueAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.stopped {
		p.signal(syscall.SIGCONT)
	}
}

// checkWorkers checks that every worker that joined and was neither
// killed nor stopped at the end exits 0: by itself once the run is over
// (once: the workers run -once and the run ended), else once sent SIGTERM.
func (r *runState) checkWorkers(ctx context.Context, once bool) []finding {
	// The chaos is over: r.stopped and r.killed no longer change.
	r.mu.Lock()
	workers, stopped, killed := append([]*proc(nil), r.workers...), r.stopped, r.killed
	r.mu.Unlock()
	names := map[string]bool{}
	for _, m := range r.masters {
		for _, l := range m.err.kept() {
			if sub := joined.FindStringSubmatch(l); sub != nil {
				names[sub[1]] = true
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(r.s.cfg.Slack*float64(workerGrace)))
	defer cancel()
	var bad []string
	for _, p := range workers {
		if killed[p] || stopped[p] || !names[p.name] {
			continue // killed and not replaced yet, stopped at the end, or never in the run
		}
		how := "once the run was over (-once)"
		if !once {
			how = "after SIGTERM"
			p.signal(syscall.SIGTERM)
		}
		if !p.wait(wctx) {
			bad = append(bad, fmt.Sprintf("%s still running %v %s", p.name, time.Duration(r.s.cfg.Slack*float64(workerGrace)), how))
			continue
		}
		if st := p.status(); st != "exit 0" {
			bad = append(bad, fmt.Sprintf("%s: %s %s, want exit 0", p.name, st, how))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return []finding{{kindWorkerExit, summarise(bad)}}
}
