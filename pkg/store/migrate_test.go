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

// A migrate that finds the database's migration lock taken waits while
// its holder works, saying so, and gives up, naming it, once the holder
// sits idle: deploy scripts run migrate on every host at once, and a
// rebuild on the first takes minutes.
func TestMigrateWaitsForTheLockWhileItsHolderWorks(t *testing.T) {
	// Not parallel: it changes the lock's timings for the package.
	env := testenv.New(t)
	store.MigrateLockTimes(t, time.Second, 3*time.Second)
	ctx := context.Background()
	holder, err := env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	defer holder.Close()
	var holderID int64
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&holderID))
	var got int
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())), 0)`).Scan(&got))
	require.Equal(t, 1, got)

	// The holder works (runs a statement) for 2 s: the migrate waits.
	var lines []string
	done := make(chan error, 1)
	go func() {
		_, err := env.Store.Migrate(ctx, store.MigrateParams{Progress: func(l string) { lines = append(lines, l) }})
		done <- err
	}()
	_, err = holder.ExecContext(ctx, `DO SLEEP(2)`)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `DO RELEASE_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())))`)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NotEmpty(t, lines)
	require.Regexp(t, fmt.Sprintf(`^waiting for another taskd migrate: connection %d runs "DO SLEEP\(2\)", for \ds$`, holderID), lines[0])

	// An idle holder is given up on, by name.
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())), 0)`).Scan(&got))
	_, err = env.Store.Migrate(ctx, store.MigrateParams{})
	require.ErrorContains(t, err, fmt.Sprintf("the migration lock is held by connection %d, idle for", holderID))
}
