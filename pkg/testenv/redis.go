package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// ClusterBusOffset is how far above its port a Redis Cluster node listens
// for its bus.
const ClusterBusOffset = 10000

// FreePorts returns n distinct loopback ports nothing listens on right
// now, each with its port+ClusterBusOffset free too (a Redis Cluster
// node's bus). Both lie below Linux's ephemeral range (32768 up), so that
// no client connection takes one before the server binds it.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	free := func(p int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	var out []int
	seen := map[int]bool{}
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("testenv: no %d free ports found", n)
		}
		p := 10000 + rand.IntN(32768-10000-ClusterBusOffset)
		if !seen[p] && !seen[p+ClusterBusOffset] && free(p) && free(p+ClusterBusOffset) {
			seen[p], seen[p+ClusterBusOffset] = true, true
			out = append(out, p)
		}
	}
	return out
}

// PrivateRedis runs a redis-server of the test's own on port (0: a free
// one) with extra arguments, so a test can set server options, flush or
// kill it without touching the shared one. It returns the address once the
// server answers; the server is killed when the test ends. The test is
// skipped where redis-server is not installed. A free port taken by
// someone else before the server bound it is replaced by another.
func PrivateRedis(t testing.TB, port int, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	for try := 1; ; try++ {
		p := port
		if p == 0 {
			p = FreePort(t)
		}
		addr, err := startRedis(t, bin, p, args)
		if err == nil {
			return addr
		}
		if port != 0 || try == 3 {
			t.Fatalf("testenv: %v", err)
		}
	}
}

// startRedis starts redis-server on port and waits until it answers, or
// returns why it did not.
func startRedis(t testing.TB, bin string, port int, args []string) (string, error) {
	dir := t.TempDir()
	log := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", log}, args...)...)
	DieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	// A real process starting: under load it may take a while, and it
	// either answers or exits (its port taken, a bad argument).
	deadline := time.After(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for rdb.Ping(context.Background()).Err() != nil {
		select {
		case <-exited:
			out, _ := os.ReadFile(log)
			return "", fmt.Errorf("private redis-server on %s exited at start:\n%s", addr, out)
		case <-deadline:
			return "", fmt.Errorf("private redis-server did not answer on %s within a minute", addr)
		case <-tick.C:
		}
	}
	return addr, nil
}

// FullRedis starts a private Redis with a 2 MB maxmemory under noeviction
// (the policy taskd requires) and fills it with another application's
// keys until it refuses even a few bytes more: a server that answers and
// refuses every push. It returns its address.
func FullRedis(t testing.TB) string {
	t.Helper()
	addr := PrivateRedis(t, 0, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	for _, size := range []int{32 << 10, 1 << 10, 16} {
		blob := strings.Repeat("x", size)
		for rdb.RPush(ctx, "other-app:blobs", blob).Err() == nil {
		}
	}
	return addr
}
