package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/testenv"
)

// A read with a short window (a node's start, `taskd doctor`) leaves out a
// process that stopped beating but does not remove it: the monitor reads
// with an hour and must still list it, or its stale heartbeat alert
// resolves and tasktop forgets it.
func TestProcessesShortWindowFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	for _, id := range []string{"live", "dead"} {
		require.NoError(t, b.BeatProcess(ctx, &broker.Process{ID: id, Node: "n-" + id}, time.Minute))
	}
	now, err := b.Client().Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, b.Client().ZAdd(ctx, b.Keys.Processes(), redisZ("dead", now.Add(-2*time.Minute))).Err())

	ps, err := b.Processes(ctx, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"live"}, processIDs(ps))
	require.Equal(t, "n-live", ps[0].Node)

	ps, err = b.Processes(ctx, time.Hour)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"live", "dead"}, processIDs(ps), "the short read removed the dead process")
}

// Only entries older than ProcessesKeep leave the registry, whatever
// window the read asks for.
func TestProcessesPruneBeyondKeep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := testenv.New(t).Broker
	now, err := b.Client().Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, b.Client().ZAdd(ctx, b.Keys.Processes(),
		redisZ("recent", now.Add(-broker.ProcessesKeep+time.Minute)),
		redisZ("ancient", now.Add(-broker.ProcessesKeep-time.Minute))).Err())

	ps, err := b.Processes(ctx, time.Second)
	require.NoError(t, err)
	require.Empty(t, ps)
	ids, err := b.Client().ZRange(ctx, b.Keys.Processes(), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"recent"}, ids)

	ps, err = b.Processes(ctx, 2*broker.ProcessesKeep)
	require.NoError(t, err)
	require.Equal(t, []string{"recent"}, processIDs(ps))
}

func processIDs(ps []broker.Process) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}
