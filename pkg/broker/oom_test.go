package broker_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// smallRedis is a broker on a private Redis of 3 MB under noeviction.
func smallRedis(t *testing.T) *broker.Broker {
	t.Helper()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "3mb", "--maxmemory-policy", "noeviction")
	b, err := broker.Open(context.Background(), broker.Options{Addr: addr, Prefix: "t:"})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// fill pushes 2 KB messages of queue q, ids from first on, until Redis
// refuses them, and returns their payload and how many went in.
func fill(t *testing.T, b *broker.Broker, first int64) (json.RawMessage, int) {
	t.Helper()
	payload, _ := json.Marshal(map[string]string{"x": strings.Repeat("a", 2048)})
	pushed := 0
	var err error
	for id := first; err == nil && id < first+100000; id += 50 {
		var msgs []*task.Message
		for i := range int64(50) {
			msgs = append(msgs, &task.Message{ID: id + i, Attempt: 1, Code: "q", Queue: "q", Priority: task.DefaultPriority, Payload: payload})
		}
		var failed []*task.Message
		failed, err = b.Push(context.Background(), msgs)
		pushed += len(msgs) - len(failed)
	}
	require.ErrorContains(t, err, "OOM")
	return payload, pushed
}

// A Redis at maxmemory (noeviction) refuses new messages, but what frees
// or moves memory keeps working: takes, acks, quarantine, heartbeats and
// counters. Memory reports how full it is.
func TestFullRedisStillDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := smallRedis(t)

	epoch, _, created, err := b.Epoch(ctx)
	require.NoError(t, err)
	require.True(t, created)
	payload, pushed := fill(t, b, 1)
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
	alive, err := b.Alive(ctx, []string{"w1"})
	require.NoError(t, err)
	require.True(t, alive["w1"])
	// Recovery reads the data set's epoch, and forgets a dead worker, remembering it among the gone.
	require.NoError(t, b.BeatCounts(ctx, &broker.Heartbeat{ID: "w2", Node: "n", Queues: []string{"q"}}, time.Minute, time.Now(), broker.Counts{}))
	since, _, created, err := b.Epoch(ctx)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, epoch, since)
	require.NoError(t, b.Forget(ctx, "w2"))
	gone, err := b.GoneWorkers(ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, gone, 1)
	require.Equal(t, "w2", gone[0].ID)

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

// A queue limited at take still drains at maxmemory: its take gets
// leases and counts tokens, renewals and releases work, and a release
// wakes the workers waiting for the capacity it frees (else they would
// wait for a lease to expire, a heartbeat TTL).
func TestFullRedisLimitedQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := smallRedis(t)
	b.SetLayout(limited{limits: map[string]limit.Limit{
		"reports": {MaxRunning: 2, Rate: limit.Rate{N: 100, Period: time.Second}, Burst: 10}}})
	push(t, b, "reports", seq(1, 6), task.DefaultPriority)
	fill(t, b, 100)

	take := func() broker.Taken {
		t.Helper()
		got, err := b.TakeMany(ctx, "w1", []broker.TakeRequest{{Queue: "reports", Max: 5, LeaseTTL: time.Minute}})
		require.NoError(t, err)
		return got[0]
	}
	for done := 0; done < 6; {
		got := take()
		require.NotEmpty(t, got.Msgs, "after %d", done)
		require.NoError(t, b.RenewLeases(ctx, map[string][]string{"reports": got.Leases}, time.Minute))
		require.NoError(t, b.Ack(ctx, "w1", map[string][]string{"reports": got.Msgs}))
		require.NoError(t, b.Client().Del(ctx, b.Keys.Notify("reports")).Err())
		require.NoError(t, b.ReleaseLeases(ctx, map[string][]string{"reports": got.Leases}))
		require.Positive(t, b.Client().LLen(ctx, b.Keys.Notify("reports")).Val(), "the release woke the queue")
		done += len(got.Msgs)
	}
}

// Script flags (allow-oom) came with Redis 7; earlier servers, and a
// version that cannot be read, run the scripts plain.
func TestScriptFlagsIn(t *testing.T) {
	for version, want := range map[string]bool{"7.0.15": true, "7.2.4": true, "8.0.0": true, "10.0.1": true,
		"6.2.14": false, "6.0.16": false, "5.0.7": false, "": false, "x": false} {
		require.Equal(t, want, broker.ScriptFlagsIn(version), version)
	}
}
