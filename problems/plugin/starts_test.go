package plugin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// A plugin that starts once and then fails at every start, opened again
// and again (as a worker does, once per session with a master), is
// started on the back-off schedule of its shared Starts, whatever the
// number of Opens: 1 s, 2 s, 4 s, then 4 s apart (RetryMax), on a fake
// clock. The first failure is logged once at error level, then a summary
// at most once a minute.
func TestStartsBackOffAcrossOpens(t *testing.T) {
	leaktest.Check(t)
	startsFile := t.TempDir() + "/starts"
	count := func() int {
		b, _ := os.ReadFile(startsFile)
		return strings.Count(string(b), "start")
	}
	var now time.Time
	st := &Starts{now: func() time.Time { return now }}
	sink := &logSink{}
	cfg := Config{
		Name: "testp", Path: helperPlugin(t, "serve-then-die", "ESGRID_TEST_STARTS="+startsFile),
		RetryMin: time.Second, RetryMax: 4 * time.Second, Starts: st, Logger: slog.New(sink),
	}
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(context.Background(), []float64{1}); err != nil {
		t.Fatal(err)
	}
	p.Close()

	// At each time (s), whether an Open starts a process.
	steps := []struct {
		at     float64
		starts bool
	}{
		{0, true}, {0, false}, {0.5, false}, {1, true}, {2, false}, {2.9, false}, {3, true},
		{5, false}, {6.9, false}, {7, true}, {10, false}, {11, true}, {100, true}, {101, false},
	}
	want := 1
	for _, s := range steps {
		now = time.Unix(0, 0).Add(time.Duration(s.at * float64(time.Second)))
		_, err := Open(context.Background(), cfg)
		if s.starts {
			want++
		}
		if got := count(); got != want {
			t.Fatalf("at %vs: %d starts, want %d (Open: %v)", s.at, got, want, err)
		}
		if !errors.Is(err, ErrStart) {
			t.Fatalf("at %vs: Open = %v, want ErrStart", s.at, err)
		}
		if s.starts == errors.Is(err, ErrBackingOff) || !s.starts && !strings.Contains(err.Error(), "not restarted for another") {
			t.Errorf("at %vs: Open = %v, want the back-off named", s.at, err)
		}
	}
	if n := len(sink.records("plugin failed to start; further starts back off")); n != 1 {
		t.Errorf("the failed start logged %d times at error level, want once", n)
	}
	// One summary: at 100 s, a minute after the first failure.
	if n := len(sink.records("plugin still fails to start (summary)")); n != 1 {
		t.Errorf("%d summaries, want 1", n)
	}
}

// A process that starts after failed starts does not end their run; its
// first answer does.
func TestStartsEndWithAnAnswer(t *testing.T) {
	leaktest.Check(t)
	var now time.Time
	st := &Starts{now: func() time.Time { return now }}
	cfg := Config{Name: "testp", Path: helperPlugin(t, "die"), Starts: st, Logger: slog.New(&logSink{})}
	if _, err := Open(context.Background(), cfg); !errors.Is(err, ErrStart) {
		t.Fatalf("Open = %v, want ErrStart", err)
	}
	now = now.Add(time.Hour)
	cfg.Path = helperPlugin(t, "serve")
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, fails, _ := st.wait(); fails != 1 {
		t.Errorf("after a start: %d failures on record, want 1", fails)
	}
	mustEval(t, p, 2)
	if _, fails, _ := st.wait(); fails != 0 {
		t.Errorf("after an answer: %d failures on record, want 0", fails)
	}
}

// A plugin that crashes at every evaluation, session after session (one
// Problem each, sharing its Starts), is logged crashBurst times at once
// and then once per crashEvery, with the count of the lines held back
// (at debug level); on a fake clock.
func TestCrashLinesLimitedPerPlugin(t *testing.T) {
	leaktest.Check(t)
	now := time.Unix(1000, 0)
	st := &Starts{now: func() time.Time { return now }}
	sink := &logSink{}
	cfg := Config{Name: "testp", Path: helperPlugin(t, "serve"), Starts: st, Logger: slog.New(sink)}
	const msg = "plugin process exited during an evaluation"
	crash := func(p *Problem) {
		t.Helper()
		if _, err := p.Eval(context.Background(), []float64{xCrash}); !errors.Is(err, ErrCrashed) {
			t.Fatalf("Eval = %v, want ErrCrashed", err)
		}
	}
	const crashes = crashBurst + 3
	for range 2 {
		p, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range crashes / 2 {
			crash(p)
		}
		p.Close()
	}
	levels := func() (warn, debug int) {
		for _, r := range sink.records(msg) {
			switch r["level"] {
			case "WARN":
				warn++
			case "DEBUG":
				debug++
			}
		}
		return warn, debug
	}
	if warn, debug := levels(); warn != crashBurst || debug != crashes-crashBurst {
		t.Errorf("%d crashes at once: %d warnings and %d debug lines, want %d and %d", crashes, warn, debug, crashBurst, crashes-crashBurst)
	}
	now = now.Add(crashEvery)
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	crash(p)
	recs := sink.records(msg)
	if last := recs[len(recs)-1]; last["level"] != "WARN" || last["held_back_since_last"] != "3" {
		t.Errorf("the crash %v later: %v, want a warning counting 3 lines held back", crashEvery, last)
	}
}
