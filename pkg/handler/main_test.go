package handler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary reap the orphans of the scripts it runs,
// as `taskd run` does, so the tests see what a host with a proper init sees.
func TestMain(m *testing.M) {
	if mode := os.Getenv("POOL_HELPER"); mode != "" {
		os.Exit(poolHelper(mode))
	}
	if err := StartReaper(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
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
