//go:build unix

package grid

import "syscall"

// openFileLimit is the process's limit on open files (RLIMIT_NOFILE's
// soft limit, which Go raises to the hard one as it starts), 0 unknown.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
