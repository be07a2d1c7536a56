package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/sched"
)

// pluginName is the problem the soak runs: the plugin soakplugin serves.
const pluginName = "soak"

// scenario is one run: its grid, its ES and its chaos, all drawn from
// its seed.
type scenario struct {
	Seed    uint64
	Policy  string
	ES      esConfig
	Workers []workerSpec
	// Faults are injected in order, each once the master has printed the
	// generation AtGen.
	Faults []fault
	// KillMaster > 0: the master is killed with SIGKILL once generation
	// KillMaster is printed and checkpointed, and esrun -resume continues
	// the run; the workers then run without -once.
	KillMaster int
	// Split is esrun -split (paper or gain), "" for none, and MasterCost
	// its -master-cost: a master made slow, so that fine tasks on a few
	// workers overload it and it promotes workers to child masters.
	Split      string
	MasterCost time.Duration
	// Relay, if not nil, is an esworker -relay joined to the master; the
	// workers with Behind reach the master through it (-master, no -join).
	Relay *relaySpec
}

// relaySpec is the relay's esworker: its agent works behind its own relay
// with Slots, unless Only (-relay-only).
type relaySpec struct {
	Name  string
	Slots int
	Only  bool
}

// agents is the number of workers that join the master at the start:
// every esworker, and the relay's own unless it only relays.
func (s scenario) agents() int {
	n := len(s.Workers)
	if s.Relay != nil && !s.Relay.Only {
		n++
	}
	return n
}

// esConfig is what fixes a run's trajectory: the same config gives the
// same run bit for bit, however it is evaluated. LoadMS only adds work.
type esConfig struct {
	Dim, Mu, Lambda, Gens int
	Seed                  uint64
	LoadMS                int
}

// args are esrun's ES flags for c (without the load).
func (c esConfig) args(plugin string) []string {
	return []string{"-problem", pluginName, "-plugin", pluginName + "=" + plugin,
		"-dim", strconv.Itoa(c.Dim), "-mu", strconv.Itoa(c.Mu), "-lambda", strconv.Itoa(c.Lambda),
		"-gens", strconv.Itoa(c.Gens), "-seed", strconv.FormatUint(c.Seed, 10)}
}

// key names the trajectory in messages.
func (c esConfig) key() string {
	return fmt.Sprintf("dim=%d mu=%d lambda=%d gens=%d seed=%d", c.Dim, c.Mu, c.Lambda, c.Gens, c.Seed)
}

// tasks is the number of evaluations of the whole run: μ, then λ a
// generation.
func (c esConfig) tasks() int { return c.Mu + c.Gens*c.Lambda }

// workerSpec is one esworker process and its plugin's faults.
type workerSpec struct {
	Name      string
	Slots     int
	Delay     time.Duration // esworker -delay
	Slowdown  int           // esworker -slowdown (a plugin's wall time)
	HangEvery int           // esworker -hang-every
	FailEvery int           // esworker -fail-every
	Silent    bool          // esworker -silent: takes tasks, never answers
	// PluginCrashEvery and PluginHangEvery make the plugin process crash
	// (exit) or hang on its K-th evaluation (soakplugin).
	PluginCrashEvery, PluginHangEvery int
	// Behind: the worker reaches the master through the scenario's relay
	// (it is never moved nor promoted, and joins no gossip).
	Behind bool
}

// args are esworker's flags for w, but -join, -master and -once.
func (w workerSpec) args(plugin string) []string {
	a := []string{"-name", w.Name, "-slots", strconv.Itoa(w.Slots), "-plugin", pluginName + "=" + plugin}
	if !w.Behind {
		a = append(a, "-gossip", "127.0.0.1:0")
	}
	if w.Delay > 0 {
		a = append(a, "-delay", w.Delay.String())
	}
	if w.Slowdown > 1 {
		a = append(a, "-slowdown", strconv.Itoa(w.Slowdown))
	}
	if w.HangEvery > 0 {
		a = append(a, "-hang-every", strconv.Itoa(w.HangEvery))
	}
	if w.FailEvery > 0 {
		a = append(a, "-fail-every", strconv.Itoa(w.FailEvery))
	}
	if w.Silent {
		a = append(a, "-silent")
	}
	return a
}

// env is the plugin's faults, for the esworker's environment (it passes
// it on to its plugin processes).
func (w workerSpec) env(events string) []string {
	e := []string{"ESSOAK_EVENTS=" + events}
	if w.PluginCrashEvery > 0 {
		e = append(e, "ESSOAK_CRASH_EVERY="+strconv.Itoa(w.PluginCrashEvery))
	}
	if w.PluginHangEvery > 0 {
		e = append(e, "ESSOAK_HANG_EVERY="+strconv.Itoa(w.PluginHangEvery))
	}
	return e
}

// Kinds of fault a scenario injects while it runs.
const (
	killWorker = "kill-worker" // SIGKILL to its process group; a replacement joins
	stopWorker = "stop-worker" // SIGSTOP, then SIGCONT after Stop
	// killChild and stopChild hit the process of a worker promoted to a
	// child master: the first promoted once AtGen is printed, After its
	// promotion (a child lives for part of a generation).
	killChild = "kill-child"
	stopChild = "stop-child"
	// killRelay and stopRelay hit the relay's process; a relay killed is
	// started again at the same address, where its workers look for it.
	killRelay = "kill-relay"
	stopRelay = "stop-relay"
)

// fault is one fault injected while the run goes on.
type fault struct {
	Kind   string
	AtGen  int
	Worker int           // index in the scenario's Workers (kill-worker, stop-worker)
	Stop   time.Duration // a stop's: how long the process stays stopped
	After  time.Duration // kill-child, stop-child: the wait from the promotion
}

// stops says whether the fault stops a process (and continues it).
func (f fault) stops() bool {
	return f.Kind == stopWorker || f.Kind == stopChild || f.Kind == stopRelay
}

// maxStop bounds a worker's stop: less than the master's idle timeout on
// a connection (30 s), so a stopped worker is late, not lost.
const maxStop = 5 * time.Second

// drawScenario draws the scenario of seed within l. The same seed and
// Limits give the same scenario.
func drawScenario(seed uint64, l Limits) scenario {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	chance := func(p float64) bool { return r.Float64() < p }
	// Faults added later draw from streams of their own, so that a seed's
	// scenario keeps the faults it had.
	silentR := rand.New(rand.NewPCG(seed, 0x5113))
	s := scenario{Seed: seed, Policy: sched.Names[r.IntN(len(sched.Names))]}
	mu := in(2, min(10, l.Lambda-2))
	s.ES = esConfig{
		Dim: in(2, 10), Mu: mu, Lambda: in(mu+2, l.Lambda), Gens: in(4, l.Gens),
		Seed: r.Uint64() >> 1, LoadMS: []int{0, 1, 2, 5, 10}[r.IntN(5)],
	}
	n := in(1, l.Workers)
	for i := range n {
		w := workerSpec{Name: fmt.Sprintf("w%d", i), Slots: in(1, 3), Slowdown: 1}
		if chance(0.3) {
			w.Delay = time.Duration(in(1, 20)) * time.Millisecond
		}
		if chance(0.2) {
			w.Slowdown = 2
		}
		if chance(0.3) {
			w.PluginCrashEvery = in(5, 30)
		}
		if chance(0.15) {
			w.PluginHangEvery = in(8, 40)
		}
		if chance(0.1) {
			w.HangEvery = in(20, 80)
		}
		if chance(0.15) {
			w.FailEvery = in(10, 40)
		}
		// Never the first: some worker must compute.
		w.Silent = i > 0 && silentR.Float64() < l.Silent
		s.Workers = append(s.Workers, w)
	}
	last := s.ES.Gens - 1 // a fault at the last generation would find the run over
	for range in(0, 2) {
		if chance(0.4) {
			s.Faults = append(s.Faults, fault{Kind: killWorker, AtGen: in(0, last), Worker: r.IntN(n)})
		}
		if chance(0.4) {
			s.Faults = append(s.Faults, fault{Kind: stopWorker, AtGen: in(0, last), Worker: r.IntN(n),
				Stop: time.Duration(in(200, int(maxStop/time.Millisecond))) * time.Millisecond})
		}
	}
	if chance(0.25) {
		s.KillMaster = in(1, last-1)
	}
	drawSplit(&s, rand.New(rand.NewPCG(seed, 0x5b117)), l)
	drawRelay(&s, rand.New(rand.NewPCG(seed, 0x4e1a7)), l)
	slices.SortStableFunc(s.Faults, func(a, b fault) int { return a.AtGen - b.AtGen })
	return s
}

// drawSplit makes s, with chance l.Split, a run whose master splits:
// -split paper or gain and a master made slow (200 µs–2 ms a message),
// on 4–10 workers (one-slot workers added to those drawn) with fine tasks
// (no load, or 1 ms) and generations of 2–6 × l.Lambda tasks, at most 8
// of them, so that one master saturates and promotes; and faults on the
// children: a promoted worker killed, or stopped up to maxStop. Its own
// stream r keeps every other part of a seed's scenario.
func drawSplit(s *scenario, r *rand.Rand, l Limits) {
	if r.Float64() >= l.Split {
		return
	}
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	s.Split = []string{"paper", "gain"}[r.IntN(2)]
	s.MasterCost = time.Duration(in(200, 2000)) * time.Microsecond
	if s.Policy == "cyclic" { // it deals every task out at once: no queue to share
		s.Policy = []string{"wq", "rr", "rwq", "r3q", "eft"}[r.IntN(5)]
	}
	s.ES.LoadMS = []int{0, 0, 1}[r.IntN(3)]
	s.ES.Lambda = in(2*l.Lambda, 6*l.Lambda)
	s.ES.Gens = min(s.ES.Gens, 8)
	last := s.ES.Gens - 1
	for i := range s.Faults { // the faults drawn stay within the run
		s.Faults[i].AtGen = min(s.Faults[i].AtGen, last)
	}
	s.KillMaster = min(s.KillMaster, last-1)
	for n := in(4, 10); len(s.Workers) < n; {
		s.Workers = append(s.Workers, workerSpec{Name: fmt.Sprintf("w%d", len(s.Workers)), Slots: 1, Slowdown: 1})
	}
	if r.Float64() < 0.5 {
		s.Faults = append(s.Faults, fault{Kind: killChild, AtGen: in(0, last), After: time.Duration(in(0, 100)) * time.Millisecond})
	}
	if r.Float64() < 0.5 {
		s.Faults = append(s.Faults, fault{Kind: stopChild, AtGen: in(0, last), After: time.Duration(in(0, 100)) * time.Millisecond,
			Stop: time.Duration(in(200, int(maxStop/time.Millisecond))) * time.Millisecond})
	}
}

// drawRelay gives s, with chance l.Relay, a relay (that works too, or
// only relays) and puts each worker but the first behind it with chance
// 1/2 (one at least, when there is one); and faults on the relay: killed,
// or stopped up to maxStop. Its own stream r keeps every other part of a
// seed's scenario.
func drawRelay(s *scenario, r *rand.Rand, l Limits) {
	if r.Float64() >= l.Relay {
		return
	}
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	s.Relay = &relaySpec{Name: "relay", Slots: in(1, 2), Only: r.Float64() < 0.3}
	behind := 0
	for i := 1; i < len(s.Workers); i++ {
		if r.Float64() < 0.5 {
			s.Workers[i].Behind = true
			behind++
		}
	}
	if behind == 0 && len(s.Workers) > 1 {
		s.Workers[1+r.IntN(len(s.Workers)-1)].Behind = true
	}
	last := s.ES.Gens - 1
	if r.Float64() < 0.4 {
		s.Faults = append(s.Faults, fault{Kind: killRelay, AtGen: in(0, last)})
	}
	if r.Float64() < 0.4 {
		s.Faults = append(s.Faults, fault{Kind: stopRelay, AtGen: in(0, last),
			Stop: time.Duration(in(200, int(maxStop/time.Millisecond))) * time.Millisecond})
	}
}

// String describes s in one line.
func (s scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d+%d)-ES %d-D %d gens load %dms, workers", s.Policy, s.ES.Mu, s.ES.Lambda, s.ES.Dim, s.ES.Gens, s.ES.LoadMS)
	for _, w := range s.Workers {
		fmt.Fprintf(&b, " %s×%d", w.Name, w.Slots)
		for _, f := range []struct {
			name string
			v    int
		}{{"slow", max(w.Slowdown, 1) - 1}, {"crash", w.PluginCrashEvery}, {"phang", w.PluginHangEvery}, {"hang", w.HangEvery}, {"fail", w.FailEvery}} {
			switch {
			case f.name == "slow" && f.v > 0:
				fmt.Fprintf(&b, ",slow%d", w.Slowdown)
			case f.v > 0:
				fmt.Fprintf(&b, ",%s%d", f.name, f.v)
			}
		}
		if w.Delay > 0 {
			fmt.Fprintf(&b, ",delay%v", w.Delay)
		}
		if w.Silent {
			b.WriteString(",silent")
		}
		if w.Behind {
			b.WriteString(",relayed")
		}
	}
	if s.Relay != nil {
		if s.Relay.Only {
			fmt.Fprintf(&b, "; relay %s (relay only)", s.Relay.Name)
		} else {
			fmt.Fprintf(&b, "; relay %s×%d", s.Relay.Name, s.Relay.Slots)
		}
	}
	if s.Split != "" {
		fmt.Fprintf(&b, "; split %s master-cost %v", s.Split, s.MasterCost)
	}
	for _, f := range s.Faults {
		switch f.Kind {
		case killWorker, stopWorker:
			fmt.Fprintf(&b, "; %s w%d@%d", f.Kind, f.Worker, f.AtGen)
		case killChild, stopChild:
			fmt.Fprintf(&b, "; %s @%d+%v", f.Kind, f.AtGen, f.After)
		default:
			fmt.Fprintf(&b, "; %s @%d", f.Kind, f.AtGen)
		}
		if f.stops() {
			fmt.Fprintf(&b, " for %v", f.Stop)
		}
	}
	if s.KillMaster > 0 {
		fmt.Fprintf(&b, "; kill-master@%d", s.KillMaster)
	}
	return b.String()
}
