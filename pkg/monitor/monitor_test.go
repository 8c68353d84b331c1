package monitor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/monitor"
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
