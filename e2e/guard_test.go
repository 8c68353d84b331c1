package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// TestSigkillLeavesNoHandlerChild: a SIGKILLed taskd takes the children
// of its handlers with it (its handler guard kills their process groups),
// not only their first process, so nothing of the attempt runs on beside
// the one recovery starts. dash runs `sleep` as a child of the shell (it
// execs only a lone last command), and a pool process's background child
// is in its group too.
func TestSigkillLeavesNoHandlerChild(t *testing.T) {
	t.Parallel()
	execSleep, poolSleep := sleepMarker(), sleepMarker()
	b := setup(t, fmt.Sprintf(`handlers:
  shell:
    exec: ["sh", "-c", "sleep %s; echo done"]
  forks:
    pool: ["sh", "-c", "sleep %s & echo '{\"ready\":true,\"protocol\":1}'; cat >/dev/null"]
    size: 1
scheduler:
  poll_interval: 200ms
`, execSleep, poolSleep))
	d := b.startDaemon(t, "node-1")
	b.created(t, "submit", "shell")
	execPid := testenv.WaitArgs(t, 30*time.Second, "sleep", execSleep)
	poolPid := testenv.WaitArgs(t, 30*time.Second, "sleep", poolSleep)

	require.NoError(t, d.cmd.Process.Kill())
	<-d.done
	for _, s := range []struct {
		pid    int
		marker string
	}{{execPid, execSleep}, {poolPid, poolSleep}} {
		require.Eventually(t, func() bool { return !testenv.HasArgs(s.pid, "sleep", s.marker) }, 5*time.Second, 20*time.Millisecond,
			"sleep %s (pid %d) outlived the SIGKILLed taskd", s.marker, s.pid)
	}
	require.Eventually(t, func() bool { // in the node's log, where Supervisor keeps it
		logged, _ := os.ReadFile(d.log)
		return bytes.Contains(logged, []byte(`"msg":"taskd exited with handlers running: killed their process groups"`))
	}, 5*time.Second, 20*time.Millisecond)
}

// TestSigkilledLockLeavesNoCommandChild: a SIGKILLed taskd lock takes its
// command's whole process group with it, not only its first process, so
// the host that takes the expired lock does not run the job beside what
// the killed one started (the php of `sh -c 'php a && php b'`).
func TestSigkilledLockLeavesNoCommandChild(t *testing.T) {
	t.Parallel()
	marker := sleepMarker()
	b := setup(t, "")
	d := b.startBinary(t, "lock", taskdBin, "lock", "nightly", "--", "sh", "-c", "sleep "+marker+"; echo done")
	pid := testenv.WaitArgs(t, 30*time.Second, "sleep", marker)
	require.NoError(t, d.cmd.Process.Kill())
	<-d.done
	require.Eventually(t, func() bool { return !testenv.HasArgs(pid, "sleep", marker) }, 5*time.Second, 20*time.Millisecond,
		"sleep %s (pid %d) outlived the SIGKILLed taskd lock", marker, pid)
	require.Eventually(t, func() bool { // its stderr: the cron mail or the job's log
		logged, _ := os.ReadFile(d.log)
		return bytes.Contains(logged, []byte(`msg="taskd lock exited with its command running: killed its process group"`))
	}, 5*time.Second, 20*time.Millisecond)
}

// TestSigtermLeavesNoGuard: the handler guard runs in a session of its
// own (a signal to taskd's process group does not reach it), and a
// drained taskd stops and reaps it before it exits.
func TestSigtermLeavesNoGuard(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	d := b.startDaemon(t, "node-1")
	daemon := d.cmd.Process.Pid
	var guard int
	require.Eventually(t, func() bool {
		guard = childNamed(daemon, "taskd-guard")
		return guard != 0
	}, 20*time.Second, 20*time.Millisecond, "no handler guard under taskd %d", daemon)
	require.Equal(t, strconv.Itoa(guard), procStat(guard, 3), "the guard leads a session of its own")

	code, _ := d.stop(t, 20*time.Second)
	require.Zero(t, code)
	require.False(t, isNamed(guard, "taskd-guard"), "the guard %d outlived taskd", guard)
}

// sleepMarker is a sleep argument no other process uses: 61 seconds and a
// random fraction.
func sleepMarker() string { return fmt.Sprintf("61.%09d", rand.IntN(1e9)) }

// childNamed is the child of ppid whose process name is name, or 0.
func childNamed(ppid int, name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && isNamed(pid, name) && procStat(pid, 1) == strconv.Itoa(ppid) {
			return pid
		}
	}
	return 0
}

// procStat is field i of /proc/PID/stat after the process name: 0 state,
// 1 ppid, 2 pgrp, 3 session; "" when there is no such process.
func procStat(pid, i int) string {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) <= i {
		return ""
	}
	return f[i]
}

// isNamed says whether process pid exists with process name name.
func isNamed(pid int, name string) bool {
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(comm)) == name
}
