package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
)

func (b *testBundle) submitMany(t *testing.T, code string, n, priority int) {
	t.Helper()
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i] = producer.Submission{Code: code, Priority: &priority}
	}
	_, err := b.prod.SubmitBatch(context.Background(), subs)
	require.NoError(t, err)
}

// Reshard 4 -> 8 -> 2 while 10,000 queued messages are consumed: every
// task succeeds exactly once, workers follow without a restart and take
// what the retired shards hold.
func TestReshardUnderLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 10000
	_, err := b.ops.Reshard(ctx, "rq", 4)
	require.NoError(t, err)
	b.submitMany(t, "rq", n, task.DefaultPriority)
	rc := &runCounter{runs: map[int64]int{}}
	b.runFleet(t, "rq", 16, rc.handler(0))

	require.Eventually(t, func() bool { return rc.count() >= n/5 }, time.Minute, 5*time.Millisecond)
	_, err = b.ops.Reshard(ctx, "rq", 8)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rc.count() >= n/2 }, time.Minute, 5*time.Millisecond)
	c, err := b.ops.Reshard(ctx, "rq", 2)
	require.NoError(t, err)
	require.Equal(t, 8, c.Queue.After.Span, "the retired shards are still consumed")

	require.Eventually(t, func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`) == n
	}, 2*time.Minute, 50*time.Millisecond)
	rc.mu.Lock()
	require.Len(t, rc.runs, n)
	for id, runs := range rc.runs {
		require.Equal(t, 1, runs, "task %d", id)
	}
	rc.mu.Unlock()
	require.Equal(t, n, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE outcome = 'succeeded'`))
	ql, err := b.env.Broker.QueueLen(ctx, "rq")
	require.NoError(t, err)
	require.Zero(t, ql)
	left, err := b.env.Broker.RetiredLeft(ctx, "rq", 2, 8)
	require.NoError(t, err)
	require.Zero(t, left, "the workers emptied the retired shards")
}

// A priority-0 task does not wait behind 10,000 queued priority-9
// messages: it is taken from its lane first.
func TestPriorityLaneJumpsBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 10000
	b.window = n + 1 // the whole backlog queued in Redis, and room for the urgent task
	b.submitMany(t, "lane", n, 9)
	var started = make(chan int64, 1)
	var urgent int64
	rc := &runCounter{runs: map[int64]int{}}
	h := handler.Func(func(ctx context.Context, r *handler.Request) (string, error) {
		if r.ID == urgent {
			started <- int64(rc.count())
		}
		return rc.handler(time.Millisecond)(ctx, r)
	})
	// The backlog is queued in Redis before anything consumes it.
	cache := b.runFleet(t, "other", 1, rc.handler(0))
	_ = cache
	require.Eventually(t, func() bool {
		l, err := b.env.Broker.QueueLen(ctx, "lane")
		return err == nil && l == n
	}, time.Minute, 20*time.Millisecond)
	p := 0
	r, err := b.prod.Submit(ctx, producer.Submission{Code: "lane", Priority: &p})
	require.NoError(t, err)
	urgent = r.ID
	require.Eventually(t, func() bool {
		tk, err := b.env.Store.TaskGet(ctx, urgent)
		return err == nil && tk.Status == task.Dispatched
	}, 10*time.Second, 10*time.Millisecond)
	b.startWorker(t, "lane", 2, h)
	select {
	case before := <-started:
		require.Less(t, before, int64(100), "the urgent task started before the backlog drained")
	case <-time.After(30 * time.Second):
		t.Fatal("the urgent task did not start")
	}
}
