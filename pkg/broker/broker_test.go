package broker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/testenv"
)

// A Redis that may evict keys would lose queued messages silently: taskd
// refuses it.
func TestCheckEviction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for policy, ok := range map[string]bool{"noeviction": true, "allkeys-lru": false, "volatile-ttl": false} {
		addr := testenv.PrivateRedis(t, 0, "--maxmemory", "100mb", "--maxmemory-policy", policy)
		b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: "t:"})
		require.NoError(t, err)
		err = b.CheckEviction(ctx)
		if ok {
			require.NoError(t, err, policy)
		} else {
			require.ErrorContains(t, err, "noeviction", policy)
		}
		b.Close()
	}
}
