package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
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
	"github.com/esgrid/esgrid/internal/flagx"
)

// binaries are the programs a run starts.
type binaries struct {
	esrun, esworker, plugin string
}

// soak is the state of one essoak invocation.
type soak struct {
	o      *options
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

// run is essoak: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, nil)
}

// runWith is run with the tests' mangle (see soak).
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, mangle func(*outcome)) int {
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		fs := newFlagSet(&options{})
		fs.SetOutput(stdout)
		fs.Usage()
		return flagx.ExitOK
	}
	if errors.Is(err, flagx.ErrVersion) {
		fmt.Fprintln(stdout, flagx.Version("essoak"))
		return flagx.ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "essoak: %v (see essoak -h)\n", err)
		return flagx.ExitUsage
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano()) >> 1
	}
	root, err := os.MkdirTemp("", "essoak-")
	if err != nil {
		fmt.Fprintf(stderr, "essoak: %v\n", err)
		return 1
	}
	defer os.RemoveAll(root)
	s := &soak{o: o, root: root, mangle: mangle}
	defer s.procs.killAll()
	if s.bin, err = s.binaries(ctx); err != nil {
		fmt.Fprintf(stderr, "essoak: %v\n", err)
		return 1
	}
	if s.keyEnv, err = newKeyEnv(); err != nil {
		fmt.Fprintf(stderr, "essoak: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "essoak: seed %d (run i replays with -seed %d+i -runs 1), for %v%s; logs of defects kept in %s\n",
		o.seed, o.seed, o.duration, runsNote(o.runs), o.keep)
	fmt.Fprintf(stdout, "essoak: bound on a run = K × (M×start + work + faults), K = %g (see -h and bound.go)\n", o.slack)
	t := newTally(o)
	start := time.Now()
	for i := 0; o.runs == 0 || i < o.runs; i++ {
		if i > 0 && time.Since(start) >= o.duration || ctx.Err() != nil {
			break
		}
		res := s.runOne(ctx, i, o.seed+uint64(i))
		if res.Interrupted {
			t.interrupted = true
			break
		}
		t.add(res)
		fmt.Fprintln(stdout, t.line(res))
	}
	t.took = time.Since(start)
	t.interrupted = t.interrupted || ctx.Err() != nil
	fmt.Fprint(stdout, t.summary())
	if len(t.defects) > 0 || t.interrupted {
		return 1
	}
	return 0
}

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
	dir := s.o.bin
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
	dst := filepath.Join(s.o.keep, fmt.Sprintf("run%d-seed%d", res.Run, res.Scenario.Seed))
	for n := 2; ; n++ { // never over the logs of an earlier soak
		if _, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(s.o.keep, fmt.Sprintf("run%d-seed%d.%d", res.Run, res.Scenario.Seed, n))
	}
	if err := copyTree(dir, dst); err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	note := fmt.Sprintf("scenario: %s\nbound: %v\ntook: %v\nreplay: %s\n", res.Scenario, res.Bound, res.Took, s.o.replay(res.Scenario.Seed))
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
