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
	time.Sleep(10 * time.Millisecond) // an absence: ten 1 ms intervals in which no pass may run
	require.Equal(t, n, passes.Load(), "no pass after Stop returned")
	r.Stop() // twice
}

// Cancel returns while the loop still winds down; a Stop after it waits.
func TestCancelDoesNotWait(t *testing.T) {
	t.Parallel()
	var r startstop.Runner
	r.Cancel() // without Start
	release, ended := make(chan struct{}), make(chan struct{})
	require.NoError(t, r.Start(context.Background(), func(ctx context.Context) {
		defer close(ended)
		<-ctx.Done()
		<-release
	}))
	r.Cancel()
	select {
	case <-ended:
		t.Fatal("the loop ended before it was released")
	default:
	}
	close(release)
	r.Stop()
	<-ended
}
