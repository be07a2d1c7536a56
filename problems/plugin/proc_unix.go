//go:build unix

package plugin

import (
	"os/exec"
	"syscall"
)

// setProcAttr starts the plugin in a process group of its own, so that a
// kill reaches whatever it started (a shell script's interpreter, a
// simulator's helpers), and a Ctrl-C meant for the worker does not reach
// it: a draining worker lets its running evaluations finish.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the plugin's process group, then the plugin itself.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Process.Kill()
}
