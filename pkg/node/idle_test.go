package node_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// An idle node with every role and 300 queues holds no more Redis
// connections than redis.pool_size and sends at most 50 commands a second
// (counted on a Redis of the test's own, over at least five one-second
// waits of the worker); a task submitted to any of the queues still runs.
func TestIdleCostIsFlatInQueues(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	addr := testenv.PrivateRedis(t, 0)
	const queues, poolSize = 300, 16
	var b strings.Builder
	fmt.Fprintf(&b, "mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n  pool_size: %d\nqueues:\n", env.DSN, addr, env.Prefix, poolSize)
	for i := range queues {
		fmt.Fprintf(&b, "  code%03d: { concurrency: 2 }\n", i)
	}
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	cfg, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	n, err := node.Open(context.Background(), cfg, nil, quiet)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { n.Close() })

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	// Let it settle (first beats, first recovery pass), then count.
	require.Eventually(t, func() bool { return n.Worker != nil && rdb.Exists(ctx, env.Prefix+"worker:"+n.Worker.ID()).Val() == 1 },
		20*time.Second, 20*time.Millisecond)
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	var calls, blpops int64
	require.Eventually(t, func() bool {
		calls, blpops = commandCalls(t, rdb)
		return blpops >= 5
	}, 60*time.Second, 100*time.Millisecond)
	t.Logf("%d commands over %d one-second waits", calls, blpops)
	if testing.Verbose() {
		info, _ := rdb.Info(ctx, "commandstats").Result()
		t.Log(info)
	}
	require.LessOrEqual(t, calls, 50*blpops, "commands per second of an idle node")
	clients := infoField(t, rdb, "clients", "connected_clients") - 1 // this test's own
	t.Logf("%d connections", clients)
	require.LessOrEqual(t, clients, int64(poolSize))

	p := producer.New(n.Store, n.Broker, producer.Options{})
	r, err := p.Submit(ctx, producer.Submission{Code: "code299"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		tk, err := n.Store.TaskGet(ctx, r.ID)
		require.NoError(t, err)
		return tk.Status == task.Dead || tk.Status == task.Failed // no handler: it fails, but it ran
	}, 20*time.Second, 20*time.Millisecond)
}

// commandCalls sums the calls of every command since the last reset, and
// returns those of BLPOP apart.
func commandCalls(t *testing.T, rdb *redis.Client) (total, blpop int64) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" || name == "config|resetstat" {
			continue
		}
		n, err := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		require.NoError(t, err)
		total += n
		if name == "blpop" {
			blpop = n
		}
	}
	return total, blpop
}

func infoField(t *testing.T, rdb *redis.Client, section, field string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in INFO %s", field, section)
	return 0
}

// A worker with nothing to run says so: a configuration whose handlers
// went missing would otherwise idle without a word.
func TestWorkerWithoutHandlersWarns(t *testing.T) {
	t.Parallel()
	cfg := configWith(t, testenv.New(t), "node: { roles: [worker] }\n")
	var logged bytes.Buffer
	n, err := node.Open(context.Background(), cfg, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	require.NoError(t, err)
	n.Close()
	require.Contains(t, logged.String(), "the worker role has no handler and no queue in this configuration")
}

// A configuration copied to a second host with its node.id left in: the
// node says so at start, as `taskd doctor` does (nodes.ids). Another
// process of this host under the same node.id is no warning.
func TestSharedNodeIDWarns(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	cfg := configWith(t, env, "node: { id: web }\n")
	host, err := os.Hostname()
	require.NoError(t, err)
	open := func() string {
		var logged bytes.Buffer
		n, err := node.Open(context.Background(), cfg, nil, slog.New(slog.NewTextHandler(&logged, nil)))
		require.NoError(t, err)
		n.Close()
		return logged.String()
	}
	ctx := context.Background()
	require.NoError(t, env.Broker.BeatProcess(ctx, &broker.Process{ID: "here", Node: "web", Host: host}, time.Minute))
	require.NotContains(t, open(), "node.id is taken")
	require.NoError(t, env.Broker.BeatProcess(ctx, &broker.Process{ID: "there", Node: "web", Host: "web-2"}, time.Minute))
	logged := open()
	require.Contains(t, logged, `msg="node.id is taken by live processes on other hosts: `)
	require.Contains(t, logged, `node_id=web other_hosts=web-2`)
}

// configWith loads env's configuration with extra in it.
func configWith(t *testing.T, env *testenv.Env, extra string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taskd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(env.ConfigYAML(extra)), 0o644))
	cfg, err := config.Load(config.NewViper(), path)
	require.NoError(t, err)
	return cfg
}
