package cputime

import (
	"runtime"
	"testing"
	"time"
)

func TestThreadCountsComputeNotWaits(t *testing.T) {
	if _, ok := Thread(); !ok {
		t.Skip("this system cannot tell a thread's CPU time")
	}
	// On one thread throughout: a goroutine that wakes on another thread
	// would read that thread's CPU time, whatever it ran before.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, _ := Thread()
	for c, _ := Thread(); c-c0 < 10*time.Millisecond; c, _ = Thread() {
	}
	c1, _ := Thread()
	if c1-c0 < 10*time.Millisecond {
		t.Errorf("a 10 ms spin advanced the thread's CPU time by %v", c1-c0)
	}
	// A goroutine that sleeps uses no CPU while it sleeps.
	time.Sleep(50 * time.Millisecond)
	c2, _ := Thread()
	if c2 >= c1+50*time.Millisecond {
		t.Errorf("a 50 ms sleep advanced the thread's CPU time by %v", c2-c1)
	}
}
