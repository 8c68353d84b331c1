package batch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/batch"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// TestRunOnce: a pass finishes the batches whose members all ended, once,
// and leaves the others open.
func TestRunOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	insert := func(n int) store.BatchInsertResult {
		ms := make([]store.TaskInsertParams, n)
		for i := range ms {
			ms[i] = store.TaskInsertParams{Code: "m", Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60}
		}
		res, err := env.Store.BatchInsert(ctx, store.BatchInsertParams{Members: ms,
			Callback: store.BatchCallback{Code: "cb", Priority: 5, Timeout: 60, Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		return res
	}
	ended, open := insert(3), insert(2)
	env.Exec(t, `UPDATE task_center SET status = 3 WHERE batch_id = ?`, ended.ID)
	env.Exec(t, `UPDATE task_center SET status = 6 WHERE id = ?`, open.MemberIDs[0]) // cancelled by an operator

	f := batch.New(batch.Config{}, env.Store)
	n, err := f.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'cb'`))

	// Started, it finishes the other once its last member ends.
	require.NoError(t, f.Start(ctx))
	defer f.Stop()
	env.Exec(t, `UPDATE task_center SET status = 5 WHERE id = ?`, open.MemberIDs[1])
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'cb'`) == 2
	}, 20*time.Second, 50*time.Millisecond)
	f.Stop()
	f.Stop()
}
