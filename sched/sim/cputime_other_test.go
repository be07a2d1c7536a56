//go:build !linux

package sim

import "time"

// threadCPU: not known here (the benchmark then takes real time).
func threadCPU() (time.Duration, bool) { return 0, false }
