package sim

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The paper's machine sets ship inside the binary, so `essim -machines lan`
// needs no file on disk; they sit beside the parser that defines their format.
//
//go:embed machines/*.txt
var builtinSets embed.FS

// Machine is one computer of a machine set: a worker, possibly the master's
// own host, possibly a relay for machines behind it.
type Machine struct {
	// Name is unique within the set (e.g. "L1").
	Name string
	// CPUs is the number of execution slots (default 1).
	CPUs int
	// Speed is the machine's speed ratio against the reference machine
	// (the one whose task time defines a task's grain): a task of grain g
	// takes g/Speed. Used when Times has no entries.
	Speed float64
	// Times is the measured task time per grain, sorted by grain (the
	// paper's Table 1). A grain between two entries interpolates the
	// time/grain ratio linearly; a grain outside the table uses the
	// nearest entry's ratio.
	Times []GrainTime
	// Delay is the one-way delay of the machine's own link: to the master,
	// or to its relay when Via is set.
	Delay time.Duration
	// Via names the relay machine this one is reached through ("" when the
	// master reaches it directly).
	Via string
	// Local says the machine is the master's own host: its link has no
	// delay and the simulator's added delay does not apply to it.
	Local bool
	// SendCost is the machine's time to build and send one message (the
	// paper's T_s); RecvCost its time to receive and decode one (T_r). A
	// machine handles its messages one at a time, apart from its slots.
	SendCost, RecvCost time.Duration
	// RelayCost is the time this machine spends forwarding one message for
	// the machines behind it; forwarding is one message at a time.
	RelayCost time.Duration
	// Slowdowns are changes of the machine's pace during a run (At and
	// Factor as in a Config's Slowdowns; Machine is this machine).
	Slowdowns []Slowdown
	// LeaveAt, when positive, is when the machine leaves the run: its
	// slots stop, what it held and ran is lost, and the master is told
	// (sched.WorkerLeft). Results already on their way still arrive.
	LeaveAt time.Duration
}

// GrainTime is one row of a machine's task-time table: a task of Grain
// (its time on the reference machine) takes Time here.
type GrainTime struct {
	Grain, Time time.Duration
}

// Set is a machine set: the master's parameters and its machines, in file
// order (which is also the order of worker ids in a simulation).
type Set struct {
	// Name is the set's name (the built-in name or the file's path).
	Name string
	// MasterCost is the master's time to handle one message, incoming
	// result or outgoing task or cancel. The master is a single server, so
	// a high cost makes it saturate.
	MasterCost time.Duration
	// Machines are the workers.
	Machines []Machine
}

// BuiltinSets lists the names of the machine sets shipped with esgrid.
func BuiltinSets() []string {
	ents, err := builtinSets.ReadDir("machines")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".txt"))
	}
	sort.Strings(names)
	return names
}

// BuiltinText returns the file text of a built-in machine set.
func BuiltinText(name string) ([]byte, error) {
	b, err := builtinSets.ReadFile("machines/" + name + ".txt")
	if err != nil {
		return nil, fmt.Errorf("no built-in machine set %q (have %s)", name, strings.Join(BuiltinSets(), ", "))
	}
	return b, nil
}

// MaxSetFile bounds the machine set file LoadSet reads.
const MaxSetFile = 1 << 20

// LoadSet returns the built-in set called nameOrPath ("lan", "wan"), or
// else parses the file at that path, of at most MaxSetFile bytes.
func LoadSet(nameOrPath string) (*Set, error) {
	if b, err := BuiltinText(nameOrPath); err == nil {
		return ParseSet(nameOrPath, strings.NewReader(string(b)))
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("machine set: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSetFile+1))
	if err != nil {
		return nil, fmt.Errorf("machine set: %w", err)
	}
	if len(b) > MaxSetFile {
		return nil, fmt.Errorf("machine set %s is larger than %d bytes", nameOrPath, MaxSetFile)
	}
	return ParseSet(nameOrPath, strings.NewReader(string(b)))
}

// ParseSet reads a machine set in esgrid's text format:
//
//	# a comment runs to the end of the line
//	master cost=20us
//	machine M1 local t100ms=101ms t500ms=506ms t1000ms=1000ms
//	machine L1 delay=0.2ms t100ms=42ms t500ms=175ms t1000ms=229ms
//	machine R1 delay=15ms relay=50us speed=3
//	machine W1 via=R1 cpus=2 speed=2.7 send=1ms recv=1ms
//
// One "master" line at most (default cost 0), then one "machine NAME"
// line per machine with fields:
//
//	cpus=N        execution slots (default 1)
//	speed=F       speed ratio to the reference machine
//	tG=D          task time D for tasks of grain G (G, D Go durations)
//	delay=D       one-way delay of its own link (default 0)
//	via=NAME      reached through relay machine NAME (defined in the set)
//	local         the master's own host (no delay allowed, no added delay)
//	send=D recv=D time to send / receive one message (default 0)
//	relay=D       time to forward one message when acting as a relay
//	slow=T*F      from time T on, its tasks take F times as long (F = 1
//	              restores it); repeatable
//	leave=T       the machine leaves the run at time T
//	count=N       N machines alike, named NAME-1 ... NAME-N (at most
//	              MaxMachines in a set)
//
// Every machine needs speed or at least one tG entry. Delays and costs
// are at most MaxLinkTime (an hour), slow= and leave= times at most
// MaxSetTime (a century). Errors name the line.
func ParseSet(name string, r io.Reader) (*Set, error) {
	s := &Set{Name: name}
	sc := bufio.NewScanner(r)
	seen := map[string]int{}
	sawMaster := false
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		errf := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
		}
		switch f[0] {
		case "master":
			if sawMaster {
				return nil, errf("second master line")
			}
			sawMaster = true
			for i, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k != "cost" {
					return nil, errf("master: unknown field %q (want cost=DURATION)", kv)
				}
				if i > 0 {
					return nil, errf("master: cost given twice")
				}
				d, err := parseDurMax(v, MaxLinkTime)
				if err != nil {
					return nil, errf("master cost: %v", err)
				}
				s.MasterCost = d
			}
		case "machine":
			if len(f) < 2 || strings.Contains(f[1], "=") {
				return nil, errf("machine: missing name")
			}
			m := Machine{Name: f[1], CPUs: 1}
			count, err := parseMachineFields(&m, f[2:])
			if err != nil {
				return nil, errf("machine %s: %v", m.Name, err)
			}
			if count > MaxMachines-len(s.Machines) {
				return nil, errf("machine %s: more than %d machines in the set", m.Name, MaxMachines)
			}
			names := []string{m.Name}
			if count > 0 {
				names = names[:0]
				for i := 1; i <= count; i++ {
					names = append(names, fmt.Sprintf("%s-%d", m.Name, i))
				}
			}
			for _, name := range names {
				if _, dup := seen[name]; dup {
					return nil, errf("machine %s defined twice", name)
				}
				c := m
				c.Name = name
				c.Slowdowns = slices.Clone(m.Slowdowns)
				for i := range c.Slowdowns {
					c.Slowdowns[i].Machine = name
				}
				seen[name] = len(s.Machines)
				s.Machines = append(s.Machines, c)
			}
		default:
			return nil, errf("unknown directive %q (want master or machine)", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// parseMachineFields reads a machine line's fields into m and returns its
// count= (0 when not given).
func parseMachineFields(m *Machine, fields []string) (int, error) {
	count := 0
	given := map[string]bool{}
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, "=")
		// A field given twice was the last one's, silently (cpus=1 cpus=2:
		// 2): only slow= and the task times (each grain once) repeat.
		if given[k] && k != "slow" && !strings.HasPrefix(k, "t") {
			return 0, fmt.Errorf("%s given twice", k)
		}
		given[k] = true
		if kv == "local" {
			m.Local = true
			continue
		}
		if !ok || v == "" {
			return 0, fmt.Errorf("field %q: want key=value", kv)
		}
		var err error
		switch k {
		case "cpus":
			m.CPUs, err = strconv.Atoi(v)
			if err == nil && (m.CPUs < 1 || m.CPUs > MaxCPUs) {
				err = fmt.Errorf("must be 1 to %d", MaxCPUs)
			}
		case "count":
			count, err = strconv.Atoi(v)
			if err == nil && (count < 1 || count > MaxMachines) {
				err = fmt.Errorf("must be 1 to %d", MaxMachines)
			}
		case "slow":
			at, factor, ok := strings.Cut(v, "*")
			var sd Slowdown
			if !ok {
				err = errors.New("want TIME*FACTOR, e.g. slow=60s*5")
			} else if sd.At, err = parseDurMax(at, MaxSetTime); err == nil {
				sd.Factor, err = strconv.ParseFloat(factor, 64)
				if err == nil && !(sd.Factor > 0 && sd.Factor <= 1e6) {
					err = errors.New("factor must be a number in (0, 1e6]")
				}
			}
			sd.Machine = m.Name
			m.Slowdowns = append(m.Slowdowns, sd)
		case "leave":
			m.LeaveAt, err = parseDurMax(v, MaxSetTime)
			if err == nil && m.LeaveAt <= 0 {
				err = errors.New("must be after the start")
			}
		case "speed":
			m.Speed, err = strconv.ParseFloat(v, 64)
			if err == nil && !(m.Speed > 0 && !math.IsInf(m.Speed, 1)) {
				err = errors.New("must be a positive number")
			}
		case "delay":
			m.Delay, err = parseDurMax(v, MaxLinkTime)
		case "via":
			m.Via = v
		case "send":
			m.SendCost, err = parseDurMax(v, MaxLinkTime)
		case "recv":
			m.RecvCost, err = parseDurMax(v, MaxLinkTime)
		case "relay":
			m.RelayCost, err = parseDurMax(v, MaxLinkTime)
		default:
			if !strings.HasPrefix(k, "t") {
				return 0, fmt.Errorf("unknown field %q", k)
			}
			g, gerr := time.ParseDuration(k[1:])
			if gerr != nil || g <= 0 {
				return 0, fmt.Errorf("unknown field %q (a task-time entry is tGRAIN=TIME, e.g. t100ms=42ms)", k)
			}
			var d time.Duration
			d, err = parseDur(v)
			if err == nil && d <= 0 {
				err = errors.New("task time must be positive")
			}
			for _, e := range m.Times {
				if e.Grain == g {
					err = errors.New("grain given twice")
				}
			}
			m.Times = append(m.Times, GrainTime{Grain: g, Time: d})
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
	}
	if m.Speed != 0 && len(m.Times) > 0 {
		// The task times won, and the speed was ignored.
		return 0, errors.New("speed= and task times tG= both given: give one")
	}
	sort.Slice(m.Times, func(i, j int) bool { return m.Times[i].Grain < m.Times[j].Grain })
	sort.SliceStable(m.Slowdowns, func(i, j int) bool { return m.Slowdowns[i].At < m.Slowdowns[j].At })
	return count, nil
}

// MaxMachines bounds the machines of a set, MaxCPUs a machine's slots
// (as sched.MaxSlots bounds what a policy counts).
const (
	MaxMachines = 1 << 16
	MaxCPUs     = 4096
)

// MaxLinkTime bounds a set's delays and costs, MaxSetTime its times
// (slow=T, leave=T): a relay chain of MaxMachines links each of
// MaxLinkTime, and its costs, still fit a time.Duration. Two relays'
// delays of two million hours each made a negative round trip.
const (
	MaxLinkTime = time.Hour
	MaxSetTime  = 100 * 365 * 24 * time.Hour
)

// parseDurMax is parseDur, at most hi.
func parseDurMax(v string, hi time.Duration) (time.Duration, error) {
	d, err := parseDur(v)
	if err == nil && d > hi {
		err = fmt.Errorf("%s is longer than %v", v, hi)
	}
	return d, err
}

// parseDur parses a non-negative Go duration; a bare 0 is allowed.
func parseDur(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %s", v)
	}
	return d, nil
}

// Slots is the set's slots: its machines' CPUs together.
func (s *Set) Slots() int {
	n := 0
	for _, m := range s.Machines {
		n += m.CPUs
	}
	return n
}

// Validate checks that the set can be simulated: at least one machine,
// every machine with a speed or a time table, relays that exist and form
// no cycle, and no delay on a local machine.
func (s *Set) Validate() error {
	if len(s.Machines) == 0 {
		return errors.New("no machines")
	}
	idx := make(map[string]int, len(s.Machines))
	for i, m := range s.Machines {
		idx[m.Name] = i
	}
	for _, m := range s.Machines {
		if m.CPUs < 1 {
			return fmt.Errorf("machine %s: cpus must be at least 1", m.Name)
		}
		if m.Speed <= 0 && len(m.Times) == 0 {
			return fmt.Errorf("machine %s: needs speed=F or task times tG=D", m.Name)
		}
		if m.Local && (m.Delay != 0 || m.Via != "") {
			return fmt.Errorf("machine %s: a local machine has no delay and no relay", m.Name)
		}
		if m.LeaveAt < 0 {
			return fmt.Errorf("machine %s: negative leave time", m.Name)
		}
		for _, sd := range m.Slowdowns {
			if !(sd.Factor > 0) || math.IsInf(sd.Factor, 1) || sd.At < 0 {
				return fmt.Errorf("machine %s: slowdown factor must be > 0 and time >= 0", m.Name)
			}
		}
		if m.Via != "" {
			r, ok := idx[m.Via]
			if !ok {
				return fmt.Errorf("machine %s: relay %q is not in the set", m.Name, m.Via)
			}
			// Walk the relay chain; more steps than machines means a cycle.
			for steps := 0; ; steps++ {
				if steps > len(s.Machines) || s.Machines[r].Name == m.Name {
					return fmt.Errorf("machine %s: relay chain has a cycle", m.Name)
				}
				if s.Machines[r].Via == "" {
					break
				}
				r2, ok := idx[s.Machines[r].Via]
				if !ok {
					return fmt.Errorf("machine %s: relay %q is not in the set", s.Machines[r].Name, s.Machines[r].Via)
				}
				r = r2
			}
		}
	}
	return nil
}

// TaskTime is the time machine k needs for one task of the given grain,
// before noise and slowdowns: at least a nanosecond, the clock's tick. A
// task of no time at all (speed=1e9 at 100 ms, or any fast machine at a
// grain of 1µs) made a speed of +Inf and a count of tasks of int(+Inf),
// an index out of range in the optimum's bound.
//
// It is at most MaxSetTime: speed=1e-300 made a time past what a
// time.Duration holds, which converted to a negative one, and so to the
// nanosecond: the slowest machine became the fastest.
func (s *Set) TaskTime(k int, grain time.Duration) time.Duration {
	m := &s.Machines[k]
	d := math.Round(float64(grain) * m.timeRatio(grain))
	if !(d < float64(MaxSetTime)) {
		return MaxSetTime
	}
	return max(time.Duration(d), 1)
}

// timeRatio is time/grain for this machine at this grain: 1/Speed, or
// interpolated from the table.
func (m *Machine) timeRatio(grain time.Duration) float64 {
	t := m.Times
	if len(t) == 0 {
		return 1 / m.Speed
	}
	ratio := func(e GrainTime) float64 { return float64(e.Time) / float64(e.Grain) }
	if grain <= t[0].Grain {
		return ratio(t[0])
	}
	for i := 1; i < len(t); i++ {
		if grain <= t[i].Grain {
			a, b := t[i-1], t[i]
			w := float64(grain-a.Grain) / float64(b.Grain-a.Grain)
			return ratio(a)*(1-w) + ratio(b)*w
		}
	}
	return ratio(t[len(t)-1])
}

// SpeedSum is Σ over machines of CPUs × speed ratio at the given grain: the
// grid's maximum speed-up over the reference machine (the paper's Table 1
// total), the denominator of the paper's lower bound.
func (s *Set) SpeedSum(grain time.Duration) float64 {
	sum := 0.0
	for i := range s.Machines {
		m := &s.Machines[i]
		sum += float64(m.CPUs) / m.timeRatio(grain)
	}
	return sum
}

// route is the path of a message between the master and one machine:
// the relays it crosses (nearest the master first) and the one-way delay of
// each hop, so hops[i] ends at relays[i] and the last hop at the machine.
type route struct {
	relays []int
	hops   []time.Duration
}

// routes computes every machine's route; added is added to the delay of
// each link that starts at the master, except a local machine's.
func (s *Set) routes(added time.Duration) []route {
	idx := s.indexByName()
	rs := make([]route, len(s.Machines))
	for k := range s.Machines {
		rs[k] = s.route(k, added, idx)
	}
	return rs
}

func (s *Set) indexByName() map[string]int {
	idx := make(map[string]int, len(s.Machines))
	for i, m := range s.Machines {
		idx[m.Name] = i
	}
	return idx
}

// route is machine k's route (see routes), with idx from indexByName.
func (s *Set) route(k int, added time.Duration, idx map[string]int) route {
	var chain []int // machine, its relay, the relay's relay, ...
	for j := k; ; j = idx[s.Machines[j].Via] {
		chain = append(chain, j)
		if s.Machines[j].Via == "" {
			break
		}
	}
	var r route
	for i := len(chain) - 1; i >= 0; i-- {
		m := &s.Machines[chain[i]]
		d := m.Delay
		if i == len(chain)-1 && !m.Local {
			d += added
		}
		r.hops = append(r.hops, d)
		if i > 0 {
			r.relays = append(r.relays, chain[i])
		}
	}
	return r
}

// PathDelay is the one-way delay between the master and machine k with
// added delay on the master's links: through a relay, the relay's link plus
// the machine's own (relay forwarding costs not included).
func (s *Set) PathDelay(k int, added time.Duration) time.Duration {
	var d time.Duration
	for _, h := range s.route(k, added, s.indexByName()).hops {
		d += h
	}
	return d
}

// RoundTrip is machine k's round trip with added delay, execution
// excluded: the master sends (its cost), the message travels and is
// forwarded by each relay, the worker receives it; the result comes back the
// same way. Queueing behind other messages is not included.
func (s *Set) RoundTrip(k int, added time.Duration) time.Duration {
	down, up := s.legs(k, s.route(k, added, s.indexByName()))
	return down + up
}

// legs splits machine k's round trip on route r into the way down (the
// master's cost to send, the links and relays, the worker's cost to
// receive) and the way up (the worker's cost to send, the links and
// relays, the master's cost to receive).
func (s *Set) legs(k int, r route) (down, up time.Duration) {
	m := &s.Machines[k]
	down, up = s.MasterCost+m.RecvCost, s.MasterCost+m.SendCost
	for _, h := range r.hops {
		down += h
		up += h
	}
	for _, j := range r.relays {
		down += s.Machines[j].RelayCost
		up += s.Machines[j].RelayCost
	}
	return down, up
}

// MeanRoundTrip is RoundTrip averaged over the machines.
func (s *Set) MeanRoundTrip(added time.Duration) time.Duration {
	var sum time.Duration
	idx := s.indexByName()
	for k := range s.Machines {
		down, up := s.legs(k, s.route(k, added, idx))
		sum += down + up
	}
	return sum / time.Duration(len(s.Machines))
}

// Index returns the position of the machine called name, or -1.
func (s *Set) Index(name string) int {
	for i, m := range s.Machines {
		if m.Name == name {
			return i
		}
	}
	return -1
}
