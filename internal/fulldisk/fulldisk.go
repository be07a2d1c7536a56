// Package fulldisk lets a test fill the disk: past a size, every write of
// the process to a regular file fails, as on a full disk.
package fulldisk

import (
	"syscall"
	"testing"
)

// After makes every write of this process past n bytes of a regular file
// fail with EFBIG (the kernel's SIGXFSZ, which Go ignores), until the test
// ends; where the limit cannot be set, the test is skipped. Pipes and
// terminals are not limited, so the test's output is not.
func After(t testing.TB, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip("no file size limit here:", err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: old.Max}); err != nil {
		t.Skip("cannot limit the file size:", err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) })
}
