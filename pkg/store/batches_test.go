package store_test

import (
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func (b *testBundle) batch(t *testing.T, st *store.Store, n int, payload string) store.BatchInsertResult {
	t.Helper()
	ms := make([]store.TaskInsertParams, n)
	for i := range ms {
		ms[i] = oneOff("member")
	}
	res, err := st.BatchInsert(b.ctx, store.BatchInsertParams{Members: ms, Callback: store.BatchCallback{
		Code: "done", Priority: 3, Timeout: 60, MaxRetry: 2, Payload: json.RawMessage(payload)}})
	require.NoError(t, err)
	require.Len(t, res.MemberIDs, n)
	return res
}

// callback returns batch id's callback tasks.
func (b *testBundle) callbacks(t *testing.T, st *store.Store, id int64) []*task.Task {
	t.Helper()
	ts, err := st.TaskList(b.ctx, &store.TaskListParams{Code: "done"})
	require.NoError(t, err)
	var out []*task.Task
	for _, tk := range ts {
		if tk.UniqueKey == store.BatchCallbackKey(id) {
			out = append(out, tk)
		}
	}
	return out
}

// TestBatchFinish: no callback while a member has not ended; once all
// have, exactly one, with the counts and the callback's own payload.
func TestBatchFinish(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	res := b.batch(t, st, 4, `{"report":"may"}`)
	m := res.MemberIDs
	require.Equal(t, 4, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE batch_id = ?`, res.ID))

	set := func(id int64, s task.Status) {
		b.env.Exec(t, `UPDATE task_center SET status = ? WHERE id = ?`, int(s), id)
	}
	set(m[0], task.Succeeded)
	set(m[1], task.Dead)
	set(m[2], task.Failed) // a retry is due: not ended
	set(m[3], task.Cancelled)
	done, err := st.BatchFinish(b.ctx, []int64{res.ID})
	require.NoError(t, err)
	require.Empty(t, done)
	ids, err := st.BatchListFinishable(b.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, ids)
	bt, err := st.BatchGet(b.ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, store.BatchCounts{ID: res.ID, Total: 4, Succeeded: 1, Dead: 1, Cancelled: 1}, bt.BatchCounts)
	require.Equal(t, 1, bt.Open)
	require.Nil(t, bt.FinishedAt)

	set(m[2], task.Succeeded)
	ids, err = st.BatchListFinishable(b.ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{res.ID}, ids)
	done, err = st.BatchFinish(b.ctx, ids)
	require.NoError(t, err)
	require.Equal(t, []int64{res.ID}, done)

	cbs := b.callbacks(t, st, res.ID)
	require.Len(t, cbs, 1)
	cb := cbs[0]
	require.JSONEq(t, `{"report":"may","batch":{"id":`+strconv.FormatInt(res.ID, 10)+`,"total":4,"succeeded":2,"dead":1,"cancelled":1}}`, string(cb.Payload))
	require.Equal(t, 3, cb.Priority)
	require.Equal(t, 2, cb.MaxRetry)
	require.Equal(t, task.Pending, cb.Status)

	bt, err = st.BatchGet(b.ctx, res.ID)
	require.NoError(t, err)
	require.NotNil(t, bt.FinishedAt)
	require.Equal(t, cb.ID, bt.CallbackID)
	require.Equal(t, store.BatchCounts{ID: res.ID, Total: 4, Succeeded: 2, Dead: 1, Cancelled: 1}, bt.BatchCounts)

	// Finished is final: a retried member changes nothing, a second finish
	// creates nothing.
	set(m[1], task.Pending)
	set(m[1], task.Succeeded)
	done, err = st.BatchFinish(b.ctx, []int64{res.ID})
	require.NoError(t, err)
	require.Empty(t, done)
	require.Len(t, b.callbacks(t, st, res.ID), 1)
	_, err = st.BatchGet(b.ctx, res.ID+1000)
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
}

// TestBatchFinishRace: nodes finishing one batch at once create one
// callback.
func TestBatchFinishRace(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	res := b.batch(t, st, 3, `{}`)
	b.env.Exec(t, `UPDATE task_center SET status = 3 WHERE batch_id = ?`, res.ID)
	var wg sync.WaitGroup
	finished := make(chan int64, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := st.BatchFinish(b.ctx, []int64{res.ID})
			require.NoError(t, err)
			for _, id := range done {
				finished <- id
			}
		}()
	}
	wg.Wait()
	close(finished)
	n := 0
	for range finished {
		n++
	}
	require.Equal(t, 1, n)
	require.Len(t, b.callbacks(t, st, res.ID), 1)
}

// TestBatchDeletedMembers: members deleted before they ran count as
// cancelled, so their batch still finishes.
func TestBatchDeletedMembers(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	res := b.batch(t, st, 3, `{}`)
	_, err := st.TaskDeleteUnheld(b.ctx, store.TaskAction{Actor: store.Actor{User: "test"}}, res.MemberIDs[:2], false)
	require.NoError(t, err)
	b.env.Exec(t, `UPDATE task_center SET status = 5 WHERE id = ?`, res.MemberIDs[2])
	done, err := st.BatchFinish(b.ctx, []int64{res.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{res.ID}, done)
	cbs := b.callbacks(t, st, res.ID)
	require.Len(t, cbs, 1)
	var p struct{ Batch store.BatchCounts }
	require.NoError(t, json.Unmarshal(cbs[0].Payload, &p))
	require.Equal(t, store.BatchCounts{ID: res.ID, Total: 3, Dead: 1, Cancelled: 2}, p.Batch)
}

// TestBatchFinishedByTheLastResult: the result write that ends the last
// member creates the callback, with no finisher pass.
func TestBatchFinishedByTheLastResult(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	res := b.batch(t, st, 2, `{}`)
	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	var ts []store.Transition
	for _, m := range msgs {
		require.Equal(t, res.ID, m.Batch, "the message names its batch")
		ok, err := st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: m.ID, Attempt: m.Attempt}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, ok)
		ts = append(ts, succeed(m, "ok"))
	}
	_, err = st.TaskTransition(b.ctx, ts[:1])
	require.NoError(t, err)
	require.Empty(t, b.callbacks(t, st, res.ID))
	_, err = st.TaskTransition(b.ctx, ts[1:])
	require.NoError(t, err)
	require.Len(t, b.callbacks(t, st, res.ID), 1)
}

// TestBatchInsertInvalid: an empty batch is bad input, and nothing is
// written.
func TestBatchInsertInvalid(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	_, err := st.BatchInsert(b.ctx, store.BatchInsertParams{Callback: store.BatchCallback{Code: "done", Payload: json.RawMessage(`{}`)}})
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_batch`))
}

// A batch whose callback the task center refuses (a task of the
// callback's code holds its unique key) does not hold back the batches
// after it: each is finished, and the refused one is named.
func TestBatchRefusedCallbackHoldsBackNoOther(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	first, second := b.batch(t, st, 1, `{}`), b.batch(t, st, 1, `{}`)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, unique_key) VALUES ('done', '{}', ?)`, store.BatchCallbackKey(first.ID))
	b.env.Exec(t, `UPDATE task_center SET status = 3 WHERE batch_id IN (?, ?)`, first.ID, second.ID)
	ids, err := st.BatchListFinishable(b.ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{first.ID, second.ID}, ids)
	done, err := st.BatchFinish(b.ctx, ids)
	require.ErrorContains(t, err, "finish batch "+strconv.FormatInt(first.ID, 10))
	require.Equal(t, []int64{second.ID}, done)
	require.Len(t, b.callbacks(t, st, second.ID), 1)
}
