package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// Batches whose text adds up to more than the server's max_allowed_packet
// are written in as many statements as they need: one statement was
// refused by the server, which resets the connection, so that a burst of
// chatty tasks (http handlers returning web pages, 64 KiB of output each)
// had every result write fail, again at each retry, and a batch of large
// payloads could not be submitted at all.
func TestBatchesLargerThanAPacket(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st := env.Store
	packet := int(st.MaxAllowedPacket())

	// Submissions: twice a packet of payloads, in one call.
	payload := json.RawMessage(`"` + strings.Repeat("p", 900_000) + `"`)
	n := 2*packet/len(payload) + 1
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = store.TaskInsertParams{Code: "big", Payload: payload, Priority: 5, Timeout: 60}
	}
	res, err := st.TaskInsert(ctx, ps)
	require.NoError(t, err)
	seen := map[int64]bool{}
	for _, r := range res {
		require.False(t, seen[r.ID], "ids are distinct")
		seen[r.ID] = true
	}
	require.Equal(t, n, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'big' AND LENGTH(payload) = ?`, len(payload)))
	for _, id := range []int64{res[0].ID, res[n-1].ID} {
		got, err := st.TaskGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "big", got.Code, "the ids returned are the rows'")
	}

	// A batch of as many.
	ms := make([]store.TaskInsertParams, n)
	for i := range ms {
		ms[i] = store.TaskInsertParams{Code: "member", Payload: payload, Priority: 5, Timeout: 60}
	}
	br, err := st.BatchInsert(ctx, store.BatchInsertParams{Members: ms, Callback: store.BatchCallback{Code: "done", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	require.Len(t, br.MemberIDs, n)
	require.Equal(t, n, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE batch_id = ? AND LENGTH(payload) = ?`, br.ID, len(payload)))

	// Results of 60 KB with their runs, twice a packet of them, each
	// success creating a child whose payload is the result.
	result := strings.Repeat("r", 60_000)
	k := 2*packet/len(result) + 1
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, attempt, dispatched_at) SELECT 'chatty', '{}', 1, 1, NOW(3) FROM seq_1_to_`+itoa(k))
	then, err := task.EncodeChildren([]task.Child{{Code: "next", Priority: 5, Timeout: 60, MaxRetry: 3}})
	require.NoError(t, err)
	ids := env.Count(t, `SELECT MIN(id) FROM task_center WHERE task_code = 'chatty'`)
	ts := make([]store.Transition, k)
	for i := range ts {
		ts[i] = store.Transition{ID: int64(ids + i), Attempt: 1, From: task.Dispatched, To: task.Succeeded,
			SetResult: true, Result: result, Then: then,
			Run: &store.RunRecord{Code: "chatty", Queue: "chatty", WorkerID: "w", Outcome: task.OutcomeSucceeded, Result: result}}
	}
	applied, err := st.TaskTransition(ctx, ts)
	require.NoError(t, err)
	require.NotContains(t, applied, false)
	require.Equal(t, k, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'chatty' AND status = 3 AND last_result = ?`, result))
	require.Equal(t, k, env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_code = 'chatty' AND result = ?`, result))
	require.Equal(t, k, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'next' AND payload = ?`, `"`+result+`"`))
}
