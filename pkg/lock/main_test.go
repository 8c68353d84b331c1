package lock

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when a goroutine outlives the tests: every
// Lease must have ended its goroutines when Release returned, and every
// test closes what it opened.
//
// This is goleak.VerifyNone in a few lines; switch to
// go.uber.org/goleak once it is a requirement in go.mod.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := waitForLeaks(5 * time.Second); leaks != "" {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests:\n\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakIgnored are goroutines of the runtime and the test framework.
var leakIgnored = []string{
	"testing.(*M).",
	"testing.runTests",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.goexit0",
}

// waitForLeaks returns the stacks of unexpected goroutines, retrying until
// timeout so that goroutines that are just returning can finish.
func waitForLeaks(timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		leaks := unexpectedGoroutines()
		if leaks == "" || time.Now().After(deadline) {
			return leaks
		}
		time.Sleep(20 * time.Millisecond) // polls: TestMain has no testing.T for require.Eventually
	}
}

func unexpectedGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	// The first stack is this goroutine's.
	for _, g := range strings.Split(string(buf), "\n\n")[1:] {
		ignored := false
		for _, s := range leakIgnored {
			if strings.Contains(g, s) {
				ignored = true
				break
			}
		}
		if !ignored && strings.TrimSpace(g) != "" {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
