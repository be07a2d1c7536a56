package gridtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMasterFloor: what BenchmarkMasterAgents's traffic costs a Go
// server with no esgrid code in it, the floor under the master's CPU per
// task. The shape is the same: 256 TCP connections over 127.0.0.1, a
// server process of its own that reads its rusage, and on each connection
// a client that answers every task frame (taskFrameBytes, the size of a
// sealed 30-dimensional task) with a result frame (resultFrameBytes, a
// sealed result) after sleeping benchEval; the server answers every
// result with the next task until the run's tasks are sent. Frames are
// length-prefixed and not sealed. Five server shapes:
//
//   - chan: a reader goroutine per connection hands each frame (a new
//     slice) by channel to one loop goroutine, which hands the next task
//     by channel to the connection's writer goroutine: the master's shape.
//   - direct: the same, but the loop writes to the socket itself.
//   - idle: the loop writes itself when no other frame waits for it,
//     else hands over to the writer goroutine.
//   - inline: the reader answers on its own goroutine, no loop at all:
//     the least a Go server with a goroutine per connection can do.
//   - epoll (Linux): no Go networking; one thread with its own epoll
//     set reads and writes raw sockets: the kernel's share alone.
//
// Reported per task as BenchmarkMasterAgents does (CPU, user CPU, the
// result-to-send latency), and the clients' round trip from writing a
// result to the next task's arrival (median and 90th percentile: a run's
// first task on each connection answers the last result of the run
// before, 256 samples of b.N, long after). With ESGRID_BENCH_MASTER_PROFILE=FILE the
// server process writes its CPU profile there. No time is asserted.
func BenchmarkMasterFloor(b *testing.B) {
	if testing.Short() {
		b.Skip("256 connections and a server process")
	}
	for _, shape := range append([]string{"chan", "direct", "idle", "inline"}, floorOSShapes...) {
		b.Run(shape, func(b *testing.B) {
			f := startFloorBench(b, shape, benchAgents)
			defer f.close(b)
			if _, err := f.run(min(b.N, 1024)); err != nil { // warm up
				b.Fatal(err)
			}
			b.ResetTimer()
			f.rtt.reset()
			r, err := f.run(b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			rtt50, rtt90, _ := f.rtt.quantiles()
			n := float64(r.Tasks)
			b.ReportMetric(float64(rtt50)/1e3, "client-rtt-p50-µs")
			b.ReportMetric(float64(rtt90)/1e3, "client-rtt-p90-µs")
			b.ReportMetric(float64(r.CPU)/1e3/n, "server-cpu-µs/task")
			b.ReportMetric(float64(r.User)/1e3/n, "server-user-µs/task")
			b.ReportMetric(float64(r.Wall)/1e3/n, "wall-µs/task")
			if r.LatP50 > 0 { // epoll does not time it
				b.ReportMetric(float64(r.LatP50)/1e3, "result-to-send-p50-µs")
				b.ReportMetric(float64(r.LatP90)/1e3, "result-to-send-p90-µs")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// Frame sizes of BenchmarkMasterAgents, length prefix included: a sealed
// Tasks frame of one 30-dimensional task and a sealed Results frame of
// one result.
const (
	taskFrameBytes   = 310
	resultFrameBytes = 56
)

// floorServerEnv, when set ("shape,conns"), makes the test binary
// BenchmarkMasterFloor's server process (TestMain).
const floorServerEnv = "ESGRID_BENCH_FLOOR"

// floorBench is the server process and its clients.
type floorBench struct {
	agentsBench
	rtt latencies // clients: from a result's write to the next task's arrival
}

func startFloorBench(b *testing.B, shape string, n int) *floorBench {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	dieWithParent(cmd)
	cmd.Env = append(os.Environ(), floorServerEnv+"="+shape+","+strconv.Itoa(n))
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
	f := &floorBench{agentsBench: agentsBench{cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}}
	if !f.out.Scan() {
		f.abort()
		b.Fatalf("server process: no address (%v)", f.out.Err())
	}
	addr := strings.TrimPrefix(f.out.Text(), "addr ")
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			f.abort() // it still waits for its clients: stdin closing would not end it
			f.agents.Wait()
			b.Fatal(err)
		}
		f.agents.Add(1)
		go func() {
			defer f.agents.Done()
			floorClient(ctx, c, &f.rtt)
		}()
	}
	return f
}

// floorClient answers every task frame on c with a result frame, benchEval
// later, until c or ctx closes. It adds to rtt the time from writing a
// result to the next task's arrival.
func floorClient(ctx context.Context, c net.Conn, rtt *latencies) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	br := bufio.NewReader(c)
	result := frame(resultFrameBytes)
	var hdr [4]byte
	var wrote time.Time
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		if !wrote.IsZero() {
			rtt.add(time.Since(wrote))
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<16 { // not a frame of ours
			return
		}
		if _, err := br.Discard(int(n)); err != nil {
			return
		}
		time.Sleep(benchEval)
		wrote = time.Now()
		if _, err := c.Write(result); err != nil {
			return
		}
	}
}

// frame is a length-prefixed frame of size bytes in all.
func frame(size int) []byte {
	f := make([]byte, size)
	binary.BigEndian.PutUint32(f, uint32(size-4))
	for i := 4; i < size; i++ {
		f[i] = byte(i * 7)
	}
	return f
}

// floorConn is one of the server's connections.
type floorConn struct {
	nc  net.Conn
	out chan []byte // chan: to its writer goroutine
}

// floorServer is BenchmarkMasterFloor's server: it counts the tasks sent
// and the results received of the current run.
type floorServer struct {
	shape   string
	task    []byte
	results chan floorConnFrame // chan, direct and idle: readers to the loop
	starts  chan int            // chan, direct and idle: a run of n tasks begins
	done    chan struct{}       // the run's last result arrived

	// inline: the run's counters, shared by the readers.
	target, sent, received atomic.Int64
}

type floorConnFrame struct {
	c     *floorConn
	frame []byte
}

// floorServerMain is the server process of BenchmarkMasterFloor, run as
// benchMaster is: it prints its address, accepts its connections, then
// runs "run N" lines from stdin, printing a benchResult for each.
func floorServerMain(spec string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "floor server:", err)
		return 1
	}
	shape, nstr, ok := strings.Cut(spec, ",")
	conns, err := strconv.Atoi(nstr)
	if !ok || err != nil {
		return fail(fmt.Errorf("%s=%q: want shape,conns", floorServerEnv, spec))
	}
	if shape == "epoll" {
		return floorEpoll(conns)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	lat := &latencies{}
	tl := timedListener{ln, lat}
	fmt.Printf("addr %s\n", ln.Addr())
	s := &floorServer{
		shape: shape, task: frame(taskFrameBytes),
		results: make(chan floorConnFrame, conns), starts: make(chan int), done: make(chan struct{}, 1),
	}
	var all []*floorConn
	for range conns {
		nc, err := tl.Accept()
		if err != nil {
			return fail(err)
		}
		c := &floorConn{nc: nc}
		all = append(all, c)
		if shape == "chan" || shape == "idle" {
			c.out = make(chan []byte, 4)
			go func() {
				for f := range c.out {
					if _, err := c.nc.Write(f); err != nil {
						return
					}
				}
			}()
		}
		go s.read(c)
	}
	if shape != "inline" {
		go s.loop(all)
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
	return serveRuns(fail, func(n int) benchResult {
		lat.reset()
		lat.boundary()
		if shape == "inline" {
			s.target.Store(int64(n))
			s.sent.Store(0)
			s.received.Store(0)
			for _, c := range all {
				if s.sent.Add(1) > int64(n) {
					break
				}
				c.nc.Write(s.task)
			}
		} else {
			s.starts <- n
		}
		<-s.done
		r := benchResult{Tasks: n, PerFrame: 1}
		r.LatP50, r.LatP90, r.LatP99 = lat.quantiles()
		return r
	})
}

// read reads c's frames: into a new slice each, handed to the loop, or
// (inline) answered here.
func (s *floorServer) read(c *floorConn) {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<16 {
			fmt.Fprintln(os.Stderr, "floor server: frame too large")
			return
		}
		f := make([]byte, n)
		if _, err := io.ReadFull(br, f); err != nil {
			return
		}
		if s.shape != "inline" {
			s.results <- floorConnFrame{c, f}
			continue
		}
		if s.sent.Add(1) <= s.target.Load() {
			if _, err := c.nc.Write(s.task); err != nil {
				return
			}
		}
		if s.received.Add(1) == s.target.Load() {
			s.done <- struct{}{}
		}
	}
}

// loop is the chan, direct and idle shapes' one goroutine that decides.
func (s *floorServer) loop(all []*floorConn) {
	var target, sent, received int
	send := func(c *floorConn) {
		sent++
		if s.shape == "chan" || s.shape == "idle" && len(s.results) > 0 {
			c.out <- s.task
			return
		}
		if _, err := c.nc.Write(s.task); err != nil {
			fmt.Fprintln(os.Stderr, "floor server:", err)
		}
	}
	for {
		select {
		case n := <-s.starts:
			target, sent, received = n, 0, 0
			for _, c := range all {
				if sent == target {
					break
				}
				send(c)
			}
		case r := <-s.results:
			received++
			if sent < target {
				send(r.c)
			}
			if received == target {
				s.done <- struct{}{}
			}
		}
	}
}
