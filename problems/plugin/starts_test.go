package plugin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// One slot whose process cannot start (short of a licence or a device)
// while the other works: an evaluation given to it waits for the slot
// that works instead of failing, and the slot is started again in the
// background once its back-off is over, for the evaluations after.
func TestSlotThatCannotStartFailsNoEvaluation(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	broken, release := filepath.Join(dir, "broken"), filepath.Join(dir, "release")
	if err := os.WriteFile(broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64 // the fake clock of the back-offs, in ns since the epoch
	const retryMin = time.Minute
	starts := &Starts{now: func() time.Time { return time.Unix(0, now.Load()) }}
	p, sink := open(t, Config{
		Path:  helperPlugin(t, "serve", "ESGRID_TEST_FAIL_SLOT=2", "ESGRID_TEST_FAIL_WHILE="+broken, "ESGRID_TEST_RELEASE="+release),
		Procs: 2, StartAll: true, RetryMin: retryMin, RetryMax: time.Hour, Starts: starts,
	})
	if st := p.Stats(); st.Starts != 1 || st.StartFailures != 1 {
		t.Fatalf("stats %+v after Open, want slot 1 started and slot 2 failed", st)
	}
	// The failure is the slot's: the plugin's back-off, which would
	// refuse slot 1's restarts and the next session's Open, is not on.
	if wait, fails, _ := starts.wait(); wait != 0 || fails != 0 {
		t.Errorf("the plugin backs off %v after %d failures, want not at all", wait, fails)
	}
	if logged := sink.records("plugin failed to start on one slot; evaluations go to the slots that work, and it is started again in the background"); len(logged) != 1 || logged[0]["slot"] != "2" || logged[0]["level"] != "WARN" {
		t.Errorf("the slot's failure logged as %v, want once, a warning", logged)
	}
	type answer struct {
		f   float64
		err error
	}
	eval := func(ctx context.Context, x ...float64) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			f, err := p.Eval(ctx, x)
			ch <- answer{f, err}
		}()
		return ch
	}
	// Slot 1 busy; the next evaluation finds only slot 2 free.
	said := func(line string) { // waits until a process said line on its stderr
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, r := range sink.records("plugin stderr") {
				if r["line"] == line {
					return
				}
			}
		}
		t.Fatalf("no plugin said %q", line)
	}
	first := eval(context.Background(), xRelease)
	said("helper: waiting for release")
	second := eval(context.Background(), 1, 2)
	for deadline := time.Now().Add(time.Minute); p.Stats().Waits < 1 && time.Now().Before(deadline); {
		select {
		case a := <-second:
			t.Fatalf("the evaluation given slot 2 ended before slot 1 was free: %v, %v", a.f, a.err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if a := <-first; a.err != nil || a.f != xRelease*xRelease {
		t.Errorf("first = %v, %v", a.f, a.err)
	}
	if a := <-second; a.err != nil || a.f != 5 {
		t.Fatalf("second = %v, %v, want 5 from slot 1", a.f, a.err)
	}
	// Slot 2 can start now. Before its back-off is over nothing starts
	// it; after, an evaluation that finds slot 1 busy starts it in the
	// background and runs on it.
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	mustEval(t, p, 3)
	now.Add(int64(retryMin))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := eval(ctx, xBlock) // slot 1, until cancelled
	said("helper: blocking")
	if a := <-eval(context.Background(), 3, 4); a.err != nil || a.f != 25 {
		t.Fatalf("with slot 1 busy = %v, %v, want 25 from slot 2, started again", a.f, a.err)
	}
	cancel()
	if a := <-blocked; !errors.Is(a.err, context.Canceled) {
		t.Errorf("blocked = %v, want cancelled", a.err)
	}
	if st := p.Stats(); st.Starts != 2 || st.StartFailures != 1 || st.Waits != 1 || st.Crashes+st.Kills != 0 {
		t.Errorf("stats %+v, want 2 starts, 1 failure, 1 evaluation that waited, no crash nor kill", st)
	}
}
