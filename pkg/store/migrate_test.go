package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// An interrupted migration stops its statement on the server too: left
// running, a table rebuild would go on for minutes after the command
// exited, holding the migration lock, and the next run would wait for it
// (the server stops a statement for a closed connection only when it
// next writes to it).
func TestInterruptedMigrationStopsItsStatement(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	env.Exec(t, `CREATE TABLE t_big (id INT PRIMARY KEY, pad CHAR(200) NOT NULL DEFAULT '')`)
	env.Exec(t, `INSERT INTO t_big (id) SELECT seq FROM seq_1_to_200000`)
	migs, err := store.Migrations()
	require.NoError(t, err)
	n := migs[len(migs)-1].Version
	migs = append(migs, store.Migration{Version: n + 1, Name: fmt.Sprintf("%04d_rebuild.sql", n+1),
		SQL: "ALTER TABLE t_big ADD COLUMN IF NOT EXISTS extra INT, ALGORITHM=COPY;\n"})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := env.Store.Migrate(ctx, store.MigrateParams{Migrations: migs})
		done <- err
	}()
	altering := `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND INFO LIKE 'ALTER TABLE t_big%'`
	require.Eventually(t, func() bool { return env.Count(t, altering) == 1 }, 30*time.Second, time.Millisecond)
	cancel()
	require.ErrorContains(t, <-done, "interrupted")
	require.Eventually(t, func() bool { return env.Count(t, altering) == 0 }, time.Minute, 20*time.Millisecond)
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't_big' AND COLUMN_NAME = 'extra'`), "the rebuild went on after the interrupt")
	v, err := env.Store.SchemaVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, n, v)
}
