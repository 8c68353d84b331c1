package handler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const prSetChildSubreaper = 36 // linux/prctl.h

// TestMain makes the test binary a child subreaper. Killed grandchildren
// are reparented to PID 1, and a container's PID 1 may never reap them: they
// then stay zombies in their group and kill(-pgid, 0) keeps succeeding. As a
// subreaper this process inherits them, and requireGroupGone reaps them.
func TestMain(m *testing.M) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// requireGroupGone waits until no process of group pgid remains, reaping
// the group's zombies that were reparented to this process.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, pid := range groupMembers(pgid) {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // ECHILD when not ours
		}
		return syscall.Kill(-pgid, 0) == syscall.ESRCH
	}, 5*time.Second, 20*time.Millisecond, "process group %d still has members %v", pgid, groupMembers(pgid))
}

// groupMembers lists the pids whose process group is pgid, from /proc.
func groupMembers(pgid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces and ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitPids waits until the script has written n pids to path.
func waitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(path)
		pids = pids[:0]
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && strings.HasSuffix(line, "\n") {
				pids = append(pids, pid)
			}
		}
		return len(pids) >= n
	}, 5*time.Second, 10*time.Millisecond)
	return pids
}
