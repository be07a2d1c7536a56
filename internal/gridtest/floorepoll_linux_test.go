package gridtest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when this one dies, so
// that a benchmark's server or master process (whose epoll thread the Go
// runtime cannot see as stuck) never outlives a test binary killed
// mid-run.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// floorOSShapes are BenchmarkMasterFloor's shapes that only Linux has.
var floorOSShapes = []string{"epoll"}

// floorEpoll is BenchmarkMasterFloor's epoll shape: no Go networking at
// all. One locked thread waits on an epoll set of its own over raw
// non-blocking sockets, reads each connection's results and writes the
// next tasks itself: the kernel's cost of the traffic, and the least a
// server that writes each task to its socket can spend on it here.
func floorEpoll(conns int) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "floor server (epoll):", err)
		return 1
	}
	ln, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	defer syscall.Close(ln)
	if err := syscall.Bind(ln, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fail(err)
	}
	if err := syscall.Listen(ln, conns); err != nil {
		return fail(err)
	}
	sa, err := syscall.Getsockname(ln)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("addr 127.0.0.1:%d\n", sa.(*syscall.SockaddrInet4).Port)
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fail(err)
	}
	defer syscall.Close(ep)
	fds := make([]int, conns)
	for i := range fds {
		fd, _, err := syscall.Accept4(ln, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return fail(err)
		}
		fds[i] = fd
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fail(err)
		}
	}
	task := frame(taskFrameBytes)
	var target, sent atomic.Int64
	done := make(chan struct{}, 1)
	go func() {
		runtime.LockOSThread()
		events := make([]syscall.EpollEvent, 64)
		buf := make([]byte, 64<<10)
		rest := make(map[int32]int) // bytes of a result frame already read
		received := int64(0)
		for {
			n, err := syscall.EpollWait(ep, events, -1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "floor server (epoll):", err)
				return
			}
			for _, ev := range events[:n] {
				k, err := syscall.Read(int(ev.Fd), buf)
				if k <= 0 || err != nil {
					if err != syscall.EAGAIN {
						syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
					}
					continue
				}
				got := rest[ev.Fd] + k
				rest[ev.Fd] = got % resultFrameBytes
				for range got / resultFrameBytes {
					if sent.Add(1) <= target.Load() {
						syscall.Write(int(ev.Fd), task)
					}
					if received++; received == target.Load() {
						received = 0
						done <- struct{}{}
					}
				}
			}
		}
	}()
	return serveRuns(fail, func(n int) benchResult {
		target.Store(int64(n))
		sent.Store(0)
		for _, fd := range fds {
			if sent.Add(1) > int64(n) {
				break
			}
			syscall.Write(fd, task)
		}
		<-done
		return benchResult{Tasks: n, PerFrame: 1}
	})
}
