//go:build !linux

package cputime

import "time"

// Thread cannot tell a thread's CPU time here: callers time by the wall
// clock instead.
func Thread() (time.Duration, bool) { return 0, false }
