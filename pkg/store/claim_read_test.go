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

// Large payloads: a claim reads about 16 MiB of them, by the mean of the
// last claim's, not a batch of 500 of 1 MiB each into memory at once; and
// where no mean foresees them (the first claim, or large ones after small
// ones) it keeps no more than reach 16 MiB of what it read.
func TestClaimReadsBoundedBytes(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	fat := func(n string) {
		b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at)
			SELECT 'fat', CONCAT('"', REPEAT('x', 1000000), '"'), NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_`+n)
	}
	claim := func() (claimed int, read int64) {
		t.Helper()
		before := st.Candidates()
		got, err := st.TaskClaimDueIn(b.ctx, 500, 0, nil)
		require.NoError(t, err)
		return len(got), st.Candidates() - before
	}
	fat("57")
	n, read := claim()
	require.Equal(t, 17, n, "the first claim knows no sizes yet: it keeps those that reach 16 MiB")
	require.EqualValues(t, 17, read)
	for range 2 {
		n, read = claim()
		require.Equal(t, 16, n, "16 MiB of payloads of 1 MB")
		require.EqualValues(t, 16, read)
	}
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) SELECT 'small', '{}', NOW(3) FROM seq_1_to_300`)
	n, _ = claim()
	require.Equal(t, 16, n, "the 8 fat ones left and 8 small ones")
	n, _ = claim()
	require.Equal(t, 33, n, "16 MiB over a mean of 500 KB a task")
	n, _ = claim()
	require.Equal(t, 259, n, "small ones: the rest of them")
	fat("40")
	n, read = claim()
	require.Equal(t, 17, n, "after a mean of small ones, large ones are still kept to 16 MiB")
	require.EqualValues(t, 17, read)
	n, _ = claim()
	require.Equal(t, 16, n)
}
