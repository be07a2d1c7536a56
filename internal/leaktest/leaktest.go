// Package leaktest finds goroutines that outlive a test.
package leaktest

import (
	"runtime"
	"testing"
	"time"
)

// Check fails t if, after t's other cleanups have run, more goroutines
// are alive than when Check was called. It waits up to thirty seconds
// for stragglers to exit (a loaded machine may run them late), then
// prints every stack.
func Check(t testing.TB) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
		}
	})
}
