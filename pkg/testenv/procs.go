package testenv

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// HasArgs says whether process pid is alive and runs exactly argv (a
// zombie has no command line). Tests give their processes an argument no
// other process has (`sleep 61.<random>`), so they never touch another's.
func HasArgs(pid int, argv ...string) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return string(b) == strings.Join(argv, "\x00")+"\x00"
}

// WaitArgs waits up to within for a process running exactly argv and
// returns its pid; a cleanup SIGKILLs it if the test left it running.
func WaitArgs(t testing.TB, within time.Duration, argv ...string) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && HasArgs(pid, argv...) {
				t.Cleanup(func() {
					if HasArgs(pid, argv...) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				})
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q within %s", argv, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
