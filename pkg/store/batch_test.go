package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Two copies of one dispatch in a batch (a push retried by the client):
// exactly one wins.
func TestMarkRunningDuplicateInBatch(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	id := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	msgs, err := st.TaskClaimDue(b.ctx, "c", 10)
	require.NoError(t, err)
	f := store.Fence{ID: id, Attempt: msgs[0].Attempt}
	ok, err := st.TaskMarkRunning(b.ctx, "w", []store.Fence{f, f, {ID: id, Attempt: f.Attempt + 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false}, ok)
}

// A batch holding a stale attempt and the live one of the same task is
// written in rounds; only the live one applies and has a run row.
func TestTransitionSameTaskTwiceInBatch(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	a := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	c := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 2 WHERE id IN (?, ?)`, a, c)
	run := func() *store.RunRecord {
		return &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded}
	}
	applied, err := st.TaskTransition(b.ctx, []store.Transition{
		{ID: a, Attempt: 1, From: task.Running, To: task.Succeeded, Run: run()}, // stale
		{ID: c, Attempt: 2, From: task.Running, To: task.Failed, Retry: store.RetryInc, Run: run()},
		{ID: a, Attempt: 2, From: task.Running, To: task.Succeeded, SetResult: true, Result: "ok", Run: run()},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, true}, applied)
	ta, err := st.TaskGet(b.ctx, a)
	require.NoError(t, err)
	require.Equal(t, task.Succeeded, ta.Status)
	require.Equal(t, "ok", ta.LastResult)
	tc, err := st.TaskGet(b.ctx, c)
	require.NoError(t, err)
	require.Equal(t, task.Failed, tc.Status)
	require.Equal(t, 1, tc.RetryCount)
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 2`, a))
}
