//go:build !linux

package gridtest

import "os/exec"

// floorOSShapes are BenchmarkMasterFloor's shapes that only Linux has.
var floorOSShapes []string

func floorEpoll(int) int { panic("floor server: epoll is Linux's") }

// dieWithParent does nothing here: only Linux ends a child with its
// parent (the benchmarks' processes also end when their stdin closes).
func dieWithParent(*exec.Cmd) {}
