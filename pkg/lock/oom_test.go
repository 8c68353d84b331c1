package lock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/testenv"
)

// fillRedis fills a Redis at maxmemory (noeviction) with another
// application's keys until it refuses writes.
func fillRedis(t *testing.T, rdb *redis.Client) {
	t.Helper()
	blob := strings.Repeat("x", 16<<10)
	for i := 0; ; i++ {
		err := rdb.RPush(context.Background(), "other-app:blobs", blob).Err()
		if err != nil {
			require.ErrorContains(t, err, "OOM")
			return
		}
		require.Less(t, i, 100000, "Redis never refused a write")
	}
}

// A full Redis (maxmemory, noeviction) does not stop a singular duty from
// moving between nodes: acquire, renew and release still work, as a lock
// costs a few hundred bytes. Without allow-oom, acquire's first write is
// refused with OOM.
func TestRedisLockAtMaxmemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	fillRedis(t, rdb)
	l := NewRedis(rdb, "t:")

	for range 2 { // a fresh name, then one whose token sequence exists
		// A minute: a lease of MinTTL could lapse before the second try
		// on a loaded machine, and that try would rightly win.
		lease, err := l.Acquire(ctx, "alerts", time.Minute)
		require.NoError(t, err)
		_, err = l.Acquire(ctx, "alerts", MinTTL)
		require.ErrorIs(t, err, ErrNotAcquired)
		ok, err := l.renew(ctx, "alerts", lease.owner, time.Minute, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, lease.Release(ctx))
	}
	require.ErrorContains(t, rdb.Set(ctx, "still-full", "x", 0).Err(), "OOM", "Redis is still at maxmemory")
}
