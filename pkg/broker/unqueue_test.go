package broker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The messages of killed attempts leave their queue, in every shard and
// priority and across more than one chunk of a long list; the others, and
// another attempt's, stay in their order.
func TestUnqueue(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	b, ctx := env.Broker, context.Background()
	b.SetLayout(layout{shards: map[string]int{"q": 2}})
	var all, gone []int64
	for id := int64(1); id <= 2500; id++ {
		all = append(all, id)
		if id%7 == 0 || id == 1 || id == 2500 {
			gone = append(gone, id)
		}
	}
	push(t, b, "q", all, task.DefaultPriority)
	push(t, b, "q", []int64{3001, 3002}, 0)
	push(t, b, "other", []int64{7}, task.DefaultPriority)
	gone = append(gone, 3002)
	attempts := map[int64]int{3001: 2} // a retry's attempt: not the message queued
	for id := int64(5000); id < 6500; id++ {
		attempts[id] = 1 // more attempts than one call takes, none queued
	}
	for _, id := range gone {
		attempts[id] = 1
	}

	n, err := b.Unqueue(ctx, "q", 2, attempts)
	require.NoError(t, err)
	require.EqualValues(t, len(gone), n)
	var left []int64
	for s := range 2 {
		for _, p := range []int{0, task.DefaultPriority} {
			raws, err := b.Client().LRange(ctx, b.Keys.Lane("q", s, p), 0, -1).Result()
			require.NoError(t, err)
			left = append(left, ids(t, raws)...)
		}
	}
	require.Len(t, left, len(all)+2-len(gone))
	for _, id := range gone {
		require.NotContains(t, left, id)
	}
	require.Contains(t, left, int64(3001))
	raws, err := b.Client().LRange(ctx, b.Keys.Lane("q", 0, task.DefaultPriority), 0, 2).Result()
	require.NoError(t, err)
	require.Equal(t, []int64{2498, 2496, 2494}, ids(t, raws), "newest first, as pushed: 2500 and 7's multiples gone")
	other, err := b.QueueLen(ctx, "other")
	require.NoError(t, err)
	require.EqualValues(t, 1, other, "another queue's message of the same id stays")

	n, err = b.Unqueue(ctx, "q", 2, map[int64]int{99999: 1})
	require.NoError(t, err)
	require.Zero(t, n)
}

// At maxmemory a kill still takes its messages out, and frees the memory
// they held: a flood of bad tasks killed to relieve a full Redis.
func TestUnqueueAtMaxmemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := smallRedis(t)
	_, pushed := fill(t, b, 1)
	// To the last byte: nothing that may grow memory goes through.
	for i := 0; ; i++ {
		if err := b.Client().Set(ctx, "t:pad:"+strconv.Itoa(i), strings.Repeat("p", 64), 0).Err(); err != nil {
			require.ErrorContains(t, err, "OOM")
			break
		}
	}
	before, err := b.Memory(ctx)
	require.NoError(t, err)
	attempts := map[int64]int{}
	for id := int64(1); id <= int64(pushed/2); id++ {
		attempts[id] = 1
	}
	n, err := b.Unqueue(ctx, "q", 1, attempts)
	require.NoError(t, err)
	require.EqualValues(t, pushed/2, n)
	left, err := b.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, pushed-pushed/2, left)
	after, err := b.Memory(ctx)
	require.NoError(t, err)
	require.Less(t, after.Used, before.Used-int64(pushed/2)*1024, "the messages' memory is freed")
}
