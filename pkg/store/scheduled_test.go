package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// A run's scheduled time is its occurrence's: the due time of its first
// try, kept by a retry's backoff, a recovery, an operator's retry and a run
// now of a failed task; a new occurrence (a periodic task's next time, an
// enable) has its own.
func TestScheduledTimeKeptByRetries(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	id := insertRaw(t, b.env, "report", 5, task.Pending, -time.Minute)
	first := int64(b.env.Count(t, "SELECT CAST(UNIX_TIMESTAMP(plan_next_run_at) * 1000 AS SIGNED) FROM task_center WHERE id = ?", id))

	claim := func() *task.Message {
		t.Helper()
		msgs, err := st.TaskClaimDue(b.ctx, 10)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		return msgs[0]
	}
	move := func(tr store.Transition) {
		t.Helper()
		ok, err := st.TaskTransition(b.ctx, []store.Transition{tr})
		require.NoError(t, err)
		require.Len(t, ok, 1)
	}
	zero := time.Duration(0)

	m := claim()
	require.Zero(t, m.ScheduledUnixMS, "a first try: its due time is the occurrence's")
	require.Equal(t, first, m.Scheduled().UnixMilli())

	// A failure, retried at once (the backoff moves the due time).
	move(store.Transition{ID: id, Attempt: m.Attempt, From: task.Dispatched, To: task.Failed, Retry: store.RetryInc, NextIn: &zero})
	m = claim()
	require.Equal(t, first, m.ScheduledUnixMS, "a retry keeps the first try's time")
	require.Greater(t, m.DueUnixMS, first)

	// Found with a dead worker and recovered.
	move(store.Transition{ID: id, Attempt: m.Attempt, From: task.Dispatched, To: task.Pending, Crash: store.RetryInc, NextIn: &zero})
	m = claim()
	require.Equal(t, first, m.ScheduledUnixMS, "a recovered run keeps it")

	// Dead, then retried by an operator.
	move(store.Transition{ID: id, Attempt: m.Attempt, From: task.Dispatched, To: task.Dead})
	actor := store.TaskAction{Actor: store.Actor{User: "test"}}
	_, err := st.TaskRetry(b.ctx, actor, []int64{id})
	require.NoError(t, err)
	m = claim()
	require.Equal(t, first, m.ScheduledUnixMS, "an operator's retry keeps it")

	// Failed with a long backoff, then run now.
	hour := time.Hour
	move(store.Transition{ID: id, Attempt: m.Attempt, From: task.Dispatched, To: task.Failed, Retry: store.RetryInc, NextIn: &hour})
	_, err = st.TaskRunNow(b.ctx, actor, []int64{id})
	require.NoError(t, err)
	m = claim()
	require.Equal(t, first, m.ScheduledUnixMS, "run now of a failed run keeps it")

	// The next occurrence of a periodic task (NextAt) is its own.
	next := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	move(store.Transition{ID: id, Attempt: m.Attempt, From: task.Dispatched, To: task.Pending, Retry: store.RetryReset, NextAt: next})
	m = claim()
	require.Zero(t, m.ScheduledUnixMS, "a new occurrence")
	require.Equal(t, next.UnixMilli(), m.Scheduled().UnixMilli())
}

// A replace gives a waiting task a new due time: a new occurrence, which
// no longer has the scheduled time of the failed run it replaced.
func TestScheduledTimeResetByReplace(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	insert := func(mode store.ConflictMode) store.TaskInsertResult {
		t.Helper()
		rs, err := st.TaskInsert(b.ctx, []store.TaskInsertParams{{Code: "sync", Payload: json.RawMessage(`{}`), Priority: 5,
			Timeout: 60, UniqueKey: "k", OnConflict: store.Conflict{Mode: mode}}})
		require.NoError(t, err)
		return rs[0]
	}
	id := insert(store.Reject).ID
	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	hour := time.Hour
	_, err = st.TaskTransition(b.ctx, []store.Transition{{ID: id, Attempt: 1, From: task.Dispatched, To: task.Failed, Retry: store.RetryInc, NextIn: &hour}})
	require.NoError(t, err)
	require.Equal(t, 1, b.env.Count(t, "SELECT COUNT(*) FROM task_center WHERE id = ? AND scheduled_at IS NOT NULL", id))

	require.Equal(t, id, insert(store.Replace).ID)
	require.Equal(t, 1, b.env.Count(t, "SELECT COUNT(*) FROM task_center WHERE id = ? AND scheduled_at IS NULL", id))
}
