package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The task table of the seed design, as its article creates it.
const seedTable = `CREATE TABLE task_center (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  task_code VARCHAR(64) NOT NULL COMMENT 'task code',
  task_type TINYINT NOT NULL DEFAULT 0,
  payload JSON NOT NULL,
  cron_expr VARCHAR(100) DEFAULT NULL,
  priority TINYINT NOT NULL DEFAULT 5,
  delay INT NOT NULL DEFAULT 0,
  timeout INT NOT NULL DEFAULT 300,
  max_retry TINYINT NOT NULL DEFAULT 3,
  retry_count TINYINT NOT NULL DEFAULT 0,
  status TINYINT NOT NULL DEFAULT 0,
  plan_next_run_at DATETIME NOT NULL,
  last_run_at DATETIME DEFAULT NULL,
  last_result TEXT DEFAULT NULL,
  created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  KEY idx_status_next (status, plan_next_run_at),
  KEY idx_task_type (task_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// sideDatabase creates an empty database beside env's and returns its DSN
// and a raw handle on it.
func sideDatabase(t *testing.T, env *testenv.Env, suffix string) (string, *sql.DB) {
	t.Helper()
	cfg, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	cfg.DBName += suffix
	admin := env.Store.DB()
	_, err = admin.ExecContext(context.Background(), "CREATE DATABASE "+cfg.DBName)
	require.NoError(t, err)
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+cfg.DBName) })
	raw, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	return cfg.FormatDSN(), raw
}

// A team moving from the seed design keeps its table and its backlog:
// migrate adopts the table, and the rows already in it run.
func TestMigrateAdoptsSeedTable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t) // a migrated database; make a bare one beside it
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_seed")
	_, err := raw.ExecContext(ctx, seedTable)
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout,
		max_retry, plan_next_run_at, status) VALUES ('send_email', 0, '{"to":"a@b.c"}', NULL, 5, 300, 3, NOW(), 0),
		('report', 1, '{}', '0 2 * * *', 5, 300, 3, NOW() + INTERVAL 1 DAY, 0)`)
	require.NoError(t, err)

	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	res, err := st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	migs, err := store.Migrations()
	require.NoError(t, err)
	var all []int
	for _, m := range migs {
		all = append(all, m.Version)
	}
	require.Equal(t, all, res.Applied)
	again, err := st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Empty(t, again.Applied, "idempotent")

	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the due seed row is claimable; the future cron row is not")
	require.Equal(t, "send_email", msgs[0].Queue)
	require.Equal(t, 1, msgs[0].Attempt)
	tk, err := st.TaskGet(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, task.Periodic, tk.Type)
	require.Equal(t, "0 2 * * *", tk.CronExpr)
}

// The seed's table has no CHECK constraints: its rows may hold a priority
// outside 0-9, which put them in a lane of idx_lane no claim and no
// recovery reads (never run, never dead), and a task_type or status taskd
// has no meaning for. Migrate brings such rows within range, ends those
// it cannot read as dead with why, and adds the constraints, so that the
// PHP side's next such INSERT fails where it is made. A table adopted by
// an older taskd, without them, gets them at its next migrate.
func TestMigrateAddsTheChecksToAnAdoptedTable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st, raw := seedBeside(t, env, "_checks")
	_, err := raw.ExecContext(ctx, `INSERT INTO task_center (task_code, task_type, payload, priority, plan_next_run_at, status)
		VALUES ('high', 0, '{}', 10, NOW(), 0), ('low', 0, '{}', -1, NOW(), 0), ('odd', 3, '{}', 5, NOW(), 0),
		('lost', 0, '{}', 5, NOW(), 9), ('fine', 0, '{}', 5, NOW(), 0)`)
	require.NoError(t, err)
	var said []string
	_, err = st.Migrate(ctx, store.MigrateParams{Progress: func(l string) { said = append(said, l) }})
	require.NoError(t, err)
	require.Contains(t, strings.Join(said, "\n"), "2 tasks of a priority outside 0-9")

	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	var codes []string
	for _, m := range msgs {
		codes = append(codes, m.Code)
	}
	require.ElementsMatch(t, []string{"high", "low", "fine"}, codes, "the priorities within range run")
	for id, why := range map[int64]string{3: "task_type 3", 4: "status 9"} {
		tk, err := st.TaskGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, task.Dead, tk.Status)
		require.Contains(t, tk.LastResult, why)
	}
	require.ErrorContains(t, insertPriority10(raw), "ck_task_priority", "refused where it is made")

	// Adopted by an older taskd: the constraints come at the next migrate.
	_, err = raw.ExecContext(ctx, `ALTER TABLE task_center DROP CONSTRAINT ck_task_priority`)
	require.NoError(t, err)
	_, err = st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.ErrorContains(t, insertPriority10(raw), "ck_task_priority")
}

// Adding the constraints waits for a table in use as every step does: a
// transaction of the PHP application open on it for longer than one lock
// wait (3 s) held the ALTER back, and migrate failed at its first wait.
func TestAddingTheChecksWaitsForTheTable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st, raw := seedBeside(t, env, "_checkwait")
	_, err := st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `ALTER TABLE task_center DROP CONSTRAINT ck_task_priority`) // adopted by an earlier taskd
	require.NoError(t, err)

	app, err := raw.BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int
	require.NoError(t, app.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_center`).Scan(&n))
	done := make(chan error, 1)
	go func() {
		_, err := st.Migrate(ctx, store.MigrateParams{})
		done <- err
	}()
	time.Sleep(4 * time.Second) // past one lock wait
	require.NoError(t, app.Commit())
	require.NoError(t, <-done)
	require.ErrorContains(t, insertPriority10(raw), "ck_task_priority")
}

// seedBeside creates the seed's table in a database beside env's and
// returns a store on it (not migrated) and a raw handle on it.
func seedBeside(t *testing.T, env *testenv.Env, suffix string) (*store.Store, *sql.DB) {
	t.Helper()
	dsn, raw := sideDatabase(t, env, suffix)
	_, err := raw.ExecContext(context.Background(), seedTable)
	require.NoError(t, err)
	st, err := store.Open(context.Background(), dsn, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, raw
}

// insertPriority10 is a PHP INSERT of a task of priority 10.
func insertPriority10(raw *sql.DB) error {
	_, err := raw.ExecContext(context.Background(), `INSERT INTO task_center (task_code, task_type, payload, priority, plan_next_run_at, status)
		VALUES ('again', 0, '{}', 10, NOW(), 0)`)
	return err
}

// A seed table made under a lenient sql_mode, with zero dates for
// defaults and in its rows, is adopted on a server whose mode refuses
// them (MySQL 8's default: NO_ZERO_DATE, strict), where any ALTER of it
// failed with "Invalid default value for 'last_run_at'".
func TestMigrateAdoptsSeedTableWithZeroDates(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_zero")
	legacy, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer legacy.Close()
	_, err = legacy.ExecContext(ctx, `SET SESSION sql_mode = ''`)
	require.NoError(t, err)
	_, err = legacy.ExecContext(ctx, strings.Replace(seedTable, "last_run_at DATETIME DEFAULT NULL",
		"last_run_at DATETIME NOT NULL DEFAULT '0000-00-00 00:00:00'", 1))
	require.NoError(t, err)
	_, err = legacy.ExecContext(ctx, `INSERT INTO task_center (task_code, payload, plan_next_run_at)
		VALUES ('send_email', '{}', NOW()), ('send_email', '{}', '0000-00-00 00:00:00')`)
	require.NoError(t, err)

	// One connection: the migration's, if it went back to the pool, is
	// the one every statement after it runs on.
	st, err := store.Open(ctx, dsn, store.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer st.Close()
	var mode string
	var lockWait int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT @@SESSION.sql_mode`).Scan(&mode))
	require.Contains(t, mode, "NO_ZERO_DATE", "the test's sessions refuse zero dates")
	_, err = st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT @@SESSION.sql_mode, @@SESSION.lock_wait_timeout`).Scan(&mode, &lockWait))
	require.Contains(t, mode, "NO_ZERO_DATE", "the rest of taskd runs under the server's mode")
	require.Greater(t, lockWait, 3, "and the server's lock wait, not the migration's")

	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2, "both rows are due, the zero date as now")

	// Their results are written: the zero-dated one's write was refused
	// ("Column 'plan_next_run_at' cannot be null") and recovery ran it
	// again and again.
	var ts []store.Transition
	for _, m := range msgs {
		ts = append(ts, store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched, To: task.Succeeded,
			SetResult: true, Result: "done", Run: &store.RunRecord{Code: m.Code, Queue: m.Queue, WorkerID: "w", Outcome: task.OutcomeSucceeded}})
	}
	applied, err := st.TaskTransition(ctx, ts)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, applied)

	// An operator's "run now" of a zero-dated waiting row.
	_, err = legacy.ExecContext(ctx, `INSERT INTO task_center (task_code, payload, plan_next_run_at, status) VALUES ('send_email', '{}', '0000-00-00 00:00:00', 4)`)
	require.NoError(t, err)
	var failed int64
	require.NoError(t, legacy.QueryRowContext(ctx, `SELECT LAST_INSERT_ID()`).Scan(&failed))
	done, err := st.TaskRunNow(ctx, store.TaskAction{Actor: store.Actor{User: "test"}}, []int64{failed})
	require.NoError(t, err)
	require.Equal(t, []int64{failed}, done)

	// A debounced submit onto a zero-dated waiting row with its key, made
	// and due at a zero date.
	_, err = legacy.ExecContext(ctx, `INSERT INTO task_center (task_code, payload, plan_next_run_at, created_at, unique_key)
		VALUES ('digest', '{}', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 'd1')`)
	require.NoError(t, err)
	res, err := st.TaskInsert(ctx, []store.TaskInsertParams{{Code: "digest", Payload: []byte(`{"v":1}`), UniqueKey: "d1",
		OnConflict: store.Conflict{Mode: store.Debounce, Debounce: time.Minute, MaxWait: time.Hour}}})
	require.NoError(t, err)
	require.True(t, res[0].Existing && res[0].Changed, "%+v", res[0])
}

// A table named task_center that is not a task table is refused.
func TestMigrateRefusesForeignTable(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_other")
	_, err := raw.ExecContext(ctx, `CREATE TABLE task_center (id INT PRIMARY KEY, name TEXT)`)
	require.NoError(t, err)
	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Migrate(ctx, store.MigrateParams{})
	require.ErrorContains(t, err, "not the seed design's task table")
	var tables int
	require.NoError(t, raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()`).Scan(&tables))
	require.Equal(t, 1, tables, "nothing created beside the other application's table")
}

// An adoption stopped half way (a metadata lock held by the PHP
// application, an interrupt) goes on where it stopped at the next
// migrate: a table with some of taskd's columns was taken for taskd's
// own, its adoption skipped, and every later migrate failed on a missing
// column.
func TestMigrateResumesAnAdoption(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_half")
	_, err := raw.ExecContext(ctx, seedTable)
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('send_email', '{}', NOW())`)
	require.NoError(t, err)
	// The first four of the columns an adoption adds, then it stopped.
	_, err = raw.ExecContext(ctx, `ALTER TABLE task_center ADD COLUMN queue VARCHAR(64) NOT NULL DEFAULT '',
		ADD COLUMN unique_key VARCHAR(191) DEFAULT NULL, ADD COLUMN timezone VARCHAR(64) NOT NULL DEFAULT '',
		ADD COLUMN attempt INT UNSIGNED NOT NULL DEFAULT 0`)
	require.NoError(t, err)

	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Migrate(ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.NoError(t, st.CheckSchema(ctx))
	var precision int
	require.NoError(t, raw.QueryRowContext(ctx, `SELECT DATETIME_PRECISION FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND COLUMN_NAME = 'plan_next_run_at'`).Scan(&precision))
	require.Equal(t, 3, precision, "the time columns widened")
	var unique int
	require.NoError(t, raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND INDEX_NAME = 'uk_code_unique'`).Scan(&unique))
	require.Positive(t, unique, "unique keys are kept unique")
	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}
