package plugin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/internal/testplugin"
	"github.com/esgrid/esgrid/problems"
)

// The example plugins of examples/plugins, against the built-ins they
// mirror.

var (
	goExampleOnce sync.Once
	goExamplePath string
	goExampleErr  error
)

// goExample builds examples/plugins/rastrigin-go once per test binary.
func goExample(tb testing.TB) string {
	tb.Helper()
	goExampleOnce.Do(func() {
		dir, err := os.MkdirTemp("", "esgrid-plugin-example")
		if err != nil {
			goExampleErr = err
			return
		}
		exampleDirs = append(exampleDirs, dir)
		goExamplePath, goExampleErr = testplugin.Build(dir)
	})
	if errors.Is(goExampleErr, testplugin.ErrNoGoTool) {
		tb.Skip(goExampleErr)
	}
	if goExampleErr != nil {
		tb.Fatal(goExampleErr)
	}
	return goExamplePath
}

// exampleDirs are removed by TestMain when the tests end.
var exampleDirs []string

// pythonExample returns the path of examples/plugins/sphere-py, which
// runs with Debian's /usr/bin/python3 (its first line) and the Python SDK
// of sdk/python, or skips the test without that python3.
func pythonExample(tb testing.TB) string {
	tb.Helper()
	needPython(tb)
	script, err := filepath.Abs("../../examples/plugins/sphere-py/sphere.py")
	if err != nil {
		tb.Fatal(err)
	}
	return script
}

// needPython skips a test without /usr/bin/python3, which the Python
// plugins name on their first line.
func needPython(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		tb.Skip("/usr/bin/python3 not found: the Python SDK and plugins need Python 3 (apt-get install python3)")
	}
}

// esRun runs a small (5+10)-ES on p with a pool of slots goroutines and
// returns every generation's stats and the final parents.
func esRun(t *testing.T, p problems.Problem, dim int) ([]es.Stats, []es.Individual) {
	t.Helper()
	lo, hi := p.Bounds()
	eng, err := es.New(es.Config{Problem: p.Name(), Mu: 5, Lambda: 10, Dim: dim, Lower: lo, Upper: hi, Seed: 11,
		Stop: es.Stop{Generations: 40}})
	if err != nil {
		t.Fatal(err)
	}
	var stats []es.Stats
	_, err = eng.Run(context.Background(), problems.NewPool(p, 3), es.RunOptions{
		OnGeneration: func(s es.Stats) error { stats = append(stats, s); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return stats, eng.Parents()
}

// sameRun checks that a plugin and a built-in give the same run, bit for
// bit: the same best-fitness trajectory and the same final parents.
func sameRun(t *testing.T, name, path, builtin string, dim int) {
	t.Helper()
	pl, err := Open(context.Background(), Config{Name: name, Path: path, Dim: dim, Procs: 3, Logger: slog.New(&logSink{})})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	bi, err := problems.New(builtin, dim)
	if err != nil {
		t.Fatal(err)
	}
	if blo, bhi := bi.Bounds(); blo != pl.Hello().Lower || bhi != pl.Hello().Upper {
		t.Fatalf("bounds differ: built-in [%v, %v], plugin %+v", blo, bhi, pl.Hello())
	}
	ps, pp := esRun(t, pl, dim)
	bs, bp := esRun(t, bi, dim)
	if len(ps) != 41 || !reflect.DeepEqual(ps, bs) {
		t.Errorf("trajectories differ:\nplugin   %v\nbuilt-in %v", ps, bs)
	}
	if !reflect.DeepEqual(pp, bp) {
		t.Errorf("final parents differ")
	}
	if st := pl.Stats(); st.Crashes+st.Kills+st.StartFailures != 0 {
		t.Errorf("plugin trouble: %+v", st)
	}
}

func TestGoExampleEqualsBuiltin(t *testing.T) {
	leaktest.Check(t)
	sameRun(t, "rastrigin-go", goExample(t), "rastrigin", 10)
}

func TestPythonExampleEqualsBuiltin(t *testing.T) {
	leaktest.Check(t)
	sameRun(t, "sphere-py", pythonExample(t), "sphere", 10)
}

// The Python example: a cancelled evaluation, an error answer.
func TestPythonExampleErrors(t *testing.T) {
	leaktest.Check(t)
	p, err := Open(context.Background(), Config{Name: "sphere-py", Path: pythonExample(t), Dim: 2, Logger: slog.New(&logSink{})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Hello().Cancel {
		t.Fatal("the Python example says it honours cancels")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Cancelled before it starts: no kill needed.
	if _, err := p.Eval(ctx, []float64{1, 2}); err == nil {
		t.Error("a cancelled Eval succeeded")
	}
	if f, err := p.Eval(context.Background(), []float64{1, 2}); err != nil || f != 5 {
		t.Errorf("Eval = %v, %v", f, err)
	}
	// An error in the fitness function is an error answer.
	if _, err := p.Eval(context.Background(), []float64{1, 2, 3}); err == nil {
		t.Error("a vector of the wrong length was evaluated")
	}
}

// BenchmarkRoundTrip measures, in one run, the cost of one evaluation of
// the same function built in, through the Go plugin and through the
// Python plugin, one at a time (the plugin's round trip is the
// difference). Run: go test -run '^$' -bench RoundTrip ./problems/plugin
func BenchmarkRoundTrip(b *testing.B) {
	const dim = 30
	x := make([]float64, dim)
	for i := range x {
		x[i] = float64(i%7) - 3.25
	}
	run := func(b *testing.B, p problems.Problem) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Eval(ctx, x); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/eval")
	}
	open := func(b *testing.B, name, path string) *Problem {
		p, err := Open(context.Background(), Config{Name: name, Path: path, Dim: dim, Logger: slog.New(&logSink{})})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		return p
	}
	for _, builtin := range []string{"rastrigin", "sphere"} {
		b.Run("builtin-"+builtin, func(b *testing.B) {
			p, _ := problems.New(builtin, dim)
			run(b, p)
		})
	}
	b.Run("go-plugin-rastrigin-go", func(b *testing.B) { run(b, open(b, "rastrigin-go", goExample(b))) })
	b.Run("python-plugin-sphere-py", func(b *testing.B) { run(b, open(b, "sphere-py", pythonExample(b))) })
}

// BenchmarkStart measures what a new process costs before its first
// evaluation (start, hello), which is what a kill costs the next
// evaluation on that slot.
func BenchmarkStart(b *testing.B) {
	for _, c := range []struct {
		bench, name string
		path        func(testing.TB) string
	}{{"go-plugin", "rastrigin-go", goExample}, {"python-plugin", "sphere-py", pythonExample}} {
		b.Run(c.bench+"-"+c.name, func(b *testing.B) {
			path := c.path(b)
			for b.Loop() {
				p, err := Open(context.Background(), Config{Name: c.name, Path: path, Logger: slog.New(&logSink{})})
				if err != nil {
					b.Fatal(err)
				}
				p.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/start")
		})
	}
}

// BenchmarkCancel measures how long a cancelled evaluation takes to
// return, and what the next evaluation then costs, on both cancel paths:
// a plugin that honours cancels (answers, keeps its process) and one that
// does not (killed; the next evaluation starts a new process).
func BenchmarkCancel(b *testing.B) {
	for _, c := range []struct{ name, mode string }{{"honoured", "serve"}, {"kill", "serve-nocancel"}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := Open(context.Background(), Config{Name: "testp", Path: helperPlugin(b, c.mode), Logger: slog.New(&logSink{})})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			var cancelToReturn, nextEval time.Duration
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				cancelled := make(chan time.Time, 1)
				go func() {
					time.Sleep(2 * time.Millisecond) // the evaluation is running
					cancelled <- time.Now()
					cancel()
				}()
				p.Eval(ctx, []float64{xBlock})
				cancelToReturn += time.Since(<-cancelled)
				start := time.Now()
				if _, err := p.Eval(context.Background(), []float64{1}); err != nil {
					b.Fatal(err)
				}
				nextEval += time.Since(start)
			}
			b.ReportMetric(float64(cancelToReturn.Microseconds())/float64(b.N), "µs-cancel")
			b.ReportMetric(float64(nextEval.Microseconds())/float64(b.N), "µs-next-eval")
		})
	}
}
