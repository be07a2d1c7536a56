package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/esgrid/esgrid/localgrid"
	"github.com/esgrid/esgrid/sched"
)

// localGrid is the run's grid (package localgrid), with what esrun tells
// the user about it.
type localGrid struct {
	*localgrid.Grid
	master *grid.Master
	gossip *grid.Membership
	// hint is the command line that starts a remote worker.
	hint string
	// keyFile is the file localgrid.SaveRunKey wrote for this run, if any.
	keyFile string
}

// startGrid starts the master on o.listen, its gossip on o.gossip and
// o.local agents with o.localSlots() slots each (or the plan's). The
// master logs at log's level; the local agents only their warnings,
// unless -v. onGeneration, when set, receives each generation's final
// figures (the metrics), and onInstance, when set, each ended instance
// (the status page).
func startGrid(o *options, spec grid.ProblemSpec, key *grid.Key, log *slog.Logger, onGeneration func(sched.Generation), onInstance func(sched.Instance)) (*localGrid, error) {
	cfg := localgrid.Config{
		Master: grid.MasterConfig{
			Listen: o.listen, Key: key, Policy: o.sched, Problem: spec, Logger: log,
			Ledger:      sched.LedgerConfig{OnGeneration: onGeneration, OnInstance: onInstance},
			Sched:       sched.Config{Adaptive: o.adaptive, Copies: o.copies},
			TaskTimeout: orNone(o.taskTimeout),
			MaxRetries:  orNone(o.maxRetries),
			MaxFrame:    o.maxFrame(spec.Dim),
			MaxWorkers:  o.maxConns,
			Verify:      o.verify,
			Excluded:    o.excluded,
			Plan:        o.planned,
			Split:       o.split.config(), // split.go
		},
		Gossip:      o.gossip,
		Local:       o.local,
		Slots:       func(name string) int { return o.planSlots(name, o.localSlots()) }, // plan.go
		PluginSlots: o.localSlots(),
		Catalog:     o.catalog,
	}
	if o.verbose {
		cfg.AgentLogger = log
	}
	g, err := localgrid.Start(cfg)
	if ae := (*localgrid.AddrError)(nil); errors.As(err, &ae) {
		return nil, flagx.ListenError("-"+ae.What, ae.Addr, ae.Err)
	}
	if err != nil {
		return nil, err
	}
	return &localGrid{Grid: g, master: g.Master(), gossip: g.Gossip()}, nil
}

// waitWorkers blocks until n workers (local or remote) are connected. It
// prints how many have joined every localgrid.WaitReport, and at once when
// announce is set (remote workers are expected, so the user has something
// to do).
func (g *localGrid) waitWorkers(ctx context.Context, n int, announce bool, con logx.Console) error {
	return g.WaitWorkers(ctx, n, announce, func(joined int) {
		con.Say(slog.LevelInfo, fmt.Sprintf("esrun: waiting for workers: %d/%d joined; start %s", joined, n, g.hint),
			"waiting for workers", "workers", joined, "wanted", n, "command", g.hint)
	})
}

// close ends the run on the grid (localgrid.Grid.Close) and removes the
// key file made for the run.
func (g *localGrid) close(final bool) error {
	err := g.Close(final)
	if g.keyFile != "" {
		os.Remove(g.keyFile)
		g.keyFile = ""
	}
	return err
}

// clusterKey is the run's key, from -key, -key-file or ESGRID_KEY, and
// how a worker is told to get it. Without any of them a random key is
// made for the run (secret is then set): local agents get it directly,
// and remote workers from the file localgrid.SaveRunKey writes, which the command
// line esrun prints names. A key is never printed.
type clusterKey struct {
	key       *grid.Key
	secret    string // the generated key; "" when given
	workerArg string // what an esworker command line adds for the key
}

func loadClusterKey(o *options) (*clusterKey, error) {
	k, err := grid.LoadKey(o.key, o.keyFile, o.keyAny)
	switch {
	case err == nil:
		arg := "-key-file " + o.keyFile
		if o.keyFile == "" {
			arg = "with the same key (-key, -key-file or " + grid.KeyEnv + ")"
		}
		return &clusterKey{key: k, workerArg: arg}, nil
	case errors.Is(err, grid.ErrNoKey) && o.key == "" && o.keyFile == "":
		secret, err := grid.GenerateKey()
		if err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
		if k, err = grid.NewKey(secret); err != nil {
			return nil, fmt.Errorf("cluster key: %w", err)
		}
		// Until localgrid.SaveRunKey writes it somewhere, no other worker can have it.
		return &clusterKey{key: k, secret: secret, workerArg: "with this run's key (made for it and not saved: give esrun -key-file K to share one)"}, nil
	case errors.Is(err, grid.ErrWeakKey):
		// LoadKey's error names where the key came from.
		return nil, usagef("%v", err)
	case o.keyFile != "":
		return nil, usagef("-key-file: %v", err)
	default:
		return nil, usagef("-key: %v", err)
	}
}

// orNone maps a flag's 0 ("none") to the negative value that a config
// struct reads as none (its 0 is "the default").
func orNone[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// joinCommand is the command line that starts a remote worker.
func (g *localGrid) joinCommand(k *clusterKey) string {
	return "esworker -join " + g.Gossip().Addr() + " " + k.workerArg
}
