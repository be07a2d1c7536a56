package plugin

import (
	"os"
	"os/exec"
	"testing"
)

// The waiter of a plugin process that has ended forgets its pid only if
// it is still that process's: the pid, free once the process has been
// waited for, may already be a new plugin process's, which the orphan
// reaper must never wait for nor kill.
func TestWaitedKeepsTheEntryOfAPidsNextProcess(t *testing.T) {
	const pid = 1 << 30 // over any pid_max: no real process's
	procWith := func() *proc { return &proc{cmd: &exec.Cmd{Process: &os.Process{Pid: pid}}} }
	old, next := procWith(), procWith()
	live.mu.Lock()
	if live.pids == nil {
		live.procs = make(map[*proc]struct{})
		live.pids = make(map[int]*proc)
	}
	live.pids[pid] = next // as startLive records a process given old's pid
	live.mu.Unlock()
	t.Cleanup(func() {
		live.mu.Lock()
		delete(live.pids, pid)
		live.mu.Unlock()
	})
	waited(old) // old's waiter, late
	live.mu.Lock()
	got := live.pids[pid]
	live.mu.Unlock()
	if got != next {
		t.Fatalf("after the old process's waited, the pid's entry is %p, want the new process's %p", got, next)
	}
	waited(next)
	live.mu.Lock()
	_, ok := live.pids[pid]
	live.mu.Unlock()
	if ok {
		t.Fatal("the new process's waited left its entry")
	}
}
