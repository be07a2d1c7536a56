// Package soak is esgrid's soak test, the driver behind cmd/essoak: run
// after run of real esrun and esworker processes on 127.0.0.1, with a
// problem plugin and seeded chaos (workers killed, stopped and continued,
// plugins that crash and hang, slow links, the master killed and resumed
// from its checkpoint). After every run it checks that the run ended
// within its bound, that its trajectory is the in-process one bit for
// bit, that its counters agree, that every process exited as it should
// and that the master's memory stayed bounded; it ends with a summary of
// runs, faults injected and defects found, each with the command that
// replays it.
package soak

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/esgrid/esgrid/grid"
)

// Limits bound the scenarios drawn: the largest grid and ES a run may
// have. They are part of a scenario's replay.
type Limits struct {
	Workers int // esworker processes at the start of a run, 1..Workers
	Gens    int // last generation, 4..Gens
	Lambda  int // offspring per generation
	// Silent is the chance that a worker other than the first runs
	// esworker -silent.
	Silent float64
	// Split is the chance that a run's master splits (esrun -split, with
	// -master-cost and more workers and tasks: see drawSplit), Relay the
	// chance that some of its workers reach the master through a relay
	// (esworker -relay). Each is drawn from a stream of its own: with
	// both 0, a seed draws the scenario it drew before they were added.
	Split, Relay float64
}

// DefaultLimits keep one run to a few seconds of work on a 2-core machine.
var DefaultLimits = Limits{Workers: 4, Gens: 20, Lambda: 30, Silent: 0.05, Split: 0.25, Relay: 0.25}

// Config is one soak.
type Config struct {
	// Duration: runs start until it has passed (the run under way
	// finishes).
	Duration time.Duration
	// Runs, if not 0, stops the soak after that many runs.
	Runs int
	// Seed: run i draws its scenario from Seed + i.
	Seed uint64
	// Bin is the directory holding esrun, esworker and soakplugin; empty:
	// build them with the go tool (inside the esgrid module).
	Bin string
	// Keep is the directory where the logs of runs with defects are
	// kept, one directory per run.
	Keep string
	// Slack: the bound on a run is Slack × the sum of its terms (≥ 1).
	Slack float64
	// MaxRSS bounds each esrun's peak resident memory, in MiB.
	MaxRSS int
	// Limits bound the scenarios drawn.
	Limits Limits
	// Replay, if not nil, is the command line that replays the scenario
	// of a seed; nil: "essoak -seed SEED -runs 1".
	Replay func(seed uint64) string

	// mangle, when set, alters each reference before a run is checked
	// against it: the tests' way to check that a wrong trajectory is
	// caught.
	mangle func(*outcome)
	// alter, when set, alters each scenario drawn before it runs: the
	// tests' way to run a scenario no seed draws.
	alter func(*scenario)
}

func (c *Config) replay(seed uint64) string {
	if c.Replay != nil {
		return c.Replay(seed)
	}
	return fmt.Sprintf("essoak -seed %d -runs 1", seed)
}

// Run soaks: run after run of real esrun and esworker processes on
// 127.0.0.1 with seeded chaos, each checked (bound, trajectory, counts,
// exits, memory), one line per run on out, then the summary. It returns
// whether the soak ended without a defect and uninterrupted, or an error
// if it could not start. Every process it starts is killed when it
// returns.
func Run(ctx context.Context, cfg Config, out io.Writer) (passed bool, err error) {
	root, err := os.MkdirTemp("", "essoak-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(root)
	s := &soak{cfg: &cfg, root: root, mangle: cfg.mangle}
	defer s.procs.killAll()
	if s.bin, err = s.binaries(ctx); err != nil {
		return false, err
	}
	if s.keyEnv, err = newKeyEnv(); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "essoak: seed %d (run i replays with -seed %d+i -runs 1), for %v%s; logs of defects kept in %s\n",
		cfg.Seed, cfg.Seed, cfg.Duration, runsNote(cfg.Runs), cfg.Keep)
	fmt.Fprintf(out, "essoak: bound on a run = K × (M×start + work + faults), K = %g (see -h and internal/soak/bound.go)\n", cfg.Slack)
	t := newTally(&cfg)
	start := time.Now()
	for i := 0; cfg.Runs == 0 || i < cfg.Runs; i++ {
		if i > 0 && time.Since(start) >= cfg.Duration || ctx.Err() != nil {
			break
		}
		res := s.runOne(ctx, i, cfg.Seed+uint64(i))
		if res.Interrupted {
			t.interrupted = true
			break
		}
		t.add(res)
		fmt.Fprintln(out, t.line(res))
	}
	t.took = time.Since(start)
	t.interrupted = t.interrupted || ctx.Err() != nil
	fmt.Fprint(out, t.summary())
	return len(t.defects) == 0 && !t.interrupted, nil
}

// binaries are the programs a run starts.
type binaries struct {
	esrun, esworker, plugin string
}

// soak is the state of one essoak invocation.
type soak struct {
	cfg    *Config
	bin    binaries
	root   string // the runs' temporary directories
	keyEnv string // the cluster key, for every process's environment
	procs  procs
	// mangle, when set, alters each reference before a run is checked
	// against it: the tests' way to check that a wrong trajectory is
	// caught.
	mangle func(*outcome)
}

// referenceTimeout bounds one in-process reference run (tiny ES, no load).
const referenceTimeout = 5 * time.Minute

func runsNote(runs int) string {
	if runs > 0 {
		return fmt.Sprintf(" or %d runs", runs)
	}
	return ""
}

// newKeyEnv makes a random cluster key for the soak's processes.
func newKeyEnv() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return grid.KeyEnv + "=" + base64.StdEncoding.EncodeToString(b), nil
}

// binaries finds esrun, esworker and soakplugin in -bin, or builds them.
func (s *soak) binaries(ctx context.Context) (binaries, error) {
	dir := s.cfg.Bin
	if dir == "" {
		dir = filepath.Join(s.root, "bin")
		if err := build(ctx, dir); err != nil {
			return binaries{}, err
		}
	}
	b := binaries{filepath.Join(dir, "esrun"), filepath.Join(dir, "esworker"), filepath.Join(dir, "soakplugin")}
	for _, p := range []string{b.esrun, b.esworker, b.plugin} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("-bin %s: %w", dir, err)
		}
	}
	return b, nil
}

// packages are what build builds.
var packages = []string{
	"github.com/esgrid/esgrid/cmd/esrun",
	"github.com/esgrid/esgrid/cmd/esworker",
	"github.com/esgrid/esgrid/internal/testplugin/soakplugin",
}

// build builds the binaries into dir with the go tool.
func build(ctx context.Context, dir string) error {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return fmt.Errorf("no go tool to build esrun, esworker and soakplugin: give -bin DIR")
		}
	}
	cmd := exec.CommandContext(ctx, goTool, append([]string{"build", "-o", dir + string(filepath.Separator)}, packages...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the binaries (run essoak inside the esgrid module, or give -bin DIR): %v\n%s", err, out)
	}
	return nil
}

// reference is the run of c evaluated by esrun -inprocess (each scenario
// draws its own ES, so there is nothing to share between runs).
func (s *soak) reference(ctx context.Context, c esConfig) (outcome, error) {
	dir, err := os.MkdirTemp(s.root, "reference-")
	if err != nil {
		return outcome{}, err
	}
	defer os.RemoveAll(dir)
	rep, ckpt := filepath.Join(dir, "report.json"), filepath.Join(dir, "state.ckpt")
	args := append([]string{"-inprocess", "-report", rep, "-checkpoint", ckpt}, c.args(s.bin.plugin)...)
	p, err := s.procs.start(dir, "esrun", s.bin.esrun, nil, watch{keepOut: anyLine, keepErr: anyLine}, args...)
	if err != nil {
		return outcome{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, referenceTimeout)
	defer cancel()
	if !p.wait(rctx) {
		p.signal(syscall.SIGKILL)
		<-p.done
		return outcome{}, fmt.Errorf("esrun -inprocess %s: not over after %v", c.key(), referenceTimeout)
	}
	if st := p.status(); st != "exit 0" {
		return outcome{}, fmt.Errorf("esrun -inprocess %s: %s; %s", c.key(), st, lastLine(p.err.kept()))
	}
	o, err := readOutcome(rep, ckpt, p.out.kept())
	if err != nil {
		return outcome{}, fmt.Errorf("esrun -inprocess %s: %w", c.key(), err)
	}
	if s.mangle != nil {
		s.mangle(&o)
	}
	return o, nil
}

// keepLogs copies a run's directory to the -keep directory, with a note
// of its scenario and findings, and returns where.
func (s *soak) keepLogs(dir string, res result) string {
	dst := filepath.Join(s.cfg.Keep, fmt.Sprintf("run%d-seed%d", res.Run, res.Scenario.Seed))
	for n := 2; ; n++ { // never over the logs of an earlier soak
		if _, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(s.cfg.Keep, fmt.Sprintf("run%d-seed%d.%d", res.Run, res.Scenario.Seed, n))
	}
	if err := copyTree(dir, dst); err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	note := fmt.Sprintf("scenario: %s\nbound: %v\ntook: %v\nreplay: %s\n", res.Scenario, res.Bound, res.Took, s.cfg.replay(res.Scenario.Seed))
	for _, f := range res.Findings {
		note += fmt.Sprintf("defect: %s: %s\n", f.Kind, f.Detail)
	}
	os.WriteFile(filepath.Join(dst, "defects.txt"), []byte(note), 0o644)
	return dst
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
