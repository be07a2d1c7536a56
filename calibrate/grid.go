package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/plan"
)

// calibrator measures the live grid, one master per size N on one data
// address, behind one gossip member.
type calibrator struct {
	cfg      Config
	key      *grid.Key
	log      *slog.Logger
	progress io.Writer
	addr     string // the data address, fixed once the first master listens
	cur      atomic.Pointer[grid.Master]
	gen      int
	onListen func(addr string) // tests: the data address, once known
}

// machine is a worker as the calibration knows it.
type machine struct {
	name  string
	group string
	cpus  int
}

func (c *calibrator) run(ctx context.Context) (*plan.Calibration, error) {
	cal := &plan.Calibration{Version: plan.CalibrationVersion, Source: "grid"}
	var ms *grid.Membership
	defer func() {
		if ms != nil {
			ms.Close()
		}
	}()
	var machines []machine
	c.addr = c.cfg.Listen
	for i, n := range c.cfg.Sizes {
		m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
			Listen: c.addr, Key: c.key, Policy: "wq", Logger: c.log,
			Problem: grid.ProblemSpec{Name: "sphere", Dim: 1, LoadN: n},
			// A change of P or M changes the task time by far more than
			// the usual deadline allows: no replicas of slow tasks here.
			DeadlineFactor: 1000, DeadlineFloor: time.Hour,
		})
		if err != nil {
			return cal, fmt.Errorf("-listen %s: %w", c.addr, err)
		}
		c.cur.Store(m)
		c.addr = m.Addr()
		if i == 0 && c.onListen != nil {
			c.onListen(c.addr)
		}
		if ms == nil && c.cfg.Gossip != "" {
			if ms, err = c.joinGossip(); err != nil {
				m.Close()
				return cal, err
			}
			fmt.Fprintf(c.progress, "esplan: listening data=%s gossip=%s; start the workers: esworker -join %s -key-file K\n", c.addr, ms.Addr(), ms.Addr())
		} else if i == 0 {
			fmt.Fprintf(c.progress, "esplan: listening data=%s; start the workers: esworker -master %s -key-file K\n", c.addr, c.addr)
		}
		got, err := c.size(ctx, m, n, machines, cal)
		if i == 0 && err == nil {
			machines = got
			for _, w := range machines {
				cal.Machines = append(cal.Machines, plan.Machine{Name: w.name, Group: w.group, CPUs: w.cpus})
			}
		}
		last := i == len(c.cfg.Sizes)-1 || err != nil
		if last && err == nil {
			m.Close() // the run is over: -once workers exit
		} else {
			m.Interrupt() // the workers wait for the next master
		}
		c.cur.Store(nil)
		if err != nil {
			return cal, fmt.Errorf("size N = %d: %w", n, err)
		}
	}
	cal.Notes = append(cal.Notes, checkGroups(cal)...)
	for _, note := range cal.Notes {
		fmt.Fprintf(c.progress, "esplan: note: %s\n", note)
	}
	return cal, nil
}

func (c *calibrator) joinGossip() (*grid.Membership, error) {
	host, p, err := net.SplitHostPort(c.cfg.Gossip)
	if err != nil {
		return nil, fmt.Errorf("-gossip %q: %w", c.cfg.Gossip, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("-gossip %q: bad port", c.cfg.Gossip)
	}
	ms, err := grid.JoinMembership(context.Background(), grid.MembershipConfig{
		BindAddr: host, BindPort: port, SecretKey: c.key.GossipKey(),
		Meta: grid.NodeMeta{Role: grid.RoleMaster, DataAddr: c.addr},
		OnEvent: func(ev grid.MemberEvent) {
			if m := c.cur.Load(); m != nil {
				m.HandleMemberEvent(ev)
			}
		},
		Logger: c.log, LeaveTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("-gossip %s: %w", c.cfg.Gossip, err)
	}
	return ms, nil
}

// size measures every configuration at size n on master m. known are the
// machines of the first size (nil at the first): the same must come back.
func (c *calibrator) size(ctx context.Context, m *grid.Master, n int, known []machine, cal *plan.Calibration) ([]machine, error) {
	wctx, cancel := context.WithTimeout(ctx, c.cfg.Wait)
	defer cancel()
	want := c.cfg.Workers
	if err := m.WaitWorkers(wctx, want); err != nil {
		return nil, fmt.Errorf("waiting for %d workers (%d joined): %w", want, m.Workers(), err)
	}
	// Ids by name; at later sizes, wait for the very machines of the first.
	var byName map[string]sched.WorkerID
	var machines []machine
	for {
		byName = map[string]sched.WorkerID{}
		machines = machines[:0]
		for _, s := range m.WorkerStats() {
			byName[s.Name] = s.ID
			g := grid.GroupOf(s.Name)
			if c.cfg.GroupBy == "worker" {
				g = s.Name
			}
			machines = append(machines, machine{name: s.Name, group: g, cpus: s.Slots})
		}
		missing := 0
		for _, k := range known {
			if _, ok := byName[k.name]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("%d of the first size's workers did not come back: %w", missing, wctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if known != nil {
		machines = known
	}
	slices.SortFunc(machines, func(a, b machine) int { return strings.Compare(a.name, b.name) })
	order := interleave(machines)
	// A first batch on everyone: the workers build the load and warm up.
	warm := map[string]int{}
	for _, w := range machines {
		warm[w.name] = 1
	}
	if _, err := c.batch(ctx, m, n, byName, warm); err != nil {
		return nil, err
	}
	done := map[string]bool{}
	measure := func(active map[string]int) error {
		sig := signature(active)
		if done[sig] {
			return nil
		}
		done[sig] = true
		samples, err := c.batch(ctx, m, n, byName, active)
		if err != nil {
			return err
		}
		cal.Samples = append(cal.Samples, samples...)
		return nil
	}
	for _, mm := range c.slotCounts(machines) {
		// Each group's first machine alone: P = M.
		seen := map[string]bool{}
		for _, w := range order {
			if seen[w.group] || w.cpus < mm {
				continue
			}
			seen[w.group] = true
			if err := measure(map[string]int{w.name: mm}); err != nil {
				return nil, err
			}
		}
		// The first k machines, k = 2..all: P > M.
		for k := 2; k <= len(order); k++ {
			active := map[string]int{}
			for _, w := range order[:k] {
				active[w.name] = min(mm, w.cpus)
			}
			if err := measure(active); err != nil {
				return nil, err
			}
		}
	}
	return machines, nil
}

// slotCounts are the M to measure: -slots, capped at the largest CPUs,
// and every machine's CPUs (the baseline "slots = CPUs" must be known).
func (c *calibrator) slotCounts(machines []machine) []int {
	top := 0
	for _, w := range machines {
		top = max(top, w.cpus)
	}
	var out []int
	for _, s := range c.cfg.Slots {
		if s <= top {
			out = append(out, s)
		}
	}
	for _, w := range machines {
		out = append(out, w.cpus)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// interleave orders the machines round-robin over their groups (groups
// and machines by name), so that the first k span as many groups as they
// can.
func interleave(machines []machine) []machine {
	groups := map[string][]machine{}
	var names []string
	for _, w := range machines {
		if _, ok := groups[w.group]; !ok {
			names = append(names, w.group)
		}
		groups[w.group] = append(groups[w.group], w)
	}
	slices.Sort(names)
	var out []machine
	for i := 0; len(out) < len(machines); i++ {
		for _, g := range names {
			if i < len(groups[g]) {
				out = append(out, groups[g][i])
			}
		}
	}
	return out
}

func signature(active map[string]int) string {
	var b []string
	for _, name := range slices.Sorted(maps.Keys(active)) {
		b = append(b, fmt.Sprintf("%s×%d", name, active[name]))
	}
	return strings.Join(b, " ")
}

// batch gives the active workers their slots and every other worker none,
// runs reps tasks per slot and returns each active worker's mean task time
// in it (from the master's ledger: its executions before and after).
func (c *calibrator) batch(ctx context.Context, m *grid.Master, n int, byName map[string]sched.WorkerID, active map[string]int) ([]plan.Sample, error) {
	p := 0
	for name, id := range byName {
		s := active[name]
		p += s
		if err := m.SetSlots(id, s); err != nil {
			return nil, err
		}
	}
	before := execByWorker(m.Report())
	xs := make([][]float64, c.cfg.Reps*p)
	for i := range xs {
		xs[i] = []float64{0.5}
	}
	c.gen++
	start := time.Now()
	if _, err := m.Evaluate(ctx, c.gen, xs); err != nil {
		return nil, err
	}
	after := execByWorker(m.Report())
	var samples []plan.Sample
	var line []string
	for _, name := range slices.Sorted(maps.Keys(active)) {
		id := byName[name]
		a, b := after[id], before[id]
		cnt := a.n - b.n
		if cnt <= 0 {
			line = append(line, fmt.Sprintf("%s×%d –", name, active[name]))
			continue
		}
		mean := (a.sum - b.sum) / float64(cnt)
		g := grid.GroupOf(name)
		if c.cfg.GroupBy == "worker" {
			g = name
		}
		samples = append(samples, plan.Sample{Group: g, Worker: name, N: n, P: p, M: active[name], Exec: mean, Count: cnt,
			Source: fmt.Sprintf("batch %d", c.gen)})
		line = append(line, fmt.Sprintf("%s×%d %s (%d)", name, active[name], Seconds(mean), cnt))
	}
	fmt.Fprintf(c.progress, "esplan: N=%d P=%d: %s  [%s]\n", n, p, strings.Join(line, ", "), time.Since(start).Round(time.Millisecond))
	return samples, nil
}

type execTotal struct {
	n   int
	sum float64 // seconds
}

// execByWorker is each worker's finished executions and their total time
// so far, from the ledger's report.
func execByWorker(r sched.Report) map[sched.WorkerID]execTotal {
	out := map[sched.WorkerID]execTotal{}
	for _, w := range r.Workers {
		fin := w.Executions - w.Aborted
		out[w.Worker] = execTotal{n: fin, sum: w.MeanExec.Seconds() * float64(fin)}
	}
	return out
}

// checkGroups compares the machines of each group where they ran side by
// side (the same N, P and M): machines more than 25 % apart are probably
// not identical, and a note says so.
func checkGroups(cal *plan.Calibration) []string {
	type key struct {
		g       string
		n, p, m int
		src     string
	}
	by := map[key][]plan.Sample{}
	for _, s := range cal.Samples {
		k := key{s.Group, s.N, s.P, s.M, s.Source}
		by[k] = append(by[k], s)
	}
	worst := map[string]string{}
	worstR := map[string]float64{}
	for k, ss := range by {
		if len(ss) < 2 {
			continue
		}
		lo, hi := ss[0], ss[0]
		for _, s := range ss {
			if s.Exec < lo.Exec {
				lo = s
			}
			if s.Exec > hi.Exec {
				hi = s
			}
		}
		if r := hi.Exec / lo.Exec; r > 1.25 && r > worstR[k.g] {
			worstR[k.g] = r
			worst[k.g] = fmt.Sprintf("group %s: %s took %.2f× as long as %s (N=%d P=%d M=%d): not identical machines? name them apart (esworker -name) or use -group-by worker",
				k.g, hi.Worker, r, lo.Worker, k.n, k.p, k.m)
		}
	}
	var out []string
	for _, g := range slices.Sorted(maps.Keys(worst)) {
		out = append(out, worst[g])
	}
	return out
}

// reportFile is what esplan reads of an esrun -report file.
type reportFile struct {
	Config struct {
		LoadN int `json:"load_n"`
	} `json:"config"`
	Schedule *struct {
		PerWorker []struct {
			Name     string  `json:"name"`
			Slots    int     `json:"slots"`
			Accepted int     `json:"accepted"`
			MeanExec float64 `json:"mean_exec"`
		} `json:"per_worker"`
	} `json:"schedule"`
}

// maxReportBytes bounds a report FromReports reads, as esreport does.
const maxReportBytes = 1 << 30

// readReportFile reads what FromReports needs of the report at path: a
// regular file, decoded as it is read, at most maxReportBytes. It read
// any file whole first: a report named /dev/zero was read until the
// memory ran out.
func readReportFile(path string) (*reportFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("report %s is not a regular file", path)
	}
	var r reportFile
	if err := json.NewDecoder(io.LimitReader(f, maxReportBytes)).Decode(&r); err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	return &r, nil
}

// FromReports makes a calibration of esrun -report files: per
// report, one sample per worker that returned results (N = the run's
// load, M = its slots, P = the slots of every such worker).
func FromReports(paths []string, groupBy string) (*plan.Calibration, error) {
	cal := &plan.Calibration{Version: plan.CalibrationVersion, Source: "reports"}
	machines := map[string]plan.Machine{}
	for _, path := range paths {
		r, err := readReportFile(path)
		if err != nil {
			return nil, err
		}
		if r.Config.LoadN < 1 || r.Schedule == nil {
			return nil, fmt.Errorf("report %s: not a grid run with an LU load (load_n %d)", path, r.Config.LoadN)
		}
		p := 0
		for _, w := range r.Schedule.PerWorker {
			if w.Accepted > 0 && w.Slots > 0 {
				p += w.Slots
			}
		}
		for _, w := range r.Schedule.PerWorker {
			if w.Accepted < 1 || w.Slots < 1 || !(w.MeanExec > 0) || math.IsInf(w.MeanExec, 0) {
				continue
			}
			if w.Name == "" {
				return nil, fmt.Errorf("report %s: worker without a name (an esrun older than its names in reports)", path)
			}
			g := grid.GroupOf(w.Name)
			if groupBy == "worker" {
				g = w.Name
			}
			if old, ok := machines[w.Name]; !ok || w.Slots > old.CPUs {
				machines[w.Name] = plan.Machine{Name: w.Name, Group: g, CPUs: w.Slots}
			}
			cal.Samples = append(cal.Samples, plan.Sample{Group: g, Worker: w.Name, N: r.Config.LoadN, P: p, M: w.Slots,
				Exec: w.MeanExec, Count: w.Accepted, Source: path})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(machines)) {
		cal.Machines = append(cal.Machines, machines[name])
	}
	if len(cal.Samples) == 0 {
		return nil, errors.New("no worker samples in the reports")
	}
	return cal, cal.Check()
}
