package worker

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/internal/testplugin"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/problems/plugin"
)

// trap writes an executable that leaves a marker file when run, and
// returns its path and the marker's: nothing a master says may run it.
func trap(t *testing.T, dir string) (exe, marker string) {
	t.Helper()
	marker = filepath.Join(dir, "TRAP-RAN")
	exe = filepath.Join(dir, "evil")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, marker
}

func noMarker(t *testing.T, marker string) {
	t.Helper()
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program the worker's owner did not list was executed")
	}
}

// A worker's Build turns a name into a program only through its own
// catalog: paths, relative tricks and names found in PATH are refused,
// and nothing runs.
func TestPluginBuildRunsOnlyListedPlugins(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	evil, marker := trap(t, dir)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cat := rastriginCatalog(t, dir)
	build := PluginBuild(cat, PluginOptions{Slots: 2, Logger: logger(io.Discard)})
	for _, name := range []string{"evil", evil, "./evil", "../" + filepath.Base(dir) + "/evil", "rastrigin-go/../evil", "", "sh", "/bin/sh", "rastrigin-go "} {
		_, err := build(grid.ProblemSpec{Name: name, Dim: 2})
		if !errors.Is(err, plugin.ErrNotListed) {
			t.Errorf("Build(%q) = %v, want ErrNotListed", name, err)
		}
	}
	noMarker(t, marker)

	// Built-ins still build, and the listed plugin runs.
	if p, err := build(grid.ProblemSpec{Name: "sphere", Dim: 2}); err != nil || p.Name() != "sphere" {
		t.Errorf("Build(sphere) = %v, %v", p, err)
	}
	p, err := build(grid.ProblemSpec{Name: "rastrigin-go", Dim: 3, LoadN: 4})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := problems.New("rastrigin", 3)
	x := []float64{0.5, -1, 2}
	f, err := p.Eval(context.Background(), x)
	g, _ := want.Eval(context.Background(), x)
	if err != nil || f != g {
		t.Errorf("plugin f = %v, %v; built-in %v", f, err, g)
	}
	// With a load it still closes its processes.
	c, ok := p.(io.Closer)
	if !ok {
		t.Fatal("a loaded plugin problem is not an io.Closer")
	}
	c.Close()
	if _, err := p.Eval(context.Background(), x); !errors.Is(err, plugin.ErrClosed) {
		t.Errorf("Eval after Close = %v", err)
	}
}

// hostileMaster welcomes every worker with spec, whatever it offers,
// sends tasks, and reports what the worker answers: a master that holds
// the key but not the worker owner's trust.
func hostileMaster(t *testing.T, key *grid.Key, spec grid.ProblemSpec, tasks *grid.Tasks) (addr string, answers <-chan grid.Message, closed <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan grid.Message, 100)
	ends := make(chan error, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []*grid.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
				<-c.Done()
			}
		}()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			c, _, err := grid.Accept(ctx, nc, grid.AcceptConfig{
				Key:     key,
				Welcome: func(*grid.Hello) (int32, grid.ProblemSpec, error) { return 1, spec, nil },
				Conn:    grid.ConnConfig{Logger: logger(io.Discard)},
			})
			if err != nil {
				continue
			}
			conns = append(conns, c)
			c.Start(func(m grid.Message) { msgs <- m })
			if tasks != nil {
				c.Send(tasks)
			}
			go func() {
				<-c.Done()
				ends <- c.Err()
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-done
	})
	return ln.Addr().String(), msgs, ends
}

// A master cannot make a worker run a program its owner did not list,
// even one that holds the key and ignores what the worker offers: the
// worker refuses the problem, and nothing runs.
func TestMasterCannotMakeWorkerRunUnlisted(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	evil, marker := trap(t, dir)
	key, _ := grid.NewKey(testSecret)
	cat, err := plugin.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{evil, "evil"} {
		addr, _, closed := hostileMaster(t, key, grid.ProblemSpec{Name: name, Dim: 2}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		log := new(logBuffer)
		_, wait := startAgent(t, ctx, Config{
			Master: addr, Key: key, Name: "w", Slots: 1, Problems: OfferedProblems(cat),
			Build: PluginBuild(cat, PluginOptions{Slots: 1, Logger: logger(log)}), Logger: logger(log),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		})
		select {
		case err := <-closed:
			var rej *grid.RejectError
			if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "neither a built-in problem nor a listed plugin") {
				t.Errorf("master saw %v, want the worker's refusal", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the worker did not refuse")
		}
		cancel()
		wait()
		noMarker(t, marker)
	}
}

// childProcesses counts this process's children whose command name is
// comm (Linux /proc), or skips.
func childProcesses(t *testing.T, comm string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to count plugin processes")
	}
	n := 0
	me := os.Getpid()
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		j := strings.IndexByte(s, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me && s[j+1:i] == comm && f[0] != "Z" {
			n++
		}
	}
	return n
}

// An agent with a listed plugin evaluates the master's tasks with it, the
// same numbers as the built-in, and stops the plugin's processes when the
// session ends.
func TestAgentEvaluatesWithPlugin(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	cat := rastriginCatalog(t, dir)
	key, _ := grid.NewKey(testSecret)
	ts := &grid.Tasks{Gen: 0}
	for i := range 6 {
		ts.Items = append(ts.Items, grid.Task{ID: int32(i), X: []float64{float64(i) / 3, -1, math.Pi}})
	}
	addr, answers, _ := hostileMaster(t, key, grid.ProblemSpec{Name: "rastrigin-go", Dim: 3}, ts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := new(logBuffer)
	_, wait := startAgent(t, ctx, Config{
		Master: addr, Key: key, Name: "w", Slots: 2, Problems: OfferedProblems(cat),
		Build: PluginBuild(cat, PluginOptions{Slots: 2, Logger: logger(log)}), Logger: logger(log),
	})
	want, _ := problems.New("rastrigin", 3)
	got := map[int32]float64{}
	deadline := time.After(time.Minute)
	for len(got) < len(ts.Items) {
		select {
		case m := <-answers:
			if rs, ok := m.(*grid.Results); ok {
				for _, r := range rs.Items {
					if r.Err != "" {
						t.Fatalf("task %d: %s", r.ID, r.Err)
					}
					got[r.ID] = r.F
				}
			}
		case <-deadline:
			t.Fatalf("results for %d of %d tasks", len(got), len(ts.Items))
		}
	}
	for _, task := range ts.Items {
		if f, _ := want.Eval(context.Background(), task.X); got[task.ID] != f {
			t.Errorf("task %d: plugin %v, built-in %v", task.ID, got[task.ID], f)
		}
	}
	if n := childProcesses(t, "rastrigin-go"); n < 1 || n > 2 {
		t.Errorf("%d plugin processes during the session, want 1 or 2 (slots)", n)
	}
	cancel()
	wait()
	if n := childProcesses(t, "rastrigin-go"); n != 0 {
		t.Errorf("%d plugin processes left after the session", n)
	}
}

// The real master sends a problem's tasks only to workers that offer it:
// a worker without the plugin is refused in the handshake with a reason
// that names the problem (it logs it and retries later), and never counts
// as joined; a worker that lists it joins.
func TestMasterRefusesWorkersWithoutThePlugin(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	key, _ := grid.NewKey(testSecret)
	mlog := new(logBuffer)
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Problem: grid.ProblemSpec{Name: "rastrigin-go", Dim: 3}, Logger: logger(mlog),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	empty, _ := plugin.NewCatalog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wlog := new(logBuffer)
	_, wait := startAgent(t, ctx, Config{
		Master: m.Addr(), Key: key, Name: "without", Slots: 1, Problems: OfferedProblems(empty),
		Build: PluginBuild(empty, PluginOptions{Slots: 1, Logger: logger(wlog)}), Logger: logger(wlog),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(wlog.String(), `does not offer problem \"rastrigin-go\"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(wlog.String(), `does not offer problem \"rastrigin-go\"`) {
		t.Fatalf("the worker was not told why it was refused; its log:\n%s", wlog)
	}
	if n := m.Workers(); n != 0 {
		t.Errorf("%d workers joined, want 0", n)
	}

	cat := rastriginCatalog(t, dir)
	_, wait2 := startAgent(t, ctx, Config{
		Master: m.Addr(), Key: key, Name: "with", Slots: 1, Problems: OfferedProblems(cat),
		Build: PluginBuild(cat, PluginOptions{Slots: 1, Logger: logger(io.Discard)}),
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := m.WaitWorkers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	f, err := m.Evaluate(wctx, 0, [][]float64{{1, 2, 3}})
	want, _ := problems.New("rastrigin", 3)
	g, _ := want.Eval(ctx, []float64{1, 2, 3})
	if err != nil || f[0] != g {
		t.Errorf("Evaluate = %v, %v; want %v", f, err, g)
	}
	if n := m.Workers(); n != 1 {
		t.Errorf("%d workers joined, want only the one with the plugin", n)
	}
	m.Close()
	cancel()
	wait()
	wait2()
}

// A worker's gossip metadata advertises its plugins besides the
// built-ins.
func TestGossipAdvertisesPlugins(t *testing.T) {
	leaktest.Check(t)
	dir := t.TempDir()
	sim := filepath.Join(dir, "sim")
	if err := os.WriteFile(sim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := plugin.NewCatalog(plugin.Entry{Name: "sim-3", Path: sim})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := grid.NewKey(testSecret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms, err := grid.JoinMembership(ctx, grid.MembershipConfig{
		Name: "master", BindAddr: "127.0.0.1", SecretKey: key.GossipKey(),
		Meta:   grid.NodeMeta{Role: grid.RoleMaster, DataAddr: "127.0.0.1:1"},
		Logger: logger(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	_, wait := startAgent(t, ctx, Config{
		Join: []string{ms.Addr()}, GossipBind: "127.0.0.1:0", Key: key, Name: "lab-9", Slots: 1,
		Problems: OfferedProblems(cat), Build: PluginBuild(cat, PluginOptions{Slots: 1, Logger: logger(io.Discard)}),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	var offered []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, m := range ms.Members() {
			if m.Name == "lab-9" && m.MetaErr == nil {
				offered = m.Meta.Problems
			}
		}
		if offered != nil {
			break
		}
	}
	if !slices.Contains(offered, "sim-3") || !slices.Contains(offered, "sphere") {
		t.Errorf("gossip metadata offers %v, want the built-ins and sim-3", offered)
	}
	cancel()
	wait()
}

// A drain while the master's problem is being built (a plugin that says
// nothing, within a start timeout of an hour) does not wait for the
// start: the build ends with the drain, the plugin's process is killed,
// and Run returns.
func TestDrainDuringPluginStart(t *testing.T) {
	leaktest.Check(t)
	mute := filepath.Join(t.TempDir(), "mute")
	if err := os.WriteFile(mute, []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := plugin.NewCatalog(plugin.Entry{Name: "mute", Path: mute})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := grid.NewKey(testSecret)
	addr, _, _ := hostileMaster(t, key, grid.ProblemSpec{Name: "mute", Dim: 2}, nil)
	a, wait := startAgent(t, context.Background(), Config{
		Master: addr, Key: key, Name: "w", Slots: 1, Problems: OfferedProblems(cat),
		BuildContext: PluginBuildContext(cat, PluginOptions{Slots: 1, StartTimeout: time.Hour, Logger: logger(io.Discard)}),
		MinBackoff:   10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	for deadline := time.Now().Add(time.Minute); childProcesses(t, "sleep") == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := childProcesses(t, "sleep"); n != 1 {
		t.Fatalf("%d plugin processes starting, want 1", n)
	}
	a.Drain()
	if err := wait(); err != nil {
		t.Errorf("Run = %v, want nil (drained)", err)
	}
	if n := childProcesses(t, "sleep"); n != 0 {
		t.Errorf("%d plugin processes left after the drain", n)
	}
}

// rastriginCatalog lists the test plugin, built in dir, as rastrigin-go.
func rastriginCatalog(t *testing.T, dir string) *plugin.Catalog {
	t.Helper()
	cat, err := plugin.NewCatalog(plugin.Entry{Name: "rastrigin-go", Path: testplugin.MustBuild(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}
