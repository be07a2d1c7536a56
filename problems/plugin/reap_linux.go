package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reapMu makes one reapOrphans at a time: each orphan is waited for
// once, so that no wait4 can reach a pid reused after another reaped it.
var reapMu sync.Mutex

// Subreap makes this program a child subreaper (Linux's
// PR_SET_CHILD_SUBREAPER), so that a plugin's descendants that leave its
// process group (setsid, a daemonising library, Python's
// start_new_session) and are orphaned become its children instead of
// init's. Such an orphan cannot be traced to the plugin that started it,
// and a running plugin may still use it (a helper daemon): the orphans
// are killed (with their process groups) and reaped only once no plugin
// process runs any more, when the last one ends and at KillAll. Until
// then, those that exit are reaped as they do (on SIGCHLD, until ctx is
// done), so that a plugin whose evaluations leave short-lived orphans
// ("cmd &") does not fill the program with zombies. Without Subreap,
// killing a plugin's group leaves them running.
//
// It is for a program whose children with a process group or a session
// of their own are all plugin processes (esworker): an orphan is
// recognised as a child not started as a plugin whose process group or
// session differs from the program's, and a child that another part of
// the program started so would be killed or reaped too. Children in the
// program's own group and session are never touched, so os/exec keeps
// every exit status it waits for. The flag is the process's own: the
// program's parent (systemd, a container's init) is not affected. On
// systems other than Linux, Subreap does nothing and returns nil: a kill
// reaches the plugin's process group only.
func Subreap(ctx context.Context) error {
	if _, err := children(); err != nil {
		return fmt.Errorf("cannot list this program's children, so it does not adopt plugins' orphans: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	subreaping.Store(true)
	// Signals coalesce: one received while a round runs makes another,
	// which finds whatever exited since the first listed the children.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		defer signal.Stop(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sigs:
				reap(false)
			}
		}
	}()
	return nil
}

// reapOrphans kills and reaps, until there are none, this program's
// children that are orphans of plugins (see Subreap), if no plugin
// process runs any more; otherwise it reaps those that have exited.
func reapOrphans() { reap(true) }

// reap reaps, until there are none, this program's children that are
// orphans of plugins: every child that is not a plugin process it
// started and waits for itself, and whose process group or session is
// not the program's. A zombie is reaped wherever it stands; one still
// running is killed first, with its group, if mayKill and no plugin
// process is running (an orphan cannot be traced to its plugin, which
// may still use it), and left alone otherwise. A killed orphan's own
// children become the program's as it dies, and are found on the next
// round.
func reap(mayKill bool) {
	if !subreaping.Load() {
		return
	}
	reapMu.Lock()
	defer reapMu.Unlock()
	self := os.Getpid()
	pgid, _ := syscall.Getpgid(0)
	sid, _ := unix.Getsid(0)
	failed := make(map[int]bool) // those a kill did not reach, or not yet waitable: left
	for {
		var pending []int
		zombie := make(map[int]bool)
		pids, _ := children()
		// Under live.mu no plugin process is being started: a child
		// listed, not in live.pids, is not one whose pid startLive has
		// yet to record (it records it before it lets go of live.mu),
		// and one waited for since it was listed, its pid reused, is no
		// longer this program's child, or is in live.pids again.
		live.mu.Lock()
		kill := mayKill && len(live.pids) == 0
		for _, pid := range pids {
			if _, ok := live.pids[pid]; ok || failed[pid] {
				continue
			}
			st, err := readStat(pid)
			if err != nil || st.ppid != self {
				continue // gone, or reaped and its pid reused
			}
			if st.pgid == pgid && st.sid == sid {
				continue // one of the program's own (os/exec waits for it)
			}
			if st.state == 'Z' {
				zombie[pid] = true
			} else {
				if !kill {
					continue // a running plugin may use it
				}
				if st.pgid == pid {
					syscall.Kill(-pid, syscall.SIGKILL) // its own group's members too
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					failed[pid] = true
					continue
				}
			}
			pending = append(pending, pid)
		}
		live.mu.Unlock()
		if len(pending) == 0 {
			return
		}
		for _, pid := range pending {
			// An unreaped child's pid cannot be reused, and no one
			// else waits for it: this wait is the only one. A killed
			// one's returns when it has died. A zombie's returns at
			// once, unless it is a leader whose other threads still
			// run: it is not waited for again here, or the loop would
			// spin (its end brings a SIGCHLD, and a next round).
			opts := 0
			if zombie[pid] {
				opts = unix.WNOHANG
			}
			var ws unix.WaitStatus
			for {
				wpid, err := unix.Wait4(pid, &ws, opts, nil)
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				if wpid != pid {
					failed[pid] = true
				}
				break
			}
		}
	}
}

// children lists this program's children: those of each of its
// threads (an orphan is given to one of them).
func children() ([]int, error) {
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no /proc/self/task/*/children (a kernel without CONFIG_PROC_CHILDREN, or no /proc)")
	}
	var pids []int
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err) // a thread that has just exited
			continue
		}
		for _, w := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(w)); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(errs) == len(files) {
		return nil, errors.Join(errs...)
	}
	return pids, nil
}

// stat is what reapOrphans reads of a process in /proc/PID/stat.
type stat struct {
	state           byte
	ppid, pgid, sid int
}

// readStat reads pid's state, parent, process group and session; a
// zombie's are still there until it is reaped.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// "PID (COMM) S PPID PGRP SESSION ...": COMM may hold anything, ')'
	// included, so the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	var st stat
	st.state = f[0][0]
	nums := []*int{&st.ppid, &st.pgid, &st.sid}
	for k, p := range nums {
		if *p, err = strconv.Atoi(string(f[k+1])); err != nil {
			return stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return st, nil
}
