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

// Every kill request reaches a subscriber, in order, however many are sent
// at once (they go out in pipelined chunks of 1,000).
func TestKillsReachSubscribers(t *testing.T) {
	t.Parallel()
	b := testenv.New(t).Broker
	ctx := context.Background()
	kills, closeKills := b.Kills(ctx)
	defer closeKills()
	// The subscription is live once a request sent after it arrives.
	require.Eventually(t, func() bool {
		require.NoError(t, b.Kill(ctx, broker.KillRequest{ID: 1, Attempt: 1}))
		select {
		case <-kills:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}, 10*time.Second, time.Millisecond)

	rs := make([]broker.KillRequest, 2500)
	for i := range rs {
		rs[i] = broker.KillRequest{ID: int64(i + 10), Attempt: i % 3}
	}
	require.NoError(t, b.Kill(ctx, rs...))
	for i := range rs {
		select {
		case r := <-kills:
			for r.ID == 1 { // a late copy of the probe
				r = <-kills
			}
			require.Equal(t, rs[i], r)
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d of %d did not arrive", i, len(rs))
		}
	}
	require.NoError(t, b.Kill(ctx))
}

// Kill requests are kept for the workers that were not listening, newest
// KillMax of the last KillKeep, and read back from a given time on.
func TestKilledAreKept(t *testing.T) {
	t.Parallel()
	b := testenv.New(t).Broker
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	require.NoError(t, b.Kill(ctx, broker.KillRequest{ID: 7, Attempt: 2}, broker.KillRequest{ID: 8, Attempt: 1}))
	got, err := b.Killed(ctx, before)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, broker.KillRequest{ID: 7, Attempt: 2}, got[0].KillRequest)
	require.WithinDuration(t, time.Now(), got[0].At, time.Minute)
	got, err = b.Killed(ctx, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Empty(t, got, "none after since")

	// A day-old request is dropped at the next kill.
	rdb := b.Client()
	require.NoError(t, rdb.ZAdd(ctx, b.Keys.Killed(), redis.Z{Score: float64(time.Now().Add(-broker.KillKeep - time.Minute).UnixMilli()), Member: "5:1"}).Err())
	require.NoError(t, b.Kill(ctx, broker.KillRequest{ID: 9, Attempt: 1}))
	n, err := rdb.ZCard(ctx, b.Keys.Killed()).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "7, 8 and 9")
}

// A Redis at maxmemory still delivers a kill to the workers listening,
// and says it could not keep it for later ones.
func TestKillOnAFullRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := broker.Open(ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: "t:"})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	kills, closeKills := b.Kills(ctx)
	defer closeKills()
	err = b.Kill(ctx, broker.KillRequest{ID: 3, Attempt: 1})
	require.ErrorIs(t, err, broker.ErrKillNotKept)
	select {
	case r := <-kills:
		require.Equal(t, broker.KillRequest{ID: 3, Attempt: 1}, r)
	case <-time.After(10 * time.Second):
		t.Fatal("the kill did not arrive")
	}
}
