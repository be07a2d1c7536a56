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

// refuser is a worker that connects again and again and refuses the
// master's problem at once, as a worker whose plugin does not start.
func refuser(ctx context.Context, wg *sync.WaitGroup, addr string, key *Key, name, reason string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			conn, _, err := Dial(ctx, addr, DialConfig{Key: key, Name: name, Slots: 1, Conn: ConnConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
			if err == nil {
				conn.SendAndClose(&Reject{Reason: reason})
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
	refuser(ctx, &wg, m.Addr(), m.cfg.Key, "lab-1", "worker: cannot build problem: plugin sim: no licence")
	refuser(ctx, &wg, m.Addr(), m.cfg.Key, "lab-2", "worker: cannot build problem: plugin sim: no hello within 30s")
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
	refuser(ctx, &wg, m.Addr(), m.cfg.Key, "lab-1", "worker: cannot build problem")
	good := newTestWorker("good", 1, 0)
	startWorkers(t, m, good)
	for gen := range 20 {
		if _, err := m.Evaluate(ctx, gen, [][]float64{{1, 2, 3, 4, 5}, {0, 0, 0, 0, 1}}); err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
	}
}
