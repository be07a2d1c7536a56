// Package sweep runs essim's experiments on the simulator (sched/sim):
// a sweep of scheduling policies over task grains and added delays, with
// the paper's qualitative shape checked, a CSV and a chart (Run, Result);
// and the masters that split of docs/papers.md §2 (MastersPaper,
// MastersScale).
package sweep

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/internal/atomicfile"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/sched/sim"
)

// Config is a sweep: every grain × delay, under every policy.
type Config struct {
	Set              *sim.Set
	Policies         []string
	Grains, Delays   []time.Duration
	Workload         string // "es" (a (mu+lambda)-ES of Gens generations) or "bag" (of Tasks tasks)
	Shape            string // a bag's grains: "mandelbrot" strips, else uniform
	Tasks            int
	Mu, Lambda, Gens int
	EngineCost       time.Duration // the ES engine's time per generation
	Depth            int           // the policies' remote queue depth (0: their default)
	Adaptive         bool          // rwq and r3q size their queues from measurements
	Copies           int           // eft: most live instances of a task (0: the default)
	PolicyCost       time.Duration // the master's time per policy step (sim.Config.PolicyCost; 0: as measured)
	Noise            float64       // sigma of the log-normal task-time noise
	Slowdowns        []sim.Slowdown
	Seed             uint64
	Trials, Parallel int // trials per setting and policy; simulations at once
	// TaskTimeout is the master's task timeout: the deadlines stop
	// doubling at half of it, and a task that runs past it fails the run
	// (sim.Config.Deadlines). 0: the master's default, 10 minutes;
	// negative: none.
	TaskTimeout time.Duration
}

// ceiling is the deadlines' ceiling of TaskTimeout: half of it (0: the
// simulator's default, the master's; negative: none).
func (c *Config) ceiling() time.Duration {
	switch {
	case c.TaskTimeout < 0:
		return -1
	case c.TaskTimeout > 0:
		return max(c.TaskTimeout/2, time.Nanosecond)
	}
	return 0
}

// Setting is one point of the sweep.
type Setting struct {
	Grain, Delay time.Duration
}

// Result is a sweep's outcome: Sums has, for each setting in turn, one
// summary per policy in Config.Policies' order.
type Result struct {
	Config   *Config
	Settings []Setting
	Sums     []sim.Summary
}

// workloadFor builds the workload of one grain.
func (c *Config) workloadFor(grain time.Duration) sim.Workload {
	var w sim.Workload
	switch {
	case c.Workload == "bag" && c.Shape == "mandelbrot":
		w = sim.Bag(sim.MandelbrotGrains(c.Tasks, grain))
		w.Name = fmt.Sprintf("bag of %d Mandelbrot strips, mean %v", c.Tasks, grain)
	case c.Workload == "bag":
		w = sim.BagUniform(c.Tasks, grain)
	default:
		w = sim.ES(c.Mu, c.Lambda, c.Gens, grain)
	}
	w.EngineCost = c.EngineCost
	return w
}

// Run simulates every setting (grain × delay) under every policy, c.Trials
// times each, c.Parallel at once.
func Run(ctx context.Context, c *Config) (*Result, error) {
	res := &Result{Config: c}
	var cfgs []sim.Config
	for _, g := range c.Grains {
		wl := c.workloadFor(g)
		for _, d := range c.Delays {
			res.Settings = append(res.Settings, Setting{g, d})
			for _, p := range c.Policies {
				cfgs = append(cfgs, sim.Config{
					Set:          c.Set,
					Policy:       p,
					PolicyConfig: sched.Config{Depth: c.Depth, Adaptive: c.Adaptive, Copies: c.Copies},
					Workload:     wl,
					AddedDelay:   d,
					Noise:        c.Noise,
					Slowdowns:    c.Slowdowns,
					Seed:         c.Seed,
					PolicyCost:   c.PolicyCost,
					Deadlines:    sched.Deadlines{Ceiling: c.ceiling()},
				})
			}
		}
	}
	sums, err := sim.RunTrials(ctx, cfgs, c.Trials, c.Parallel)
	if err != nil {
		return nil, err
	}
	res.Sums = sums
	return res, nil
}

// Describe prints the sweep's setting: the machines, the workload and
// what the table's columns mean.
func Describe(w io.Writer, c *Config) {
	s := c.Set
	fmt.Fprintf(w, "machines %s: %d machines, %d slots, master cost %v/msg; speed sum",
		s.Name, len(s.Machines), s.Slots(), s.MasterCost)
	for _, g := range c.Grains {
		fmt.Fprintf(w, " %.2f@%v", s.SpeedSum(g), g)
	}
	fmt.Fprintln(w)
	wl := c.workloadFor(c.Grains[0])
	name := wl.Name
	if len(c.Grains) > 1 {
		name = strings.Replace(name, c.Grains[0].String(), "{grain}", 1)
	}
	fmt.Fprintf(w, "workload %s, %d tasks; %d trials, noise sigma %.2f, seed %d", name, wl.Tasks(), c.Trials, c.Noise, c.Seed)
	if c.Depth > 0 {
		fmt.Fprintf(w, ", depth %d", c.Depth)
	}
	if c.Adaptive {
		fmt.Fprintf(w, ", adaptive depth (rwq, r3q; cap %d)", sched.DefaultAdaptiveMax)
	}
	if c.Copies > 0 {
		fmt.Fprintf(w, ", eft copies %d", c.Copies)
	}
	if c.PolicyCost > 0 {
		fmt.Fprintf(w, ", the master's policy %v a step", c.PolicyCost)
	}
	for _, sd := range c.Slowdowns {
		fmt.Fprintf(w, ", %s x%g from %v", sd.Machine, sd.Factor, sd.At)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "times are means over trials; comm counts only time outside the sync wait, so compute = total - sync - comm;")
	fmt.Fprintln(w, "effLB = LB/total, effBar = barrier-bound/total; opt = the clairvoyant optimum of each trial's actual task times")
	fmt.Fprintln(w, "(noise included) on these slots, delays and costs (a proven floor, see below), effOpt = opt/total, effNom =")
	fmt.Fprintln(w, "the exact optimum of the same tasks at their mean time / total; counts are per run, msg/t and rep/t per task")
	fmt.Fprintln(w)
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// PrintTable prints a row per setting and policy: the times, the
// efficiencies and the policy's actions.
func (r *Result) PrintTable(w io.Writer) {
	c, settings, sums := r.Config, r.Settings, r.Sums
	fmt.Fprintf(w, "%6s %6s %-6s %9s %8s %8s %9s %9s %6s %6s %6s %6s %7s %6s %6s %6s %5s %5s\n",
		"grain", "delay", "policy", "total s", "sync s", "comm s", "compute s", "opt s", "effLB", "effBar", "effOpt", "effNom",
		"replica", "c.held", "c.run", "stop", "msg/t", "rep/t")
	i := 0
	exact, gap := true, 0.0
	for si, st := range settings {
		if si > 0 {
			fmt.Fprintln(w)
		}
		for range c.Policies {
			s := sums[i]
			i++
			exact = exact && s.OptExact
			if s.Opt > 0 {
				gap = max(gap, float64(s.OptUB-s.Opt)/float64(s.Opt))
			}
			fmt.Fprintf(w, "%6s %6s %-6s %9s %8s %8s %9s %9s %5.1f%% %5.1f%% %5.1f%% %5.1f%% %7.0f %6.0f %6.0f %6.0f %5.2f %5.2f\n",
				ms(st.Grain), ms(st.Delay), s.Config.Policy, secs(s.Total), secs(s.SyncWait), secs(s.Comm), secs(s.Compute), secs(s.Opt),
				100*s.EfficiencyLB, 100*s.EfficiencyBarrier, 100*s.EfficiencyOpt, 100*s.EfficiencyNominal,
				s.Replicas, s.CancelsHeld, s.CancelsRunning, s.Aborted, s.MessagesPerTask, s.ReplicasPerTask)
		}
	}
	fmt.Fprintln(w, "\nreplica: replicas sent; c.held/c.run: cancels of instances the master believed held/running; stop: instances actually stopped while running")
	if exact {
		fmt.Fprintln(w, "opt: exact (the clairvoyant schedule meets the floor in every batch of every trial)")
	} else {
		fmt.Fprintf(w, "opt: a proven lower bound; a clairvoyant schedule found is at most %.2f%% above it (so the true optimum is too)\n", 100*gap)
	}
}

// PrintShape checks the paper's qualitative results setting by setting
// (with wq, rr, rwq and r3q among the policies).
func (r *Result) PrintShape(w io.Writer) {
	c, settings, sums := r.Config, r.Settings, r.Sums
	idx := func(p string) int { return slices.Index(c.Policies, p) }
	if idx("wq") < 0 || idx("rr") < 0 || idx("rwq") < 0 || idx("r3q") < 0 {
		return
	}
	n := len(c.Policies)
	var r3qBest, rwqComm, queueComm, rrSync int
	for si := range settings {
		row := sums[si*n : (si+1)*n]
		best, comm := idx("wq"), idx("wq")
		for j, s := range row {
			if p := s.Config.Policy; p != "wq" && p != "rr" && p != "rwq" && p != "r3q" {
				continue // the paper's shape is about its four policies
			}
			if s.Total < row[best].Total {
				best = j
			}
			if s.Comm < row[comm].Comm {
				comm = j
			}
		}
		if row[best].Config.Policy == "r3q" {
			r3qBest++
		}
		if row[comm].Config.Policy == "rwq" {
			rwqComm++
		}
		if row[idx("rr")].SyncWait < row[idx("wq")].SyncWait {
			rrSync++
		}
		if max(row[idx("rwq")].Comm, row[idx("r3q")].Comm) < min(row[idx("wq")].Comm, row[idx("rr")].Comm) {
			queueComm++
		}
	}
	fmt.Fprintf(w, "\npaper's shape (among wq, rr, rwq, r3q), settings where it holds out of %d:\n", len(settings))
	fmt.Fprintf(w, "  r3q lowest total %d, rwq lowest comm %d, rwq and r3q comm below wq's and rr's %d, rr less sync wait than wq %d\n",
		r3qBest, rwqComm, queueComm, rrSync)
	for _, g := range c.Grains {
		fmt.Fprintf(w, "  total vs delay at %v:", g)
		for _, p := range []string{"wq", "rr", "rwq", "r3q"} {
			fmt.Fprintf(w, "  %s", p)
			for si, st := range settings {
				if st.Grain == g {
					fmt.Fprintf(w, " %s", secs(sums[si*n+idx(p)].Total))
				}
			}
		}
		fmt.Fprintln(w)
	}
}

// WriteCSV writes a row per setting and policy to path, whole or not at
// all (atomicfile.Write): a full disk leaves the file that was there.
func (r *Result) WriteCSV(path string) error {
	if err := atomicfile.Write(path, 0o644, r.writeCSV); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// writeCSV writes the table to w.
func (r *Result) writeCSV(w io.Writer) error {
	c, settings, sums := r.Config, r.Settings, r.Sums
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"machines", "workload", "grain_ms", "delay_ms", "policy", "trials",
		"total_s", "sync_s", "comm_s", "compute_s", "busy_s", "lb_s", "barrier_s", "eff_lb", "eff_barrier",
		"opt_s", "opt_ub_s", "opt_exact", "eff_opt", "eff_opt_min", "nominal_s", "eff_nominal",
		"originals", "replicas", "cancels_held", "cancels_running", "stopped_running", "wasted_s",
		"duplicates", "held_dropped", "late_cancels", "messages_per_task", "replicas_per_task", "copies", "noise", "seed"})
	n := len(c.Policies)
	f64 := func(x float64, p int) string { return strconv.FormatFloat(x, 'f', p, 64) }
	sec := func(d time.Duration) string { return f64(d.Seconds(), 4) }
	for i, s := range sums {
		st := settings[i/n]
		_ = cw.Write([]string{c.Set.Name, c.Workload, ms(st.Grain), ms(st.Delay), s.Config.Policy, strconv.Itoa(s.Trials),
			sec(s.Total), sec(s.SyncWait), sec(s.Comm), sec(s.Compute), sec(s.Busy), sec(s.LB), sec(s.BarrierBound),
			f64(s.EfficiencyLB, 4), f64(s.EfficiencyBarrier, 4),
			sec(s.Opt), sec(s.OptUB), strconv.FormatBool(s.OptExact), f64(s.EfficiencyOpt, 4), f64(s.MinEfficiencyOpt, 4),
			sec(s.Nominal), f64(s.EfficiencyNominal, 4),
			f64(s.Originals, 1), f64(s.Replicas, 1), f64(s.CancelsHeld, 1), f64(s.CancelsRunning, 1), f64(s.Aborted, 1),
			sec(s.Wasted), f64(s.Duplicates, 1), f64(s.HeldDropped, 1), f64(s.LateCancels, 1),
			f64(s.MessagesPerTask, 3), f64(s.ReplicasPerTask, 3), strconv.Itoa(c.Copies),
			f64(c.Noise, 3), strconv.FormatUint(c.Seed, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// ShowSet prints the machine set c.Set (machines: its name or file): the
// built-in set's text, or each machine's paths and task times at c.Grains.
func ShowSet(w io.Writer, machines string, c *Config) {
	if b, err := sim.BuiltinText(machines); err == nil {
		w.Write(b)
		return
	}
	s := c.Set
	fmt.Fprintf(w, "# %s: %d machines, master cost %v per message\n", s.Name, len(s.Machines), s.MasterCost)
	for k, m := range s.Machines {
		fmt.Fprintf(w, "%-8s cpus=%d path=%v roundtrip=%v", m.Name, m.CPUs, s.PathDelay(k, 0), s.RoundTrip(k, 0))
		for _, g := range c.Grains {
			fmt.Fprintf(w, " t%v=%v", g, s.TaskTime(k, g))
		}
		fmt.Fprintln(w)
	}
}

// PrintSpeed prints the simulator's own speed: the runs, tasks,
// instances and events it simulated in elapsed real time.
func (r *Result) PrintSpeed(w io.Writer, elapsed time.Duration) {
	var tasks, inst, events int
	for _, s := range r.Sums {
		tasks += s.Tasks
		inst += s.Instances
		events += s.Events
	}
	sec := elapsed.Seconds()
	fmt.Fprintf(w, "\nsimulated %d runs, %d tasks (%d instances, %d events) in %.2f s real: %.0f tasks/s, %.0f events/s\n",
		len(r.Sums)*r.Config.Trials, tasks, inst, events, sec, float64(tasks)/sec, float64(events)/sec)
}
