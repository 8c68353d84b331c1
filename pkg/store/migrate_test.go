package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
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
	holder, holderID := lockHolder(t, env)

	// The holder works (runs a statement) for 2 s: the migrate waits.
	var lines []string
	done := make(chan error, 1)
	go func() {
		_, err := env.Store.Migrate(ctx, store.MigrateParams{Progress: func(l string) { lines = append(lines, l) }})
		done <- err
	}()
	_, err := holder.ExecContext(ctx, `DO SLEEP(2)`)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `DO RELEASE_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())))`)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NotEmpty(t, lines)
	require.Regexp(t, fmt.Sprintf(`^waiting for another taskd migrate: connection %d runs "DO SLEEP\(2\)", for \ds$`, holderID), lines[0])

	// An idle holder is given up on, by name.
	var got int
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())), 0)`).Scan(&got))
	require.Equal(t, 1, got)
	_, err = env.Store.Migrate(ctx, store.MigrateParams{})
	require.ErrorContains(t, err, fmt.Sprintf("the migration lock is held by connection %d, idle for", holderID))
}

// An account without the PROCESS privilege sees no other account's
// session: a migrate under it neither waits without end on a lock holder
// it cannot see, nor takes an unreadable list of transactions for none.
func TestMigrateUnderAnAccountThatSeesNoOtherSession(t *testing.T) {
	// Not parallel: it changes the lock's timings for the package.
	env := testenv.New(t)
	store.MigrateLockTimes(t, time.Second, 2*time.Second)
	ctx := context.Background()
	limited, err := store.Open(ctx, env.Account(t, "ALL"), store.Options{})
	require.NoError(t, err)
	defer limited.Close()

	holder, holderID := lockHolder(t, env)
	var lines []string
	_, err = limited.Migrate(ctx, store.MigrateParams{Progress: func(l string) { lines = append(lines, l) }})
	require.ErrorContains(t, err, fmt.Sprintf("held by connection %d of another account, which this one cannot see", holderID))
	require.Contains(t, lines, fmt.Sprintf("waiting for another taskd migrate (connection %d, another account's)", holderID))
	_, err = holder.ExecContext(ctx, `DO RELEASE_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())))`)
	require.NoError(t, err)

	// A step that waits for its table says the transactions could not be
	// read, not that there are none.
	n := store.LatestVersion()
	migs, err := store.Migrations()
	require.NoError(t, err)
	migs = append(migs, store.Migration{Version: n + 1, Name: fmt.Sprintf("%04d_alter.sql", n+1),
		SQL: "ALTER TABLE task_queue ADD COLUMN IF NOT EXISTS extra INT;\n"})
	_, err = holder.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `SELECT COUNT(*) FROM task_queue`)
	require.NoError(t, err)
	lines = nil
	done := make(chan error, 1)
	go func() {
		_, err := limited.Migrate(ctx, store.MigrateParams{Migrations: migs, Progress: func(l string) { lines = append(lines, l) }})
		done <- err
	}()
	// The first wait ends, is told, and the next one starts.
	altering := func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND STATE = 'Waiting for table metadata lock' AND INFO LIKE 'ALTER TABLE task_queue%'`) > 0
	}
	require.Eventually(t, altering, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return !altering() }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, altering, 30*time.Second, 20*time.Millisecond)
	_, err = holder.ExecContext(ctx, `COMMIT`)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NotEmpty(t, lines)
	var told bool
	for _, l := range lines {
		told = told || strings.Contains(l, "its open transactions could not be read")
	}
	require.True(t, told, "%q", lines)
}

// lockHolder opens a connection of env that holds the database's
// migration lock, and returns it with its id.
func lockHolder(t *testing.T, env *testenv.Env) (*sql.Conn, int64) {
	t.Helper()
	ctx := context.Background()
	holder, err := env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	var id int64
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id))
	var got int
	require.NoError(t, holder.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('taskd_migrate.', MD5(DATABASE())), 0)`).Scan(&got))
	require.Equal(t, 1, got)
	return holder, id
}

// A step cut short runs again from its first statement: each guarded
// clause (ADD COLUMN IF NOT EXISTS, DROP KEY IF EXISTS) is resolved
// against the schema before it is sent, since MySQL 8 reads no such
// guard, and what is there already is left alone.
func TestGuardedStepsRunAgain(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	tables := []string{"task_center", "task_queue", "task_run", "taskd_schema"}
	schema := func() map[string]string {
		out := map[string]string{}
		for _, tb := range tables {
			var name, def string
			require.NoError(t, env.Store.DB().QueryRowContext(ctx, "SHOW CREATE TABLE "+tb).Scan(&name, &def))
			lines := strings.Split(strings.ReplaceAll(def, ",\n", "\n"), "\n")
			slices.Sort(lines) // an index added again is listed last
			out[tb] = strings.Join(lines, "\n")
		}
		return out
	}
	before := schema()
	// Steps of guarded clauses only: adds of columns and keys, and drops.
	again := []int{2, 5, 7, 8, 14}
	for _, v := range again {
		env.Exec(t, `DELETE FROM taskd_schema WHERE version = ?`, v)
	}
	res, err := env.Store.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Equal(t, again, res.Applied)
	require.Equal(t, before, schema())

	// A step that stopped half-way: its column is there, its key not;
	// the second run adds the key.
	env.Exec(t, `ALTER TABLE task_center DROP KEY idx_held`)
	env.Exec(t, `DELETE FROM taskd_schema WHERE version = 2`)
	res, err = env.Store.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Equal(t, []int{2}, res.Applied)
	require.Equal(t, before, schema())
}
