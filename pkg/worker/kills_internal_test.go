package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The attempts killed before they started are remembered for killedKeep,
// once each, and never more than killedMax of them.
func TestKilledSetBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	k := newKilledSet(func() time.Time { return now })
	k.add(1, 2)
	require.False(t, k.take(1, 1), "another attempt of the task")
	require.True(t, k.take(1, 2))
	require.False(t, k.take(1, 2), "taken once")

	k.add(3, 1)
	now = now.Add(killedKeep + time.Second)
	require.False(t, k.take(3, 1), "forgotten after killedKeep")

	for i := range killedMax + 100 {
		k.add(int64(i+10), 1)
	}
	require.LessOrEqual(t, len(k.at), killedMax)
	require.True(t, k.take(killedMax+109, 1), "the latest is kept")
}
