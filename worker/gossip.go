package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// joinGossip makes the agent a gossip member. It does not need the seeds to
// answer yet: masterAddr joins them (again) before every connection
// attempt, so a worker may start before its master, and finds a restarted
// master that does not know it.
func (a *Agent) joinGossip(ctx context.Context) (*grid.Membership, error) {
	host, portStr, err := net.SplitHostPort(a.cfg.GossipBind)
	if err != nil {
		return nil, fmt.Errorf("worker: gossip address %q: %w", a.cfg.GossipBind, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("worker: gossip port %q: %w", portStr, err)
	}
	offered := a.cfg.Problems
	if len(offered) > grid.MaxMetaProblems {
		offered = offered[:grid.MaxMetaProblems]
	}
	ms, err := grid.JoinMembership(ctx, grid.MembershipConfig{
		Name:      a.cfg.Name,
		BindAddr:  host,
		BindPort:  port,
		SecretKey: a.cfg.Key.GossipKey(),
		Meta:      grid.NodeMeta{Role: grid.RoleWorker, Slots: a.cfg.Slots, Problems: offered},
		Logger:    a.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: gossip: %w", err)
	}
	return ms, nil
}

// errNoMasterYet: the cluster has no master now; a lab agent waits.
var errNoMasterYet = errors.New("no master in the cluster yet")

// masterWait bounds how long one attempt waits for gossip to name a master.
const masterWait = 3 * time.Second

// masterAddr is the master's data address: Config.Master if set, else one
// that a master gossips. attempt counts the failures so far: when gossip
// names several masters (a crashed one not yet declared dead beside its
// successor), each failure moves on to the next, so a dead master cannot
// hold the worker up until failure detection catches it.
func (a *Agent) masterAddr(ctx context.Context, ms *grid.Membership, attempt int) (string, error) {
	if ms == nil {
		return pickAddr(a.cfg.Master, attempt), nil // relay.go: a list is tried in turn
	}
	joinErr := ms.Join(a.cfg.Join...)
	if a.cfg.Master != "" {
		return pickAddr(a.cfg.Master, attempt), nil
	}
	if masters := ms.Masters(); len(masters) > 0 {
		return masters[attempt%len(masters)].DataAddr(), nil
	}
	if joinErr != nil {
		return "", joinErr
	}
	wctx, cancel := context.WithTimeout(ctx, masterWait)
	defer cancel()
	m, err := ms.WaitMaster(wctx)
	if err != nil {
		if ctx.Err() == nil {
			return "", errNoMasterYet
		}
		return "", err
	}
	return m.DataAddr(), nil
}
