package simgrid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// masterHost and masterAddr are the master's place on the simulated
// network.
const (
	masterHost = "127.0.0.1"
	masterAddr = masterHost + ":7947"
	relayHost  = "127.0.2.1"
	relayAddr  = relayHost + ":7950"
)

// Master timing in the simulated world: the defaults a user runs with,
// so that the bound a run must end within is the one a lab meets.
var masterTiming = grid.MasterConfig{
	DeadlineFactor: 4, DeadlineFloor: time.Second, FirstDeadline: 30 * time.Second,
	IdleTimeout: 30 * time.Second, TaskTimeout: 10 * time.Minute, ShutdownGrace: 5 * time.Second,
	MaxFailures: 3, VerifyWait: 30 * time.Second,
}

// workerTiming is the agents': reconnection backoff and the grace a
// cancelled evaluation has.
var workerTiming = worker.Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, AbandonGrace: 5 * time.Second}

// Accept is one result the master accepted.
type Accept struct {
	Master int // the master's incarnation (0, then 1 after a restart)
	Gen    int
	Task   int
	Worker string
}

// Outcome is what a simulated run did.
type Outcome struct {
	// Trajectory is the engine's statistics after every generation, in
	// order; a generation redone after a master restart appears once.
	Trajectory []es.Stats
	Final      []es.Individual // the last parents
	Err        error           // the run's error, if it failed
	Elapsed    time.Duration   // virtual time from start to the run's end
	// Closed is the virtual time at which the last master closed its
	// listener (0: it never did): a worker that dials it later cannot hear
	// that the run is over. Close may go on long after, waiting for
	// workers on their way back from child masters.
	Closed  time.Duration
	Accepts []Accept
	// Reports and Stats are each master incarnation's.
	Reports []sched.Report
	Stats   []grid.MasterStats
	// Batches lists, per incarnation, the task count of each batch it
	// was given (its generations), in order; Completed how many of them
	// it completed.
	Batches   [][]int
	Completed []int
	NetPeak   int // most bytes that ever waited in one direction of a link
	Unclosed  int // connections still open a minute after the run's end
	// Lingering lists the workers still in a session with a master the
	// master's shutdown grace after the run ended.
	Lingering []string
	// Waiting lists the workers still running then, out of any session:
	// looking for a master (as esworker -once would, for ever).
	Waiting []string
	// Began lists, per worker name, the virtual times at which its
	// evaluations began; BatchAt, per incarnation, when each of its
	// batches began.
	Began   map[string][]time.Duration
	BatchAt [][]time.Duration
	// Ready is, per worker name, when it first had a session's problem
	// built: the first time a master could give it work.
	Ready map[string]time.Duration
	// BatchPoints lists, per incarnation and batch (as Batches), each
	// task's point (pointKey); Evals every evaluation the workers began,
	// in order. With them the check tells a try that hung from one that
	// ran (hungTimeouts).
	BatchPoints [][][]uint64
	Evals       []Eval
}

// Eval is one evaluation a worker began: when, of which point
// (pointKey), and whether it was an emulated hang.
type Eval struct {
	Worker string // the name its agent gives the master
	Point  uint64
	At     time.Duration
	Hung   bool
}

// pointKey names a point, whoever evaluates it.
func pointKey(x []float64) uint64 {
	h := mix(0x9017)
	for _, v := range x {
		h = mix(h, math.Float64bits(v))
	}
	return h
}

// world is one simulated run in progress.
type world struct {
	sc  Scenario
	net *Network
	key *grid.Key
	log *slog.Logger

	mu        sync.Mutex
	out       Outcome
	curMaster *grid.Master // the incarnation running
	live      map[string]*worker.Agent

	agents sync.WaitGroup
	start  time.Time // the run's start on the virtual clock

	// lose, with Scenario.LoseGrandchild, is each machine's signal that
	// it is the grandchild master to lose (grandchildWatch).
	lose map[string]chan struct{}
}

// Run runs sc in the simulated world and returns what happened. It must
// be called inside a synctest bubble: every clock, timer and sleep it and
// the code it drives use is then virtual. log receives the trace: every
// line of the master and the workers, stamped with virtual time.
func Run(ctx context.Context, sc Scenario, log io.Writer) *Outcome {
	w := &world{sc: sc, net: NewNetwork(sc.Seed), live: map[string]*worker.Agent{}, start: time.Now()}
	w.out.Began = map[string][]time.Duration{}
	w.out.Ready = map[string]time.Duration{}
	start := w.start
	if sc.LoseGrandchild != nil {
		w.lose = map[string]chan struct{}{}
		for _, ws := range sc.Workers {
			w.lose[ws.Name] = make(chan struct{}, 1)
		}
		log = &grandchildWatch{Writer: log, lose: w.lose, gen: sc.LoseGrandchild.Gen, child: sc.LoseGrandchild.Child,
			atEnd: sc.LoseGrandchild.How == LoseFreeze, masters: map[string]string{}}
	}
	w.log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Duration("t", time.Since(start))
			}
			return a
		},
	}))
	key, err := grid.NewKey("simulated-cluster-key-of-32-bytes!")
	if err != nil {
		panic(err) // a constant key: a bug here, not an input
	}
	w.key = key
	for _, ws := range sc.Workers {
		w.net.SetDelay(ws.Host, ws.Delay[0], ws.Delay[1])
	}
	ctx, stopAgents := context.WithCancel(ctx)
	if sc.Relay != nil {
		w.net.SetDelay(relayHost, sc.Relay.Delay[0], sc.Relay.Delay[1])
		w.agents.Add(1)
		go w.relay(ctx)
	}
	for _, ws := range sc.Workers {
		w.agents.Add(1)
		go w.machine(ctx, ws)
	}
	w.runES(ctx)
	w.out.Elapsed = time.Since(start)
	// The workers were told the run is over: those connected end by
	// themselves, once their evaluations have returned or been abandoned
	// (AbandonGrace); the rest (cut off, or between connections) are
	// stopped once that has passed.
	sleep(ctx, lingerAfter)
	w.mu.Lock()
	for name, a := range w.live {
		if a.Activity().Connected {
			// Still in a session with a master (a child master, say)
			// that never said the run is over.
			w.out.Lingering = append(w.out.Lingering, name)
		} else {
			w.out.Waiting = append(w.out.Waiting, name)
		}
	}
	w.mu.Unlock()
	slices.Sort(w.out.Lingering)
	slices.Sort(w.out.Waiting)
	stopAgents()
	w.agents.Wait()
	w.out.NetPeak = w.net.Peak()
	// Every connection is closed by now, or in its last bytes: one left
	// open is a leak.
	w.out.Unclosed = w.net.Settle(time.Minute)
	return &w.out
}

// runES runs the ES over master incarnations until it ends.
func (w *world) runES(ctx context.Context) {
	eng, err := es.New(w.sc.ES)
	if err != nil {
		w.out.Err = err
		return
	}
	restart := w.sc.Restart
	var excluded []grid.Exclusion
	for inc := 0; ; inc++ {
		ckpt, killed, err := w.incarnation(ctx, inc, eng, restart, excluded)
		if !killed {
			w.out.Err = err
			if err == nil {
				w.out.Final = eng.Parents()
			}
			return
		}
		restart = nil
		// The master is dead; a new one comes up and resumes from the
		// checkpoint, as esrun -resume does.
		w.log.Info("sim: master killed", "down_for", w.sc.Restart.Down)
		if !sleep(ctx, w.sc.Restart.Down) {
			w.out.Err = ctx.Err()
			return
		}
		// It starts with the hosts excluded when the checkpoint was
		// written, as esrun's, which keeps them in it.
		excluded = ckpt.excluded
		eng = new(es.Engine)
		if err := eng.UnmarshalBinary(ckpt.state); err != nil {
			w.out.Err = fmt.Errorf("sim: resume: %w", err)
			return
		}
		w.mu.Lock()
		// Generations the dead master completed after the checkpoint are
		// done again; the trajectory keeps what the resumed run does.
		if keep := eng.Gen(); len(w.out.Trajectory) > keep {
			w.out.Trajectory = w.out.Trajectory[:keep]
		}
		w.mu.Unlock()
	}
}

// checkpoint is what a master leaves for the next: the engine's state
// and the hosts excluded when it was saved.
type checkpoint struct {
	state    []byte
	excluded []grid.Exclusion
}

// incarnation runs one master, starting with the hosts excluded, until
// the ES ends or the master is killed (restart). It returns the last
// checkpoint and whether it was killed.
func (w *world) incarnation(ctx context.Context, inc int, eng *es.Engine, restart *Restart, excluded []grid.Exclusion) (checkpoint, bool, error) {
	ln, err := w.net.Listen(masterAddr)
	if err != nil {
		return checkpoint{}, false, err
	}
	w.mu.Lock()
	w.out.Batches = append(w.out.Batches, nil)
	w.out.BatchAt = append(w.out.BatchAt, nil)
	w.out.BatchPoints = append(w.out.BatchPoints, nil)
	w.out.Completed = append(w.out.Completed, 0)
	w.mu.Unlock()
	cfg := masterTiming
	cfg.Listener = &closeNoted{Listener: ln, w: w}
	cfg.Key = w.key
	cfg.Policy = w.sc.Policy
	cfg.Sched = sched.Config{Adaptive: w.sc.Adaptive}
	cfg.Problem = grid.ProblemSpec{Name: w.sc.ES.Problem, Dim: w.sc.ES.Dim}
	cfg.Verify = w.sc.Verify
	cfg.Excluded = excluded
	if w.sc.Split {
		cfg.Split = grid.SplitConfig{Rule: grid.SplitPaper, MessageCost: w.sc.MessageCost}
	}
	cfg.MaxRetries = w.sc.MaxRetries
	cfg.Logger = w.log.With("master", inc)
	cfg.OnAccept = func(gen, task int, name string, _ time.Duration) {
		w.mu.Lock()
		w.out.Accepts = append(w.out.Accepts, Accept{Master: inc, Gen: gen, Task: task, Worker: name})
		w.mu.Unlock()
	}
	mctx, kill := context.WithCancel(ctx)
	defer kill()
	m, err := grid.NewMaster(mctx, cfg)
	if err != nil {
		return checkpoint{}, false, err
	}
	w.mu.Lock()
	w.curMaster = m
	w.mu.Unlock()
	var ckpt checkpoint // after generation 0 only: a kill comes after one
	var killMu sync.Mutex
	killed := false
	ev := es.EvaluatorFunc(func(ctx context.Context, gen int, xs [][]float64) ([]float64, error) {
		w.mu.Lock()
		w.out.Batches[inc] = append(w.out.Batches[inc], len(xs))
		w.out.BatchAt[inc] = append(w.out.BatchAt[inc], time.Since(w.start))
		points := make([]uint64, len(xs))
		for i, x := range xs {
			points[i] = pointKey(x)
		}
		w.out.BatchPoints[inc] = append(w.out.BatchPoints[inc], points)
		w.mu.Unlock()
		// The ES computes in no virtual time: its next batch would reach
		// the loop at the instant of the last one's end, and come in the
		// turn of its last results or after it as the goroutines ran.
		// After, always: the loop's turn ends first.
		synctest.Wait()
		f, err := m.Evaluate(ctx, gen, xs)
		if err == nil {
			w.mu.Lock()
			w.out.Completed[inc]++
			w.mu.Unlock()
		}
		return f, err
	})
	_, runErr := eng.Run(mctx, ev, es.RunOptions{OnGeneration: func(st es.Stats) error {
		w.mu.Lock()
		w.out.Trajectory = append(w.out.Trajectory, st)
		w.mu.Unlock()
		b, err := eng.MarshalBinary()
		if err != nil {
			return err
		}
		ckpt = checkpoint{state: b, excluded: m.Excluded()}
		if restart != nil && st.Gen == restart.AfterGen {
			// SIGKILL: the process is gone, its sockets reset, nothing
			// said to the workers.
			time.AfterFunc(restart.At, func() {
				killMu.Lock()
				killed = true
				killMu.Unlock()
				w.net.Reset(masterHost)
				settle()
				kill()
			})
		}
		return nil
	}})
	killMu.Lock()
	wasKilled := killed
	killMu.Unlock()
	if !wasKilled && ctx.Err() != nil {
		// Stalled past its bound: what the master thinks of each worker
		// is what explains it.
		for _, ws := range m.WorkerStats() {
			w.log.Warn("sim: stalled; the master's view", "worker", ws.Name, "worker_id", ws.ID, "slots", ws.Slots,
				"outstanding", ws.Outstanding, "queued", ws.Queued, "running", ws.Running, "late", ws.Late, "draining", ws.Draining, "aside", ws.Aside)
		}
		st := m.Stats()
		w.log.Warn("sim: stalled; the master's counts", "stats", fmt.Sprintf("%+v", st))
	}
	// A normal end: the master tells the workers the run is over. A
	// killed one only ends its goroutines: its sockets are already gone.
	m.Close()
	w.mu.Lock()
	w.curMaster = nil
	w.out.Reports = append(w.out.Reports, m.Report())
	w.out.Stats = append(w.out.Stats, m.Stats())
	w.mu.Unlock()
	if wasKilled && runErr != nil {
		return ckpt, true, nil
	}
	return ckpt, false, runErr
}

// machine is one worker machine's life: its agent starts, and the faults
// of its spec befall it at their times.
func (w *world) machine(ctx context.Context, ws WorkerSpec) {
	defer w.agents.Done()
	if !sleep(ctx, ws.Join) {
		return
	}
	t0 := ws.Join
	// One generator per machine, seeded by the run and the name: its
	// draws never depend on other machines.
	rng := rand.New(rand.NewPCG(w.sc.Seed, hashString(ws.Name)))
	timer := time.NewTimer(time.Hour) // the next fault's; Reset before each wait
	timer.Stop()
	defer timer.Stop()
	for life := 0; ; life++ {
		actx, stop := context.WithCancel(ctx)
		a, err := worker.New(w.agentConfig(ws, rng, actx.Done()))
		if err != nil {
			stop()
			w.log.Error("sim: worker config", "worker", ws.Name, "err", err)
			return
		}
		done := make(chan error, 1)
		w.mu.Lock()
		w.live[ws.Name] = a
		w.mu.Unlock()
		go func() {
			err := a.Run(actx)
			w.mu.Lock()
			delete(w.live, ws.Name)
			w.mu.Unlock()
			done <- err
		}()
		// The faults of this life, in time order.
		var events []func()
		var at []time.Duration
		if life == 0 {
			if ws.Freeze > 0 {
				at = append(at, ws.Freeze)
				events = append(events, func() { w.freeze(ctx, ws) })
			}
			if ws.Drain > 0 {
				at = append(at, ws.Drain)
				events = append(events, func() {
					w.log.Info("sim: worker drains", "worker", ws.Name)
					a.Drain()
				})
			}
			if ws.Kill > 0 {
				at = append(at, ws.Kill)
				events = append(events, nil) // the kill ends this life
			}
			if ws.OneWay > 0 {
				at = append(at, ws.OneWay)
				events = append(events, func() { w.oneWay(ctx, ws) })
			}
			if ws.Slow > 0 {
				at = append(at, ws.Slow)
				events = append(events, func() {
					w.log.Info("sim: worker's links slow", "worker", ws.Name, "for", ws.SlowFor, "by", ws.SlowBy)
					w.net.Slow(ws.Host, ws.SlowBy, time.Now().Add(ws.SlowFor))
				})
			}
		}
		killed := false
		var lose chan struct{} // this machine is the grandchild to lose
		if life == 0 {
			lose = w.lose[ws.Name]
		}
	life:
		for len(at) > 0 || lose != nil {
			i := 0
			for j := range at {
				if at[j] < at[i] {
					i = j
				}
			}
			var due <-chan time.Time // nil: no event to wait for
			if len(at) > 0 {
				timer.Reset(max(at[i]-t0, 0))
				due = timer.C
			}
			select {
			case <-due:
				t0 = at[i]
				if events[i] == nil {
					killed = true
					break life
				}
				events[i]()
				at = append(at[:i], at[i+1:]...)
				events = append(events[:i], events[i+1:]...)
			case <-lose:
				// A moment later, on a timer as every fault: the signal
				// came at an instant other goroutines share.
				g := w.sc.LoseGrandchild
				lose = nil
				t0 = time.Since(w.start)
				at = append(at, t0+max(g.After, time.Nanosecond))
				w.log.Info("sim: grandchild master to be lost", "worker", ws.Name, "how", g.How, "in", g.After)
				switch g.How {
				case LoseKill:
					events = append(events, nil) // the kill ends this life
				case LoseFreeze:
					events = append(events, func() {
						w.log.Info("sim: grandchild master frozen", "worker", ws.Name, "for", g.For)
						w.net.Partition(ws.Host, time.Now().Add(g.For))
					})
				default:
					events = append(events, func() {
						w.log.Info("sim: grandchild master cut off", "worker", ws.Name)
						w.net.Reset(ws.Host)
						settle()
					})
				}
			case err := <-done:
				done <- err
				break life
			}
		}
		if killed && ws.HalfOpen > 0 {
			// A crash: its connections stay half-open at their far
			// ends until a later instant, whatever happens meanwhile.
			w.log.Info("sim: worker crashed; its connections half-open", "worker", ws.Name, "for", ws.HalfOpen)
			reset := w.net.HalfOpen(ws.Host)
			w.agents.Add(1)
			go func() {
				defer w.agents.Done()
				if sleep(ctx, ws.HalfOpen) {
					w.log.Info("sim: the crashed worker's half-open connections reset", "worker", ws.Name)
				}
				reset()
			}()
			settle()
		} else if killed {
			w.log.Info("sim: worker killed", "worker", ws.Name)
			w.net.Reset(ws.Host)
			settle()
		}
		if killed {
			stop()
			<-done
			if ws.Back == 0 || !sleep(ctx, ws.Back) {
				return
			}
			t0 += ws.Back
			w.log.Info("sim: worker restarted", "worker", ws.Name)
			continue
		}
		err = <-done
		stop()
		if err != nil && !errors.Is(err, worker.ErrShutdown) && !errors.Is(err, context.Canceled) {
			w.log.Warn("sim: worker ended", "worker", ws.Name, "err", err)
		}
		return
	}
}

// grandchildWatch passes the trace on and, seeing the first grandchild
// master (a worker promoted by a master other than the root) of
// generation gen or later take its first worker (or, atEnd, seeing its
// parent hear that the run is over while it is a master still: the
// first that has not returned by then), signals that machine
// (Scenario.LoseGrandchild). The trace is the only outside sign of a
// promotion; each line is one Write.
type grandchildWatch struct {
	io.Writer
	lose  map[string]chan struct{}
	gen   int
	atEnd bool
	child bool // the root's child, as its agent hears its promotion

	mu      sync.Mutex
	name    string            // the grandchild's worker, once promoted
	parent  string            // ... and its parent's address
	masters map[string]string // child masters' names, by address (atEnd)
	fired   bool
}

func (g *grandchildWatch) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n") + " " // attr's values end in a space
	g.mu.Lock()
	if g.atEnd && strings.Contains(line, `msg="child master started"`) {
		g.masters[attr(line, "addr")] = attr(line, "child")
	}
	fire := false
	switch {
	case g.fired:
	case g.child && g.atEnd:
		switch {
		case g.name == "" && strings.Contains(line, `msg="promoted to a child master"`) && attr(line, "parent") == masterAddr &&
			atoi(attr(line, "gen")) >= g.gen:
			g.name = attr(line, "worker")
		case g.name != "" && strings.Contains(line, `msg="child master done; back to work as a worker"`) && attr(line, "worker") == g.name:
			g.name = "" // returned before the end: the next one
		default:
			fire = g.name != "" && strings.Contains(line, `msg="the parent master ended the run"`) && attr(line, "child") == g.name
		}
	case g.child:
		if strings.Contains(line, `msg="promoted to a child master"`) && attr(line, "parent") == masterAddr && atoi(attr(line, "gen")) >= g.gen {
			g.name, fire = attr(line, "worker"), true
		}
	case g.name == "" && strings.Contains(line, `msg="promoted to a child master"`) && attr(line, "parent") != masterAddr &&
		atoi(attr(line, "gen")) >= g.gen:
		g.name, g.parent = attr(line, "worker"), attr(line, "parent")
	case g.atEnd && g.name != "" && strings.Contains(line, `msg="child master done; back to work as a worker"`) && attr(line, "worker") == g.name:
		g.name = "" // returned before the end: the next one
	case g.atEnd:
		fire = g.name != "" && strings.Contains(line, `msg="the parent master ended the run"`) &&
			attr(line, "child") == g.masters[g.parent]
	default:
		fire = g.name != "" && strings.Contains(line, `msg="worker joined"`) && strings.Contains(line, " child="+g.name+" ")
	}
	if fire {
		g.fired = true
		if ch := g.lose[g.name]; ch != nil {
			ch <- struct{}{}
		}
	}
	g.mu.Unlock()
	return g.Writer.Write(p)
}

// atoi is s's value, or -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// relay is the relay machine's life: a relay (esworker -relay) serving
// run after run, killed and started again as its spec says.
func (w *world) relay(ctx context.Context) {
	defer w.agents.Done()
	rs := w.sc.Relay
	rng := rand.New(rand.NewPCG(w.sc.Seed, hashString(relayHost)))
	for life := 0; ; life++ {
		ln, err := w.net.Listen(relayAddr)
		if err != nil {
			w.log.Error("sim: relay listener", "err", err)
			return
		}
		rctx, stop := context.WithCancel(ctx)
		r, err := grid.NewRelay(grid.RelayConfig{
			Listener: ln, Key: w.key, Name: "relay",
			Upstream: func(context.Context, int) (string, error) { return masterAddr, nil },
			Network:  w.net.Host(relayHost), Rand: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
			MinBackoff: workerTiming.MinBackoff, MaxBackoff: workerTiming.MaxBackoff, Logger: w.log,
		})
		if err != nil {
			stop()
			w.log.Error("sim: relay", "err", err)
			return
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		if life > 0 || rs.Kill == 0 {
			<-done
			stop()
			return
		}
		if !sleep(ctx, rs.Kill) {
			stop()
			<-done
			return
		}
		w.log.Info("sim: relay killed")
		w.net.Reset(relayHost)
		settle()
		stop()
		<-done
		if !sleep(ctx, rs.Back) {
			return
		}
		w.log.Info("sim: relay restarted")
	}
}

// freeze cuts ws off for FreezeFor; gossip declares it dead to the master
// if the freeze outlasts its detection time.
func (w *world) freeze(ctx context.Context, ws WorkerSpec) {
	w.log.Info("sim: worker frozen", "worker", ws.Name, "for", ws.FreezeFor)
	w.net.Partition(ws.Host, time.Now().Add(ws.FreezeFor))
	if ws.Gossip < ws.FreezeFor {
		go func() {
			if sleep(ctx, ws.Gossip) {
				w.log.Info("sim: gossip declares the worker dead", "worker", ws.Name)
				w.memberFailed(ws.agentName())
			}
		}()
	}
}

// oneWay holds ws's bytes one way for OneWayFor; gossip, whose probes
// need both ways, declares it dead if that outlasts its detection time.
func (w *world) oneWay(ctx context.Context, ws WorkerSpec) {
	dir := "to it"
	if ws.OneWayOut {
		dir = "from it"
	}
	w.log.Info("sim: worker partitioned one way", "worker", ws.Name, "held", dir, "for", ws.OneWayFor)
	w.net.OneWay(ws.Host, ws.OneWayOut, time.Now().Add(ws.OneWayFor))
	if ws.Gossip < ws.OneWayFor {
		go func() {
			if sleep(ctx, ws.Gossip) {
				w.log.Info("sim: gossip declares the worker dead", "worker", ws.Name)
				w.memberFailed(ws.agentName())
			}
		}()
	}
}

// memberFailed tells the running master what gossip would.
func (w *world) memberFailed(name string) {
	w.mu.Lock()
	m := w.curMaster
	w.mu.Unlock()
	if m != nil {
		m.HandleMemberEvent(grid.MemberEvent{Kind: grid.MemberFailed, Member: grid.Member{Name: name, Meta: grid.NodeMeta{Role: grid.RoleWorker}}})
	}
}

func (w *world) agentConfig(ws WorkerSpec, rng *rand.Rand, stop <-chan struct{}) worker.Config {
	cfg := workerTiming
	cfg.Master = masterAddr
	if ws.Relayed {
		cfg.Master = relayAddr
	}
	cfg.Key = w.key
	cfg.Name = ws.agentName()
	cfg.Slots = ws.Slots
	cfg.Problems = []string{w.sc.ES.Problem}
	cfg.Faults = worker.Faults{Silent: ws.Silent}
	cfg.Network = w.net.Host(ws.Host)
	if w.sc.shared(ws) {
		cfg.Network = w.net.Agent(ws.Host, ws.Name)
	}
	cfg.Rand = rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	cfg.Logger = w.log
	// The machine's count of its evaluations of each point, over all its
	// sessions: a session's problem, built afresh, counted from 0, so
	// that a point that hung a session's first try hung the first try of
	// every session after (a task cut short at the deadlines' ceiling
	// then ran to the task timeout, was dropped with its worker, and hung
	// again when the worker came back, until the run failed).
	seen := &evalCounts{n: map[uint64]uint64{}}
	cfg.Build = func(spec grid.ProblemSpec) (problems.Problem, error) {
		p, err := problems.New(spec.Name, spec.Dim)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		if _, ok := w.out.Ready[ws.Name]; !ok {
			w.out.Ready[ws.Name] = time.Since(w.start)
		}
		w.mu.Unlock()
		began := func() {
			w.mu.Lock()
			w.out.Began[ws.Name] = append(w.out.Began[ws.Name], time.Since(w.start))
			w.mu.Unlock()
		}
		evaluated := func(x []float64, hung bool) {
			w.mu.Lock()
			w.out.Evals = append(w.out.Evals, Eval{Worker: ws.agentName(), Point: pointKey(x), At: time.Since(w.start), Hung: hung})
			w.mu.Unlock()
		}
		return &timed{Problem: p, long: w.sc.long, longPoints: w.sc.Long, seed: w.sc.Seed, name: hashString(ws.Name), mean: ws.Task, start: ws.NoCancel, began: began, evaluated: evaluated,
			failEvery: ws.FailEvery, hangEvery: ws.HangEvery, liar: ws.Liar, nan: ws.NaN, seen: seen, stop: stop}, nil
	}
	return cfg
}

// timed is a problem whose evaluations take virtual time: a draw in
// [mean/2, 3·mean/2] fixed by the seed, the worker and the point, so that
// two evaluations almost never end at one instant. It stops when
// cancelled, as a well-behaved long evaluation does. With failEvery or
// hangEvery, about one evaluation in that many fails, or hangs deaf to
// its cancel until the machine stops: which ones is drawn from the seed,
// the worker, the point and how often this machine evaluated it before
// (in any session of its life),
// never from the order in which slots that start at one instant count
// (worker.Faults counts, so its choice would race).
type timed struct {
	problems.Problem
	seed, name           uint64
	mean                 time.Duration
	failEvery, hangEvery int
	liar                 int             // one value in about liar is wrong
	nan                  bool            // every value is NaN
	stop                 <-chan struct{} // the machine's life ends
	began                func()          // an evaluation begins (Outcome.Began)
	// evaluated records an evaluation of x, and whether it hangs
	// (Outcome.Evals), as it is decided.
	evaluated func(x []float64, hung bool)
	// long says x is one of longPoints (Scenario.Long): it takes their
	// time, or hangs, on every worker.
	long       func(x []float64) bool
	longPoints *LongPoints
	// start, when > 0: a plugin that cannot be cancelled, whose
	// processes take start to start (WorkerSpec.NoCancel).
	start time.Duration

	seen *evalCounts // the machine's evaluations of each point so far

	mu     sync.Mutex
	killed int // start > 0: processes killed, to start again
}

func (p *timed) Eval(ctx context.Context, x []float64) (float64, error) {
	p.began()
	h := mix(p.seed, p.name)
	for _, v := range x {
		h = mix(h, math.Float64bits(v))
	}
	k := p.seen.next(h)
	fault := mix(h, k)
	if p.start > 0 {
		if err := p.restart(ctx); err != nil {
			return 0, err
		}
	}
	hang := p.hangEvery > 0 && fault%uint64(p.hangEvery) == 0
	long := p.long(x)
	hang = hang || long && p.longPoints.Hang
	p.evaluated(x, hang)
	if hang {
		if p.start == 0 {
			<-p.stop
			return 0, errors.New("emulated hang ended with the machine")
		}
		select {
		case <-ctx.Done():
			return 0, p.cancelled(ctx, time.Duration(math.MaxInt64))
		case <-p.stop:
			return 0, errors.New("emulated hang ended with the machine")
		}
	}
	// The evaluation's time, then its end: a failure too comes after
	// the time it took, so that it ends at an instant of its own.
	d := p.mean/2 + time.Duration(mix(h, k)%uint64(p.mean+1)) | 1
	if long {
		d = p.longPoints.Took
	}
	began := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		if p.start > 0 {
			return 0, p.cancelled(ctx, d-time.Since(began))
		}
		return 0, ctx.Err()
	}
	if p.failEvery > 0 && (fault>>32)%uint64(p.failEvery) == 0 {
		return 0, fmt.Errorf("emulated failure (about one evaluation in %d)", p.failEvery)
	}
	if p.nan {
		return math.NaN(), nil
	}
	f, err := p.Problem.Eval(ctx, x)
	if err == nil && p.liar > 0 && (fault>>16)%uint64(p.liar) == 0 {
		f += 1 // a plausible lie
	}
	return f, err
}

// evalCounts counts a machine's evaluations of each point (by its hash
// with the machine's), across its sessions: evaluations of an old session,
// abandoned deaf to their cancel, may still begin as a new one runs.
type evalCounts struct {
	mu sync.Mutex
	n  map[uint64]uint64
}

// next returns how often h was evaluated before, and counts one more.
func (c *evalCounts) next(h uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.n[h]
	c.n[h]++
	return k
}

// restart waits for a process killed earlier to start again, as the
// plugin host does: the start outlives a cancel of this evaluation.
func (p *timed) restart(ctx context.Context) error {
	p.mu.Lock()
	again := p.killed > 0
	if again {
		p.killed--
	}
	p.mu.Unlock()
	if again && !p.pause(p.start) {
		return errors.New("emulated start ended with the machine")
	}
	return ctx.Err()
}

// cancelled is the plugin host's answer to a cancel of an evaluation
// with left to run (problems/plugin, cancelEval): while evaluations are
// quicker than starts it lets the evaluation finish within a start's time
// (at most the host's default grace, 1 s); if it has not by then, or
// evaluations are slower, its process is killed and the next evaluation
// starts a new one.
func (p *timed) cancelled(ctx context.Context, left time.Duration) error {
	wait := time.Duration(0)
	if p.mean < p.start {
		wait = min(p.start, time.Second)
	}
	if !p.pause(min(left, wait)) {
		return errors.New("emulated evaluation ended with the machine")
	}
	if left > wait {
		p.mu.Lock()
		p.killed++
		p.mu.Unlock()
	}
	return ctx.Err()
}

// pause waits d of virtual time, or until the machine stops (then
// false).
func (p *timed) pause(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stop:
		return false
	}
}

// lingerAfter is how long after the run's end a worker may still be in
// a session: the master's grace for its goodbyes, then the agent's for
// evaluations deaf to their cancel.
var lingerAfter = masterTiming.ShutdownGrace + workerTiming.AbandonGrace + time.Second

// settle lets everything that the instant's event set off finish before
// the next event: virtual time moves on only once every goroutine waits,
// so two events one nanosecond apart never race, as two at one instant
// would.
func settle() { time.Sleep(time.Nanosecond) }

// sleep waits d of virtual time, or less if ctx ends (then false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeNoted notes in Outcome.Closed when the master closes its listener.
type closeNoted struct {
	net.Listener
	w    *world
	once sync.Once
}

func (l *closeNoted) Close() error {
	l.once.Do(func() {
		l.w.mu.Lock()
		l.w.out.Closed = time.Since(l.w.start)
		l.w.mu.Unlock()
	})
	return l.Listener.Close()
}
