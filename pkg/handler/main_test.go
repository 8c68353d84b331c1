package handler

import (
	"bytes"
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

// TestMain makes the test binary a child subreaper that reaps the orphans it
// inherits. Killed grandchildren are reparented to PID 1, and a container's
// PID 1 may never reap them: they would stay zombies in their group, so
// kill(-pgid, 0) would keep succeeding and Handle would wait out KillGrace.
// This way the tests see what a host with a proper init sees.
func TestMain(m *testing.M) {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
		os.Exit(1)
	}
	go reapOrphans()
	os.Exit(m.Run())
}

// reapOrphans reaps zombie children of this process that are not group
// leaders: the leaders are the Exec children, which cmd.Wait must reap.
func reapOrphans() {
	self := os.Getpid()
	for range time.Tick(5 * time.Millisecond) {
		for _, p := range procs() {
			if p.state == "Z" && p.ppid == self && p.pid != p.pgrp {
				_, _ = syscall.Wait4(p.pid, nil, syscall.WNOHANG, nil)
			}
		}
	}
}

type proc struct {
	pid, ppid, pgrp int
	state           string
}

// procs lists the processes in /proc.
func procs() []proc {
	var ps []proc
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
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		ps = append(ps, proc{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0]})
	}
	return ps
}

// requireGroupGone waits until no process of group pgid remains.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	require.Eventually(t, func() bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH },
		5*time.Second, 10*time.Millisecond, "process group %d still has members", pgid)
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
