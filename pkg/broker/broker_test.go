package broker_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
)

// privateRedis starts a redis-server of its own with extra arguments, so a
// test can set server options without touching the shared one.
func privateRedis(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	return addr
}

// A Redis that may evict keys would lose queued messages silently: taskd
// refuses it.
func TestCheckEviction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for policy, ok := range map[string]bool{"noeviction": true, "allkeys-lru": false, "volatile-ttl": false} {
		addr := privateRedis(t, "--maxmemory", "100mb", "--maxmemory-policy", policy)
		b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: "t:"})
		require.NoError(t, err)
		err = b.CheckEviction(ctx)
		if ok {
			require.NoError(t, err, policy)
		} else {
			require.ErrorContains(t, err, "noeviction", policy)
		}
		b.Close()
	}
}
