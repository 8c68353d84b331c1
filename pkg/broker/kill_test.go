package broker_test

import (
	"context"
	"testing"
	"time"

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
