package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/task"
)

// A claim ahead takes the tasks due within its lead, in due order, and
// leaves later ones; a claim without one takes only what is due.
func TestClaimAhead(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	now := insertRaw(t, b.env, "hello", 5, task.Pending, -time.Second)
	soon := insertRaw(t, b.env, "hello", 5, task.Pending, 2*time.Second)
	failed := insertRaw(t, b.env, "hello", 5, task.Failed, 3*time.Second)
	insertRaw(t, b.env, "hello", 5, task.Pending, time.Hour)

	got, err := st.TaskClaimDueIn(b.ctx, 10, 0, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{now}, ids(got))

	got, err = st.TaskClaimDueIn(b.ctx, 10, time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{soon, failed}, ids(got))
	for _, m := range got {
		require.Equal(t, 1, m.Attempt)
		require.Greater(t, m.DueUnixMS, m.DispatchedUnixMS, "task %d is claimed before it is due", m.ID)
	}
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center
		WHERE status = 1 AND plan_next_run_at > NOW(3)`))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`), "the task due in an hour")
}
