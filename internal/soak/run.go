package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Fault kinds counted beside the scenario's own (killWorker, stopWorker).
const (
	killMaster  = "kill-master"  // SIGKILL to esrun, then esrun -resume
	pluginCrash = "plugin-crash" // a plugin process exited during an evaluation
	pluginHang  = "plugin-hang"  // a plugin's evaluation hung
	failEvery   = "fail-every"   // an esworker -fail-every failure the master saw
	hangEvery   = "hang-every"   // an esworker started with -hang-every
	delayed     = "delay"        // an esworker started with -delay
	silent      = "silent"       // an esworker started with -silent
	relayed     = "relayed"      // an esworker started behind the relay
	split       = "split"        // a master promoted a worker to a child master
	childLost   = "child-lost"   // a master counted a child lost (killed, cut off, never up)
)

// workerGrace bounds how long a worker may take to exit once the run is
// over (-once) or once it is sent SIGTERM: the master's shutdown grace
// (5 s) and a worker's drain, with room for a loaded machine.
const workerGrace = 30 * time.Second

// listening is esrun's line once it is bound; joined the master's line
// for a worker that joined. masterErr keeps those, errors, and esrun's
// own lines (its last is why it failed: errorLine).
var (
	listening = regexp.MustCompile(`^esrun: listening data=(\S+) gossip=(\S+)$`)
	joined    = regexp.MustCompile(`msg="worker joined".* worker=(\S+)`)
	relayUp   = regexp.MustCompile(`msg="relay connected".* relay=(\S+)`)
	masterErr = regexp.MustCompile(listening.String() + `|` + joined.String() + `|` + relayUp.String() + `|level=ERROR|^esrun: `)
	// relayListening is esworker -relay's line once its relay is bound.
	relayListening = regexp.MustCompile(`^esworker: relay listening (\S+)$`)
	anyLine        = regexp.MustCompile(``)
)

// result is one run's account.
type result struct {
	Run         int
	Scenario    scenario
	Bound       bound
	Took        time.Duration
	Faults      map[string]int
	Findings    []finding
	PeakRSS     int64  // the largest esrun peak RSS, bytes
	Logs        string // where its logs are kept, when it has findings
	Interrupted bool
	// Exhausted, when not empty, says why the run ended as designed with
	// an error: a task failed more often than -max-retries allows, every
	// failure injected by the scenario (exhausted).
	Exhausted string
}

// runState is a run under way.
type runState struct {
	s       *soak
	sc      scenario
	dir     string
	once    bool // workers exit when the run ends (no master restart)
	report  string
	ckpt    string
	gossip  string
	masters []*proc

	mu        sync.Mutex
	workers   []*proc         // the live process of each scenario worker
	relay     *proc           // the live relay, if any
	relayAddr string          // where the relay listens, the same for its replacements
	index     map[*proc]int   // each worker process's place in the scenario's Workers
	promoted  map[string]bool // the workers (by name) that are child masters now
	promoCh   chan struct{}   // closed and replaced when a worker is promoted
	spares    int             // replacements started
	// The root master's log lines are numbered as they come (line);
	// joinedAt is the line at which each worker (or relay) last joined,
	// relayLostAt the last at which the master lost the relay (or the
	// line after the last the master had logged when the soak killed it).
	line        int
	joinedAt    map[string]int
	relayLostAt int
	killed      map[*proc]bool // workers the chaos killed
	faults      map[string]int
	ob          observed
	gen         int           // the last generation any master printed
	genCh       chan struct{} // closed and replaced when gen grows
}

// runOne runs the scenario of seed as run i and checks it.
func (s *soak) runOne(ctx context.Context, i int, seed uint64) result {
	sc := drawScenario(seed, s.cfg.Limits)
	if s.cfg.alter != nil {
		s.cfg.alter(&sc)
	}
	res := result{Run: i, Scenario: sc, Bound: boundOf(sc, s.cfg.Slack, observed{}), Faults: map[string]int{}}
	dir, err := os.MkdirTemp(s.root, fmt.Sprintf("run%d-seed%d-", i, seed))
	if err != nil {
		res.Findings = append(res.Findings, finding{kindHarness, err.Error()})
		return res
	}
	defer os.RemoveAll(dir)
	want, err := s.reference(ctx, sc.ES)
	if err != nil {
		if ctx.Err() != nil {
			res.Interrupted = true
			return res
		}
		res.Findings = append(res.Findings, finding{kindReference, err.Error()})
		res.Logs = s.keepLogs(dir, res)
		return res
	}
	r := &runState{s: s, sc: sc, dir: dir, once: sc.KillMaster == 0,
		report: filepath.Join(dir, "report.json"), ckpt: filepath.Join(dir, "state.ckpt"),
		killed: map[*proc]bool{}, faults: res.Faults, gen: -1, genCh: make(chan struct{}),
		index: map[*proc]int{}, promoted: map[string]bool{}, promoCh: make(chan struct{}), joinedAt: map[string]int{}}
	res.Findings = r.exec(ctx, &res, want)
	if ctx.Err() != nil {
		res.Interrupted = true
		return res
	}
	if len(res.Findings) > 0 {
		res.Logs = s.keepLogs(dir, res)
	}
	return res
}

// exec runs the scenario and checks the invariants, killing every process
// of the run before it returns.
func (r *runState) exec(ctx context.Context, res *result, want outcome) []finding {
	defer r.killAll()
	start := time.Now()
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := r.watch(start, cancel)
	last, err := r.drive(rctx)
	res.Took = time.Since(start)
	stopWatch()
	res.Bound = r.bound()
	r.countEvents()
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(context.Cause(rctx), errStall):
		r.killAll()
		r.peakRSS(res)
		return []finding{{kindStall, fmt.Sprintf("not over after %v (bound %v); last generation printed: %d; killed",
			res.Took.Round(time.Millisecond), res.Bound, r.lastGen())}}
	case errors.As(err, new(*earlyExit)):
		return []finding{{kindExit, err.Error()}}
	case err != nil:
		return []finding{{kindHarness, err.Error()}}
	}
	return r.check(ctx, res, last, want)
}

// check checks a run that ended, last being its last master: the
// workers' exits, the master's, its memory, its trajectory and its counts.
func (r *runState) check(ctx context.Context, res *result, last *proc, want outcome) []finding {
	st := last.status()
	if st == "exit 1" {
		// esrun's report of a run that did not end says whether a task
		// exhausted its retries, and how each attempt failed.
		res.Exhausted = exhausted(r.sc, readFailedTask(r.report+".partial"))
	}
	// A failed run is one to resume: its master told the workers it will
	// be back, and they wait for it, -once or not (grid.Master.Interrupt).
	out := r.checkWorkers(ctx, r.once && res.Exhausted == "")
	if st != "exit 0" && res.Exhausted == "" {
		out = append(out, finding{kindExit, fmt.Sprintf("esrun: %s, want exit 0; %s", st, errorLine(last.err.kept()))})
	}
	out = append(out, checkMemory(r.peakRSS(res), int64(r.s.cfg.MaxRSS)<<20)...)
	var lines []string
	for _, m := range r.masters {
		lines = append(lines, m.out.kept()...)
	}
	report := r.report
	if res.Exhausted != "" {
		report += ".partial" // esrun's report of a run that did not end
	}
	got, err := readOutcome(report, r.ckpt, lines)
	if err != nil {
		return append(out, finding{kindExit, fmt.Sprintf("esrun left no report: %v", err)})
	}
	if res.Exhausted != "" {
		// The run stopped at the failed task: what it completed must
		// still be the in-process run's.
		return append(out, checkPrefix(got, want)...)
	}
	out = append(out, checkTrajectory(got, want)...)
	return append(out, checkCounts(got.rep, r.sc.ES)...)
}

// peakRSS returns each master's peak RSS and notes the largest in res.
func (r *runState) peakRSS(res *result) []int64 {
	var peaks []int64
	for _, m := range r.masters {
		peaks = append(peaks, m.peakRSS())
		res.PeakRSS = max(res.PeakRSS, m.peakRSS())
	}
	return peaks
}

// earlyExit: esrun ended before it listened.
type earlyExit struct{ msg string }

func (e *earlyExit) Error() string { return e.msg }

// errStall: a run went past its bound.
var errStall = errors.New("past its bound")

// bound is the run's bound with the faults seen so far.
func (r *runState) bound() bound {
	r.mu.Lock()
	defer r.mu.Unlock()
	return boundOf(r.sc, r.s.cfg.Slack, r.ob)
}

// watch cancels the run with errStall once it has lasted longer than its
// bound, which grows with the faults seen; the returned function stops it.
func (r *runState) watch(start time.Time, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if time.Since(start) > r.bound().Total {
					cancel(errStall)
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// drive starts the master and the workers, injects the faults, and
// returns the last master once it has exited.
func (r *runState) drive(ctx context.Context) (*proc, error) {
	m, err := r.startMaster(ctx, false)
	if err != nil {
		return nil, err
	}
	if rs := r.sc.Relay; rs != nil {
		p, err := r.startRelay(ctx, rs.Name, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.relay = p
		r.mu.Unlock()
	}
	for i, w := range r.sc.Workers {
		p, err := r.startWorker(w, w.Name)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.workers = append(r.workers, p)
		r.index[p] = i
		r.mu.Unlock()
		if w.Behind {
			r.faults[relayed]++
		}
		if w.Delay > 0 {
			r.faults[delayed]++
		}
		if w.HangEvery > 0 {
			r.faults[hangEvery]++
		}
		if w.Silent {
			r.faults[silent]++
		}
	}
	cctx, stopChaos := context.WithCancel(ctx)
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		r.chaos(cctx)
	}()
	defer func() {
		stopChaos()
		<-chaosDone // a stopped worker has been continued
	}()
	if r.sc.KillMaster > 0 {
		if m, err = r.restartMaster(ctx, m); err != nil {
			return nil, err
		}
	}
	if !m.wait(ctx) {
		return nil, ctx.Err()
	}
	return m, nil
}

// startMaster starts esrun, or esrun -resume, and waits until it listens.
func (r *runState) startMaster(ctx context.Context, resume bool) (*proc, error) {
	s := r.s
	args := []string{"-local", "0", "-listen", "127.0.0.1:0", "-policy", r.sc.Policy, "-report", r.report}
	if r.sc.ES.LoadMS > 0 {
		args = append(args, "-load-ms", strconv.Itoa(r.sc.ES.LoadMS))
	}
	if resume {
		// Workers come back on their own: the run need not wait for all.
		args = append(args, "-min-workers", "1", "-gossip", r.gossip, "-resume", r.ckpt,
			"-plugin", pluginName+"="+s.bin.plugin)
	} else {
		args = append(args, "-min-workers", strconv.Itoa(r.sc.agents()), "-gossip", "127.0.0.1:0", "-checkpoint", r.ckpt)
		args = append(args, r.sc.ES.args(s.bin.plugin)...)
	}
	if r.sc.Split != "" {
		args = append(args, "-split", r.sc.Split, "-master-cost", r.sc.MasterCost.String())
	}
	name := fmt.Sprintf("esrun-%d", len(r.masters)+1)
	m, err := s.procs.start(r.dir, name, s.bin.esrun, []string{s.keyEnv}, watch{
		keepOut: anyLine, onOut: r.sawLine, keepErr: masterErr,
		onErr: r.sawRootLog,
	}, args...)
	if err != nil {
		return nil, err
	}
	r.masters = append(r.masters, m)
	r.mu.Lock()
	r.ob.Masters++
	r.mu.Unlock()
	sub, err := m.err.waitLine(ctx, listening)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m.wait(ctx)
		return nil, &earlyExit{fmt.Sprintf("%s ended before it listened: %s; %s", name, m.status(), errorLine(m.err.kept()))}
	}
	r.gossip = sub[2]
	return m, nil
}

// restartMaster kills m once it has printed generation KillMaster (its
// checkpoint then exists), and starts esrun -resume at the same gossip
// address, where the workers look for it. A run over before that is left
// alone.
func (r *runState) restartMaster(ctx context.Context, m *proc) (*proc, error) {
	if !r.waitGen(ctx, r.sc.KillMaster, m.done) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return m, nil
	}
	if err := m.signal(syscall.SIGKILL); err != nil {
		return nil, err
	}
	r.count(killMaster)
	if !m.wait(ctx) {
		return nil, ctx.Err()
	}
	return r.startMaster(ctx, true)
}

// killAll kills every process of the run.
func (r *runState) killAll() {
	r.s.procs.killAll()
}

// lastLine is the last of lines, for a finding.
// errorLine returns esrun's error line among its stderr lines (the last
// that begins "esrun: "), or the last line when there is none.
func errorLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "esrun: ") {
			return lines[i]
		}
	}
	return lastLine(lines)
}

func lastLine(lines []string) string {
	if len(lines) == 0 {
		return "(no error line)"
	}
	return lines[len(lines)-1]
}
