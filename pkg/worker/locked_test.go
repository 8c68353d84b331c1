package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// A dispatched task whose row another transaction holds does not hold back
// the tasks taken with it: they are marked running and run, and it starts
// once the lock is gone. A result whose row is held is written once the
// lock is gone, and the results written meanwhile are not held back.
func TestLockedRowsHoldBackOnlyThemselves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	b.reg.Register("wait", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "waited", nil
	}))
	var ids []int64
	for range 4 {
		ids = append(ids, b.submit(t, producer.Submission{Code: "ok"}))
	}
	slow := b.submit(t, producer.Submission{Code: "wait"})
	b.dispatchUntil(t, "dispatch", func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1`) == 5
	})
	unlock := testenv.HoldRowLocks(t, b.env.DSN, ids[1])
	b.startWorker(t, nil)

	// The running mark: three run while the fourth is held.
	succeeded := func(id int64) bool { return b.task(t, id).Status == task.Succeeded }
	require.Eventually(t, func() bool { return succeeded(ids[0]) && succeeded(ids[2]) && succeeded(ids[3]) },
		15*time.Second, 20*time.Millisecond)
	require.Equal(t, task.Dispatched, b.task(t, ids[1]).Status)
	unlock()
	require.Eventually(t, func() bool { return succeeded(ids[1]) }, 15*time.Second, 20*time.Millisecond)

	// The result write: the slow task ends while its row is held; a task
	// submitted meanwhile is written back.
	require.Eventually(t, func() bool { return b.task(t, slow).Status == task.Running }, 15*time.Second, 20*time.Millisecond)
	unlock = testenv.HoldRowLocks(t, b.env.DSN, slow)
	close(release)
	other := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "the other task", func() bool { return succeeded(other) })
	require.Equal(t, task.Running, b.task(t, slow).Status)
	unlock()
	require.Eventually(t, func() bool { return succeeded(slow) }, 15*time.Second, 20*time.Millisecond)

	for _, id := range append(ids, slow, other) {
		require.Equal(t, 1, b.task(t, id).Attempt, "task %d", id)
		require.Equal(t, []string{"succeeded"}, b.outcomes(t, id), "task %d", id)
	}
}
