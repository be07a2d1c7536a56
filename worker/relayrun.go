package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// RelayConfig is a relay for workers the master cannot reach (docs/papers.md
// §1's R1 in front of W1–W3), as esworker -relay runs it: it accepts
// their connections on Listen and carries each, as a stream, over one
// connection to its upstream, the master (Master, or found through gossip
// from Join) or another relay.
type RelayConfig struct {
	// Listen is the downstream HOST:PORT (port 0: any free port).
	Listen string
	// Master is the upstream: a comma-separated list of HOST:PORT, tried
	// in turn. Empty: the master found through gossip.
	Master string
	// Join are the gossip addresses joined, before every attempt, when
	// Master is empty; Gossip is the HOST:PORT bound for gossip.
	Join   []string
	Gossip string
	Key    *grid.Key
	// Name is the relay's gossip member name: the machine's (the agent
	// behind it has the same, one machine one member).
	Name string
	// Once ends the relay when the master ends the run.
	Once bool
	// MaxBuffered bounds what the relay's streams hold together for
	// workers that do not read (grid.RelayConfig.MaxBuffered). Default
	// grid.DefaultRelayBuffered.
	MaxBuffered int
	Logger      *slog.Logger
}

// Relay is a relay started by StartRelay, running.
type Relay struct {
	addr  string        // its downstream address, for this machine's own agent
	ended chan struct{} // closed when it ended: stopped, or (Once) the run is over
	err   error         // why it ended, once ended is closed
	stop  func()        // stops it and waits
}

// Addr is the relay's downstream address, which the workers behind it
// (and this machine's own agent) are given as their master's.
func (r *Relay) Addr() string { return r.addr }

// Ended is closed when the relay has ended: stopped, or (Once) the run
// is over.
func (r *Relay) Ended() <-chan struct{} { return r.ended }

// Err is why the relay ended, once Ended is closed.
func (r *Relay) Err() error { return r.err }

// Stop stops the relay and waits for it; it may be called more than once.
func (r *Relay) Stop() { r.stop() }

// Await waits, no longer than d, for the relay to end by itself.
func (r *Relay) Await(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ended:
	case <-t.C:
	case <-ctx.Done():
	}
}

// StartRelay starts a relay. Without Master it waits for its master as a
// worker does: the cluster need not answer yet. It runs until Stop, ctx
// is done or (Once) the master ends the run.
func StartRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("-relay %s: %w", cfg.Listen, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var ms *grid.Membership
	upstream := func(context.Context, int) (string, error) { return "", fmt.Errorf("no upstream") }
	if cfg.Master != "" {
		list := cfg.Master
		upstream = func(_ context.Context, attempt int) (string, error) { return pickAddr(list, attempt), nil }
	} else {
		host, portStr, _ := net.SplitHostPort(cfg.Gossip)
		port, _ := strconv.Atoi(portStr)
		// No seeds yet: upstream joins them before every attempt, so that
		// a relay started before its master waits for it.
		ms, err = grid.JoinMembership(rctx, grid.MembershipConfig{
			Name: cfg.Name, BindAddr: host, BindPort: port, SecretKey: cfg.Key.GossipKey(),
			Meta:   grid.NodeMeta{Role: grid.RoleWorker},
			Logger: log,
		})
		if err != nil {
			cancel()
			ln.Close()
			return nil, fmt.Errorf("relay gossip: %w", err)
		}
		joins := cfg.Join
		upstream = func(ctx context.Context, attempt int) (string, error) {
			joinErr := ms.Join(joins...)
			if masters := ms.Masters(); len(masters) > 0 {
				return masters[attempt%len(masters)].DataAddr(), nil
			}
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			defer wcancel()
			m, err := ms.WaitMaster(wctx)
			if err != nil {
				if joinErr != nil {
					return "", joinErr
				}
				return "", fmt.Errorf("no master in the cluster yet")
			}
			return m.DataAddr(), nil
		}
	}
	r, err := grid.NewRelay(grid.RelayConfig{Listener: ln, Upstream: upstream, Key: cfg.Key, Name: cfg.Name, Once: cfg.Once, MaxBuffered: cfg.MaxBuffered, Logger: log})
	if err != nil {
		cancel()
		ln.Close()
		if ms != nil {
			ms.Close()
		}
		return nil, err
	}
	rr := &Relay{addr: r.Addr(), ended: make(chan struct{})}
	go func() {
		defer close(rr.ended)
		rr.err = r.Run(rctx)
	}()
	var once sync.Once
	rr.stop = func() {
		once.Do(func() {
			cancel()
			<-rr.ended
			if ms != nil {
				ms.Close()
			}
		})
	}
	return rr, nil
}
