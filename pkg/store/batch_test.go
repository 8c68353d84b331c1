package store_test

import (
	"slices"
	"strconv"
	"strings"
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
	msgs, err := st.TaskClaimDue(b.ctx, 10)
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

// A transition whose fence matches only once an earlier entry of the same
// batch has applied is not applied: every entry is fenced on the row as it
// was before the batch, as in one statement.
func TestTransitionRepeatSeesTheRowBefore(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	id := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1 WHERE id = ?`, id)
	applied, err := st.TaskTransition(b.ctx, []store.Transition{
		{ID: id, Attempt: 1, From: task.Running, To: task.Failed, Retry: store.RetryInc},
		{ID: id, Attempt: 1, From: task.Failed, To: task.Dead},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, applied)
	got, err := st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Failed, got.Status)
	require.Equal(t, 1, got.RetryCount)
}

// A batch larger than one statement carries is written whole, with a
// repeated entry in a later statement than its first.
func TestBatchLargerThanAStatement(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	n := store.MaxBatchRows + 7
	q := strings.Repeat(`('x', '{}', 0, NOW(3) - INTERVAL 1 SECOND), `, n)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, status, plan_next_run_at) VALUES `+strings.TrimSuffix(q, ", "))
	msgs, err := st.TaskClaimDue(b.ctx, n)
	require.NoError(t, err)
	require.Len(t, msgs, n)
	var fences []store.Fence
	for _, m := range msgs {
		require.Equal(t, 1, m.Attempt)
		fences = append(fences, store.Fence{ID: m.ID, Attempt: m.Attempt})
	}
	ok, err := st.TaskMarkRunning(b.ctx, "w", append([]store.Fence{fences[n-1]}, fences...))
	require.NoError(t, err)
	require.Equal(t, n, len(slices.DeleteFunc(ok, func(ok bool) bool { return !ok })))
	var ts []store.Transition
	for _, f := range fences {
		ts = append(ts, store.Transition{ID: f.ID, Attempt: f.Attempt, From: task.Running, To: task.Succeeded,
			SetResult: true, Result: "r" + strconv.FormatInt(f.ID, 10)})
	}
	applied, err := st.TaskTransition(b.ctx, append(ts, ts[0]))
	require.NoError(t, err)
	require.Equal(t, n, len(slices.DeleteFunc(applied, func(ok bool) bool { return !ok })))
	require.False(t, applied[n])
	require.Equal(t, n, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3 AND last_result = CONCAT('r', id)`))
}

// The two ways a batched write renders a column (one value when the
// entries agree, a lookup by id when they differ) write the same: a claim,
// a mark-running batch with a duplicate, and transitions carrying text, an
// instant, a delay and NULLs.
func TestBatchFormsAgree(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"constants", "per_row"} {
		t.Run(form, func(t *testing.T) {
			st, b := setup(t)
			if form == "per_row" {
				st.UsePerRowColumns()
			}
			var ids []int64
			for range 3 {
				ids = append(ids, insertRaw(t, b.env, "x", 5, task.Pending, -time.Second))
			}
			msgs, err := st.TaskClaimDue(b.ctx, 10)
			require.NoError(t, err)
			require.Len(t, msgs, 3)
			fences := []store.Fence{}
			for _, m := range msgs {
				require.Equal(t, 1, m.Attempt)
				fences = append(fences, store.Fence{ID: m.ID, Attempt: m.Attempt})
			}
			ok, err := st.TaskMarkRunning(b.ctx, "w", append(fences, fences[0]))
			require.NoError(t, err)
			require.Equal(t, []bool{true, true, true, false}, ok)

			at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
			later := 90 * time.Second
			result := "quote ' \" back\\slash \u00e9 \U0001F600 <tag> & {json}"
			applied, err := st.TaskTransition(b.ctx, []store.Transition{
				{ID: ids[0], Attempt: 1, From: task.Running, To: task.Succeeded, SetResult: true, Result: result,
					Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded, Result: result}},
				{ID: ids[1], Attempt: 1, From: task.Running, To: task.Failed, Retry: store.RetryInc, NextAt: at},
				{ID: ids[2], Attempt: 1, From: task.Running, To: task.Pending, Crash: store.RetryInc, NextIn: &later},
			})
			require.NoError(t, err)
			require.Equal(t, []bool{true, true, true}, applied)

			t0, err := st.TaskGet(b.ctx, ids[0])
			require.NoError(t, err)
			require.Equal(t, task.Succeeded, t0.Status)
			require.Equal(t, result, t0.LastResult)
			require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND result = ?`, ids[0], result))
			t1, err := st.TaskGet(b.ctx, ids[1])
			require.NoError(t, err)
			require.Equal(t, task.Failed, t1.Status)
			require.Equal(t, 1, t1.RetryCount)
			require.True(t, t1.PlanNextRun.Equal(at), "next run %s, want %s", t1.PlanNextRun, at)
			t2, err := st.TaskGet(b.ctx, ids[2])
			require.NoError(t, err)
			require.Equal(t, task.Pending, t2.Status)
			require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND crash_count = 1
				AND plan_next_run_at BETWEEN NOW(3) + INTERVAL 80 SECOND AND NOW(3) + INTERVAL 91 SECOND`, ids[2]))
		})
	}
}

// A batch whose entries repeat values in runs, with rows of other tasks
// between its ids, writes each row its own values and leaves the rows
// between alone (the lookups list only where a run starts).
func TestBatchRunsOfValues(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	starts := []time.Duration{0, 0, 0, 5, 5, 0, 0, 9, 9, 9}
	results := []string{"a", "a", "b", "b", "b", "a", "c", "c", "a", "a"}
	var ids, others []int64
	for range starts {
		ids = append(ids, insertRaw(t, b.env, "x", 5, task.Pending, -time.Second))
		others = append(others, insertRaw(t, b.env, "y", 5, task.Pending, time.Hour))
	}
	b.env.Exec(t, `UPDATE task_center SET status = 1, attempt = 1, dispatched_at = NOW(3) - INTERVAL 2 MINUTE WHERE task_code = 'x'`)
	var ts []store.Transition
	for i, id := range ids {
		ts = append(ts, store.Transition{ID: id, Attempt: 1, From: task.Dispatched, To: task.Succeeded, SetResult: true, Result: results[i],
			StartedAt: base.Add(starts[i] * time.Millisecond),
			Run:       &store.RunRecord{Code: "x", Queue: "x", WorkerID: "w", Outcome: task.OutcomeSucceeded, Result: results[i]}})
	}
	applied, err := st.TaskTransition(b.ctx, ts)
	require.NoError(t, err)
	require.Equal(t, len(ids), len(slices.DeleteFunc(applied, func(ok bool) bool { return !ok })))
	for i, id := range ids {
		tk, err := st.TaskGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, task.Succeeded, tk.Status, "task %d", i)
		require.Equal(t, results[i], tk.LastResult, "task %d", i)
		want := base.Add(starts[i] * time.Millisecond)
		require.True(t, tk.StartedAt != nil && tk.StartedAt.Equal(want), "task %d started %v, want %v", i, tk.StartedAt, want)
		require.True(t, tk.LastRunAt != nil && tk.LastRunAt.Equal(want), "task %d last run %v, want %v", i, tk.LastRunAt, want)
	}
	require.Equal(t, len(others), b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'y' AND status = 0
		AND started_at IS NULL AND last_result IS NULL`))
}

// Values written into a batch's text and values sent as arguments come
// back as written: plain ones, and ones with quotes, backslashes,
// question marks, newlines and UTF-8.
func TestTransitionValuesRoundTrip(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	values := []string{"plain-1.2:x_y z", `it's "done"? \ 100%`, "line\nnext\x1a", "日本語 ✓", ""}
	var ts []store.Transition
	for _, v := range values {
		id := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
		b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1 WHERE id = ?`, id)
		ts = append(ts, store.Transition{ID: id, Attempt: 1, From: task.Running, To: task.Succeeded, SetResult: true, Result: v,
			Run: &store.RunRecord{Code: "x", Queue: "x", WorkerID: "w?" + v, Node: v, Outcome: task.OutcomeSucceeded, Result: v}})
	}
	applied, err := st.TaskTransition(b.ctx, ts)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true}, applied)
	for i, v := range values {
		tk, err := st.TaskGet(b.ctx, ts[i].ID)
		require.NoError(t, err)
		require.Equal(t, v, tk.LastResult)
		runs, err := st.RunList(b.ctx, ts[i].ID, 10)
		require.NoError(t, err)
		require.Len(t, runs, 1)
		require.Equal(t, v, runs[0].Result)
		require.Equal(t, v, runs[0].Node)
		require.Equal(t, "w?"+v, runs[0].WorkerID)
	}
}
