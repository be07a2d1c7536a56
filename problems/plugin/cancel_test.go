package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// cancelWhenRunning cancels once the helper has said on stderr that the
// evaluation runs (its n-th such line), then calls then.
func cancelWhenRunning(sink *logSink, n int, cancel context.CancelFunc, then func()) {
	go func() {
		for deadline := time.Now().Add(time.Minute); len(sink.records("plugin stderr")) < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if then != nil {
			then()
		}
	}()
}

// A plugin that does not honour cancels, but whose evaluations are
// quicker than its starts, finishes a cancelled evaluation rather than be
// killed: a kill would cost a start. Its answer is dropped, Eval returns
// the context's error, and the process serves on.
func TestUncancellableQuickEvaluationRunsOut(t *testing.T) {
	leaktest.Check(t)
	release := filepath.Join(t.TempDir(), "release")
	// Starts take 2 s, evaluations microseconds: the cancelled one is
	// released at once after the cancel, well within a start's time.
	p, sink := open(t, Config{
		Path:        helperPlugin(t, "serve-nocancel", "ESGRID_TEST_START_SLEEP=2s", "ESGRID_TEST_RELEASE="+release),
		CancelGrace: time.Minute,
	})
	for range 3 {
		mustEval(t, p, 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelWhenRunning(sink, 1, cancel, func() {
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	if _, err := p.Eval(ctx, []float64{xRelease}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval = %v, want context.Canceled", err)
	}
	if f := mustEval(t, p, 2); f != 4 {
		t.Errorf("after the cancel f = %v", f)
	}
	if st := p.Stats(); st.Kills != 0 || st.RanOut != 1 || st.Starts != 1 {
		t.Errorf("stats %+v, want no kill, 1 evaluation run out, 1 start", st)
	}
}

// A plugin killed for ignoring a cancel is reported once per Problem at
// warning level, with why, and then at debug level: one that does not
// honour cancels (its first evaluation measured nothing yet, so it is
// killed at once; later ones hang past a start's time), and one that
// honours them but does not answer within the grace.
func TestKillForIgnoredCancelLoggedOnce(t *testing.T) {
	leaktest.Check(t)
	const msg = "plugin killed for ignoring a cancel; it restarts on the slot's next evaluation (only the first such kill is logged as a warning)"
	cases := []struct {
		name, mode, why string
		warm            int // quick evaluations before the hangs
	}{
		{"cancel false", "serve-nocancel", "its hello says cancel:false", 0},
		{"cancel false, quick evaluations", "serve-nocancel", "did not finish the cancelled evaluation within a start's time", 2},
		{"deaf", "serve", "did not answer a cancel within the cancel grace", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, sink := open(t, Config{Path: helperPlugin(t, c.mode, "ESGRID_TEST_START_SLEEP=300ms"), CancelGrace: 100 * time.Millisecond})
			for range c.warm {
				mustEval(t, p, 1)
			}
			for i := range 3 {
				ctx, cancel := context.WithCancel(context.Background())
				cancelWhenRunning(sink, i+1, cancel, nil)
				_, err := p.Eval(ctx, []float64{xHang})
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Eval = %v, want context.Canceled", err)
				}
			}
			if st := p.Stats(); st.Kills != 3 {
				t.Errorf("stats %+v, want 3 kills", st)
			}
			logged := sink.records(msg)
			if len(logged) != 3 {
				t.Fatalf("%d kills logged, want 3: %v", len(logged), logged)
			}
			for i, rec := range logged {
				level := "DEBUG"
				if i == 0 {
					level = "WARN"
				}
				if rec["level"] != level || rec["plugin"] != "testp" || !strings.Contains(rec["why"], c.why) {
					t.Errorf("kill %d logged as %v, want level %s, plugin testp, why %q", i+1, rec, level, c.why)
				}
			}
		})
	}
}

// A process being started for an evaluation is started all the same when
// the evaluation is cancelled meanwhile, and the next evaluation uses it:
// a start cut short by every cancel would never end.
func TestStartOutlivesCancel(t *testing.T) {
	leaktest.Check(t)
	starts := filepath.Join(t.TempDir(), "starts")
	p, _ := open(t, Config{Path: helperPlugin(t, "serve-nocancel", "ESGRID_TEST_START_SLEEP=1s", "ESGRID_TEST_STARTS="+starts)})
	if _, err := p.Eval(context.Background(), []float64{xCrash}); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancel while the new process sleeps before its hello
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if b, _ := os.ReadFile(starts); strings.Count(string(b), "start") == 2 {
				break
			}
		}
		cancel()
	}()
	if _, err := p.Eval(ctx, []float64{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval = %v, want context.Canceled", err)
	}
	if st := p.Stats(); st.Starts != 2 || st.StartFailures != 0 {
		t.Fatalf("stats %+v after the cancelled start, want it finished (2 starts, no failure)", st)
	}
	mustEval(t, p, 1)
	if st := p.Stats(); st.Starts != 2 {
		t.Errorf("stats %+v, want the next evaluation on the process started", st)
	}
}

// StartAll starts every slot's process at Open, so that no evaluation
// waits for a start (nor is timed with one): evaluations on every slot
// at once start none.
func TestStartAll(t *testing.T) {
	leaktest.Check(t)
	release := filepath.Join(t.TempDir(), "release")
	p, sink := open(t, Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_RELEASE="+release), Procs: 3, StartAll: true})
	if st := p.Stats(); st.Starts != 3 {
		t.Fatalf("stats %+v after Open, want 3 starts", st)
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := p.Eval(context.Background(), []float64{xRelease})
			errs <- err
		}()
	}
	// All three run at once, one per process, then are released.
	for deadline := time.Now().Add(time.Minute); len(sink.records("plugin stderr")) < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if st := p.Stats(); st.Starts != 3 {
		t.Errorf("stats %+v, want no start beyond Open's 3", st)
	}
}
