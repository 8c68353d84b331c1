package testenv

import (
	"context"
	"database/sql"
	"testing"
)

// HoldRowLocks opens a connection of its own to dsn, as another team's
// report would, and holds SELECT ... FOR UPDATE on the task_center rows of
// ids until release (or the test's end). One row at a time: on a small
// table an IN list is read by a scan, which would lock every row.
func HoldRowLocks(t testing.TB, dsn string, ids ...int64) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		db.Close()
		t.Fatalf("testenv: begin: %v", err)
	}
	for _, id := range ids {
		var got int64
		if err := tx.QueryRowContext(ctx, `SELECT id FROM task_center WHERE id = ? FOR UPDATE`, id).Scan(&got); err != nil {
			tx.Rollback()
			db.Close()
			t.Fatalf("testenv: lock task %d: %v", id, err)
		}
	}
	done := false
	release = func() {
		if !done {
			done = true
			tx.Rollback()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}
