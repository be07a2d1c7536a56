package plugin

import (
	"os"

	"golang.org/x/sys/unix"
)

// unread is how many bytes written to the pipe w have not been read from
// it (FIONREAD, named TIOCINQ here, which Linux answers on either end
// of a pipe), or -1 if
// the system cannot say.
func unread(w *os.File) int {
	rc, err := w.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
