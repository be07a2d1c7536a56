package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
)

// A worker that a full master refuses (MaxWorkers) hears why, logs it,
// and waits its backoff before it tries again, rather than spin.
func TestAgentRefusedByFullMasterBacksOff(t *testing.T) {
	leaktest.Check(t)
	key, _ := grid.NewKey(testSecret)
	m, err := grid.NewMaster(t.Context(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Policy: "r3q", Problem: sphereSpec, Logger: logger(new(logBuffer)), MaxWorkers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	first, stopFirst := context.WithCancel(ctx)
	_, waitFirst := startAgent(t, first, Config{Master: m.Addr(), Key: key, Name: "w1", Slots: 1})
	waitWorker(t, m)

	wlog := new(logBuffer)
	_, wait := startAgent(t, ctx, Config{Master: m.Addr(), Key: key, Name: "w2", Slots: 1, Logger: logger(wlog),
		MinBackoff: time.Hour, MaxBackoff: time.Hour})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(wlog.String(), "master full") {
		if time.Now().After(deadline) {
			t.Fatalf("the refused worker never logged why:\n%s", wlog.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// It has logged the refusal: it sleeps its backoff (an hour) now.
	if n := m.Refused()[grid.RefusedOther]; n != 1 {
		t.Errorf("%d refusals once the worker logged the first, want 1 (it waits its backoff)", n)
	}
	cancel()
	wait()
	stopFirst()
	waitFirst()
}
