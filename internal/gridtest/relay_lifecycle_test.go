package gridtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/worker"
)

// TestRelayedWorkersEndWithTheRun: workers behind a relay, and behind a
// relay chained behind it, that do not serve run after run end when the
// master ends the run (ErrShutdown), as workers connected straight to it
// do; the relays, told after their workers, end too (Once).
func TestRelayedWorkersEndWithTheRun(t *testing.T) {
	leaktest.Check(t)
	key, err := grid.NewKey("relay test cluster key 0123456789")
	if err != nil {
		t.Fatal(err)
	}
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "r3q", Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r1 := startOnceRelay(t, ctx, "r1", key, m.Addr())
	r2 := startOnceRelay(t, ctx, "r2", key, r1.addr)
	var agents []*agentRun
	for i, up := range []string{r1.addr, r1.addr, r2.addr} {
		agents = append(agents, startAgent(t, fmt.Sprintf("w%d", i), key, up))
	}
	if err := m.WaitWorkers(ctx, len(agents)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Evaluate(ctx, 0, [][]float64{make([]float64, spec.Dim), make([]float64, spec.Dim)}); err != nil {
		t.Fatal(err)
	}
	m.Close() // the run is over
	for _, a := range agents {
		select {
		case <-a.done:
			if !errors.Is(a.err, worker.ErrShutdown) {
				t.Errorf("%s: Run = %v, want ErrShutdown", a.name, a.err)
			}
		case <-ctx.Done():
			t.Fatalf("%s behind a relay did not end with the run", a.name)
		}
	}
	for _, r := range []*onceRelay{r1, r2} {
		select {
		case <-r.done:
			if !errors.Is(r.err, grid.ErrRelayRunOver) {
				t.Errorf("relay %s: Run = %v, want ErrRelayRunOver", r.name, r.err)
			}
		case <-ctx.Done():
			t.Fatalf("relay %s did not end with the run", r.name)
		}
	}
}

// onceRelay is a relay with RelayConfig.Once, running in this process.
type onceRelay struct {
	name, addr string
	done       chan struct{}
	err        error // Run's, once done
}

func startOnceRelay(t *testing.T, ctx context.Context, name string, key *grid.Key, upstream string) *onceRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := grid.NewRelay(grid.RelayConfig{
		Listener: ln, Key: key, Name: name, Logger: quiet, Once: true,
		Upstream:   func(context.Context, int) (string, error) { return upstream, nil },
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	or := &onceRelay{name: name, addr: r.Addr(), done: make(chan struct{})}
	go func() {
		defer close(or.done)
		or.err = r.Run(rctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-or.done
	})
	return or
}

// TestServingRelayWaitsForTheNextMaster: a relay without Once, and a
// worker behind it that serves run after run, outlive the master's run
// and serve the next master at the same address.
func TestServingRelayWaitsForTheNextMaster(t *testing.T) {
	leaktest.Check(t)
	key, err := grid.NewKey("relay test cluster key 0123456789")
	if err != nil {
		t.Fatal(err)
	}
	m1, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "r3q", Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := m1.Addr()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := startRelay(t, "r1", key, addr) // relay_test.go: without Once
	a, err := worker.New(worker.Config{
		Master: r.relay.Addr(), Key: key, Name: "w", Slots: 1, Serve: true, Logger: quiet,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = a.Run(actx)
	}()
	defer func() {
		stop()
		<-done
	}()
	if err := m1.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	m2, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: addr, Key: key, Policy: "r3q", Problem: spec, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.WaitWorkers(ctx, 1); err != nil {
		t.Fatalf("the worker behind the relay did not come to the next master: %v", err)
	}
	select {
	case <-r.done:
		t.Error("the serving relay ended with the run")
	case <-done:
		t.Errorf("the serving worker ended with the run: %v", runErr)
	default:
	}
}
