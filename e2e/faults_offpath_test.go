package e2e

// Faults off the happy path (FAULTS.md rows 21, 26, 27 and 30, a first
// start on a fresh Redis, and periodic tasks on hosts in several zones),
// against real `taskd run` processes.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
)

// holdRowLocks opens a connection of its own, as another team's report
// would, and holds SELECT ... FOR UPDATE on the rows of ids until release.
// One row at a time, so exactly those rows are locked.
func (b *faultBundle) holdRowLocks(t *testing.T, ids []int64) (release func()) {
	t.Helper()
	db, err := sql.Open("mysql", b.env.DSN)
	require.NoError(t, err)
	tx, err := db.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	for _, id := range ids {
		var got int64
		require.NoError(t, tx.QueryRowContext(b.ctx, `SELECT id FROM task_center WHERE id = ? FOR UPDATE`, id).Scan(&got))
	}
	done := false
	release = func() {
		if !done {
			done = true
			require.NoError(t, tx.Rollback())
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// submitDue creates n tasks of code "work" due in dueIn.
func (b *faultBundle) submitDue(t *testing.T, n int, dueIn time.Duration) []int64 {
	t.Helper()
	cl := producer.New(b.env.Store, b.env.Broker, producer.Options{Logger: quiet})
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i] = producer.Submission{Code: "work", Delay: dueIn, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	res, err := cl.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// TestFaultLockedRows is FAULTS.md row 30, the seed's incident 6.3:
// another transaction holds row locks on 10 of 60 due tasks. While it
// holds them, the other 50 are claimed, run and written back; once it lets
// go, the 10 run too, each once.
func TestFaultLockedRows(t *testing.T) {
	t.Parallel()
	b := faultSetup(t, "", `echo "$TASK_ID $TASK_ATTEMPT" >> %OUT%`)
	ids := b.submitDue(t, 60, 2*time.Second)
	locked := make([]int64, 0, 10)
	for i := 0; i < 60; i += 6 {
		locked = append(locked, ids[i])
	}
	release := b.holdRowLocks(t, locked)
	b.startNode(t, "node-a")

	// Several lock wait timeouts (5 s) pass while the 50 run.
	b.eventually(t, 40*time.Second, equal(50), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	require.Zero(t, b.count(t, fmt.Sprintf(`SELECT COUNT(*) FROM task_center WHERE status = 3 AND id IN (%s)`, joinIDs(locked))),
		"a locked task ran while its row was locked")
	release()

	b.eventually(t, 30*time.Second, equal(60), `SELECT COUNT(*) FROM task_center WHERE status = 3`)
	b.checkRecords(t, ids)
	require.Equal(t, 60, b.count(t, `SELECT COUNT(*) FROM task_run`), "a task ran twice")
}
