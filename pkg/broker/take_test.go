package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// layout is a fixed queue layout: shards per queue, and paused queues.
type layout struct {
	shards map[string]int
	paused map[string]bool
}

func (l layout) Shards(q string) (int, int) { return max(1, l.shards[q]), max(1, l.shards[q]) }
func (l layout) Paused(q string) bool       { return l.paused[q] }
func (l layout) Changed() <-chan struct{}   { return nil }

func push(t *testing.T, b *broker.Broker, q string, ids []int64, prio int) {
	t.Helper()
	var ms []*task.Message
	for _, id := range ids {
		ms = append(ms, &task.Message{ID: id, Attempt: 1, Code: q, Queue: q, Priority: prio})
	}
	failed, err := b.Push(context.Background(), ms)
	require.NoError(t, err)
	require.Empty(t, failed)
}

func ids(t *testing.T, raws []string) []int64 {
	t.Helper()
	var out []int64
	for _, r := range raws {
		m, err := task.DecodeMessage([]byte(r))
		require.NoError(t, err)
		out = append(out, m.ID)
	}
	return out
}

// One take serves several queues: each gets at most what it asked for,
// priority 0 before the default, the shards of a priority share the take
// round robin, oldest first, and a paused queue gives nothing.
func TestTakeManyQueues(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	b, ctx := env.Broker, context.Background()
	b.SetLayout(layout{shards: map[string]int{"sharded": 2}, paused: map[string]bool{"paused": true}})
	push(t, b, "plain", []int64{1, 2, 3, 4}, task.DefaultPriority)
	push(t, b, "plain", []int64{9}, 0)
	push(t, b, "sharded", []int64{10, 12, 14, 11, 13, 15}, task.DefaultPriority) // shard = id % 2
	push(t, b, "paused", []int64{20}, task.DefaultPriority)

	got, err := b.TakeMany(ctx, "w", []broker.TakeRequest{
		{Queue: "plain", Max: 3}, {Queue: "empty", Max: 5}, {Queue: "sharded", Max: 4}, {Queue: "paused", Max: 5},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{9, 1, 2}, ids(t, got[0].Msgs))
	require.Empty(t, got[1].Msgs)
	require.ElementsMatch(t, []int64{10, 12, 11, 13}, ids(t, got[2].Msgs), "two of each shard, oldest first")
	require.Empty(t, got[3].Msgs)
	require.EqualValues(t, 3, b.Client().LLen(ctx, b.Keys.Processing("plain", "w")).Val())
	require.EqualValues(t, 4, b.Client().LLen(ctx, b.Keys.Processing("sharded", "w")).Val())

	got, err = b.TakeMany(ctx, "w", []broker.TakeRequest{{Queue: "plain", Max: 10}, {Queue: "sharded", Max: 10}})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, ids(t, got[0].Msgs))
	require.ElementsMatch(t, []int64{14, 15}, ids(t, got[1].Msgs))
	n, err := b.QueueLen(ctx, "paused")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// A worker waits on the tokens of many queues on one connection: a push to
// any of them ends the wait with its name, and Interrupt ends it with none.
func TestWaitNotifyManyQueues(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	b, ctx := env.Broker, context.Background()
	queues := []string{"a", "b", "c"}
	q, err := b.WaitNotify(ctx, "w", queues, 100*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, q, "timed out")
	push(t, b, "c", []int64{1}, task.DefaultPriority)
	q, err = b.WaitNotify(ctx, "w", queues, time.Second)
	require.NoError(t, err)
	require.Equal(t, "c", q)
	require.NoError(t, b.Interrupt(ctx, "w"))
	start := time.Now()
	q, err = b.WaitNotify(ctx, "w", queues, 10*time.Second)
	require.NoError(t, err)
	require.Empty(t, q)
	require.Less(t, time.Since(start), 9*time.Second, "woken, not timed out")
}

// A batch of acks removes exactly the messages named, one copy each, and
// keeps the others in order.
func TestAckManyKeepsTheRest(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	b, ctx := env.Broker, context.Background()
	key := b.Keys.Processing("q", "w")
	require.NoError(t, b.Client().RPush(ctx, key, "a", "b", "dup", "c", "dup", "d").Err())
	require.NoError(t, b.Ack(ctx, "w", map[string][]string{"q": {"b", "dup", "d", "missing"}}))
	require.Equal(t, []string{"a", "c", "dup"}, b.Client().LRange(ctx, key, 0, -1).Val())
	require.NoError(t, b.Ack(ctx, "w", map[string][]string{"q": {"a", "c", "dup"}}))
	require.Zero(t, b.Client().Exists(ctx, key).Val())
}
