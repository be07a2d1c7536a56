//go:build !unix

package plugin

import "os/exec"

func setProcAttr(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}
