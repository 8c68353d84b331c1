package worker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// TestOwnAlreadyAfterLostCommitReply covers a mark-running retry after a
// try whose COMMIT applied but whose reply was lost (MySQL restarted): the
// retry's compare-and-set fails, yet the task runs for this very worker and
// attempt, so it is won. Anything else stays a loser. (Two messages of one
// dispatch never reach the marker both: the second is dropped at launch.)
func TestOwnAlreadyAfterLostCommitReply(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	w := New(Config{ID: "w-1"}, env.Store, env.Broker)
	insert := func(status, attempt int, worker string) int64 {
		res := env.Exec(t, `INSERT INTO task_center (task_code, payload, status, attempt, worker_id) VALUES ('q', '{}', ?, ?, ?)`,
			status, attempt, worker)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		return id
	}
	mine := insert(2, 3, "w-1")
	other := insert(2, 3, "w-2")
	older := insert(2, 4, "w-1")
	waiting := insert(1, 3, "")

	fences := []store.Fence{{ID: mine, Attempt: 3}, {ID: mine, Attempt: 3}, {ID: other, Attempt: 3}, {ID: older, Attempt: 3}, {ID: waiting, Attempt: 3}}
	var ok []bool
	for _, f := range fences {
		ok = append(ok, w.mark.ownAlready(context.Background(), f))
	}
	require.Equal(t, []bool{true, true, false, false, false}, ok)
}
