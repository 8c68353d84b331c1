package startstop_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/startstop"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	var r startstop.Runner
	r.Stop() // without Start
	var passes atomic.Int32
	require.NoError(t, r.Start(context.Background(), func(ctx context.Context) {
		startstop.Every(ctx, time.Millisecond, func(context.Context) { passes.Add(1) })
	}))
	require.ErrorIs(t, r.Start(context.Background(), func(context.Context) {}), startstop.ErrStarted)
	require.Eventually(t, func() bool { return passes.Load() >= 3 }, 5*time.Second, time.Millisecond)
	r.Stop()
	n := passes.Load()
	time.Sleep(10 * time.Millisecond)
	require.Equal(t, n, passes.Load(), "no pass after Stop returned")
	r.Stop() // twice
}
