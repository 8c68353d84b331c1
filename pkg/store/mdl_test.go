package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
)

// TestMetadataLockWaitFailsFast: a DBA's ALTER TABLE task_center waiting
// behind a transaction left open on the table (a report's long read)
// queues every statement on it behind its metadata lock, as a backup's
// FLUSH TABLES WITH READ LOCK does writes. A claim gives up after the
// session's lock wait timeout with the server's "Lock wait timeout
// exceeded", retried like a row lock wait, instead of hanging to the read
// timeout (or the server's lock_wait_timeout, a day) with no word logged.
func TestMetadataLockWaitFailsFast(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	insertRaw(t, b.env, "hello", 5, 0, 0)
	st, err := store.Open(ctx, b.env.DSN, store.Options{LockWaitTimeout: time.Second})
	require.NoError(t, err)
	defer st.Close()

	db, err := sql.Open("mysql", b.env.DSN)
	require.NoError(t, err)
	defer db.Close()
	holder, err := db.Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(ctx, "BEGIN")
	require.NoError(t, err)
	var n int
	require.NoError(t, holder.QueryRowContext(ctx, "SELECT COUNT(*) FROM task_center").Scan(&n))

	// The ALTER waits for the holder up to 20 s: longer than the claim
	// below may take, so a claim that waits for it fails the test.
	alter, err := db.Conn(ctx)
	require.NoError(t, err)
	defer alter.Close()
	_, err = alter.ExecContext(ctx, "SET SESSION lock_wait_timeout = 20")
	require.NoError(t, err)
	altered := make(chan error, 1)
	go func() {
		_, err := alter.ExecContext(ctx, "ALTER TABLE task_center ADD COLUMN dba_note INT NULL")
		altered <- err
	}()
	require.Eventually(t, func() bool {
		var waiting int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND info LIKE 'ALTER TABLE task_center%' AND state LIKE 'Waiting for table metadata lock%'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 10*time.Second, 20*time.Millisecond, "the ALTER waits for the holder's metadata lock")

	start := time.Now()
	_, err = st.TaskClaimDue(ctx, 10)
	took := time.Since(start)
	var me *mysql.MySQLError
	require.True(t, errors.As(err, &me), "the claim fails with the server's error, not a cut connection: %v", err)
	require.Equal(t, uint16(1205), me.Number, "lock wait timeout: %v", err)
	require.Less(t, took, 10*time.Second, "the claim gave up after about the lock wait timeout")
	require.False(t, store.IsRejected(err), "a lock wait is retried")

	_, err = holder.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, <-altered)
	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "claims go on once the ALTER is done")
}
