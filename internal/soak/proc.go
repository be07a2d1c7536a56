package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a process the soak started, in a process group of its own so
// that a signal reaches what it started too, and so that Ctrl-C on the
// soak reaches the soak alone (which then kills every group).
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *stream // standard output
	err  *stream // standard error
	done chan struct{}
	// state is set once done is closed.
	state   *os.ProcessState
	waitErr error
}

// procs are the processes started and not yet waited for, to be killed
// whatever happens.
type procs struct {
	mu  sync.Mutex
	all map[*proc]bool
}

// watch says what a process's streams keep and who sees their lines.
type watch struct {
	keepOut, keepErr *regexp.Regexp    // lines kept for waitLine and kept (nil: none)
	onOut, onErr     func(line string) // sees every line (nil: no one)
}

// start starts path with args in dir's logs: its standard output goes to
// dir/NAME.out, its standard error to dir/NAME.err, watched by w. env is
// added to this process's environment, without any cluster key or soak
// fault.
func (ps *procs) start(dir, name, path string, env []string, w watch, args ...string) (*proc, error) {
	out, err := newStream(filepath.Join(dir, name+".out"), w.keepOut, w.onOut)
	if err != nil {
		return nil, err
	}
	errs, err := newStream(filepath.Join(dir, name+".err"), w.keepErr, w.onErr)
	if err != nil {
		out.close()
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, errs
	cmd.Env = append(cleanEnv(), env...)
	// Pdeathsig: even a soak killed with SIGKILL leaves no process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A child that keeps the output open (a plugin outliving its worker)
	// must not keep Wait from returning.
	cmd.WaitDelay = 2 * time.Second
	fmt.Fprintf(errs.f, "# %s %s\n", path, strings.Join(args, " "))
	p := &proc{name: name, cmd: cmd, out: out, err: errs, done: make(chan struct{})}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.all == nil {
		ps.all = map[*proc]bool{}
	}
	if err := cmd.Start(); err != nil {
		out.close()
		errs.close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	ps.all[p] = true
	go func() {
		p.waitErr = cmd.Wait()
		p.state = cmd.ProcessState
		out.close()
		errs.close()
		ps.mu.Lock()
		delete(ps.all, p)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// killAll kills every process still running, with its group, and waits
// for them.
func (ps *procs) killAll() {
	ps.mu.Lock()
	var left []*proc
	for p := range ps.all {
		left = append(left, p)
	}
	ps.mu.Unlock()
	for _, p := range left {
		p.signal(syscall.SIGKILL)
	}
	for _, p := range left {
		<-p.done
	}
}

// cleanEnv is this process's environment without the variables a run
// sets itself.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ESGRID_") && !strings.HasPrefix(kv, "ESSOAK_") {
			env = append(env, kv)
		}
	}
	return env
}

// signal sends sig to p's process group; a group already gone is no
// error.
func (p *proc) signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %v: %w", p.name, sig, err)
	}
	return nil
}

// dumpGrace bounds how long a Go process takes to write its goroutines
// and exit on SIGQUIT.
const dumpGrace = 10 * time.Second

// dumpStacks sends SIGQUIT to p alone (not its group): a Go program
// writes every goroutine's stack to its standard error, kept with the
// run's logs, and exits. It waits for that, at most dumpGrace, and says
// what it found: a process gone already (reaped: what kept Wait was its
// output, held open) is no process that hangs.
func (p *proc) dumpStacks(ctx context.Context) string {
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGQUIT); err != nil {
		return fmt.Sprintf("the process was gone (%v): its output was held open", err)
	}
	dctx, cancel := context.WithTimeout(ctx, dumpGrace)
	defer cancel()
	if p.wait(dctx) {
		return "its goroutines are in its log"
	}
	return fmt.Sprintf("no exit %v after SIGQUIT", dumpGrace)
}

// exited says whether p has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for p to end or ctx to be done, and says whether p ended:
// one that ended before ctx was done did, whichever select saw first.
func (p *proc) wait(ctx context.Context) bool {
	select {
	case <-p.done:
		return true
	case <-ctx.Done():
		return p.exited()
	}
}

// status is how p ended: "exit N" or "signal S"; "running" before.
func (p *proc) status() string {
	if !p.exited() {
		return "running"
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return p.state.String()
	case ws.Signaled():
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus())
}

// peakRSS is p's peak resident memory in bytes, once it has ended (Linux
// reports ru_maxrss in KiB).
func (p *proc) peakRSS() int64 {
	if !p.exited() {
		return 0
	}
	ru, ok := p.state.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return ru.Maxrss * 1024
}

// stream writes a process's output to a file and keeps the lines that
// match its filter, waking whoever waits for one.
type stream struct {
	f      *os.File
	keep   *regexp.Regexp
	onLine func(string)

	mu      sync.Mutex
	partial []byte
	lines   []string
	changed chan struct{} // closed and replaced when a line is kept or the stream closes
	closed  bool
}

func newStream(path string, keep *regexp.Regexp, onLine func(string)) (*stream, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &stream{f: f, keep: keep, onLine: onLine, changed: make(chan struct{})}, nil
}

// maxPartial bounds a line kept in memory: a longer one is cut.
const maxPartial = 64 << 10

func (s *stream) Write(b []byte) (int, error) {
	if _, err := s.f.Write(b); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, b...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > maxPartial {
		s.line(string(s.partial))
		s.partial = s.partial[:0]
	}
	return len(b), nil
}

// line handles one whole line, with s.mu held.
func (s *stream) line(l string) {
	if s.onLine != nil {
		s.onLine(l)
	}
	if s.keep != nil && s.keep.MatchString(l) {
		s.lines = append(s.lines, l)
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.f.Close()
	close(s.changed)
}

// kept returns the lines kept so far.
func (s *stream) kept() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// errStreamClosed: the process ended before the line came.
var errStreamClosed = errors.New("the process ended")

// waitLine waits for a kept line matching re and returns its submatches.
func (s *stream) waitLine(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	for i := 0; ; {
		s.mu.Lock()
		lines, changed, closed := s.lines, s.changed, s.closed
		s.mu.Unlock()
		for ; i < len(lines); i++ {
			if m := re.FindStringSubmatch(lines[i]); m != nil {
				return m, nil
			}
		}
		if closed {
			return nil, errStreamClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// sleep waits d, or less if ctx ends; it says whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
