//go:build !linux

package worker

import "time"

// threadCPU cannot tell a thread's CPU time here: slowdowns are timed by
// the wall clock.
func threadCPU() (time.Duration, bool) { return 0, false }
