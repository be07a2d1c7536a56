//go:build linux

package plugin

import (
	"os"
	"syscall"
)

// protectStdout returns a private copy of the standard output for the
// protocol's frames and points file descriptor 1 at stderr, so that a
// stray fmt.Println in a plugin lands in the worker's log instead of
// breaking the protocol. If that cannot be done, it returns os.Stdout.
func protectStdout() *os.File {
	fd, err := syscall.Dup(1)
	if err != nil {
		return os.Stdout
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		syscall.Close(fd)
		return os.Stdout
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "protocol")
}

// pollableStdin returns the standard input switched to non-blocking mode,
// so that the runtime's poller waits for it rather than a thread blocked
// in read(2), or os.Stdin if that cannot be done.
func pollableStdin() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "stdin")
}
