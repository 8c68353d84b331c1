package testenv

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FreePort returns a loopback TCP port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PrivateRedis runs a redis-server of the test's own on port (0: a free
// one) with extra arguments, so a test can set server options, flush or
// kill it without touching the shared one. It returns the address once the
// server answers; the server is killed when the test ends. The test is
// skipped where redis-server is not installed.
func PrivateRedis(t testing.TB, port int, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	if port == 0 {
		port = FreePort(t)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: private redis-server did not answer on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr
}
