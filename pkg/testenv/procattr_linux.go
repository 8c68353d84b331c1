package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithTest makes cmd's process get SIGKILL when the test process
// exits, also when it dies without running its cleanups (a -timeout
// panic, a kill), so that no server of a test outlives it.
func DieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
