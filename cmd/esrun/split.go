package main

import (
	"flag"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
)

// splitOptions are the flags of masters that split (docs/papers.md §2).
type splitOptions struct {
	rule   string
	window int
	cost   time.Duration
}

func addSplitFlags(fs *flag.FlagSet, o *splitOptions) {
	fs.StringVar(&o.rule, "split", "off", "masters that split when overloaded (docs/papers.md §2): `RULE` off, paper (overloaded and ≥ 4 running workers: a worker becomes a child master over half the workers and half the queue), or gain (paper, and only when the expected throughput after the split, one worker fewer, beats it now)")
	flagx.IntVar(fs, &o.window, "overload-window", 0, 0, grid.MaxOverloadWindow, "the overload test's `N`: overloaded when the messages waiting after an assignment, averaged over the last N assignments, reach 1; 0 = 2 × processors (1 + the workers' slots), at most 512")
	flagx.BareDurationVar(fs, &o.cost, "master-cost", 0, 0, grid.MaxMessageCost, time.Millisecond, "emulate a slow master: spend `D` on every message from a worker (e.g. 500us; a bare number is milliseconds, as in essim), so that fine-grained tasks saturate one master on a few machines; child masters inherit it")
}

func (o *splitOptions) check() error {
	if _, err := grid.ParseSplitRule(o.rule); err != nil {
		return usagef("-split %q: want off, paper or gain", o.rule)
	}
	return nil
}

func (o *splitOptions) config() grid.SplitConfig {
	r, _ := grid.ParseSplitRule(o.rule)
	return grid.SplitConfig{Rule: r, Window: o.window, MessageCost: o.cost}
}
