package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// keyRows reads every task's id and keys, as bytes.
func keyRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT CONCAT_WS(' ', id, task_code, status, COALESCE(HEX(unique_key), '-'), COALESCE(HEX(released_key), '-'))
		FROM task_center ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// Migration 13 on a task center of migration 12 with keyed rows: every
// row and key stays as it was, the keys compare exactly from then on,
// and the same key still finds its task.
func TestExactKeysMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_keys")
	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	migs, err := store.Migrations()
	require.NoError(t, err)
	var prev []store.Migration
	for _, m := range migs {
		if m.Version <= 12 {
			prev = append(prev, m)
		}
	}
	_, err = st.Migrate(ctx, store.MigrateParams{Migrations: prev})
	require.NoError(t, err)

	// Keys the old collation held apart (one of each look-alike pair),
	// one with a trailing space as a seed INSERT may write it, an ended
	// task's released key, rows without a key, and a thousand more.
	for _, q := range []string{
		`INSERT INTO task_center (task_code, payload, unique_key, status) VALUES
			('order', '{}', 'order-abc', 0), ('order', '{}', 'gift-🐶', 0), ('order', '{}', '名-𠮷', 4),
			('order', '{}', 'café', 2), ('order', '{}', 'seed-key ', 0), ('sync', '{}', 'order-abc', 0),
			('order', '{}', NULL, 0)`,
		`INSERT INTO task_center (task_code, payload, unique_key, released_key, status) VALUES
			('order', '{}', NULL, 'done-Ω', 3), ('order', '{}', 'done-Ω', NULL, 0)`,
		`INSERT INTO task_center (task_code, payload, unique_key, status)
			SELECT 'bulk', '{}', IF(seq % 3 = 0, NULL, CONCAT('Key-', seq)), seq % 7 FROM seq_1_to_1000`,
	} {
		_, err := raw.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	before := keyRows(t, raw)

	res, err := st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Equal(t, 13, res.Applied[0], "applied %v", res.Applied)
	require.Equal(t, before, keyRows(t, raw), "every row and key as it was")
	for _, col := range []string{"unique_key", "released_key"} {
		var collation, nullable string
		var length int
		require.NoError(t, raw.QueryRowContext(ctx, `SELECT COLLATION_NAME, IS_NULLABLE, CHARACTER_MAXIMUM_LENGTH
			FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND COLUMN_NAME = ?`,
			col).Scan(&collation, &nullable, &length))
		require.Equal(t, []any{"utf8mb4_bin", "YES", 191}, []any{collation, nullable, length}, col)
	}

	// Run again (its record lost): nothing changes.
	_, err = raw.ExecContext(ctx, `DELETE FROM taskd_schema WHERE version = 13`)
	require.NoError(t, err)
	res, err = st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Equal(t, []int{13}, res.Applied)
	require.Equal(t, before, keyRows(t, raw))

	holder := func(code, key string) int64 {
		t.Helper()
		var id int64
		require.NoError(t, raw.QueryRowContext(ctx, `SELECT id FROM task_center WHERE task_code = ? AND unique_key = ?`, code, key).Scan(&id))
		return id
	}
	insert := func(code, key string, mode store.ConflictMode) store.TaskInsertResult {
		t.Helper()
		rs, err := st.TaskInsert(ctx, []store.TaskInsertParams{{Code: code, Payload: json.RawMessage(`{}`), Priority: 5,
			Timeout: 60, UniqueKey: key, OnConflict: store.Conflict{Mode: mode}}})
		require.NoError(t, err)
		return rs[0]
	}
	for _, mode := range []store.ConflictMode{store.Reject, store.Replace, store.UntilDone} {
		for _, k := range [][2]string{{"order", "order-abc"}, {"order", "gift-🐶"}, {"order", "名-𠮷"}, {"sync", "order-abc"}, {"bulk", "Key-1"}, {"order", "done-Ω"}} {
			r := insert(k[0], k[1], mode)
			require.True(t, r.Existing, "%s %q %s", k[0], k[1], mode)
			require.Equal(t, holder(k[0], k[1]), r.ID, "%s %q %s", k[0], k[1], mode)
		}
	}
	for _, k := range [][2]string{{"order", "order-ABC"}, {"order", "gift-😀"}, {"order", "名-𩸽"}, {"order", "cafe"}, {"bulk", "key-1"}} {
		r := insert(k[0], k[1], store.Reject)
		require.False(t, r.Existing, "%s %q", k[0], k[1])
		require.Equal(t, r.ID, holder(k[0], k[1]))
	}
	var n int
	require.NoError(t, raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_center`).Scan(&n))
	require.Equal(t, len(before)+5, n)
	require.Equal(t, holder("order", "seed-key "), insert("order", "seed-key ", store.Reject).ID)
}
