package worker

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"

	"github.com/esgrid/esgrid/grid"
)

// memberEvents records what one gossip member saw of the others.
type memberEvents struct {
	mu  sync.Mutex
	evs []grid.MemberEvent
}

func (l *memberEvents) add(ev grid.MemberEvent) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// seen reports whether an event of one of the kinds happened to name.
func (l *memberEvents) seen(name string, kinds ...grid.MemberEventKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.evs {
		for _, k := range kinds {
			if ev.Kind == k && ev.Member.Name == name {
				return true
			}
		}
	}
	return false
}

// When the master ends the run, it is going away too: the agent leaves
// gossip without announcing it (which would cost gossip rounds that
// nobody waits for). When it drains, the master lives on and must learn
// that the worker left, so it announces the leave first.
func TestAgentLeavesGossipQuicklyOnlyWhenTheRunIsOver(t *testing.T) {
	for _, tt := range []struct {
		name     string
		end      func(a *Agent, mc *masterConn)
		wantErr  error
		announce bool
	}{
		{"shutdown", func(_ *Agent, mc *masterConn) { mc.c.Send(&grid.Shutdown{Reason: "run over"}) }, ErrShutdown, false},
		{"drain", func(a *Agent, _ *masterConn) { a.Drain() }, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leaktest.Check(t)
			key, _ := grid.NewKey(testSecret)
			fm := startFakeMaster(t, key, grid.ProblemSpec{Name: "gate", Dim: 1})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ev memberEvents
			ms, err := grid.JoinMembership(ctx, grid.MembershipConfig{
				Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
				Meta:    grid.NodeMeta{Role: grid.RoleMaster, DataAddr: fm.addr()},
				OnEvent: ev.add, Logger: logger(io.Discard),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			cfg := gateConfig(key, "", newGateProblem(), 1)
			cfg.Join = []string{ms.Addr()}
			cfg.GossipBind = "127.0.0.1:0"
			a, wait := startAgent(t, ctx, cfg)
			mc := fm.next()
			for deadline := time.Now().Add(time.Minute); !ev.seen("w1", grid.MemberJoined); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the worker never joined gossip")
				}
			}
			tt.end(a, mc)
			if err := wait(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			}
			// Run has returned, so the agent's gossip has left: the
			// master's view follows within moments.
			for deadline := time.Now().Add(time.Minute); !ev.seen("w1", grid.MemberLeft, grid.MemberFailed); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the master never saw the worker go")
				}
			}
			if got := ev.seen("w1", grid.MemberUpdated, grid.MemberLeft); got != tt.announce {
				t.Errorf("leave announced: %v, want %v", got, tt.announce)
			}
		})
	}
}
