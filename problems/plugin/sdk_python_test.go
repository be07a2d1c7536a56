package plugin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/internal/leaktest"
)

// The Python SDK (sdk/python/esgrid_plugin.py): its own tests, and the
// host's side of what its unit tests cannot see.

// TestPythonSDK runs the SDK's own tests (unittest) under /usr/bin/python3.
func TestPythonSDK(t *testing.T) {
	needPython(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-m", "unittest", "discover", "-s", "../../sdk/python", "-v")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // nothing written into the source tree
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("no OK from unittest:\n%s", out)
	}
}

// pythonSDKPlugin writes a plugin that uses the SDK, with body after the
// import, and returns its path.
func pythonSDKPlugin(t *testing.T, body string) string {
	t.Helper()
	needPython(t)
	sdk, err := filepath.Abs("../../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plugin.py")
	src := "#!/usr/bin/python3\nimport sys, time\nsys.path.insert(0, " + pyQuote(sdk) + ")\nfrom esgrid_plugin import serve\n" + body
	if err := os.WriteFile(path, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func pyQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// A Python plugin that says cancel=True is sent the cancel, stops, and
// keeps its process: no kill, one honoured cancel, the next evaluation on
// the same process.
func TestPythonSDKHonoursCancel(t *testing.T) {
	leaktest.Check(t)
	path := pythonSDKPlugin(t, `
def f(x, cancelled):
    if x[0] < 0:
        print("running", file=sys.stderr, flush=True)
        cancelled.wait(600)
    return x[0]

serve(f, dim=1, bounds=(-1, 1), name="testp", cancel=True)
`)
	p, sink := open(t, Config{Path: path, Dim: 1, CancelGrace: time.Minute})
	if !p.Hello().Cancel {
		t.Fatalf("hello %+v: want cancel true", p.Hello())
	}
	if f := mustEval(t, p, 0.5); f != 0.5 {
		t.Errorf("f = %v", f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelWhenRunning(sink, 1, cancel, nil)
	if _, err := p.Eval(ctx, []float64{-1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval = %v, want context.Canceled", err)
	}
	if f := mustEval(t, p, 0.25); f != 0.25 {
		t.Errorf("after the cancel f = %v", f)
	}
	if st := p.Stats(); st.Cancels != 1 || st.Kills != 0 || st.Starts != 1 {
		t.Errorf("stats %+v, want 1 cancel honoured, no kill, 1 start", st)
	}
}

// An exception in a Python plugin's function is an error answer that
// names it; the process serves on.
func TestPythonSDKErrorAnswer(t *testing.T) {
	leaktest.Check(t)
	path := pythonSDKPlugin(t, `
def f(x):
    if x[0] > 0.5:
        raise ValueError("outside the model's range")
    return x[0]

serve(f, dim=1, bounds=(-1, 1), name="testp")
`)
	p, _ := open(t, Config{Path: path, Dim: 1})
	if _, err := p.Eval(context.Background(), []float64{0.75}); !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), "ValueError: outside the model's range") {
		t.Errorf("Eval = %v, want the plugin's error", err)
	}
	if f := mustEval(t, p, 0.25); f != 0.25 {
		t.Errorf("f = %v", f)
	}
	if st := p.Stats(); st.Starts != 1 || st.Kills+st.Crashes != 0 {
		t.Errorf("stats %+v", st)
	}
}
