//go:build !linux

package gridtest

// floorOSShapes are BenchmarkMasterFloor's shapes that only Linux has.
var floorOSShapes []string

func floorEpoll(int) int { panic("floor server: epoll is Linux's") }
