package soak

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// startWorker starts an esworker for w under name: it joins the master
// through gossip, or connects to the relay if w is behind it.
func (r *runState) startWorker(w workerSpec, name string) (*proc, error) {
	s := r.s
	w.Name = name
	args := w.args(s.bin.plugin)
	if w.Behind {
		r.mu.Lock()
		args = append(args, "-master", r.relayAddr)
		r.mu.Unlock()
	} else {
		args = append(args, "-join", r.gossip)
	}
	if r.once {
		args = append(args, "-once")
	}
	env := append(w.env(filepath.Join(r.dir, "events")), s.keyEnv)
	return s.procs.start(r.dir, name, s.bin.esworker, env, watch{onErr: func(l string) { r.sawWorkerLog(name, l) }}, args...)
}

// relayTries bounds the starts of a relay at its address: after a relay
// is killed, another process may hold the port for a moment.
const relayTries = 3

// startRelay starts the scenario's relay under name, listening at addr,
// and waits until it listens; its address is then where the workers
// behind it connect. A relay that cannot listen at addr is started again,
// up to relayTries times.
func (r *runState) startRelay(ctx context.Context, name, addr string) (*proc, error) {
	s, rs := r.s, r.sc.Relay
	args := []string{"-name", name, "-relay", addr, "-join", r.gossip, "-gossip", "127.0.0.1:0",
		"-slots", strconv.Itoa(rs.Slots), "-plugin", pluginName + "=" + s.bin.plugin}
	if rs.Only {
		args = append(args, "-relay-only")
	}
	if r.once {
		args = append(args, "-once")
	}
	env := []string{"ESSOAK_EVENTS=" + filepath.Join(r.dir, "events"), s.keyEnv}
	for try := 1; ; try++ {
		logName := name
		if try > 1 {
			logName = fmt.Sprintf("%s.%d", name, try)
		}
		p, err := s.procs.start(r.dir, logName, s.bin.esworker, env, watch{keepErr: relayListening,
			onErr: func(l string) { r.sawWorkerLog(name, l) }}, args...)
		if err != nil {
			return nil, err
		}
		sub, err := p.err.waitLine(ctx, relayListening)
		if err == nil {
			p.name = name // as the master names it
			r.mu.Lock()
			r.relayAddr = sub[1]
			r.mu.Unlock()
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.wait(ctx)
		if try == relayTries || !sleep(ctx, 500*time.Millisecond) {
			return nil, fmt.Errorf("relay %s ended before it listened at %s: %s; %s", logName, addr, p.status(), lastLine(p.err.kept()))
		}
	}
}

// chaos injects the scenario's faults, each once its generation is
// printed, until ctx ends.
func (r *runState) chaos(ctx context.Context) {
	for _, f := range r.sc.Faults {
		if !r.waitGen(ctx, f.AtGen, nil) {
			return
		}
		var p *proc
		switch f.Kind {
		case killWorker, stopWorker:
			r.mu.Lock()
			p = r.workers[f.Worker]
			r.mu.Unlock()
		case killChild, stopChild:
			if p = r.waitPromoted(ctx, f.After); p == nil {
				return
			}
		case killRelay, stopRelay:
			r.mu.Lock()
			p = r.relay
			r.mu.Unlock()
		}
		if p == nil || p.exited() {
			continue
		}
		var ok bool
		if f.stops() {
			ok = r.stop(ctx, p, f)
		} else {
			ok = r.kill(ctx, p, f)
		}
		if !ok {
			return
		}
	}
}

// waitPromoted waits for a worker that is a child master now and has
// been for after, and returns its process; nil if ctx ends first.
func (r *runState) waitPromoted(ctx context.Context, after time.Duration) *proc {
	for {
		r.mu.Lock()
		ch, any := r.promoCh, len(r.promoted) > 0
		r.mu.Unlock()
		if any {
			if !sleep(ctx, after) {
				return nil
			}
			r.mu.Lock()
			var names []string
			for n := range r.promoted {
				names = append(names, n)
			}
			slices.Sort(names)
			var p *proc
			for _, n := range names {
				if p = r.byName(n); p != nil && !p.exited() {
					break
				}
			}
			r.mu.Unlock()
			if p != nil && !p.exited() {
				return p
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// byName is the live worker process named n, or nil; r.mu held.
func (r *runState) byName(n string) *proc {
	for _, p := range r.workers {
		if p.name == n {
			return p
		}
	}
	return nil
}

// kill kills p with SIGKILL and, as a lab replaces a dead machine,
// starts its replacement: a worker of the same spec, or a relay at the
// same address. It says whether the chaos goes on.
func (r *runState) kill(ctx context.Context, p *proc, f fault) bool {
	if p.signal(syscall.SIGKILL) != nil || !p.wait(ctx) {
		return false
	}
	r.count(f.Kind)
	r.mu.Lock()
	r.ob.Kills++
	r.killed[p] = true
	i, isWorker := r.index[p]
	if !isWorker {
		r.relayKilled()
	}
	r.spares++
	spare := r.spares
	addr := r.relayAddr
	r.mu.Unlock()
	if !sleep(ctx, 500*time.Millisecond) {
		return false
	}
	if !isWorker {
		q, err := r.startRelay(ctx, fmt.Sprintf("%s-r%d", r.sc.Relay.Name, spare), addr)
		if err != nil {
			return false
		}
		r.mu.Lock()
		r.relay = q
		r.mu.Unlock()
		return true
	}
	q, err := r.startWorker(r.sc.Workers[i], fmt.Sprintf("%s-r%d", r.sc.Workers[i].Name, spare))
	if err != nil {
		return false
	}
	r.mu.Lock()
	r.workers[i] = q
	r.index[q] = i
	r.mu.Unlock()
	return true
}

// stop stops p with SIGSTOP for f.Stop, then continues it with SIGCONT.
// It says whether the chaos goes on.
func (r *runState) stop(ctx context.Context, p *proc, f fault) bool {
	if p.signal(syscall.SIGSTOP) != nil {
		return false
	}
	r.count(f.Kind)
	r.mu.Lock()
	r.ob.Stops++
	r.ob.Stopped += f.Stop
	if f.Kind == stopRelay {
		r.ob.RelayStops++
	}
	r.mu.Unlock()
	// Continued early when the run ends (ctx): a worker stopped across
	// the end still has the master's Shutdown to read, and is judged as
	// every other (grid.Conn reads what came before a reset).
	sleep(ctx, f.Stop)
	return p.signal(syscall.SIGCONT) == nil && ctx.Err() == nil
}

// checkWorkers checks that every worker that joined and was not killed
// at the end exits 0: by itself once the run is over
// (once: the workers run -once and the run ended), else once sent SIGTERM.
func (r *runState) checkWorkers(ctx context.Context, once bool) []finding {
	// The chaos is over: r.killed no longer changes, and no worker is
	// stopped any more.
	r.mu.Lock()
	workers, killed := append([]*proc(nil), r.workers...), r.killed
	if r.relay != nil {
		workers = append(workers, r.relay)
	}
	r.mu.Unlock()
	names := map[string]bool{}
	for _, m := range r.masters {
		for _, l := range m.err.kept() {
			if sub := joined.FindStringSubmatch(l); sub != nil {
				names[sub[1]] = true
			}
			if sub := relayUp.FindStringSubmatch(l); sub != nil {
				names[sub[1]] = true
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(r.s.cfg.Slack*float64(workerGrace)))
	defer cancel()
	var bad []string
	for _, p := range workers {
		if killed[p] || !names[p.name] {
			continue // killed and not replaced yet, or never in the run
		}
		if r.cutOff(p) {
			continue // its relay was lost and it was not back: it waits for a master, as after a crash
		}
		how := "once the run was over (-once)"
		if !once {
			how = "after SIGTERM"
			p.signal(syscall.SIGTERM)
		}
		if !p.wait(wctx) {
			bad = append(bad, fmt.Sprintf("%s still running %v %s (%s)", p.name, time.Duration(r.s.cfg.Slack*float64(workerGrace)), how, p.dumpStacks(ctx)))
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

// cutOff says whether p, the relay or a worker behind it, had not joined
// the master again since the master last lost the relay, or the soak
// killed it (a master ending as it goes logs no loss): the word that
// the run is over could not reach it, and it waits for the next master
// (docs/topologies.md: workers behind a relay that dies wait for it to
// come back; a relay without its master waits for the next).
func (r *runState) cutOff(p *proc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, isWorker := r.index[p]
	if r.relayLostAt == 0 || (isWorker && !r.sc.Workers[i].Behind) {
		return false
	}
	return r.joinedAt[p.name] < r.relayLostAt
}

// relayKilled notes that the soak killed the relay: its workers are cut
// off from the master's next log line on, whether or not the master, if
// it is ending, logs the loss. r.mu held.
func (r *runState) relayKilled() { r.relayLostAt = r.line + 1 }
