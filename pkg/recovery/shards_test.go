package recovery_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/recovery"
)

// After a reshard to fewer shards, recovery stops workers polling the
// retired shards once they took all the shards hold. Nothing is moved: a
// retired shard's messages put at the taking end of a live one went ahead
// of older messages there, and recovery, which reads a list's age at that
// end, took those for lost and had them run twice.
func TestRetireShards(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	ctx := context.Background()
	o := ops.New(b.env.Store, b.env.Broker)
	o.Known = func(q string) bool { return q == "sq" } // configured
	_, err := o.Reshard(ctx, "sq", 8)
	require.NoError(t, err)
	for s := range 8 {
		require.NoError(t, b.rdb.LPush(ctx, b.keys.Lane("sq", s, 5), "m5", "m5b").Err())
		require.NoError(t, b.rdb.LPush(ctx, b.keys.Lane("sq", s, 0), "m0").Err())
	}
	_, err = o.Reshard(ctx, "sq", 2)
	require.NoError(t, err)
	cache := queues.New(queues.Config{}, b.env.Store, b.env.Broker)
	require.NoError(t, cache.Refresh(ctx))
	b.env.Broker.SetLayout(cache)

	// Too soon: a node may not have followed yet.
	_, err = b.rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, cache.Get("sq").Span)

	// Past the grace, the retired shards still hold messages: polled on,
	// each list as it was.
	b.env.Exec(t, `UPDATE task_queue SET updated_at = NOW(3) - INTERVAL 1 MINUTE`)
	_, err = b.rec.RunOnce(ctx)
	require.NoError(t, err)
	require.NoError(t, cache.Refresh(ctx))
	require.Equal(t, queues.State{Shards: 2, Span: 8}, cache.Get("sq"))
	per, err := b.env.Broker.QueueBacklog(ctx, "sq", 8)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 3, 3, 3, 3, 3, 3, 3}, per, "nothing moved")

	// The workers took them: the span comes down to the shards.
	for s := 2; s < 8; s++ {
		for _, p := range []int{0, 5} {
			require.NoError(t, b.rdb.Del(ctx, b.keys.Lane("sq", s, p)).Err())
		}
	}
	_, err = b.rec.RunOnce(ctx)
	require.NoError(t, err)
	require.NoError(t, cache.Refresh(ctx))
	require.Equal(t, queues.State{Shards: 2, Span: 2}, cache.Get("sq"))
}
