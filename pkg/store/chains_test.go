package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// running inserts p, claims and marks it running, and returns its message.
func (b *testBundle) running(t *testing.T, st *store.Store, p store.TaskInsertParams) *task.Message {
	t.Helper()
	res, err := st.TaskInsert(b.ctx, []store.TaskInsertParams{p})
	require.NoError(t, err)
	msgs, err := st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	for _, m := range msgs {
		if m.ID == res[0].ID {
			ok, err := st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: m.ID, Attempt: m.Attempt}})
			require.NoError(t, err)
			require.Equal(t, []bool{true}, ok)
			return m
		}
	}
	t.Fatalf("task %d was not claimed", res[0].ID)
	return nil
}

func oneOff(code string) store.TaskInsertParams {
	return store.TaskInsertParams{Code: code, Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60, MaxRetry: 3}
}

// succeed writes the success of m with result, carrying its children.
func succeed(m *task.Message, result string) store.Transition {
	return store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Running, To: task.Succeeded,
		SetResult: true, Result: result, Then: m.Then, Batch: m.Batch,
		Run: &store.RunRecord{Code: m.Code, Queue: m.Queue, Outcome: task.OutcomeSucceeded}}
}

// TestChildrenWithTheSuccess: the children exist once the parent's success
// is written, with its result as payload, and a second (stale) write of the
// same success creates none.
func TestChildrenWithTheSuccess(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	then, err := task.EncodeChildren([]task.Child{
		{Code: "email", Priority: 2, Timeout: 30, MaxRetry: 1, Then: []task.Child{{Code: "archive", Priority: 5, Timeout: 60, MaxRetry: 3}}},
		{Code: "notify", Queue: "fast", Priority: 5, Timeout: 60, MaxRetry: 3, DelayMS: 60000},
	})
	require.NoError(t, err)
	p := oneOff("report")
	p.Then = then
	m := b.running(t, st, p)
	require.JSONEq(t, string(then), string(m.Then), "the message carries the children")

	applied, err := st.TaskTransition(b.ctx, []store.Transition{succeed(m, `{"report": 7}`+"\n")})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)

	kids, err := st.TaskList(b.ctx, &store.TaskListParams{ParentID: m.ID})
	require.NoError(t, err)
	require.Len(t, kids, 2)
	byCode := map[string]*task.Task{}
	for _, k := range kids {
		byCode[k.Code] = k
		require.Equal(t, m.ID, k.ParentID)
		require.JSONEq(t, `{"report": 7}`, string(k.Payload))
		require.Equal(t, task.Pending, k.Status)
	}
	email, notify := byCode["email"], byCode["notify"]
	require.Equal(t, 2, email.Priority)
	require.Equal(t, 30, email.Timeout)
	require.Equal(t, 1, email.MaxRetry)
	require.Equal(t, []task.Child{{Code: "archive", Priority: 5, Timeout: 60, MaxRetry: 3}}, email.Then)
	require.Equal(t, store.ChildUniqueKey(m.ID, m.Attempt, 0), email.UniqueKey)
	require.Equal(t, "fast", notify.QueueName())
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at > NOW(3) + INTERVAL 50 SECOND`, notify.ID),
		"the delay counts from the parent's success")

	// The same success written again (a duplicate message, a worker that
	// ran it twice): the fence rejects it, and no child is added.
	applied, err = st.TaskTransition(b.ctx, []store.Transition{succeed(m, `{"report": 8}`)})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE parent_id = ?`, m.ID))
}

// TestChildPayload: a result that is not one JSON value reaches the child
// as a JSON string; an empty one as {}.
func TestChildPayload(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	then, err := task.EncodeChildren([]task.Child{{Code: "next", Priority: 5, Timeout: 60, MaxRetry: 3}})
	require.NoError(t, err)
	for result, want := range map[string]string{
		"/reports/7.pdf\n": `"/reports/7.pdf\n"`,
		"":                 `{}`,
		`[1, 2]`:           `[1, 2]`,
		`{"a":1} trailing`: `"{\"a\":1} trailing"`,
	} {
		p := oneOff("parent")
		p.Then = then
		m := b.running(t, st, p)
		_, err := st.TaskTransition(b.ctx, []store.Transition{succeed(m, result)})
		require.NoError(t, err)
		kids, err := st.TaskList(b.ctx, &store.TaskListParams{ParentID: m.ID})
		require.NoError(t, err)
		require.Len(t, kids, 1)
		require.JSONEq(t, want, string(kids[0].Payload), "result %q", result)
	}
}

// TestChildOfACutResult: a parent's result cut to the output limit is no
// payload: its child is dead from the start, saying why, and its own
// children are never made.
func TestChildOfACutResult(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	then, err := task.EncodeChildren([]task.Child{{Code: "load", Priority: 5, Timeout: 60, MaxRetry: 3,
		Then: []task.Child{{Code: "report", Priority: 5, Timeout: 60, MaxRetry: 3}}}})
	require.NoError(t, err)
	p := oneOff("extract")
	p.Then = then
	m := b.running(t, st, p)
	applied, err := st.TaskTransition(b.ctx, []store.Transition{succeed(m, "…(truncated 5177361 bytes)\n\"rows\": [3, 4]}")})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied, "the parent's success stands")
	kids, err := st.TaskList(b.ctx, &store.TaskListParams{ParentID: m.ID})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	k, err := st.TaskGet(b.ctx, kids[0].ID)
	require.NoError(t, err)
	require.Equal(t, task.Dead, k.Status)
	require.Contains(t, k.LastResult, "lost its first 5177361 bytes to worker.output_limit")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND finished_at IS NOT NULL`, k.ID))
	claimed, err := st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	require.Empty(t, claimed, "a dead child is not run")
}

// TestChildrenOfAPeriodicTask: each successful occurrence has its own
// children; the next attempt's success adds the next set.
func TestChildrenOfAPeriodicTask(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	then, err := task.EncodeChildren([]task.Child{{Code: "after", Priority: 5, Timeout: 60, MaxRetry: 3}})
	require.NoError(t, err)
	p := oneOff("hourly")
	p.Type, p.CronExpr, p.Then = task.Periodic, "@hourly", then
	m := b.running(t, st, p)
	next := time.Duration(0)
	tr := succeed(m, "ok")
	tr.To, tr.NextIn = task.Pending, &next
	_, err = st.TaskTransition(b.ctx, []store.Transition{tr})
	require.NoError(t, err)

	msgs, err := st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	var again *task.Message
	for _, mm := range msgs {
		if mm.ID == m.ID {
			again = mm
		}
	}
	require.NotNil(t, again)
	_, err = st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: again.ID, Attempt: again.Attempt}})
	require.NoError(t, err)
	tr = succeed(again, "ok")
	tr.To, tr.NextIn = task.Pending, &next
	_, err = st.TaskTransition(b.ctx, []store.Transition{tr})
	require.NoError(t, err)
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE parent_id = ? AND task_code = 'after'`, m.ID))
}
