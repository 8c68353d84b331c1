package tui

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/task"
)

// countingSource counts the reads that reach it; while gate is set, each
// read waits for it to close.
type countingSource struct {
	fakeSource
	overviews, tasks atomic.Int64
	started          chan struct{} // one value per read that began
	gate             chan struct{}
}

func (c *countingSource) Overview(ctx context.Context) (*Overview, error) {
	c.overviews.Add(1)
	if c.gate != nil {
		c.started <- struct{}{}
		select {
		case <-c.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.fakeSource.Overview(ctx)
}

func (c *countingSource) Tasks(ctx context.Context, q TaskQuery) ([]*task.Task, error) {
	c.tasks.Add(1)
	return c.fakeSource.Tasks(ctx, q)
}

type sharedBundle struct {
	src    *countingSource
	shared *Shared
	now    time.Time
}

func setupShared(t *testing.T) *sharedBundle {
	t.Helper()
	b := &sharedBundle{src: &countingSource{started: make(chan struct{}, 100)}, now: time.Unix(1_700_000_000, 0)}
	b.src.ov = &Overview{Stats: &stats.Stats{}, NodesUp: 3}
	b.shared = NewShared(b.src)
	b.shared.Now = func() time.Time { return b.now }
	return b
}

// Ten sessions refreshing at once run one read; it is served again until
// MaxAge, then read afresh; Invalidate (an action) reads afresh at once.
func TestSharedReadsOnce(t *testing.T) {
	t.Parallel()
	b := setupShared(t)
	b.src.gate = make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ov, err := b.shared.Overview(context.Background())
			require.NoError(t, err)
			require.Equal(t, 3, ov.NodesUp)
		})
	}
	<-b.src.started
	close(b.src.gate)
	wg.Wait()
	require.EqualValues(t, 1, b.src.overviews.Load(), "ten overlapping reads, one query")

	b.now = b.now.Add(SharedMaxAgeDefault / 2)
	_, err := b.shared.Overview(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, b.src.overviews.Load(), "still fresh")
	b.now = b.now.Add(SharedMaxAgeDefault / 2)
	_, err = b.shared.Overview(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 2, b.src.overviews.Load(), "MaxAge passed")
	b.shared.Invalidate()
	_, err = b.shared.Overview(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 3, b.src.overviews.Load(), "an action invalidates")

	// Different queries are different reads; the same one is kept.
	dead := task.Dead
	for range 3 {
		_, err = b.shared.Tasks(context.Background(), TaskQuery{Limit: 50})
		require.NoError(t, err)
		_, err = b.shared.Tasks(context.Background(), TaskQuery{Status: &dead, Limit: 50})
		require.NoError(t, err)
		_, err = b.shared.Tasks(context.Background(), TaskQuery{Status: &dead, Search: "boom", Limit: 50})
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, b.src.tasks.Load())
}

// The session that started a read ends (its context is cancelled): the
// others waiting for the same read still get its result.
func TestSharedReadOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	b := setupShared(t)
	b.src.gate = make(chan struct{})
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := b.shared.Overview(first)
		firstErr <- err
	}()
	<-b.src.started
	second := make(chan *Overview, 1)
	go func() {
		ov, err := b.shared.Overview(context.Background())
		require.NoError(t, err)
		second <- ov
	}()
	cancel()
	require.ErrorIs(t, <-firstErr, context.Canceled, "the ended session stops waiting")
	close(b.src.gate)
	require.Equal(t, 3, (<-second).NodesUp)
	require.EqualValues(t, 1, b.src.overviews.Load())
}

// A failed read is served again too: a task center that does not answer
// is not asked once per session.
func TestSharedKeepsErrors(t *testing.T) {
	t.Parallel()
	b := setupShared(t)
	down := errors.New("MySQL: connection refused")
	b.src.fail(down)
	for range 5 {
		_, err := b.shared.Overview(context.Background())
		require.ErrorIs(t, err, down)
	}
	require.EqualValues(t, 1, b.src.overviews.Load())
	b.src.fail(nil)
	b.now = b.now.Add(SharedMaxAgeDefault)
	ov, err := b.shared.Overview(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, ov.NodesUp)
}
