package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The hot writes rewrite a task's row in place (migration 12): a claim, and
// the result of an attempt that ended before its running mark, leave every
// record of the primary key its size, so InnoDB neither moves a record
// nor reorganizes its page. The buffer pool reports the bytes of each
// page's records: they must not change.
func TestHotWritesInPlace(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	b.env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) SELECT 'x', 'q', '{"n":1}' FROM seq_1_to_300`)
	before := primaryBytes(t, b.env)

	msgs, err := st.TaskClaimDue(b.ctx, 500)
	require.NoError(t, err)
	require.Len(t, msgs, 300)
	require.Equal(t, before, primaryBytes(t, b.env), "the claim moved records")

	ts := make([]store.Transition, len(msgs))
	for i, m := range msgs {
		ts[i] = store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched, To: task.Succeeded,
			SetResult: true, StartedAt: time.Now().Add(-time.Millisecond),
			Run: &store.RunRecord{Code: m.Code, Queue: m.Queue, WorkerID: "vm-12-4242-7b2c9e", Node: "vm-12",
				Outcome: task.OutcomeSucceeded, Duration: time.Millisecond}}
	}
	applied, err := st.TaskTransition(b.ctx, ts)
	require.NoError(t, err)
	require.NotContains(t, applied, false)
	require.Equal(t, before, primaryBytes(t, b.env), "the results moved records")
	require.Equal(t, 300, b.env.Count(t, `SELECT COUNT(*) FROM task_center
		WHERE status = 3 AND worker_id = '' AND last_result = '' AND started_at IS NOT NULL AND finished_at IS NOT NULL`))
	require.Equal(t, 300, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE worker_id = 'vm-12-4242-7b2c9e'`))
}

// primaryBytes is the bytes of the records on the pages of the task
// center's primary key, as the buffer pool holds them (a table this small
// stays in it).
func primaryBytes(t *testing.T, env *testenv.Env) int64 {
	t.Helper()
	var n int64
	require.NoError(t, env.Store.DB().QueryRow(`SELECT COALESCE(SUM(DATA_SIZE), 0) FROM information_schema.INNODB_BUFFER_PAGE
		WHERE TABLE_NAME = CONCAT('`+"`"+`', DATABASE(), '`+"`"+`.`+"`"+`task_center`+"`"+`') AND INDEX_NAME = 'PRIMARY'`).Scan(&n))
	require.NotZero(t, n, "the primary key's pages are in the buffer pool")
	return n
}
