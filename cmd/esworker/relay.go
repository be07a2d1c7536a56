package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/worker"
)

// esworker -relay HOST:PORT: a relay for workers the master cannot reach
// (docs/papers.md §1's R1 in front of W1–W3). It accepts their connections at
// HOST:PORT and carries each, as a stream, over one connection to its
// upstream: the master (-master, or found through gossip with -join), or
// another relay's address (relays chain into a tree). The workers behind
// it are started with -master HOST:PORT (and, if they have one, another
// path after a comma) and without -join: the relay is the gossip member
// that speaks for them (see grid/relay.go). Unless -relay-only, this
// esworker also works, behind its own relay, as R1 does in the paper.

type relayOptions struct {
	addr string // -relay
	only bool   // -relay-only
}

func addRelayFlags(fs *flag.FlagSet, o *relayOptions) {
	fs.StringVar(&o.addr, "relay", "", "run a relay: accept workers (and relays) the master cannot reach at `HOST:PORT` (port 0: any free port) and carry them to the master over one connection; start them with -master HOST:PORT, without -join")
	fs.BoolVar(&o.only, "relay-only", false, "with -relay: only relay, do not evaluate tasks here")
}

func (o *relayOptions) check() error {
	if o.addr == "" {
		if o.only {
			return usagef("-relay-only needs -relay HOST:PORT")
		}
		return nil
	}
	if err := checkHostPort(o.addr, 0); err != nil {
		return usagef("-relay %q: %v", o.addr, err)
	}
	return nil
}

// checkMasters checks -master, a comma-separated list of HOST:PORT.
func checkMasters(list string) error {
	n := 0
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := checkHostPort(a, 1); err != nil {
			return usagef("-master %q: %v", a, err)
		}
		n++
	}
	if n == 0 {
		return usagef("-master %q names no address", list)
	}
	return nil
}

// runningRelay is the relay of -relay, running.
type runningRelay struct {
	addr  string        // its downstream address, for this esworker's own agent
	ended chan struct{} // closed when it ended: stopped, or (-once) the run is over
	err   error         // why it ended, once ended is closed
	stop  func()        // stops it and waits
}

// relayGrace bounds how long a -once esworker whose own agent was told
// the run is over waits for its relay to pass the word to the workers
// behind it and end.
const relayGrace = 10 * time.Second

// startRelay starts the relay of -relay, if any (nil if none). With -join
// it waits for its master as a worker does: the cluster need not answer
// yet. With -once it ends when the master ends the run.
func startRelay(ctx context.Context, o *options, key *grid.Key, log *slog.Logger, stderr io.Writer, logJSON bool) (*runningRelay, error) {
	if o.relay.addr == "" {
		return nil, nil
	}
	name := o.name
	if name == "" {
		name = worker.DefaultName()
		o.name = name // the agent behind it has the same name: one machine, one member
	}
	ln, err := net.Listen("tcp", o.relay.addr)
	if err != nil {
		return nil, fmt.Errorf("-relay %s: %w", o.relay.addr, err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var ms *grid.Membership
	upstream := func(context.Context, int) (string, error) { return "", fmt.Errorf("no upstream") }
	if o.master != "" {
		list := o.master
		upstream = func(_ context.Context, attempt int) (string, error) { return pickMaster(list, attempt), nil }
	} else {
		host, portStr, _ := net.SplitHostPort(o.gossip)
		port, _ := strconv.Atoi(portStr)
		// No seeds yet: upstream joins them before every attempt, so that
		// a relay started before its master waits for it.
		ms, err = grid.JoinMembership(rctx, grid.MembershipConfig{
			Name: name, BindAddr: host, BindPort: port, SecretKey: key.GossipKey(),
			Meta:   grid.NodeMeta{Role: grid.RoleWorker},
			Logger: log,
		})
		if err != nil {
			cancel()
			ln.Close()
			return nil, fmt.Errorf("relay gossip: %w", err)
		}
		joins := joinAddrs(o.join)
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
	r, err := grid.NewRelay(grid.RelayConfig{Listener: ln, Upstream: upstream, Key: key, Name: name, Once: o.once, Logger: log})
	if err != nil {
		cancel()
		ln.Close()
		if ms != nil {
			ms.Close()
		}
		return nil, err
	}
	rr := &runningRelay{addr: r.Addr(), ended: make(chan struct{})}
	go func() {
		defer close(rr.ended)
		rr.err = r.Run(rctx)
	}()
	if !logJSON { // the Info record below says it in JSON
		fmt.Fprintf(stderr, "esworker: relay listening %s\n", r.Addr())
	}
	log.Info("relay listening for workers the master cannot reach", "addr", r.Addr(), "upstream", o.master, "join", o.join)
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

// await waits, no longer than d, for the relay to end by itself.
func (rr *runningRelay) await(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-rr.ended:
	case <-t.C:
	case <-ctx.Done():
	}
}

// pickMaster is the attempt-th address of a comma-separated list.
func pickMaster(list string, attempt int) string {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	return addrs[max(attempt, 0)%len(addrs)]
}

// relayOnly serves the relay alone until a signal (or ctx) ends it, or,
// with -once, the master ends the run.
func relayOnly(ctx context.Context, drain <-chan struct{}, rr *runningRelay, log *slog.Logger) int {
	select {
	case <-ctx.Done():
	case <-drain:
		log.Info("signal: stopping the relay")
	case <-rr.ended:
	}
	rr.stop()
	if rr.err != nil && !errors.Is(rr.err, grid.ErrRelayRunOver) && ctx.Err() == nil {
		log.Error("the relay stopped", "err", rr.err)
		return exitFailure
	}
	return exitOK
}
