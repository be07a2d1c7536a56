package gridtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/sched"
	"github.com/esgrid/esgrid/worker"
)

// BenchmarkMasterAgents: the master at 256 real worker agents
// (worker.Agent, one slot each, over 127.0.0.1 TCP, every frame sealed
// with the run's key), under every policy. The master runs in a process
// of its own (this test binary again, benchMasterEnv set), so that its
// CPU is its own: it reads its rusage around the generations it runs.
// The agents run in this process. A generation is λ = 4 tasks per agent
// of a problem whose evaluations sleep 10 ms (a real evaluation's time,
// no CPU), so results come back one by one as in real runs and frames
// carry as many tasks as they do there.
//
// Reported per task (b.N counts tasks): the master's CPU (user + system,
// and user alone: over loopback a write's system time includes the
// receiving agent's side of TCP, which a real network puts on the
// worker's machine), the wall time; the latency from a result's arrival at the master's
// socket to the next frame it writes on that connection (median and 99th
// percentile; a generation's first frames, which answer no result, are
// not counted, but a read that brought no result, such as a heartbeat,
// counts until the next frame, which is why the 99th percentile is
// milliseconds: a worker's next task waits for its next result, 10 ms
// later); and the master's memory (Go heap in use and peak RSS).
// With ESGRID_BENCH_MASTER_PROFILE=FILE the master process writes its
// CPU profile there. No time is asserted.
func BenchmarkMasterAgents(b *testing.B) {
	if testing.Short() {
		b.Skip("256 agents and a master process")
	}
	for _, policy := range sched.Names {
		b.Run(policy, func(b *testing.B) {
			f := startAgentsBench(b, policy, benchAgents)
			defer f.close(b)
			if _, err := f.run(min(b.N, 1024)); err != nil { // warm up: every agent has served
				b.Fatal(err)
			}
			b.ResetTimer()
			r, err := f.run(b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			n := float64(r.Tasks)
			b.ReportMetric(float64(r.CPU)/1e3/n, "master-cpu-µs/task")
			b.ReportMetric(float64(r.User)/1e3/n, "master-user-µs/task")
			b.ReportMetric(float64(r.Wall)/1e3/n, "wall-µs/task")
			b.ReportMetric(float64(r.LatP50)/1e3, "result-to-send-p50-µs")
			b.ReportMetric(float64(r.LatP90)/1e3, "result-to-send-p90-µs")
			b.ReportMetric(float64(r.LatP99)/1e3, "result-to-send-p99-µs")
			b.ReportMetric(float64(r.Heap)/(1<<20), "master-heap-MiB")
			b.ReportMetric(float64(r.MaxRSS)/(1<<20), "master-maxrss-MiB")
			b.ReportMetric(r.PerFrame, "tasks/frame")
			b.ReportMetric(0, "ns/op") // ns/op is this process's (the agents'), not the master's
		})
	}
}

// benchAgents is how many agents BenchmarkMasterAgents runs.
const benchAgents = 256

// benchEval is the time one evaluation sleeps.
const benchEval = 10 * time.Millisecond

// benchMasterEnv, when set ("policy,agents,lambda"), makes the test binary
// the benchmark's master process (TestMain).
const benchMasterEnv = "ESGRID_BENCH_MASTER"

// benchProfileEnv, when set, names the file the master process writes
// its CPU profile to (go tool pprof).
const benchProfileEnv = "ESGRID_BENCH_MASTER_PROFILE"

// benchResult is what the master process reports of a run.
type benchResult struct {
	Tasks    int           `json:"tasks"`
	CPU      time.Duration `json:"cpu"`
	User     time.Duration `json:"user"`
	Wall     time.Duration `json:"wall"`
	LatP50   time.Duration `json:"lat_p50"`
	LatP90   time.Duration `json:"lat_p90"`
	LatP99   time.Duration `json:"lat_p99"`
	Heap     uint64        `json:"heap"`
	MaxRSS   int64         `json:"maxrss"`
	PerFrame float64       `json:"per_frame"`
	Err      string        `json:"err,omitempty"`
}

// agentsBench is a master process and its agents.
type agentsBench struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stop   context.CancelFunc
	agents sync.WaitGroup
}

func startAgentsBench(b *testing.B, policy string, n int) *agentsBench {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	dieWithParent(cmd)
	cmd.Env = append(os.Environ(), benchMasterEnv+"="+policy+","+strconv.Itoa(n)+","+strconv.Itoa(4*n), grid.KeyEnv+"="+testSecret)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	f := &agentsBench{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	if !f.out.Scan() {
		f.abort()
		b.Fatalf("master process: no address (%v)", f.out.Err())
	}
	addr := strings.TrimPrefix(f.out.Text(), "addr ")
	key, err := grid.NewKey(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	quiet := quiet
	for i := range n {
		a, err := worker.New(worker.Config{
			Master: addr, Key: key, Name: fmt.Sprintf("a%03d", i), Slots: 1, Logger: quiet,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second,
			Build: func(spec grid.ProblemSpec) (problems.Problem, error) {
				p, err := problems.New(spec.Name, spec.Dim)
				return sleepy{p}, err
			},
		})
		if err != nil {
			f.close(b)
			b.Fatal(err)
		}
		f.agents.Add(1)
		go func() {
			defer f.agents.Done()
			a.Run(ctx)
		}()
	}
	return f
}

// run asks the master process for tasks tasks (whole generations) and
// returns what it measured.
func (f *agentsBench) run(tasks int) (benchResult, error) {
	var r benchResult
	if _, err := fmt.Fprintf(f.in, "run %d\n", tasks); err != nil {
		return r, err
	}
	// A run that never answers (a lost frame, a hung process) ends the
	// process, and with it the wait for its line.
	watchdog := time.AfterFunc(benchRunLimit, f.kill)
	ok := f.out.Scan()
	if !watchdog.Stop() {
		return r, fmt.Errorf("master process: no result in %v", benchRunLimit)
	}
	if !ok {
		return r, fmt.Errorf("master process: no result (%v)", f.out.Err())
	}
	if err := json.Unmarshal(f.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("master process: %q: %w", f.out.Text(), err)
	}
	if r.Err != "" {
		return r, errors.New(r.Err)
	}
	return r, nil
}

func (f *agentsBench) close(b *testing.B) {
	f.in.Close() // the master process ends the run and exits
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b.Errorf("master process: %v", err)
		}
	case <-time.After(30 * time.Second):
		f.kill()
		<-done
		b.Errorf("master process did not exit")
	}
	f.stop()
	f.agents.Wait()
}

// benchRunLimit bounds one run of a benchmark's process: minutes beyond
// what 20,000 tasks take on a loaded machine.
const benchRunLimit = 10 * time.Minute

func (f *agentsBench) kill() {
	f.cmd.Process.Kill()
}

// abort kills the process before any agent started, and reaps it.
func (f *agentsBench) abort() {
	f.kill()
	f.cmd.Wait()
	if f.stop != nil {
		f.stop()
	}
}

// sleepy is a problem whose evaluations take benchEval without CPU.
type sleepy struct{ problems.Problem }

func (p sleepy) Eval(ctx context.Context, x []float64) (float64, error) {
	t := time.NewTimer(benchEval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return p.Problem.Eval(ctx, x)
}

// benchMaster is the master process of BenchmarkMasterAgents: it prints
// its address, waits for its agents, then for each "run N" line on stdin
// evaluates whole generations of λ tasks until N are done and prints one
// JSON benchResult; it ends when stdin does. It returns the exit status.
func benchMaster(spec string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "bench master:", err)
		return 1
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fail(fmt.Errorf("%s=%q: want policy,agents,lambda", benchMasterEnv, spec))
	}
	agents, err1 := strconv.Atoi(parts[1])
	lambda, err2 := strconv.Atoi(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	key, err := grid.NewKey(os.Getenv(grid.KeyEnv))
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	lat := &latencies{}
	ctx := context.Background()
	m, err := grid.NewMaster(ctx, grid.MasterConfig{
		Listener: timedListener{ln, lat}, Key: key, Policy: parts[0],
		Problem: grid.ProblemSpec{Name: "sphere", Dim: 30}, Logger: quiet,
	})
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	fmt.Printf("addr %s\n", ln.Addr())
	for m.Workers() < agents {
		time.Sleep(10 * time.Millisecond)
	}
	xs := make([][]float64, lambda)
	for i := range xs {
		xs[i] = make([]float64, 30)
		for j := range xs[i] {
			xs[i][j] = float64(i%7) - float64(j%5)
		}
	}
	if path := os.Getenv(benchProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	gen := 0
	return serveRuns(fail, func(n int) benchResult {
		lat.reset()
		st0 := m.Stats()
		var r benchResult
		for r.Tasks < n {
			lat.boundary()
			gen++
			if _, err := m.Evaluate(ctx, gen, xs); err != nil {
				r.Err = err.Error()
				break
			}
			r.Tasks += lambda
		}
		r.LatP50, r.LatP90, r.LatP99 = lat.quantiles()
		st := m.Stats()
		if f := st.FramesOut - st0.FramesOut; f > 0 {
			r.PerFrame = float64(st.TasksSent-st0.TasksSent) / float64(f)
		}
		return r
	})
}

// serveRuns is a benchmark process's side of agentsBench.run: for each
// "run N" line on stdin it calls run(N), which does the work, and prints
// its result as one JSON line, with the process's CPU time (user and
// system), the wall time, the peak RSS and the Go heap around it. It
// returns the exit status once stdin ends.
func serveRuns(fail func(error) int, run func(n int) benchResult) int {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(in.Text(), "run "))
		if err != nil {
			return fail(err)
		}
		var ru0 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		t0 := time.Now()
		r := run(n)
		r.Wall = time.Since(t0)
		var ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		r.CPU = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		r.User = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
		r.MaxRSS = ru1.Maxrss << 10 // KiB on Linux
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r.Heap = ms.HeapInuse
		if err := out.Encode(r); err != nil {
			return fail(err)
		}
	}
	return 0
}

// latencies keeps, per connection, the time from the last read to the
// first write after it: from a result's arrival at the master's socket
// to the next frame the master writes there (its next task, mostly).
type latencies struct {
	mu    sync.Mutex
	d     []time.Duration
	conns []*timedConn
}

// boundary forgets the reads so far: a generation ends, and the next
// one's first frames answer no result.
func (l *latencies) boundary() {
	l.mu.Lock()
	for _, c := range l.conns {
		c.lastRead.Store(0)
	}
	l.mu.Unlock()
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) reset() {
	l.mu.Lock()
	l.d = l.d[:0]
	l.mu.Unlock()
}

func (l *latencies) quantiles() (p50, p90, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l.d)
	return l.d[len(l.d)/2], l.d[len(l.d)*9/10], l.d[len(l.d)*99/100]
}

type timedListener struct {
	net.Listener
	lat *latencies
}

func (l timedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &timedConn{Conn: c, lat: l.lat}
	l.lat.mu.Lock()
	l.lat.conns = append(l.lat.conns, tc)
	l.lat.mu.Unlock()
	return tc, nil
}

// timedConn notes when its reads return; its next write adds the time
// since the last of them.
type timedConn struct {
	net.Conn
	lat      *latencies
	lastRead atomic.Int64 // UnixNano of the last read since the last write; 0: none
}

func (c *timedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *timedConn) Write(p []byte) (int, error) {
	if r := c.lastRead.Swap(0); r != 0 {
		c.lat.add(time.Duration(time.Now().UnixNano() - r))
	}
	return c.Conn.Write(p)
}
