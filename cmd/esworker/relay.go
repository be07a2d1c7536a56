package main

import (
	"context"
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
// (papers.md §1's R1 in front of W1–W3). It accepts their connections at
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

// startRelay starts the relay of -relay, if any: it returns the relay's
// address (for this esworker's own agent to connect to) and a function
// that stops it and waits.
func startRelay(ctx context.Context, o *options, key *grid.Key, log *slog.Logger, stderr io.Writer) (string, func(), error) {
	if o.relay.addr == "" {
		return "", func() {}, nil
	}
	name := o.name
	if name == "" {
		name = worker.DefaultName()
		o.name = name // the agent behind it has the same name: one machine, one member
	}
	ln, err := net.Listen("tcp", o.relay.addr)
	if err != nil {
		return "", nil, fmt.Errorf("-relay %s: %w", o.relay.addr, err)
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
		ms, err = grid.JoinMembership(rctx, grid.MembershipConfig{
			Name: name, BindAddr: host, BindPort: port, SecretKey: key.GossipKey(),
			Meta:   grid.NodeMeta{Role: grid.RoleWorker},
			Logger: log,
		}, joinAddrs(o.join)...)
		if err != nil {
			cancel()
			ln.Close()
			return "", nil, fmt.Errorf("relay gossip: %w", err)
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
	r, err := grid.NewRelay(grid.RelayConfig{Listener: ln, Upstream: upstream, Key: key, Name: name, Logger: log})
	if err != nil {
		cancel()
		ln.Close()
		if ms != nil {
			ms.Close()
		}
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(rctx)
	}()
	fmt.Fprintf(stderr, "esworker: relay listening %s\n", r.Addr())
	log.Info("relay listening for workers the master cannot reach", "addr", r.Addr(), "upstream", o.master, "join", o.join)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			if ms != nil {
				ms.Close()
			}
		})
	}
	return r.Addr(), stop, nil
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

// relayOnly serves the relay alone until a signal (or ctx) ends it.
func relayOnly(ctx context.Context, drain <-chan struct{}, stop func(), log *slog.Logger) int {
	select {
	case <-ctx.Done():
	case <-drain:
		log.Info("signal: stopping the relay")
	}
	stop()
	return 0
}
