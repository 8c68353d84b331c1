package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// A daemon started before Redis (a host boot, a failover) waits for it
// with clear logs instead of exiting, starts working once it answers, and
// still stops cleanly on SIGTERM while it waits.
func TestDaemonWaitsForRedis(t *testing.T) {
	t.Parallel()
	port := testenv.FreePort(t)
	b := setup(t, "handlers:\n  hello:\n    exec: [\"true\"]\n")
	// Point the daemon at a port where nothing listens yet.
	cfg, err := os.ReadFile(b.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.config, []byte(strings.Replace(string(cfg),
		"addr: \""+b.env.RedisAddr+"\"", "addr: \"127.0.0.1:"+strconv.Itoa(port)+"\"", 1)), 0o644))

	d := b.startDaemon(t, "early")
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(d.log)
		return strings.Count(string(out), "cannot connect; retrying") >= 2
	}, 15*time.Second, 50*time.Millisecond, "the daemon logs that it waits")
	select {
	case <-d.done:
		t.Fatalf("the daemon exited while waiting: %v", d.err)
	default:
	}

	// Redis comes up: the daemon connects and runs work.
	testenv.PrivateRedis(t, port)
	id := strings.TrimSpace(strings.TrimPrefix(b.taskd(t, "submit", "hello"), "submitted task "))
	require.Eventually(t, func() bool {
		return strings.Contains(b.taskd(t, "show", id), "succeeded")
	}, 30*time.Second, 100*time.Millisecond, "the task runs once Redis answers")

	code, _ := d.stop(t, 10*time.Second)
	require.Zero(t, code)
}

// SIGTERM while the daemon waits for a dependency is a clean stop.
func TestDaemonStopsWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	cfg, err := os.ReadFile(b.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.config, []byte(strings.Replace(string(cfg),
		"addr: \""+b.env.RedisAddr+"\"", "addr: \"127.0.0.1:1\"", 1)), 0o644))
	d := b.startDaemon(t, "never")
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(d.log)
		return strings.Contains(string(out), "cannot connect; retrying")
	}, 15*time.Second, 50*time.Millisecond)
	code, _ := d.stop(t, 10*time.Second)
	require.Zero(t, code)
}
