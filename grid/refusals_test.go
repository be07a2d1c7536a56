package grid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusing is a worker that refuses the master's problem, and why.
type refusing struct{ name, reason string }

// refuser plays workers that connect again and again, by turns, each
// refusing the master's problem at once, as workers whose plugin does not
// start. By turns, in one goroutine: each has been refused once before
// any is refused twice, which the master's verdict waits for, however
// the goroutines of a loaded machine are run.
func refuser(ctx context.Context, wg *sync.WaitGroup, addr string, key *Key, ws ...refusing) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			w := ws[i%len(ws)]
			conn, _, err := Dial(ctx, addr, DialConfig{Key: key, Name: w.name, Slots: 1, Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
			if err == nil {
				conn.SendAndClose(&Reject{Reason: w.reason})
				<-conn.Done()
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
}

// When no worker can evaluate the problem, Evaluate fails, with each
// worker's reason, instead of waiting for ever.
func TestNoWorkerCanEvaluateFailsTheRun(t *testing.T) {
	m := startMaster(t, "r3q", func(c *MasterConfig) { c.FirstDeadline = 300 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	refuser(ctx, &wg, m.Addr(), m.cfg.Key,
		refusing{"lab-1", "worker: cannot build problem: plugin sim: no licence"},
		refusing{"lab-2", "worker: cannot build problem: plugin sim: no hello within 30s"})
	_, err := m.Evaluate(ctx, 0, [][]float64{{1, 2, 3, 4, 5}})
	if !errors.Is(err, ErrNoWorkerCan) {
		t.Fatalf("Evaluate = %v, want ErrNoWorkerCan", err)
	}
	for _, want := range []string{"lab-1: worker: cannot build problem: plugin sim: no licence", "lab-2: worker: cannot build problem: plugin sim: no hello within 30s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q lacks %q", err, want)
		}
	}
	// A wait for more workers fails as well.
	if err := m.WaitWorkers(ctx, 3); !errors.Is(err, ErrNoWorkerCan) {
		t.Errorf("WaitWorkers = %v, want ErrNoWorkerCan", err)
	}
}

// A worker that refuses beside one that evaluates costs nothing: the run
// goes on.
func TestRefusingWorkerBesideAGoodOne(t *testing.T) {
	m := startMaster(t, "r3q", func(c *MasterConfig) { c.FirstDeadline = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	refuser(ctx, &wg, m.Addr(), m.cfg.Key, refusing{"lab-1", "worker: cannot build problem"})
	good := newTestWorker("good", 1, 0)
	startWorkers(t, m, good)
	for gen := range 20 {
		if _, err := m.Evaluate(ctx, gen, [][]float64{{1, 2, 3, 4, 5}, {0, 0, 0, 0, 1}}); err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
	}
}
