package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
)

// The attempts killed before they started are remembered for
// broker.KillKeep from their kill, once each, and never more than
// broker.KillMax of them.
func TestKilledSetBounds(t *testing.T) {
	now := time.Unix(100000, 0)
	k := newKilledSet(func() time.Time { return now })
	k.add(1, 2, now)
	require.False(t, k.take(1, 1), "another attempt of the task")
	require.True(t, k.take(1, 2))
	require.False(t, k.take(1, 2), "taken once")

	k.add(3, 1, now)
	k.add(4, 1, now.Add(-broker.KillKeep-time.Second))
	require.False(t, k.take(4, 1), "killed longer ago than KillKeep")
	now = now.Add(broker.KillKeep + time.Second)
	require.False(t, k.take(3, 1), "forgotten after KillKeep")

	for i := range broker.KillMax + 100 {
		k.add(int64(i+10), 1, now)
	}
	require.LessOrEqual(t, len(k.at), broker.KillMax)
	require.True(t, k.take(broker.KillMax+109, 1), "the latest is kept")
}
