package scheduler_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// A push whose LPUSH reached Redis but whose reply was lost leaves its
// tasks dispatched at their attempt: handed back, the next claim would
// push attempt 2 while attempt 1 waits in the queue, and both would run.
// One warning says how many are unsettled; none says handed back.
func TestPushWithoutReplyLeavesTasksDispatched(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	env := b.env
	addr := testenv.PrivateRedis(t, 0)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	proxy := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", addr)
	require.NoError(t, proxy.Start())
	t.Cleanup(proxy.Stop)
	br, err := broker.Open(b.ctx, broker.Options{Addr: proxy.Listen, Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { br.Close() })
	direct, err := broker.Open(b.ctx, broker.Options{Addr: addr, Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { direct.Close() })

	var logs testenv.LogBuffer
	// The clock stands still: after the first round, the windows read
	// nothing more from Redis, so the next round's only command is its
	// push.
	s := scheduler.New(scheduler.Config{BatchSize: 100, Clock: clock.NewManual(time.Now()),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, env.Store, br)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	// A push before the toxic leaves a connection ready: the round's
	// push is sent at once, not held up by a handshake.
	_, err = br.Push(b.ctx, []*task.Message{{ID: 1 << 40, Attempt: 1, Code: "warm", Queue: "warm", Payload: []byte(`{}`)}})
	require.NoError(t, err)

	ids := submit(t, b, 10)
	// The proxy closes the scheduler's connection when Redis's reply to
	// the push arrives: Redis ran it, the scheduler reads EOF.
	_, err = proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":0}}`))
	require.NoError(t, err)
	n, err = s.RunOnce(b.ctx)
	require.Equal(t, 10, n)
	require.Error(t, err, "no push is known to have landed")
	require.Equal(t, 10, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = ? AND attempt = 1`, task.Dispatched),
		"left dispatched at attempt 1, not handed back")

	key := direct.Keys.Queue("hello", 0)
	raws, err := direct.Client().LRange(b.ctx, key, 0, -1).Result()
	require.NoError(t, err)
	queued := map[int64]int{}
	for _, raw := range raws {
		m, err := task.DecodeMessage([]byte(raw))
		require.NoError(t, err)
		require.Equal(t, 1, m.Attempt)
		queued[m.ID]++
	}
	require.Len(t, raws, 10)
	for _, id := range ids {
		require.Equal(t, 1, queued[id], "task %d queued once", id)
	}

	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "may or may not be in redis"), out)
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "tasks=10")
	require.NotContains(t, out, "handed back")

	// Redis answers again: nothing is claimed or pushed a second time.
	require.NoError(t, proxy.Toxics.RemoveToxic(context.Background(), "cut"))
	n, err = s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	ql, err := direct.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.Equal(t, int64(10), ql)
}
