package sim

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// Summary is the mean over the seeded trials of one configuration.
type Summary struct {
	// Config is the configuration (its Seed is the base of the trials').
	Config Config
	// Trials is the number of runs averaged.
	Trials int
	// Mean times over the trials, as the ledger reports them.
	Total, SyncWait, Comm, Compute, Busy time.Duration
	// LB and BarrierBound are the mean lower bounds.
	LB, BarrierBound time.Duration
	// EfficiencyLB is LB / Total and EfficiencyBarrier BarrierBound /
	// Total, of the means (the paper's efficiency of the average time).
	EfficiencyLB, EfficiencyBarrier float64
	// Opt is the mean clairvoyant floor (Result.Optimum.LB) and OptUB the
	// mean total of the clairvoyant schedule; EfficiencyOpt is Opt / Total.
	// OptExact says every trial's floor was exact (the model's optimum).
	Opt, OptUB    time.Duration
	EfficiencyOpt float64
	// Nominal is the mean exact optimum with every task at its mean time
	// (Optimum.Nominal) and EfficiencyNominal Nominal / Total.
	Nominal           time.Duration
	EfficiencyNominal float64
	OptExact          bool
	// MinEfficiencyOpt is the lowest Optimum.LB / total over the trials.
	MinEfficiencyOpt float64
	// Mean counts per run, from the ledger.
	Originals, Replicas, CancelsHeld, CancelsRunning, Aborted, Duplicates float64
	// Wasted is the mean compute spent on instances stopped while running.
	Wasted time.Duration
	// Mean counts per run, from the simulator.
	HeldDropped, LateCancels, StaleResults float64
	// Messages is the mean number of messages per run (tasks, cancels,
	// results); MessagesPerTask and ReplicasPerTask divide by the tasks
	// of a run.
	Messages                         float64
	MessagesPerTask, ReplicasPerTask float64
	// Tasks, Instances and Events are totals over all trials.
	Tasks, Instances, Events int
}

// TrialSeed is the seed of trial i of a configuration seeded with base:
// distinct, well mixed seeds (splitmix64), so neighbouring bases do not
// share trials.
func TrialSeed(base uint64, i int) uint64 {
	z := base + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// RunTrials runs trials seeded runs of every configuration, on up to
// parallel goroutines (0: GOMAXPROCS), and returns one Summary per
// configuration in order. Results do not depend on parallel.
func RunTrials(ctx context.Context, cfgs []Config, trials, parallel int) ([]Summary, error) {
	if trials < 1 {
		return nil, fmt.Errorf("sim: %d trials", trials)
	}
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	results := make([]Result, len(cfgs)*trials)
	errs := make([]error, len(results))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(results)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				cfg := cfgs[j/trials]
				cfg.Seed = TrialSeed(cfg.Seed, j%trials)
				results[j], errs[j] = RunContext(ctx, cfg)
			}
		}()
	}
feed:
	for j := range results {
		select {
		case jobs <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]Summary, len(cfgs))
	for i, cfg := range cfgs {
		for j := i * trials; j < (i+1)*trials; j++ {
			if errs[j] != nil {
				return nil, fmt.Errorf("%s on %s: %w", cfg.Policy, cfg.Set.Name, errs[j])
			}
		}
		out[i] = summarize(cfg, results[i*trials:(i+1)*trials])
	}
	return out, nil
}

// summarize averages the results of one configuration's trials.
func summarize(cfg Config, rs []Result) Summary {
	s := Summary{Config: cfg, Trials: len(rs), OptExact: true, MinEfficiencyOpt: math.Inf(1)}
	n := float64(len(rs))
	var total, sync, comm, compute, busy, lb, bb, wasted, opt, optUB, nominal float64
	for _, r := range rs {
		opt += float64(r.Optimum.LB)
		nominal += float64(r.Optimum.Nominal)
		optUB += float64(r.Optimum.UB)
		s.OptExact = s.OptExact && r.Optimum.Exact
		if r.Report.Total > 0 {
			s.MinEfficiencyOpt = min(s.MinEfficiencyOpt, float64(r.Optimum.LB)/float64(r.Report.Total))
		}
		s.Messages += float64(r.Stats.Messages) / n
		p := &r.Report
		total += float64(p.Total)
		sync += float64(p.SyncWait)
		comm += float64(p.Comm)
		compute += float64(p.Compute)
		busy += float64(p.Busy)
		lb += float64(p.LB)
		bb += float64(p.BarrierBound)
		wasted += float64(p.Wasted)
		s.Originals += float64(p.Originals) / n
		s.Replicas += float64(p.Replicas) / n
		s.CancelsHeld += float64(p.CancelsHeld) / n
		s.CancelsRunning += float64(p.CancelsRunning) / n
		s.Aborted += float64(p.Aborted) / n
		s.Duplicates += float64(p.Duplicates) / n
		s.HeldDropped += float64(r.Stats.HeldDropped) / n
		s.LateCancels += float64(r.Stats.LateCancels) / n
		s.StaleResults += float64(r.Stats.StaleResults) / n
		s.Tasks += cfg.Workload.Tasks()
		s.Instances += r.Stats.Instances
		s.Events += r.Stats.Events
	}
	mean := func(x float64) time.Duration { return time.Duration(x / n) }
	s.Total, s.SyncWait, s.Comm, s.Compute, s.Busy = mean(total), mean(sync), mean(comm), mean(compute), mean(busy)
	s.LB, s.BarrierBound, s.Wasted = mean(lb), mean(bb), mean(wasted)
	s.Opt, s.OptUB, s.Nominal = mean(opt), mean(optUB), mean(nominal)
	if s.Total > 0 {
		s.EfficiencyLB = float64(s.LB) / float64(s.Total)
		s.EfficiencyBarrier = float64(s.BarrierBound) / float64(s.Total)
		s.EfficiencyOpt = float64(s.Opt) / float64(s.Total)
		s.EfficiencyNominal = float64(s.Nominal) / float64(s.Total)
	}
	if math.IsInf(s.MinEfficiencyOpt, 1) {
		s.MinEfficiencyOpt = 0
	}
	if tasks := float64(cfg.Workload.Tasks()); tasks > 0 {
		s.MessagesPerTask = s.Messages / tasks
		s.ReplicasPerTask = s.Replicas / tasks
	}
	return s
}
