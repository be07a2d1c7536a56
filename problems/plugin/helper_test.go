package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid/wire"
)

// The test binary doubles as every plugin the tests need: run with
// ESGRID_TEST_PLUGIN set, it is a plugin in that mode instead of a test
// run. helperPlugin writes a script that runs it so.
func TestMain(m *testing.M) {
	if mode := os.Getenv("ESGRID_TEST_PLUGIN"); mode != "" {
		os.Exit(runHelper(mode))
	}
	code := m.Run()
	for _, d := range exampleDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// Behaviours of the helper problem, chosen by x[0].
const (
	xCrash   = -1  // exit(3) after a word on stderr
	xHang    = -2  // sleep, deaf to cancels
	xBlock   = -3  // wait for the context (honours cancels)
	xGarbage = -4  // text on stdout
	xHuge    = -5  // a length prefix over the cap
	xFail    = -6  // an error answer
	xPanic   = -7  // a panic in Eval
	xWrongID = -8  // an answer to another id
	xPrint   = -9  // a stray fmt.Println, then the answer
	xNoisy   = -10 // 500 lines on stderr, some of them long
	xRelease = -11 // deaf to cancels, answer once the file ESGRID_TEST_RELEASE exists
	xFailEsc = -12 // an error answer with a newline and a terminal escape sequence
	xDieEsc  = -13 // a terminal escape sequence on stderr, then exit(3)
	xOrphan  = -14 // a shell's "sleep 0 &": an orphan that exits at once; its pid goes to ESGRID_TEST_ORPHANS
)

// helperProblem is the sphere, with misbehaviours on request.
type helperProblem struct {
	name string
	out  *os.File // the protocol's stdout
}

func (h *helperProblem) Name() string                   { return h.name }
func (h *helperProblem) Bounds() (lower, upper float64) { return -5.12, 5.12 }
func (h *helperProblem) Eval(ctx context.Context, x []float64) (float64, error) {
	if len(x) > 0 {
		switch x[0] {
		case xCrash:
			fmt.Fprintln(os.Stderr, "helper: dying on purpose")
			os.Exit(3)
		case xHang:
			fmt.Fprintln(os.Stderr, "helper: hanging") // the evaluation runs
			time.Sleep(time.Hour)
		case xBlock:
			fmt.Fprintln(os.Stderr, "helper: blocking") // the evaluation runs
			<-ctx.Done()
			return 0, ctx.Err()
		case xGarbage:
			h.out.WriteString("Traceback (most recent call last):\n")
			time.Sleep(time.Hour)
		case xHuge:
			h.out.Write([]byte{0x7f, 0xff, 0xff, 0xff, 1})
			time.Sleep(time.Hour)
		case xFail:
			return 0, fmt.Errorf("bad x %v", x)
		case xFailEsc:
			return 0, errors.New("bad x\n\x1b[2Jesrun: done\r")
		case xDieEsc:
			fmt.Fprintln(os.Stderr, "\x1b[31mdying\x1b[0m\r")
			os.Exit(3)
		case xPanic:
			panic("helper panics")
		case xWrongID:
			b, _ := wire.AppendFrame(nil, byte(MsgResult), &Result{ID: 1 << 40, F: 1}, 0)
			h.out.Write(b)
			time.Sleep(time.Hour)
		case xOrphan:
			exec.Command("sh", "-c", `sleep 0 & echo $! >> "$ESGRID_TEST_ORPHANS"`).Run()
		case xPrint:
			fmt.Println("a stray print")
		case xRelease:
			fmt.Fprintln(os.Stderr, "helper: waiting for release") // the evaluation runs
			for {
				if _, err := os.Stat(os.Getenv("ESGRID_TEST_RELEASE")); err == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
		case xNoisy:
			long := strings.Repeat("x", 10*maxLine)
			for i := range 500 {
				fmt.Fprintf(os.Stderr, "noise %d %s\n", i, long[:i%3*maxLine])
			}
		}
	}
	var s float64
	for _, v := range x {
		s += float64(v * v)
	}
	return s, nil
}

// runHelper is the plugin side of the test binary.
func runHelper(mode string) int {
	if f := os.Getenv("ESGRID_TEST_STARTS"); f != "" {
		// Count starts, for the back-off tests.
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fh.WriteString("start\n")
			fh.Close()
		}
		if b, _ := os.ReadFile(f); mode == "serve-then-die" && strings.Count(string(b), "start") > 1 {
			mode = "die"
		}
	}
	if slot := os.Getenv("ESGRID_TEST_FAIL_SLOT"); slot != "" && slot == os.Getenv("ESGRID_PLUGIN_SLOT") {
		// One slot that cannot start (a licence, a device short),
		// while the file ESGRID_TEST_FAIL_WHILE exists if it is named.
		if f := os.Getenv("ESGRID_TEST_FAIL_WHILE"); f == "" {
			mode = "die"
		} else if _, err := os.Stat(f); err == nil {
			mode = "die"
		}
	}
	if os.Getenv("ESGRID_TEST_SHOW_ENV") != "" {
		// As a crash report would.
		fmt.Fprintf(os.Stderr, "helper: ESGRID_KEY=%q ESGRID_PLUGIN_NAME=%q\n", os.Getenv("ESGRID_KEY"), os.Getenv("ESGRID_PLUGIN_NAME"))
	}
	if d, err := time.ParseDuration(os.Getenv("ESGRID_TEST_START_SLEEP")); err == nil {
		time.Sleep(d) // a plugin slow to start
	}
	if f := os.Getenv("ESGRID_TEST_DESCENDANTS"); f != "" {
		// Children that outlive it unless killed (reap_linux_test.go).
		depth, _ := strconv.Atoi(os.Getenv("ESGRID_TEST_DEPTH"))
		if err := startDescendants(f, max(depth, 1)); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
	}
	if f := os.Getenv("ESGRID_TEST_DAEMON"); f != "" {
		// A helper daemon it uses: out of its session, orphaned at
		// once (its shell exits), its pid in the file f.
		exec.Command("sh", "-c", `setsid sleep 3600 & echo $! > "$ESGRID_TEST_DAEMON.tmp" && mv "$ESGRID_TEST_DAEMON.tmp" "$ESGRID_TEST_DAEMON"`).Run()
	}
	name := os.Getenv("ESGRID_TEST_NAME")
	if name == "" {
		name = "testp"
	}
	switch mode {
	case "sleep":
		// A plugin's descendant, doing nothing for an hour.
		time.Sleep(time.Hour)
		return 0
	case "die":
		fmt.Fprintln(os.Stderr, "ImportError: no module named simulator")
		return 1
	case "hang":
		time.Sleep(time.Hour)
		return 0
	case "hello-exit":
		// A hello, then an exit without reading anything (a licence
		// check that fails after the hello).
		b, _ := wire.AppendFrame(nil, byte(MsgHello), &Hello{Version: ProtocolVersion, Name: name, MinDim: 1, Lower: -5.12, Upper: 5.12}, 0)
		os.Stdout.Write(b)
		fmt.Fprintln(os.Stderr, "licence server unreachable")
		return 4
	case "garbage":
		fmt.Println("hello, I am a plugin")
		time.Sleep(time.Hour)
		return 0
	case "oneshot":
		// One evaluation per process: the hello, one answer, then exit
		// 0 without reading anything more.
		out := os.Stdout
		b, _ := wire.AppendFrame(nil, byte(MsgHello), &Hello{Version: ProtocolVersion, Name: name, MinDim: 1, Lower: -5.12, Upper: 5.12}, 0)
		out.Write(b)
		var ev Eval
		_, body, err := wire.NewReader(os.Stdin, 0).Next()
		if err == nil {
			err = new(wire.Decoder).Decode("eval", body, &ev)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		f, _ := (&helperProblem{name: name}).Eval(context.Background(), ev.X)
		b, _ = wire.AppendFrame(nil, byte(MsgResult), &Result{ID: ev.ID, F: f}, 0)
		out.Write(b)
		if os.Getenv("ESGRID_TEST_EXIT_ON_NEXT") != "" {
			// Live on until the next request is there, unread.
			for unread(os.Stdin) <= 0 {
				time.Sleep(time.Millisecond)
			}
		}
		return 0
	case "serve", "serve-nocancel", "serve-then-die":
		out := protectStdout()
		var opts []Option
		if mode == "serve-nocancel" {
			opts = append(opts, NoCancel())
		}
		if d := os.Getenv("ESGRID_TEST_DIMS"); d != "" {
			var lo, hi int
			fmt.Sscanf(d, "%d,%d", &lo, &hi)
			opts = append(opts, Dims(lo, hi))
		}
		if err := Serve(context.Background(), &helperProblem{name: name, out: out}, pollableStdin(), out, opts...); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
	return 2
}

// helperPlugin writes an executable script that runs the test binary as a
// plugin in mode, with extra environment assignments, and returns its
// path.
func helperPlugin(t testing.TB, mode string, env ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plugin-"+mode)
	script := "#!/bin/sh\nexport ESGRID_TEST_PLUGIN=" + mode + "\n"
	for _, e := range env {
		script += "export " + e + "\n"
	}
	script += "exec '" + exe + "'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// logSink captures log records.
type logSink struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r.Clone())
	return nil
}
func (s *logSink) WithAttrs(as []slog.Attr) slog.Handler { return &attrSink{s, as} }
func (s *logSink) WithGroup(string) slog.Handler         { return s }

type attrSink struct {
	*logSink
	attrs []slog.Attr
}

func (a *attrSink) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(a.attrs...)
	return a.logSink.Handle(ctx, r)
}
func (a *attrSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrSink{a.logSink, append(append([]slog.Attr{}, a.attrs...), as...)}
}

// records returns the messages logged with msg, each as its attributes.
func (s *logSink) records(msg string) []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]string
	for _, r := range s.recs {
		if r.Message != msg {
			continue
		}
		m := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}
