package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/testenv"
)

// Per-minute counters land in the minute of the beat, reach back as far
// as asked, and the key keeps a TTL.
func TestThroughputSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	hb := &broker.Heartbeat{ID: "w1", Queues: []string{"q"}}
	now := time.Now()
	require.NoError(t, b.BeatCounts(ctx, hb, time.Minute, now.Add(-30*time.Minute), broker.Counts{Processed: 7, Failed: 1}))
	require.NoError(t, b.BeatCounts(ctx, hb, time.Minute, now.Add(-90*time.Minute), broker.Counts{Processed: 100, Failed: 100})) // outside 60 minutes
	require.NoError(t, b.BeatCounts(ctx, hb, time.Minute, now, broker.Counts{Processed: 3, Failed: 0}))
	require.NoError(t, b.BeatCounts(ctx, hb, time.Minute, now, broker.Counts{Processed: 2, Failed: 2, Dead: 1}))

	ws, err := b.Workers(ctx, 60)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.True(t, ws[0].Alive())
	s := ws[0].Series
	require.Len(t, s, 60)
	require.Equal(t, broker.Minute{At: now.Truncate(time.Minute), Processed: 5, Failed: 2, Dead: 1}, s[59])
	require.Equal(t, int64(7), s[29].Processed)
	require.Equal(t, int64(1), s[29].Failed)
	var total int64
	for _, m := range s {
		total += m.Processed
	}
	require.Equal(t, int64(12), total)
	ttl, err := b.Client().TTL(ctx, b.Keys.Throughput("w1")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Hour)

	// The heartbeat expired: the worker is listed, dead, with its series.
	require.NoError(t, b.Client().Del(ctx, b.Keys.Worker("w1")).Err())
	ws, err = b.Workers(ctx, 2)
	require.NoError(t, err)
	require.False(t, ws[0].Alive())
	require.Len(t, ws[0].Series, 2)
}

// A process that exits cleanly leaves the registry; one that vanished
// stays with its last beat until it is older than asked for.
func TestProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	for _, id := range []string{"p1", "p2"} {
		require.NoError(t, b.BeatProcess(ctx, &broker.Process{ID: id, Node: "n-" + id, Roles: []string{"worker"}}, time.Minute))
	}
	require.NoError(t, b.EndProcess(ctx, "p1"))
	ps, err := b.Processes(ctx, time.Hour)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "n-p2", ps[0].Node)
	require.WithinDuration(t, time.Now(), ps[0].LastBeat, 5*time.Second)
	raw := b.Client().Get(ctx, b.Keys.Process("p2")).Val()
	require.Contains(t, raw, `"roles":["worker"]`, "what an operator reads with redis-cli")
	require.NotContains(t, raw, "last_beat", "the registry keeps the beat, not the record")

	require.NoError(t, b.Client().ZAdd(ctx, b.Keys.Processes(), redisZ("p3", time.Now().Add(-2*time.Hour))).Err())
	ps, err = b.Processes(ctx, time.Hour)
	require.NoError(t, err)
	require.Len(t, ps, 1, "entries older than ProcessesKeep are pruned")
	require.ErrorIs(t, b.Client().ZScore(ctx, b.Keys.Processes(), "p3").Err(), redis.Nil)
}

func TestEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	for i := range 3 {
		require.NoError(t, b.RecordEvent(ctx, &broker.Event{Kind: "slot_abandoned", TaskID: int64(i + 1)}))
	}
	es, err := b.Events(ctx, 2)
	require.NoError(t, err)
	require.Len(t, es, 2)
	require.Equal(t, int64(3), es[0].TaskID, "newest first")
}

func redisZ(member string, at time.Time) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: member}
}

// The data set's age is read on Redis's clock, the marker's own, not on
// this host's: a host whose clock runs ahead took a Redis flushed seconds
// ago for one older than a heartbeat's TTL.
func TestEpochAgeOnRedisClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	since, age, created, err := b.Epoch(ctx)
	require.NoError(t, err)
	require.True(t, created)
	require.Zero(t, age)
	now, err := b.Client().Time(ctx).Result()
	require.NoError(t, err)
	// A marker 90 s old by Redis's clock, whatever this host's says.
	require.NoError(t, b.Client().Set(ctx, b.Keys.Epoch(), now.Add(-90*time.Second).UnixMilli(), 0).Err())
	since, age, created, err = b.Epoch(ctx)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, now.Add(-90*time.Second).UnixMilli(), since.UnixMilli())
	require.GreaterOrEqual(t, age, 90*time.Second)
	require.Less(t, age, 95*time.Second)
}
