package monitor_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/monitor"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// threeShards spreads every queue over three shards.
type threeShards struct{}

func (threeShards) Shards(string) (int, int) { return 3, 3 }
func (threeShards) Paused(string) bool       { return false }
func (threeShards) Changed() <-chan struct{} { return nil }

// A snapshot counts a queue's Redis messages per shard, and in all.
func TestSnapshotCountsMessagesPerShard(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Broker.SetLayout(threeShards{})
	var msgs []*task.Message
	for id := int64(1); id <= 30; id++ {
		msgs = append(msgs, &task.Message{ID: id, Attempt: 1, Code: "q", Queue: "q", Priority: 5, Payload: []byte(`{}`)})
	}
	failed, err := env.Broker.Push(ctx, msgs)
	require.NoError(t, err)
	require.Empty(t, failed)

	s, err := monitor.Take(ctx, env.Store, env.Broker, []string{"q"})
	require.NoError(t, err)
	q := s.Queues["q"]
	require.NotNil(t, q)
	require.Len(t, q.Shards, 3)
	require.Equal(t, int64(30), q.Messages)
	for shard, n := range q.Shards {
		require.Positive(t, n, "shard %d holds some of the messages", shard)
	}
}

// While the task center does not answer, a partial snapshot still holds
// what Redis does: the queues' messages and consumers, the workers and
// their unwritten results. Take fails as before.
func TestPartialSnapshotWithoutMySQL(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	proxy := testenv.NewFreezeProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	st, err := store.Open(ctx, cfg.FormatDSN(), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = env.Broker.Push(ctx, []*task.Message{{ID: 1, Attempt: 1, Code: "q", Queue: "q", Priority: 5, Payload: []byte(`{}`)}})
	require.NoError(t, err)
	require.NoError(t, env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w1", Node: "n1", Queues: []string{"q"}, ResultsWaitingMS: 42_000}, time.Minute))

	s, err := monitor.TakePartial(ctx, st, env.Broker, nil)
	require.NoError(t, err)
	require.NoError(t, s.MySQLErr)

	proxy.Down()
	tctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	s, err = monitor.TakePartial(tctx, st, env.Broker, []string{"other"})
	require.NoError(t, err, "Redis answers")
	require.ErrorContains(t, s.MySQLErr, "MySQL: ")
	require.Equal(t, int64(1), s.Queues["q"].Messages)
	require.Equal(t, 1, s.Queues["q"].Consumers)
	require.Contains(t, s.Queues, "other")
	require.Len(t, s.Workers, 1)
	require.Equal(t, int64(42_000), s.Workers[0].Heartbeat.ResultsWaitingMS)

	_, err = monitor.Take(tctx, st, env.Broker, nil)
	require.ErrorContains(t, err, "MySQL: ")

	// Both down: the error names both.
	dead, err := broker.Dial(ctx, broker.Options{Addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)), Prefix: env.Prefix})
	require.NoError(t, err)
	defer dead.Close()
	_, err = monitor.TakePartial(tctx, st, dead, nil)
	require.ErrorContains(t, err, "MySQL: ")
	require.ErrorContains(t, err, "list workers: ")
}
