package simgrid

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/sched"
)

// Scenario is one simulated run: the ES, the master's configuration, the
// workers and every fault, all drawn from one seed (Draw).
type Scenario struct {
	Seed     uint64
	ES       es.Config
	Policy   string
	Adaptive bool
	// Verify is the master's verification fraction (0 or 1).
	Verify float64
	// MaxRetries is the master's; failing workers get a high one, so that
	// a run ends by its results, not by a task that failed too often.
	MaxRetries int
	Workers    []WorkerSpec
	// Split, when set, lets an overloaded master split (grid.SplitPaper),
	// and MessageCost makes it slow enough to be overloaded.
	Split       bool
	MessageCost time.Duration
	// Relay, when set, is a relay (esworker -relay) that the Relayed
	// workers reach the master through.
	Relay *RelaySpec
	// Restart, when set, kills the master (SIGKILL: its connections
	// break, nothing is said) At after generation AfterGen completed,
	// and a new master resumes from the checkpoint Down later.
	Restart *Restart
	// LoseGrandchild, when set, loses a grandchild master (a child
	// master's child) at work. Draw never sets it; TestLostGrandchild
	// does.
	LoseGrandchild *GrandchildLoss
	// Long, when set, makes some points long on every worker, or hang
	// on every try. Draw never sets it; TestLongPoints does.
	Long *LongPoints
}

// LongPoints are points whose evaluation takes Took on every worker,
// however fast (one point in about Every, drawn from the point alone),
// or, with Hang, hangs on every try, deaf to its cancel: a task between
// half the master's task timeout and the timeout, which must end, and a
// plugin deadlocked on some input, which must fail the run naming the
// timeout.
type LongPoints struct {
	Every int
	Took  time.Duration
	Hang  bool
}

// long says x is one of sc's long points.
func (sc Scenario) long(x []float64) bool {
	return sc.Long != nil && sc.Long.Every > 0 && mix(pointKey(x), 0x1009)%uint64(sc.Long.Every) == 0
}

// GrandchildLoss is a grandchild master lost: the first promoted in
// generation Gen or later, After its first worker joined it; or, frozen
// (LoseFreeze), at the instant its own parent hears that the run is
// over, for For. With Child, it is the root's child instead: After its
// agent heard its promotion (before its child master said hello), or,
// frozen, as it hears the end itself.
type GrandchildLoss struct {
	How   Loss
	Gen   int
	After time.Duration
	For   time.Duration
	Child bool
}

// Loss is how a master below the root is lost.
type Loss int

const (
	// LoseKill kills its machine for good (SIGKILL: its connections
	// break, nothing is said).
	LoseKill Loss = iota
	// LoseCut breaks every connection of its machine at once; the
	// machine lives on.
	LoseCut
	// LoseFreeze cuts its machine off the network (SIGSTOP, a cable
	// pulled) as its parent hears the end, before that parent tells it.
	LoseFreeze
)

func (l Loss) String() string {
	switch l {
	case LoseCut:
		return "cut off"
	case LoseFreeze:
		return "frozen"
	}
	return "killed"
}

// RelaySpec is a relay machine and what befalls it.
type RelaySpec struct {
	Delay [2]time.Duration // its link to the master
	// Kill, when > 0, kills the relay's process then; it starts again
	// Back later.
	Kill, Back time.Duration
}

// Restart is a master killed and resumed from its checkpoint.
type Restart struct {
	AfterGen int
	At, Down time.Duration
}

// WorkerSpec is one simulated worker machine and what befalls it. Times
// are virtual, from the run's start.
type WorkerSpec struct {
	Name  string
	Host  string // its IP on the simulated network
	Slots int
	// Task is its mean evaluation time; each evaluation takes a draw in
	// [Task/2, 3·Task/2] fixed by the seed, the worker and the point.
	Task time.Duration
	// Delay is the one-way delay range of its link to the master.
	Delay [2]time.Duration
	Join  time.Duration // when its agent starts
	// Emulated evaluation faults (worker.Faults).
	FailEvery, HangEvery int
	Silent               bool
	// Kill, when > 0, kills its process then (its connection breaks);
	// Back, when > 0, starts it again that long after.
	Kill, Back time.Duration
	// Freeze, when > 0, cuts it off the network (SIGSTOP, a cable pulled)
	// for FreezeFor; gossip declares it dead if that lasts longer than
	// Gossip.
	Freeze, FreezeFor, Gossip time.Duration
	// Drain, when > 0, makes it leave gracefully then.
	Drain time.Duration
	// Relayed makes it reach the master through the scenario's relay.
	Relayed bool
	// Liar makes it return a wrong value for about one evaluation in
	// Liar (only with Verify, which must find it out).
	Liar int
	// NaN makes it answer NaN to every task: an evaluation error the
	// master must set aside rather than retry for ever.
	NaN bool
	// NoCancel, when > 0, makes its problem a plugin that cannot be
	// cancelled whose processes take NoCancel to start, run as the
	// plugin host runs one: a cancelled evaluation finishes, or its
	// process is killed and the next evaluation waits for a new one.
	NoCancel time.Duration

	// The faults below are drawn by DrawFaults2 alone (-sim.faults2).

	// OneWay, when > 0, holds the bytes of its links in one direction
	// for OneWayFor (a one-way partition: a route or firewall rule
	// lost), those it sends when OneWayOut, those sent to it otherwise,
	// while the other direction flows; gossip declares it dead if that
	// lasts longer than Gossip.
	OneWay, OneWayFor time.Duration
	OneWayOut         bool
	// Slow, when > 0, makes its links slow for SlowFor: every write on
	// them, either way, takes a draw in [SlowBy/2, SlowBy] more (a
	// congested or flapping route), nothing held.
	Slow, SlowFor, SlowBy time.Duration
	// HalfOpen, with Kill, makes the kill a crash whose connections
	// stay half-open: the far ends hear nothing (no FIN, no reset) for
	// HalfOpen, while the worker, started again Back later under its
	// name on its host, connects anew.
	HalfOpen time.Duration
	// Alias, when set, is the name its agent gives: another worker's,
	// from another host (two machines configured alike). Name stays the
	// simulation's own, unique.
	Alias string
}

// agentName is the name its agent gives the master.
func (w WorkerSpec) agentName() string {
	if w.Alias != "" {
		return w.Alias
	}
	return w.Name
}

// healthy says the worker always answers, and stays.
func (w WorkerSpec) healthy() bool {
	return w.FailEvery == 0 && w.HangEvery == 0 && !w.Silent && w.Kill == 0 && w.Freeze == 0 && w.Drain == 0 && w.Liar == 0 && !w.NaN &&
		w.OneWay == 0 && w.Slow == 0 && w.Alias == ""
}

func (w WorkerSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s slots=%d task=%v delay=%v–%v", w.Name, w.Slots, w.Task, w.Delay[0], w.Delay[1])
	if w.Join > 0 {
		fmt.Fprintf(&b, " join=%v", w.Join)
	}
	if w.FailEvery > 0 {
		fmt.Fprintf(&b, " fail-every=%d", w.FailEvery)
	}
	if w.HangEvery > 0 {
		fmt.Fprintf(&b, " hang-every=%d", w.HangEvery)
	}
	if w.Silent {
		b.WriteString(" silent")
	}
	if w.Kill > 0 {
		fmt.Fprintf(&b, " kill=%v back=%v", w.Kill, w.Back)
	}
	if w.Freeze > 0 {
		fmt.Fprintf(&b, " freeze=%v for=%v gossip=%v", w.Freeze, w.FreezeFor, w.Gossip)
	}
	if w.Drain > 0 {
		fmt.Fprintf(&b, " drain=%v", w.Drain)
	}
	if w.Liar > 0 {
		fmt.Fprintf(&b, " liar=1/%d", w.Liar)
	}
	if w.NaN {
		b.WriteString(" nan")
	}
	if w.Relayed {
		b.WriteString(" relayed")
	}
	if w.NoCancel > 0 {
		fmt.Fprintf(&b, " nocancel-start=%v", w.NoCancel)
	}
	if w.HalfOpen > 0 {
		fmt.Fprintf(&b, " half-open=%v", w.HalfOpen)
	}
	if w.OneWay > 0 {
		dir := "to it"
		if w.OneWayOut {
			dir = "from it"
		}
		fmt.Fprintf(&b, " one-way=%v for=%v (%s) gossip=%v", w.OneWay, w.OneWayFor, dir, w.Gossip)
	}
	if w.Slow > 0 {
		fmt.Fprintf(&b, " slow=%v for=%v by=%v", w.Slow, w.SlowFor, w.SlowBy)
	}
	if w.Alias != "" {
		fmt.Fprintf(&b, " host=%s as=%s", w.Host, w.Alias)
	}
	return b.String()
}

// String is the scenario in a few lines, for a failing seed's report.
func (sc Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s policy=%s adaptive=%v verify=%v retries=%d es=(%d+%d) %s dim %d gens %d",
		sc.Seed, sc.ES.Strategy, sc.Policy, sc.Adaptive, sc.Verify, sc.MaxRetries,
		sc.ES.Mu, sc.ES.Lambda, sc.ES.Problem, sc.ES.Dim, sc.ES.Stop.Generations)
	if sc.Split {
		fmt.Fprintf(&b, " split=paper message-cost=%v", sc.MessageCost)
	}
	if r := sc.Relay; r != nil {
		fmt.Fprintf(&b, "\n  relay delay=%v–%v kill=%v back=%v", r.Delay[0], r.Delay[1], r.Kill, r.Back)
	}
	if r := sc.Restart; r != nil {
		fmt.Fprintf(&b, "\n  master killed %v after generation %d, back %v later", r.At, r.AfterGen, r.Down)
	}
	if g := sc.LoseGrandchild; g != nil {
		if g.How == LoseFreeze && g.Child {
			fmt.Fprintf(&b, "\n  the first child master of generation %d or later frozen for %v as it hears the end", g.Gen, g.For)
		} else if g.How == LoseFreeze {
			fmt.Fprintf(&b, "\n  the first grandchild master of generation %d or later frozen for %v as its parent hears the end", g.Gen, g.For)
		} else if g.Child {
			fmt.Fprintf(&b, "\n  the first child master of generation %d or later %v %v after its promotion", g.Gen, g.How, g.After)
		} else {
			fmt.Fprintf(&b, "\n  the first grandchild master of generation %d or later %v %v after its first worker joins", g.Gen, g.How, g.After)
		}
	}
	if l := sc.Long; l != nil && l.Hang {
		fmt.Fprintf(&b, "\n  one point in about %d hangs on every worker", l.Every)
	} else if l != nil {
		fmt.Fprintf(&b, "\n  one point in about %d takes %v on every worker", l.Every, l.Took)
	}
	for _, w := range sc.Workers {
		b.WriteString("\n  " + w.String())
	}
	return b.String()
}

// Draw makes the scenario of seed. Every scenario can end: some worker
// can always, in time, evaluate every task (a lone worker may hang or
// fail, but is never silent, and one that leaves for good has company).
func Draw(seed uint64) Scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	sc := Scenario{Seed: seed, MaxRetries: 3}
	sc.Policy = sched.Names[r.IntN(len(sched.Names))]
	sc.Adaptive = (sc.Policy == "rwq" || sc.Policy == "r3q") && r.IntN(3) == 0
	problems := []string{"sphere", "rastrigin", "rosenbrock", "ackley"}
	dim := 2 + r.IntN(5)
	sc.ES = es.Config{
		Problem: problems[r.IntN(len(problems))], Strategy: es.StrategyES,
		Mu: 2 + r.IntN(4), Lambda: 4 + r.IntN(20), Dim: dim, Lower: -5, Upper: 5,
		Seed: seed, Stop: es.Stop{Generations: 3 + r.IntN(6)},
	}
	if r.IntN(4) == 0 {
		sc.ES.Strategy, sc.ES.Mu = es.StrategyCMA, 0
		sc.ES.Lambda = 4 + r.IntN(12)
		sc.ES.Mu = sc.ES.Lambda / 2
	}
	n := 1 + r.IntN(5)
	slots, tasks := 0, 0
	for i := range n {
		w := WorkerSpec{
			Name: fmt.Sprintf("w%d", i), Host: fmt.Sprintf("127.0.1.%d", i+1),
			Slots: 1 + r.IntN(4), Task: ms(2, 200),
		}
		lo := time.Duration(r.IntN(20000)) * time.Microsecond
		w.Delay = [2]time.Duration{lo, lo + time.Duration(r.IntN(10000))*time.Microsecond}
		slots += w.Slots
		tasks += int(w.Task / time.Millisecond)
		sc.Workers = append(sc.Workers, w)
	}
	// The run's expected span without faults: faults fall inside it.
	span := time.Duration((sc.ES.Stop.Generations+1)*(sc.ES.Lambda/slots+1)*tasks/n) * time.Millisecond
	at := func() time.Duration { return time.Duration(r.Int64N(int64(span)+1)) + time.Millisecond }
	for i := range sc.Workers {
		w := &sc.Workers[i]
		if i > 0 && r.IntN(4) == 0 {
			w.Join = at()
		}
		// Worker 0 is the anchor: it may misbehave, but it stays and
		// always answers in the end.
		switch k := r.IntN(10); {
		case k < 4: // healthy
		case k == 4:
			w.HangEvery = 2 + r.IntN(15)
		case k == 5:
			w.FailEvery = 2 + r.IntN(10)
			sc.MaxRetries = 1000
		case k == 6 && i > 0:
			w.Silent = true
		case k == 7:
			w.Kill = w.Join + at()
			if i == 0 || r.IntN(2) == 0 {
				w.Back = ms(100, 5000)
			}
		case k == 8:
			w.Freeze, w.FreezeFor, w.Gossip = w.Join+at(), ms(100, 40000), ms(5000, 25000)
		case k == 9 && i > 0:
			w.Drain = w.Join + at()
		}
	}
	if r.IntN(8) == 0 && n >= 3 {
		sc.Verify = 1
		// One liar among honest workers: verification must find it out.
		// A value no second worker can check stands unverified, so the
		// liar joins after two healthy workers and is never alone.
		if r.IntN(2) == 0 {
			for i := range 2 {
				sc.Workers[i] = WorkerSpec{Name: sc.Workers[i].Name, Host: sc.Workers[i].Host,
					Slots: sc.Workers[i].Slots, Task: sc.Workers[i].Task, Delay: sc.Workers[i].Delay}
			}
			liar := &sc.Workers[n-1]
			liar.Liar = 1 + r.IntN(3)
			liar.Join = max(liar.Join, time.Second)
		}
	}
	if r.IntN(6) == 0 && n >= 4 {
		// Fine tasks on a slow master: the overload test trips and the
		// master splits.
		sc.Split = true
		sc.MessageCost = time.Duration(200+r.IntN(2000)) * time.Microsecond
		for i := range sc.Workers {
			sc.Workers[i].Task = ms(1, 10)
		}
	}
	if r.IntN(6) == 0 {
		// Some workers (never the anchor, unless it has company) reach the
		// master through a relay, which may die and come back.
		rs := &RelaySpec{Delay: [2]time.Duration{ms(1, 20), ms(20, 40)}}
		if r.IntN(3) == 0 {
			rs.Kill, rs.Back = at(), ms(100, 5000)
		}
		sc.Relay = rs
		for i := range sc.Workers {
			if i > 0 || n > 1 && r.IntN(2) == 0 {
				sc.Workers[i].Relayed = r.IntN(2) == 0 || i == n-1
			}
		}
	}
	if r.IntN(6) == 0 {
		sc.Restart = &Restart{AfterGen: r.IntN(sc.ES.Stop.Generations), At: at() / time.Duration(sc.ES.Stop.Generations+1), Down: ms(10, 3000)}
	}
	// Drawn last, so that what is drawn above stays its seed's.
	if sc.liar() && sc.Relay != nil {
		// The master counts the workers behind a relay as one host, the
		// liar's: the two honest anchors reach it directly, so that two
		// hosts can outvote the liar.
		sc.Workers[0].Relayed, sc.Workers[1].Relayed = false, false
	}
	if sc.Verify == 0 && sc.Relay == nil && !sc.Split && r.IntN(10) == 0 {
		// A liar on one host, with one connection or two, beside one
		// honest worker (a tie that no third host breaks: the run fails
		// with grid.ErrUndecided, unless no lie is ever checked) or two
		// (it is outvoted and excluded).
		sc.Verify = 1
		honest, conns := 1+r.IntN(2), 1+r.IntN(2)
		sc.Workers = sc.Workers[:0]
		for i := range honest + conns {
			w := WorkerSpec{Name: fmt.Sprintf("w%d", i), Host: fmt.Sprintf("127.0.1.%d", i+1), Slots: 1 + r.IntN(3), Task: ms(2, 200)}
			lo := time.Duration(r.IntN(20000)) * time.Microsecond
			w.Delay = [2]time.Duration{lo, lo + time.Duration(r.IntN(10000))*time.Microsecond}
			if i >= honest {
				w.Name, w.Host = fmt.Sprintf("liar%d", i-honest), "127.0.1.9"
				w.Liar, w.Join = 1+r.IntN(3), time.Second
			}
			sc.Workers = append(sc.Workers, w)
		}
	}
	if w0 := sc.Workers[0]; r.IntN(10) == 0 && w0.Kill == 0 && w0.Freeze == 0 && !(w0.Relayed && sc.Relay.Kill > 0) {
		// A worker that answers NaN to everything, beside an anchor that
		// is always there (alone, it would fail every task, and the run
		// by MaxRetries).
		lo := time.Duration(r.IntN(20000)) * time.Microsecond
		sc.Workers = append(sc.Workers, WorkerSpec{Name: "nan", Host: "127.0.1.10", Slots: 1 + r.IntN(4), Task: ms(20, 200),
			Delay: [2]time.Duration{lo, lo + time.Duration(r.IntN(10000))*time.Microsecond}, NaN: true})
		sc.MaxRetries = 1000 // a master that restarts may find it first, alone
	}
	// Plugins that cannot be cancelled, from a stream of their own, so
	// that every other draw of a seed stays what it was.
	nc := rand.New(rand.NewPCG(seed, 0x9c))
	for i := range sc.Workers {
		if nc.IntN(4) == 0 {
			sc.Workers[i].NoCancel = time.Duration(1+nc.IntN(2000)) * time.Millisecond
		}
	}
	if sc.Split {
		// Half the splits get more fast one-slot workers and tasks, from
		// a stream of their own: a child master splits again only with
		// 4 running workers of its own, so nested splits need 8 at the
		// root.
		ns := rand.New(rand.NewPCG(seed, 0x5b))
		if ns.IntN(2) == 0 {
			sc.ES.Lambda = max(sc.ES.Lambda, 60+ns.IntN(200))
			for i, n := len(sc.Workers), 8+ns.IntN(6); i < n; i++ {
				lo := time.Duration(ns.IntN(2000)) * time.Microsecond
				sc.Workers = append(sc.Workers, WorkerSpec{Name: fmt.Sprintf("n%d", i), Host: fmt.Sprintf("127.0.2.%d", i+1),
					Slots: 1, Task: time.Duration(1+ns.IntN(10)) * time.Millisecond,
					Delay: [2]time.Duration{lo, lo + time.Duration(ns.IntN(1000))*time.Microsecond}})
			}
		}
	}
	return sc
}

// liar says a worker lies.
func (sc Scenario) liar() bool {
	return slices.ContainsFunc(sc.Workers, func(w WorkerSpec) bool { return w.Liar > 0 })
}

// shared says w's host has other workers on it (a liar's connections).
func (sc Scenario) shared(w WorkerSpec) bool {
	return slices.ContainsFunc(sc.Workers, func(o WorkerSpec) bool { return o.Host == w.Host && o.Name != w.Name })
}

// host is the host the master sees w on: behind the relay, the relay's.
func (sc Scenario) host(w WorkerSpec) string {
	if w.Relayed {
		return relayHost
	}
	return w.Host
}

// decisive says verification can always outvote the liars: workers that
// are there from the start and stay, and never lie, are on at least two
// hosts besides the liars'. Otherwise a tie may find no third host, and
// the run may fail with grid.ErrUndecided.
func (sc Scenario) decisive() bool {
	liars := map[string]bool{}
	for _, w := range sc.Workers {
		if w.Liar > 0 {
			liars[sc.host(w)] = true
		}
	}
	honest := map[string]bool{}
	for _, w := range sc.Workers {
		h := sc.host(w)
		if w.Liar == 0 && !w.NaN && w.Join == 0 && !w.Silent && w.Kill == 0 && w.Freeze == 0 && w.Drain == 0 &&
			w.OneWay == 0 && w.Slow == 0 && w.Alias == "" && !sc.aliased(w) &&
			!(w.Relayed && sc.Relay.Kill > 0) && !liars[h] {
			honest[h] = true
		}
	}
	return len(honest) >= 2
}

// aliased says another worker gives w's name (WorkerSpec.Alias): the
// master takes one of them at a time.
func (sc Scenario) aliased(w WorkerSpec) bool {
	return slices.ContainsFunc(sc.Workers, func(o WorkerSpec) bool { return o.Alias == w.Name })
}

// DrawFaults2 is Draw's scenario of seed with the faults of -sim.faults2
// added: one-way partitions, slow links, crashes that leave connections
// half-open as the worker comes back under its name, and a second
// machine giving a worker's name. They come from a generator of their
// own, seeded by seed, so that Draw(seed) stays what it was.
func DrawFaults2(seed uint64) Scenario {
	sc := Draw(seed)
	r := rand.New(rand.NewPCG(seed, 0xfa2175))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	slots, mean := 0, time.Duration(0)
	for _, w := range sc.Workers {
		slots += w.Slots
		mean += w.Task
	}
	mean /= time.Duration(len(sc.Workers))
	// The run's expected span without faults, as Draw's: faults fall
	// inside it.
	span := time.Duration(sc.ES.Stop.Generations+1) * time.Duration(sc.ES.Lambda/slots+1) * mean
	at := func() time.Duration { return time.Duration(r.Int64N(int64(span)+1)) + time.Millisecond }
	for i := range sc.Workers {
		w := &sc.Workers[i]
		k := r.IntN(6)
		if sc.shared(*w) {
			// A liar's host with two connections: what befalls the
			// host would befall both, and the checks reckon by worker.
			continue
		}
		if sc.liar() && w.Liar == 0 {
			// The honest hosts that outvote a liar stay healthy, as
			// Draw keeps them: cut off or slow past a check's retries,
			// they cannot check it, and the lie stands unverified, as
			// -verify promises (docs/security.md), not a stall.
			continue
		}
		if i == 0 && slices.ContainsFunc(sc.Workers, func(w WorkerSpec) bool { return w.NaN }) {
			// Draw adds a NaN worker only beside an anchor that is
			// always there: alone, it fails a task past MaxRetries in
			// seconds (seed 58147874: the anchor cut off one way from
			// the start for 58 s, the NaN worker's task failed 1,001
			// times in 35 s).
			continue
		}
		switch {
		case k < 2:
			// Longer than the idle timeout at times, and than gossip's
			// failure detection.
			w.OneWay, w.OneWayFor, w.OneWayOut = w.Join+at(), ms(100, 60000), r.IntN(2) == 0
			if w.Gossip == 0 {
				w.Gossip = ms(5000, 25000)
			}
		case k == 2:
			w.Slow, w.SlowFor, w.SlowBy = w.Join+at(), ms(500, 60000), ms(200, 5000)
		case k == 3 && w.Kill == 0 && w.Freeze == 0 && w.Drain == 0:
			// A crash (the machine's, or a cable's: no FIN, no reset),
			// and the worker started again under its name.
			w.Kill, w.Back, w.HalfOpen = w.Join+at(), ms(100, 5000), ms(100, 60000)
		}
	}
	if sc.Verify == 0 && r.IntN(3) == 0 {
		// A second machine that gives a worker's name; it always
		// answers, so either may run the work.
		of := sc.Workers[r.IntN(len(sc.Workers))]
		lo := time.Duration(r.IntN(20000)) * time.Microsecond
		w := WorkerSpec{Name: "dup", Alias: of.agentName(), Host: "127.0.1.12", Slots: 1 + r.IntN(4), Task: ms(2, 200),
			Delay: [2]time.Duration{lo, lo + time.Duration(r.IntN(10000))*time.Microsecond}}
		if sc.Split {
			w.Task = ms(1, 10)
		}
		if r.IntN(2) == 0 {
			w.Join = at()
		}
		sc.Workers = append(sc.Workers, w)
	}
	return sc
}
