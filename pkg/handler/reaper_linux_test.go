package handler

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// An orphan reparented to this process (a child subreaper, see TestMain)
// is a child of its main thread, whatever thread started its parent: what
// lets the reaper read that thread's children alone on SIGCHLD.
func TestOrphanIsChildOfMainThread(t *testing.T) {
	var out []byte
	var err error
	done := make(chan struct{})
	go func() { // from a thread other than the main one
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command("/bin/sh", "-c", `sleep 60 >/dev/null 2>&1 & echo $!`)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err = cmd.Output()
	}()
	<-done
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })

	pids := func(threads string) []int {
		var ps []int
		for _, p := range children(threads) {
			ps = append(ps, p.pid)
		}
		return ps
	}
	require.Contains(t, pids(strconv.Itoa(os.Getpid())), orphan)
	require.Contains(t, pids("*"), orphan)
}
