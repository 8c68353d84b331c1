package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// While a queue's window has room for a few tasks, a claim reads about
// what it can take instead of a whole batch of candidates; once room
// leaves none out, it reads a whole batch again.
func TestClaimReadsWhatTheRoomTakes(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at)
		SELECT 'busy', '{}', NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_700`)
	claim := func(room func(string) int) (claimed int, read int64) {
		t.Helper()
		before := st.Candidates()
		got, err := st.TaskClaimDueIn(b.ctx, 500, 0, room)
		require.NoError(t, err)
		return len(got), st.Candidates() - before
	}
	ten := func(string) int { return 10 }

	n, read := claim(ten)
	require.Equal(t, 10, n)
	require.EqualValues(t, 500, read, "the first claim reads a batch")

	n, read = claim(ten)
	require.Equal(t, 10, n)
	require.EqualValues(t, 50, read, "room for 10: the next claim reads twice that, at least 50")

	n, read = claim(nil)
	require.Equal(t, 50, n, "no bound: it takes all it read")
	require.EqualValues(t, 50, read)

	n, read = claim(nil)
	require.Equal(t, 500, n, "room left none out: a whole batch again")
	require.EqualValues(t, 500, read)
}
