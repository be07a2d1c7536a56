package plugin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
)

// open starts a helper plugin and closes it when the test ends.
func open(t *testing.T, cfg Config) (*Problem, *logSink) {
	t.Helper()
	sink := &logSink{}
	if cfg.Name == "" {
		cfg.Name = "testp"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(sink)
	}
	p, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, sink
}

func mustEval(t *testing.T, p *Problem, x ...float64) float64 {
	t.Helper()
	f, err := p.Eval(context.Background(), x)
	if err != nil {
		t.Fatalf("Eval(%v): %v", x, err)
	}
	return f
}

func TestOpenEvalClose(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve"), Dim: 3, Procs: 3})
	h := p.Hello()
	if h.Name != "testp" || h.Lower != -5.12 || h.Upper != 5.12 || !h.Cancel || h.MinDim != 1 || h.MaxDim != 0 {
		t.Errorf("hello %+v", h)
	}
	if lo, hi := p.Bounds(); lo != -5.12 || hi != 5.12 {
		t.Errorf("bounds %v %v", lo, hi)
	}
	if f := mustEval(t, p, 1, 2, 0.5); f != 5.25 {
		t.Errorf("f = %v, want 5.25", f)
	}
	// Sequential evaluations keep to the one process Open started.
	for range 5 {
		mustEval(t, p, 1, 1, 1)
	}
	if st := p.Stats(); st.Starts != 1 {
		t.Errorf("sequential evaluations started %d processes, want 1", st.Starts)
	}
	// Concurrent ones start more, up to Procs.
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			if f, err := p.Eval(context.Background(), []float64{float64(i), 0, 0}); err != nil || f != float64(i*i) {
				t.Errorf("Eval %d = %v, %v", i, f, err)
			}
		})
	}
	wg.Wait()
	if st := p.Stats(); st.Starts > 3 || st.Crashes+st.Kills+st.StartFailures != 0 {
		t.Errorf("stats %+v: want at most 3 starts and no trouble", st)
	}
	if _, err := p.Eval(context.Background(), []float64{1}); err == nil || !strings.Contains(err.Error(), "length 1, want 3") {
		t.Errorf("wrong length: %v", err)
	}
	p.Close()
	if _, err := p.Eval(context.Background(), []float64{1, 2, 3}); !errors.Is(err, ErrClosed) {
		t.Errorf("Eval after Close: %v, want ErrClosed", err)
	}
}

func TestEvalErrorsKeepTheProcess(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve")})
	for _, c := range []struct {
		x    float64
		want string
	}{{xFail, "bad x"}, {xPanic, "panic: helper panics"}} {
		_, err := p.Eval(context.Background(), []float64{c.x})
		if !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plugin testp (slot 1)") {
			t.Errorf("x %v: %v, want ErrEval naming the plugin and %q", c.x, err, c.want)
		}
	}
	// A stray print lands on stderr (Main and the helper protect stdout).
	if f := mustEval(t, p, xPrint); f != 81 {
		t.Errorf("f = %v", f)
	}
	if st := p.Stats(); st.Starts != 1 || st.Kills != 0 {
		t.Errorf("stats %+v: error answers must not cost the process", st)
	}
}

// What a plugin says reaches errors, hence the master's final line and a
// terminal, escaped: its error answer and its last stderr lines keep no
// newline, carriage return nor escape sequence.
func TestPluginTextEscapedInErrors(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve")})
	for _, c := range []struct {
		x    float64
		want string
	}{{xFailEsc, `bad x\n\x1b[2Jesrun: done\r`}, {xDieEsc, `stderr: \x1b[31mdying\x1b[0m`}} {
		_, err := p.Eval(context.Background(), []float64{c.x})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.ContainsAny(err.Error(), "\n\r\x1b") {
			t.Errorf("x %v: %q, want it with %q, escaped", c.x, err, c.want)
		}
	}
}

// The cluster key is not in a plugin's environment: a plugin that prints
// its environment (a crash report does) would put the key in the log,
// where the worker's key never goes.
func TestPluginEnvironmentHasNoKey(t *testing.T) {
	leaktest.Check(t)
	if keyEnv != grid.KeyEnv {
		t.Fatalf("keyEnv %q, the grid's is %q", keyEnv, grid.KeyEnv)
	}
	const key = "the-cluster-key-0123456789abcdef"
	t.Setenv(grid.KeyEnv, key)
	p, sink := open(t, Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_SHOW_ENV=1")})
	mustEval(t, p, 1)
	lines := sink.records("plugin stderr")
	if want := `helper: ESGRID_KEY="" ESGRID_PLUGIN_NAME="testp"`; len(lines) != 1 || lines[0]["line"] != want {
		t.Errorf("stderr %v, want %q", lines, want)
	}
}

// A plugin that crashes fails that evaluation with an error naming the
// plugin, the slot, the exit status and its last stderr; the next
// evaluation starts a new process and works.
func TestCrashRestartsOnNextEval(t *testing.T) {
	leaktest.Check(t)
	p, sink := open(t, Config{Path: helperPlugin(t, "serve")})
	_, err := p.Eval(context.Background(), []float64{xCrash})
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: %v, want ErrCrashed", err)
	}
	for _, want := range []string{"plugin testp (slot 1)", "exit status 3", "dying on purpose"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("crash error %q lacks %q", err, want)
		}
	}
	if f := mustEval(t, p, 2); f != 4 {
		t.Errorf("after the crash f = %v", f)
	}
	if st := p.Stats(); st.Starts != 2 || st.Crashes != 1 {
		t.Errorf("stats %+v, want 2 starts and 1 crash", st)
	}
	if n := len(sink.records("plugin process exited during an evaluation")); n != 1 {
		t.Errorf("crash logged %d times", n)
	}
}

// Garbage, a frame over the cap or an answer to the wrong id on stdout
// is a protocol error: the process is killed and the next evaluation
// works.
// A plugin that ends between evaluations (one that serves so many, then
// exits to start afresh; here, one each) fails none of them: the request
// its process never read runs on a new process. One that exits during an
// evaluation still fails it (TestCrashRestartsOnNextEval).
func TestProcessEndingBetweenEvaluations(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "oneshot")})
	for i := range 5 {
		if f := mustEval(t, p, 1, float64(i)); f != 1+float64(i*i) {
			t.Errorf("evaluation %d = %v", i, f)
		}
	}
	if st := p.Stats(); st.Starts != 5 || st.Crashes+st.Kills+st.StartFailures != 0 {
		t.Errorf("stats %+v, want a process per evaluation, and no crash", st)
	}
}

// The evaluation that a process ending between evaluations left unread
// runs on a new process, not on another slot's, which may be at its end
// too: here both slots' processes have answered their one evaluation,
// and end as the next request reaches them.
func TestNotReadRunsOnNewProcess(t *testing.T) {
	leaktest.Check(t)
	if runtime.GOOS != "linux" {
		t.Skip("the helper sees its unread input by FIONREAD, on Linux")
	}
	// They wait for a request even after their input ends: Close kills them.
	p, _ := open(t, Config{Path: helperPlugin(t, "oneshot", "ESGRID_TEST_EXIT_ON_NEXT=1"), Procs: 2, StartAll: true, StopGrace: time.Millisecond})
	mustEval(t, p, 1) // slot 1's process
	s1, err := p.acquire(context.Background())
	if err != nil || s1.n != 1 {
		t.Fatalf("acquire = slot %v, %v; want slot 1", s1, err)
	}
	mustEval(t, p, 2) // slot 2's process
	p.release(s1)
	if f := mustEval(t, p, 3); f != 9 {
		t.Errorf("f = %v", f)
	}
	if st := p.Stats(); st.Starts != 3 || st.Crashes+st.Kills != 0 {
		t.Errorf("stats %+v, want a third process, no crash", st)
	}
}

// A plugin that says its hello and exits, reading nothing, is broken, not
// a process ending between evaluations: each evaluation fails once, on
// one process, and counts as a crash (a process that never answered is
// not re-run on a new one).
func TestHelloThenExitIsACrash(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "hello-exit")})
	for range 3 {
		if _, err := p.Eval(context.Background(), []float64{1}); !errors.Is(err, ErrCrashed) {
			t.Fatalf("Eval = %v, want ErrCrashed", err)
		}
	}
	if st := p.Stats(); st.Crashes != 3 || st.Starts != 3 {
		t.Errorf("stats %+v, want 3 starts and 3 crashes", st)
	}
}

func TestProtocolBreachesKillAndRestart(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve")})
	for _, c := range []struct {
		x    float64
		want string
	}{{xGarbage, `it wrote text, "Trac"…, on stdout`}, {xHuge, "frame too large"}, {xWrongID, "(a result echoes its eval's id); killed"}} {
		_, err := p.Eval(context.Background(), []float64{c.x})
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("x %v: %v, want ErrProtocol with %q", c.x, err, c.want)
		}
		if f := mustEval(t, p, 3); f != 9 {
			t.Errorf("after x %v: f = %v", c.x, f)
		}
	}
	if st := p.Stats(); st.Kills != 3 || st.Starts != 4 {
		t.Errorf("stats %+v, want 3 kills and 4 starts", st)
	}
}

// Cancelling a running evaluation: a plugin that honours cancels answers
// and keeps its process; one that does not (or does not answer within the
// grace) is killed and replaced on the next evaluation. Either way Eval
// returns the context's error.
func TestCancel(t *testing.T) {
	leaktest.Check(t)
	cases := []struct {
		name        string
		mode        string
		x           float64
		kills, kept int64
	}{
		{"honoured", "serve", xBlock, 0, 1},
		{"not honoured", "serve-nocancel", xBlock, 1, 0},
		{"honoured but deaf", "serve", xHang, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A plugin that honours the cancel has a minute to do so, so
			// that a loaded machine cannot make it look deaf; the others
			// wait out 100 ms.
			grace := 100 * time.Millisecond
			if c.kept == 1 {
				grace = time.Minute
			}
			p, sink := open(t, Config{Path: helperPlugin(t, c.mode), CancelGrace: grace})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { // cancel once the evaluation runs in the plugin
				for len(sink.records("plugin stderr")) == 0 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}()
			_, err := p.Eval(ctx, []float64{c.x})
			cancel()
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "plugin testp (slot 1)") {
				t.Errorf("Eval = %v, want context.Canceled naming the plugin", err)
			}
			if f := mustEval(t, p, 2); f != 4 {
				t.Errorf("after the cancel f = %v", f)
			}
			st := p.Stats()
			if st.Kills != c.kills || st.Cancels != c.kept || st.Starts != 2-c.kept {
				t.Errorf("stats %+v, want %d kills, %d honoured", st, c.kills, c.kept)
			}
		})
	}
}

// A task deadline (a context with a deadline) stops a hung plugin.
func TestHangHitsDeadline(t *testing.T) {
	leaktest.Check(t)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve-nocancel")})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Eval(ctx, []float64{xHang}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Eval = %v, want DeadlineExceeded", err)
	}
	if f := mustEval(t, p, 1); f != 1 {
		t.Errorf("f = %v", f)
	}
}

// Close stops evaluations in flight and every process.
func TestCloseStopsInFlight(t *testing.T) {
	leaktest.Check(t)
	p, sink := open(t, Config{Path: helperPlugin(t, "serve-nocancel"), Procs: 2})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := p.Eval(context.Background(), []float64{xHang})
			errs <- err
		}()
	}
	for deadline := time.Now().Add(time.Minute); len(sink.records("plugin stderr")) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // both evaluations should run
			t.Fatal("the two evaluations never ran")
		}
	}
	p.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("in-flight Eval = %v, want ErrClosed", err)
		}
	}
}

// A plugin that dies at start-up: Open fails with its stderr and exit
// status.
func TestDiesAtStart(t *testing.T) {
	leaktest.Check(t)
	_, err := Open(context.Background(), Config{Name: "testp", Path: helperPlugin(t, "die"), Logger: slog.New(&logSink{})})
	if !errors.Is(err, ErrStart) {
		t.Fatalf("Open = %v, want ErrStart", err)
	}
	for _, want := range []string{"exited before its hello", "exit status 1", "ImportError: no module named simulator", "slot 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A plugin that starts once, crashes, and then dies at every start: the
// failed start is reported once, with its stderr; evaluations meanwhile
// fail at once, without a start, until the back-off has passed. The
// back-off runs on a fake clock, which the test moves: on the wall's, a
// test that ran 300 ms late saw it pass during the evaluations that must
// fail.
func TestStartFailuresBackOff(t *testing.T) {
	leaktest.Check(t)
	starts := t.TempDir() + "/starts"
	var now atomic.Int64 // the fake clock, in ns since the epoch
	const retryMin = 300 * time.Millisecond
	p, sink := open(t, Config{
		Path:     helperPlugin(t, "serve-then-die", "ESGRID_TEST_STARTS="+starts),
		RetryMin: retryMin, RetryMax: time.Hour,
		Starts: &Starts{now: func() time.Time { return time.Unix(0, now.Load()) }},
	})
	count := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "start")
	}
	if _, err := p.Eval(context.Background(), []float64{xCrash}); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: %v", err)
	}
	_, err := p.Eval(context.Background(), []float64{1})
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "ImportError") {
		t.Fatalf("restart: %v, want ErrStart with the stderr", err)
	}
	if count() != 2 {
		t.Fatalf("%d starts, want 2", count())
	}
	for range 20 {
		_, err := p.Eval(context.Background(), []float64{1})
		if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "not restarted for another") {
			t.Fatalf("during the back-off: %v", err)
		}
	}
	if count() != 2 {
		t.Errorf("%d starts during the back-off, want none", count()-2)
	}
	logged := sink.records("plugin failed to start; further starts back off")
	if len(logged) != 1 || !strings.Contains(logged[0]["err"], "ImportError") || logged[0]["level"] != "ERROR" {
		t.Errorf("start failure logged as %v, want once, at error level, with the stderr", logged)
	}
	// After the back-off, one more try (which fails again, and waits
	// twice as long).
	now.Add(int64(retryMin))
	p.Eval(context.Background(), []float64{1})
	if count() != 3 {
		t.Errorf("%d starts after the back-off, want 3", count())
	}
	if n := len(sink.records("plugin failed to start; further starts back off")); n != 1 {
		t.Errorf("repeated start failure logged at error level %d times", n)
	}
}

func TestBadStarts(t *testing.T) {
	leaktest.Check(t)
	notExec := t.TempDir() + "/plain"
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	noShebang := t.TempDir() + "/noshebang.py"
	os.WriteFile(noShebang, []byte("print('hello')\n"), 0o755)
	noInterpreter := t.TempDir() + "/nointerpreter.py"
	os.WriteFile(noInterpreter, []byte("#!/usr/bin/python9 -u\nprint('hello')\n"), 0o755)
	closesStdout := t.TempDir() + "/closes"
	os.WriteFile(closesStdout, []byte("#!/bin/sh\nexec >&-\nexec sleep 600\n"), 0o755)
	bom := t.TempDir() + "/bom.py"
	os.WriteFile(bom, []byte("\xef\xbb\xbf#!/bin/sh\necho hello\n"), 0o755)
	crlf := t.TempDir() + "/crlf.py"
	crlfEnv := t.TempDir() + "/crlfenv.py"
	os.WriteFile(crlfEnv, []byte("#!/usr/bin/env sh\r\necho hello\r\n"), 0o755)
	os.WriteFile(crlf, []byte("#!/bin/sh\r\necho hello\r\n"), 0o755)
	// printfPlugin writes the bytes of the printf format on its stdout,
	// then waits.
	printfPlugin := func(format string) string {
		path := t.TempDir() + "/printf"
		os.WriteFile(path, []byte("#!/bin/sh\nprintf '"+format+"'\nexec sleep 600\n"), 0o755)
		return path
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"hangs", Config{Path: helperPlugin(t, "hang"), StartTimeout: 200 * time.Millisecond}, "no hello within 200ms (nothing on its stdout: a plugin writes its hello at once and flushes its stdout after every frame; did it flush?)"},
		// The hello {"v": 1} with a length prefix that counts its keys,
		// and a hello cut short.
		{"length counts keys", Config{Path: printfPlugin(`\000\000\000\002\001\201\241v\001`)},
			"the frame's length prefix says 2 bytes follow: it must count the type byte plus the encoded msgpack body's bytes"},
		// The same hello, its length little-endian.
		{"little-endian length", Config{Path: printfPlugin(`\005\000\000\000\001\201\241v\001`)},
			"frame too large: length 83886080, cap 4194304 (read little-endian, it would be 5: the length prefix is big-endian, most significant byte first)"},
		// A newline before the hello (as one after a frame): not a
		// little-endian length of 10.
		{"newline before a frame", Config{Path: printfPlugin(`\n\000\000\000\005\001\201\241v\001`)},
			`frame too large: length 167772160, cap 4194304 (its first byte is a newline, "\n": did the plugin print one on stdout after the previous frame? stdout is for frames only)`},
		{"UTF-8 text", Config{Path: printfPlugin(`\342\234\223 started\n`)}, `it wrote text, "✓ "…, on stdout, which is for frames only: print to stderr`},
		// The hello's msgpack map with no length nor type byte before
		// it: bytes of 0x80 and up, but not UTF-8, so not text.
		{"msgpack without its length", Config{Path: printfPlugin(`\204\244name\245testp\241v\001`)},
			"frame too large: length 2225368673, cap 4194304 (its first byte, 0x84, begins a msgpack map: a frame begins with its 4-byte big-endian length, then the type byte)"},
		// A genuine frame of 5 MiB over the 4 MiB cap: 00 50 00 00 is
		// also 20480 little-endian, so both are said.
		{"frame over the cap", Config{Path: printfPlugin(`\000\120\000\000\001\201\241v\001`)},
			"frame too large: length 5242880, cap 4194304 (a frame over the cap; or, if its length was written little-endian, one of 20480: the length prefix is big-endian, most significant byte first)"},
		{"part of a frame", Config{Path: printfPlugin(`\000\000\000\011\001\201`), StartTimeout: 200 * time.Millisecond},
			"no hello within 200ms (6 bytes on its stdout, not a whole frame: did the plugin flush its stdout after the frame?"},
		{"garbage hello", Config{Path: helperPlugin(t, "garbage")}, "frame too large"},
		{"wrong name", Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_NAME=other")}, `names the problem "other"`},
		{"dimension refused", Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_DIMS=2,4"), Dim: 5}, "dimension 5 not accepted (accepts 2..4)"},
		{"not executable", Config{Path: notExec}, "permission denied"},
		{"missing", Config{Path: "/does/not/exist"}, "no such file"},
		// The file is there; what is not is its interpreter.
		{"no interpreter", Config{Path: noInterpreter}, `no such file or directory (the file is there, but not the interpreter its first line names: "#!/usr/bin/python9 -u")`},
		{"CRLF line ends", Config{Path: crlf}, `(the file is there, but its first line, "#!/bin/sh\r", ends in a carriage return: the file has Windows line ends; convert them (dos2unix))`},
		// env is found; it does not find "sh\r", and exits 127.
		{"CRLF line ends after env", Config{Path: crlfEnv}, `exited before its hello (exit status 127); stderr: `},
		{"CRLF line ends after env, told", Config{Path: crlfEnv}, `(its first line, "#!/usr/bin/env sh\r", ends in a carriage return: the file has Windows line ends; convert them (dos2unix))`},
		{"no #! line", Config{Path: noShebang}, "exec format error (a script needs a first line such as #!/usr/bin/env python3)"},
		{"byte order mark", Config{Path: bom}, "exec format error (the file begins with a UTF-8 byte order mark, the bytes EF BB BF, so its first line is not read as #!: save it as UTF-8 without a BOM)"},
		{"closes its stdout", Config{Path: closesStdout}, "closed its standard output before its hello (signal: killed)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Name = "testp"
			c.cfg.Logger = slog.New(&logSink{})
			_, err := Open(context.Background(), c.cfg)
			if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open = %v, want ErrStart with %q", err, c.want)
			}
		})
	}
	// Dimension accepted: fine.
	p, _ := open(t, Config{Path: helperPlugin(t, "serve", "ESGRID_TEST_DIMS=2,4"), Dim: 4})
	if h := p.Hello(); h.MinDim != 2 || h.MaxDim != 4 || h.Dims() != "2..4" {
		t.Errorf("hello %+v", h)
	}
}

// Stderr reaches the log line by line, with the plugin and slot, cut to
// maxLine and rate-limited.
func TestStderrBoundedAndLabelled(t *testing.T) {
	leaktest.Check(t)
	const rate = 2 // lines a second, in bursts of 5 × rate
	start := time.Now()
	p, sink := open(t, Config{Path: helperPlugin(t, "serve"), StderrRate: rate})
	mustEval(t, p, xNoisy)
	p.Close() // waits for the stderr reader
	// The bound grows with the time taken, so that a slow machine cannot
	// break it; it stays far below 500 for minutes.
	most := 5*rate + int(rate*time.Since(start).Seconds()) + 1
	lines := sink.records("plugin stderr")
	if len(lines) == 0 || len(lines) > most {
		t.Fatalf("%d of 500 stderr lines logged, want 1..%d (burst %d, then %d a second)", len(lines), most, 5*rate, rate)
	}
	for _, l := range lines {
		if l["plugin"] != "testp" || l["slot"] != "1" {
			t.Errorf("line without plugin and slot: %v", l)
		}
		if len(l["line"]) > maxLine+20 {
			t.Errorf("line of %d bytes logged", len(l["line"]))
		}
	}
	if !strings.HasPrefix(lines[0]["line"], "noise 0") {
		t.Errorf("first line %q", lines[0]["line"])
	}
}

// Probe reads the hello and leaves nothing running.
func TestProbe(t *testing.T) {
	leaktest.Check(t)
	h, err := Probe(context.Background(), Config{Name: "testp", Path: helperPlugin(t, "serve-nocancel"), Logger: slog.New(&logSink{})})
	if err != nil || h.Name != "testp" || h.Cancel {
		t.Errorf("Probe = %+v, %v", h, err)
	}
}

// A plugin that writes its answer without flushing stdout waits for its
// next request while the host waits for the answer. The host cannot see
// the buffer, but it says, once, what is the likely cause, and the
// evaluation goes on until it is cancelled.
func TestFirstAnswerNotFlushedWarns(t *testing.T) {
	leaktest.Check(t)
	// The hello {"v": 1, "name": "testp", "lower": -1, "upper": 1},
	// flushed; then it reads every request and answers none (its stdout
	// kept open on fd 3: a plugin that closes it has ended).
	path := t.TempDir() + "/unflushed"
	hello := `\000\000\000\036\001\204\241v\001\244name\245testp\245lower\377\245upper\001`
	os.WriteFile(path, []byte("#!/bin/sh\nprintf '"+hello+"'\nexec cat 3>&1 >/dev/null\n"), 0o755)
	p, sink := open(t, Config{Path: path, silentAfter: time.Millisecond})
	const msg = "plugin has not answered its first evaluation; if it wrote the answer, the answer is in its stdout's buffer: " +
		"flush stdout after every frame (C: fflush(stdout); Rust: stdout().flush(); Perl: $| = 1; Python: sys.stdout.buffer.flush()); " +
		"if it is still reading, it waits for more than the frame (a read of a line, or of all input): read the 4-byte length, then that many bytes; " +
		"a long evaluation needs no cure, it goes on"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := p.Eval(ctx, []float64{1}); done <- err }()
	for deadline := time.Now().Add(time.Minute); len(sink.records(msg)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("no warning a minute into a first evaluation that is not answered")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the evaluation ended at the warning: %v", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Eval = %v, want Canceled", err)
	}
	recs := sink.records(msg)
	if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["plugin"] != "testp" || recs[0]["slot"] != "1" {
		t.Errorf("warnings %v, want one, at WARN, naming plugin testp and slot 1", recs)
	}
	// Whether the plugin had read the request when the warning spoke
	// depends on the scheduler; that it is said does not.
	if r := recs[0]["request"]; r != "read" && r != "not read yet" && r != "unknown" {
		t.Errorf("request %q", r)
	}
}

// A plugin that dies of an uncaught exception in Node.js prints the error
// first and the stack after it, more lines than the tail keeps: the error
// quoted must still say what went wrong.
func TestTailKeepsTheErrorOfALongTrace(t *testing.T) {
	var tl tail
	trace := []string{
		"/opt/plugins/sim.js:75",
		"  const f = undefinedFn(x);",
		"            ^",
		"",
		"ReferenceError: undefinedFn is not defined",
		"    at evaluate (/opt/plugins/sim.js:75:13)",
		"    at Socket.<anonymous> (/opt/plugins/sim.js:88:21)",
		"    at Socket.emit (node:events:524:28)",
		"    at addChunk (node:internal/streams/readable:561:12)",
		"    at readableAddChunkPushByteMode (node:internal/streams/readable:512:3)",
		"    at Readable.push (node:internal/streams/readable:392:5)",
		"    at Pipe.onStreamRead (node:internal/stream_base_commons:191:23)",
		"",
		"Node.js v20.20.2",
	}
	for _, l := range trace {
		tl.add(l)
	}
	got := tl.String()
	want := "ReferenceError: undefinedFn is not defined | … | " + strings.Join(trace[len(trace)-tailLines:], " | ")
	if got != want {
		t.Errorf("tail\n%s\nwant\n%s", got, want)
	}
	// A short trace is quoted whole, once.
	var short tail
	for _, l := range []string{"Traceback (most recent call last):", `  File "sim.py", line 3`, "ZeroDivisionError: division by zero"} {
		short.add(l)
	}
	if got, want := short.String(), `Traceback (most recent call last): |   File "sim.py", line 3 | ZeroDivisionError: division by zero`; got != want {
		t.Errorf("tail %q, want %q", got, want)
	}
}

// An error line long gone, a run's worth of lines before the end, is
// not quoted as the error of a process that dies: it belongs to no
// trace of that end.
func TestTailForgetsAnOldErrorLine(t *testing.T) {
	var tl tail
	tl.add("warning: error tolerance 1e-6 is below float precision")
	for i := range 1000 {
		tl.add("generation " + strconv.Itoa(i))
	}
	if got := tl.String(); strings.Contains(got, "tolerance") {
		t.Errorf("tail %q quotes an error line 1000 lines before the end", got)
	}
}

// A plugin that answers with the wrong message type (an eval's 2 for a
// result's 3) is told which type it sent and which one it owes.
func TestWrongFrameTypeSaysWhich(t *testing.T) {
	leaktest.Check(t)
	// The hello, then {"id": 1, "f": 0} framed as an eval.
	path := t.TempDir() + "/wrongtype"
	hello := `\000\000\000\036\001\204\241v\001\244name\245testp\245lower\377\245upper\001`
	answer := `\000\000\000\011\002\202\242id\001\241f\000`
	os.WriteFile(path, []byte("#!/bin/sh\nprintf '"+hello+"'\nhead -c 1 >/dev/null\nprintf '"+answer+"'\nexec sleep 600\n"), 0o755)
	p, _ := open(t, Config{Path: path})
	_, err := p.Eval(context.Background(), []float64{1})
	want := "a frame of type 2 (eval) from a plugin, which sends a result (type 3) for each eval"
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Errorf("Eval = %v, want ErrProtocol with %q", err, want)
	}
}

// Counters given to several Problems count all their processes' events,
// for a process's metrics: a crash is a crash, a protocol breach a
// protocol error and not a kill (which Stats counts it as), and a
// cancel not answered a kill.
func TestCountersAcrossProblems(t *testing.T) {
	leaktest.Check(t)
	c := new(Counters)
	p, _ := open(t, Config{Path: helperPlugin(t, "serve"), Counters: c})
	if _, err := p.Eval(context.Background(), []float64{xGarbage}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("Eval = %v, want ErrProtocol", err)
	}
	mustEval(t, p, 3)
	// A cancel it cannot answer: killed at the end of the grace.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Eval(ctx, []float64{xHang}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Eval = %v, want its deadline", err)
	}
	q, _ := open(t, Config{Path: helperPlugin(t, "hello-exit"), Counters: c})
	if _, err := q.Eval(context.Background(), []float64{1}); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Eval = %v, want ErrCrashed", err)
	}
	want := Counts{Started: 3, Crashed: 1, Killed: 1, ProtocolErrors: 1}
	if got := c.Counts(); got != want {
		t.Errorf("counts %+v, want %+v (Stats: %+v and %+v)", got, want, p.Stats(), q.Stats())
	}
	if (*Counters)(nil).Counts() != (Counts{}) {
		t.Error("a nil *Counters counts something")
	}
}
