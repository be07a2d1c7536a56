// Package sockq reads how many bytes wait in a TCP socket's kernel
// queues, on Linux: tests that play a peer stopped or reset mid-run wait
// on these counts, not on sleeps long enough for the kernel.
package sockq

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"
)

// Unread is the number of bytes in nc's receive queue that nothing has
// read yet (TIOCINQ).
func Unread(nc net.Conn) (int, error) { return ioctl(nc, syscall.TIOCINQ) }

// Unsent is the number of bytes in nc's send queue that the peer's kernel
// has not acknowledged yet (TIOCOUTQ).
func Unsent(nc net.Conn) (int, error) { return ioctl(nc, syscall.TIOCOUTQ) }

func ioctl(nc net.Conn, req uintptr) (int, error) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("sockq: %T is not a TCP connection", nc)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, fmt.Errorf("sockq: ioctl: %w", errno)
	}
	return int(n), nil
}
