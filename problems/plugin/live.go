package plugin

import (
	"errors"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// live is every plugin process this program has started and not yet
// killed, so that KillAll can reach them all: each runs in a process
// group of its own (proc_unix.go), which no signal to the program
// reaches.
var live struct {
	mu    sync.Mutex
	procs map[*proc]struct{}
	// pids holds every plugin process started and not yet waited for,
	// killed or not, by pid: os/exec reaps those, so the orphan reaper
	// (reap_linux.go), which looks under mu, never does.
	pids   map[int]*proc
	killed bool // KillAll was called: no more starts
}

// subreaping is set by Subreap (Linux): reapOrphans does nothing
// without it.
var subreaping atomic.Bool

// errKilledAll refuses a start after KillAll.
var errKilledAll = errors.New("every plugin process was killed (the program is exiting)")

// startLive starts cmd and registers pr as live, unless KillAll has been
// called: a process started after it would outlive the program.
func startLive(cmd *exec.Cmd, pr *proc) error {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.killed {
		return errKilledAll
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if live.procs == nil {
		live.procs = make(map[*proc]struct{})
		live.pids = make(map[int]*proc)
	}
	live.procs[pr] = struct{}{}
	live.pids[cmd.Process.Pid] = pr
	return nil
}

// waited records that the plugin process pr has been waited for
// (cmd.Wait returned): from now on a process of its group is an orphan.
// Its pid, free again, may already be another plugin process's, which
// keeps its entry.
func waited(pr *proc) {
	pid := pr.cmd.Process.Pid
	live.mu.Lock()
	if live.pids[pid] == pr {
		delete(live.pids, pid)
	}
	live.mu.Unlock()
}

// forget removes a killed process from the live ones.
func forget(pr *proc) {
	live.mu.Lock()
	delete(live.procs, pr)
	live.mu.Unlock()
}

// KillAll kills the process group of every plugin process this program
// has started and not yet stopped, and refuses further starts; it
// returns how many groups it killed. It is for a program that exits at
// once (esworker's second signal) and has no time to Close its plugin
// Problems: their processes, and whatever those started, must not
// outlive it. Without Subreap it does not wait for the processes to
// exit; with it (Linux), it waits up to killWait for them to exit and
// for what they started outside their groups to be killed.
func KillAll() int {
	live.mu.Lock()
	live.killed = true
	n := len(live.procs)
	for pr := range live.procs {
		killGroup(pr.cmd)
	}
	var dying []*proc // killed now or before, not yet waited for
	for _, pr := range live.pids {
		dying = append(dying, pr)
	}
	live.mu.Unlock()
	if subreaping.Load() {
		// A plugin's children that called setsid become this
		// program's as it dies: wait for that (each process's waiter
		// then kills and reaps them), and kill those left once more.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, pr := range dying {
				<-pr.exited
			}
			reapOrphans()
		}()
		t := time.NewTimer(killWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
	return n
}
