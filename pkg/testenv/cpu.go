package testenv

import (
	"syscall"
	"testing"
	"time"
)

// SelfCPU is the CPU time (user and system) this process has used: a
// benchmark reports its difference over b.N as cpu-µs/op, which the
// machine's other load moves less than wall time.
func SelfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
