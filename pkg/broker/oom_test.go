package broker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// A Redis at maxmemory (noeviction) refuses new messages, but what frees
// or moves memory keeps working: takes, acks, quarantine, heartbeats and
// counters. Memory reports how full it is.
func TestFullRedisStillDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: "t:"})
	require.NoError(t, err)
	defer b.Close()

	// Push 2 KB messages until Redis refuses them.
	payload, _ := json.Marshal(map[string]string{"x": strings.Repeat("a", 2048)})
	pushed := 0
	var perr error
	for id := int64(1); perr == nil && id < 100000; id += 50 {
		var msgs []*task.Message
		for i := range int64(50) {
			msgs = append(msgs, &task.Message{ID: id + i, Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: payload})
		}
		var failed []*task.Message
		failed, perr = b.Push(ctx, msgs)
		pushed += len(msgs) - len(failed)
	}
	require.ErrorContains(t, perr, "OOM")
	m, err := b.Memory(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3<<20, m.Max)
	require.Greater(t, m.Ratio(), 0.9, "used %d of %d", m.Used, m.Max)
	t.Logf("%d messages pushed before OOM; used %d of %d bytes", pushed, m.Used, m.Max)

	// Still at maxmemory: a worker beats, takes, counts and acks.
	hb := &broker.Heartbeat{ID: "w1", Node: "n", Queues: []string{"q"}}
	require.NoError(t, b.BeatCounts(ctx, hb, time.Minute, time.Now(), broker.Counts{Processed: 1}))
	require.NoError(t, b.BeatProcess(ctx, &broker.Process{ID: "p1", Node: "n"}, time.Minute))
	raws, err := b.Take(ctx, "q", "w1", 10, 0)
	require.NoError(t, err)
	require.Len(t, raws, 10)
	require.NoError(t, b.Quarantine(ctx, "q", "w1", raws[0]))
	ended := map[string]broker.Ended{}
	broker.CountEnded(ended, "q", task.OutcomeSucceeded)
	require.NoError(t, b.AckEnded(ctx, "w1", map[string][]string{"q": raws[1:]}, time.Now(), ended))
	require.NoError(t, b.SaveAlertStates(ctx, map[string]string{"taskd_redis_memory{}": "{}"}, nil))
	alive, err := b.Alive(ctx, []string{"w1"})
	require.NoError(t, err)
	require.True(t, alive["w1"])

	// The whole backlog drains.
	for {
		raws, err := b.Take(ctx, "q", "w1", 100, 0)
		require.NoError(t, err)
		if len(raws) == 0 {
			break
		}
		require.NoError(t, b.Ack(ctx, "w1", map[string][]string{"q": raws}))
	}
	n, err := b.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, n)
	// With the memory back, pushes go through again.
	failed, err := b.Push(ctx, []*task.Message{{ID: 1, Attempt: 2, Code: "q", Queue: "q", Payload: payload}})
	require.NoError(t, err)
	require.Empty(t, failed)
}

// A batch larger than the room left in Redis pushes what fits: a single
// command of the whole batch would be refused whole, every time.
func TestPushLargeBatchNearMaxmemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: "t:"})
	require.NoError(t, err)
	defer b.Close()
	payload, _ := json.Marshal(map[string]string{"x": strings.Repeat("a", 2048)})
	msgs := make([]*task.Message, 500)
	for i := range msgs {
		msgs[i] = &task.Message{ID: int64(i + 1), Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: payload}
	}
	failed, err := b.Push(ctx, msgs)
	require.ErrorContains(t, err, "OOM")
	require.NotEmpty(t, failed)
	n, err := b.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.Positive(t, n, "nothing of the batch was pushed")
	require.EqualValues(t, len(msgs)-len(failed), n)
}
