package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// seedInsert is the INSERT of the seed design's PHP producers: only the old
// columns. It must keep working unchanged.
const seedInsert = `INSERT INTO task_center (task_code, task_type, payload, cron_expr, priority, timeout, max_retry, plan_next_run_at, status)
	VALUES ('hello', 0, '{"a":1}', NULL, 5, 300, 3, NOW(), 0)`

type testBundle struct {
	env *testenv.Env
	ctx context.Context
}

func setup(t *testing.T) (*store.Store, *testBundle) {
	t.Helper()
	env := testenv.New(t)
	return env.Store, &testBundle{env: env, ctx: context.Background()}
}

// insertRaw inserts one task with a due time relative to the database's
// NOW(3) and returns its id.
func insertRaw(t *testing.T, env *testenv.Env, code string, priority int, status task.Status, dueIn time.Duration) int64 {
	t.Helper()
	res := env.Exec(t, `INSERT INTO task_center (task_code, payload, priority, status, plan_next_run_at)
		VALUES (?, '{}', ?, ?, NOW(3) + INTERVAL ? MICROSECOND)`, code, priority, int(status), dueIn.Microseconds())
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

func ids(msgs []*task.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	st, b := setup(t)

	migs, err := store.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, migs)
	last := migs[len(migs)-1].Version

	// testenv applied everything: a second run applies nothing.
	res, err := st.Migrate(b.ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	v, err := st.SchemaVersion(b.ctx)
	require.NoError(t, err)
	require.Equal(t, last, v)
	require.Equal(t, len(migs), b.env.Count(t, `SELECT COUNT(*) FROM taskd_schema`))

	// Concurrent runs on several hosts serialise on the lock and agree.
	errs := make(chan error, 3)
	for range 3 {
		go func() { _, err := st.Migrate(b.ctx, store.MigrateParams{}); errs <- err }()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, len(migs), b.env.Count(t, `SELECT COUNT(*) FROM taskd_schema`))

	// Each statement is idempotent too: with the bookkeeping lost, every
	// migration re-applies cleanly over the existing schema.
	b.env.Exec(t, `DELETE FROM taskd_schema`)
	res, err = st.Migrate(b.ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Len(t, res.Applied, len(migs))
	res, err = st.Migrate(b.ctx, store.MigrateParams{})
	require.NoError(t, err)
	require.Empty(t, res.Applied)
}

func TestSeedInsertIsClaimable(t *testing.T) {
	t.Parallel()
	st, b := setup(t)

	res := b.env.Exec(t, seedInsert)
	id, err := res.LastInsertId()
	require.NoError(t, err)

	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, id, m.ID)
	require.Equal(t, "hello", m.Code)
	require.Equal(t, "hello", m.Queue, "an empty queue column means the task code")
	require.Equal(t, 1, m.Attempt)
	require.Equal(t, task.OneOff, m.Type)
	require.Equal(t, 5, m.Priority)
	require.Equal(t, 300, m.Timeout)
	require.Equal(t, 3, m.MaxRetry)
	require.JSONEq(t, `{"a":1}`, string(m.Payload))

	// The message survives the trip through Redis.
	raw, err := m.Encode()
	require.NoError(t, err)
	back, err := task.DecodeMessage(raw)
	require.NoError(t, err)
	require.Equal(t, m.ID, back.ID)
	require.Equal(t, "hello", back.Queue)
}

// A seed-style INSERT of a zero date ('0000-00-00 00:00:00', which a
// server without NO_ZERO_DATE in its sql_mode stores) is due now, and
// neither it nor the listings of the task fail on it: one such row used
// to stop every claim of the cluster.
func TestZeroDatesFromASeedInsert(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	b.env.Exec(t, `SET STATEMENT sql_mode = '' FOR INSERT INTO task_center
		(task_code, task_type, payload, plan_next_run_at, created_at, updated_at)
		VALUES ('hello', 0, '{}', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00 00:00:00')`)
	b.env.Exec(t, seedInsert)

	ts, err := st.TaskList(b.ctx, &store.TaskListParams{})
	require.NoError(t, err)
	require.Len(t, ts, 2)
	tk, err := st.TaskGet(b.ctx, ts[1].ID)
	require.NoError(t, err)
	require.True(t, tk.PlanNextRun.IsZero())

	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2, "the zero-dated task is due, and the other is not held back")
	ts, err = st.TaskList(b.ctx, &store.TaskListParams{})
	require.NoError(t, err)
	require.Len(t, ts, 2)
}

// So is it for the claim that leaves a paused queue out: its windows
// started after 1000-01-01, which a zero date sorts before, and the row
// waited for as long as any queue was paused, full or grouped. (A window
// starting at the zero date instead failed every claim on MySQL 8 under
// NO_ZERO_DATE, which refuses that literal.)
func TestZeroDateIsClaimedWithAQueuePaused(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	b.env.Exec(t, `SET STATEMENT sql_mode = '' FOR INSERT INTO task_center
		(task_code, task_type, payload, plan_next_run_at, created_at, updated_at)
		VALUES ('hello', 0, '{}', '0000-00-00 00:00:00', NOW(), NOW())`)
	f := &store.ClaimFilter{Paused: func(q string) bool { return q == "other" }}
	msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the zero-dated task is due")
}

func TestClaimOrderAndDueness(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env

	// Inserted so that id order is the reverse of claim order.
	a := insertRaw(t, env, "x", 5, task.Pending, -10*time.Second)
	bb := insertRaw(t, env, "x", 1, task.Pending, -1*time.Second)
	c := insertRaw(t, env, "x", 1, task.Pending, -5*time.Second)
	d := insertRaw(t, env, "x", 0, task.Failed, -1*time.Second) // a failed task whose retry is due
	future := insertRaw(t, env, "x", 0, task.Pending, time.Hour)
	futureFailed := insertRaw(t, env, "x", 0, task.Failed, time.Hour)
	done := insertRaw(t, env, "x", 0, task.Succeeded, -time.Hour)
	dead := insertRaw(t, env, "x", 0, task.Dead, -time.Hour)
	running := insertRaw(t, env, "x", 0, task.Running, -time.Hour)

	got, err := st.TaskClaimDue(b.ctx, 2)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{d, c}, ids(got), "priority first, then due time")
	got, err = st.TaskClaimDue(b.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{bb}, ids(got))
	got, err = st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{a}, ids(got))

	// Nothing else is ever due: future, finished, dead or running rows.
	got, err = st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	require.Empty(t, got)
	for _, id := range []int64{future, futureFailed, done, dead, running} {
		tk, err := st.TaskGet(b.ctx, id)
		require.NoError(t, err)
		require.Zero(t, tk.Attempt, "task %d must not have been claimed", id)
	}
	require.Equal(t, 4, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1 AND attempt = 1`))

	// The claim of limit 0 is a no-op.
	got, err = st.TaskClaimDue(b.ctx, 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestClaimReturnsPriorityOrder checks the order of the returned batch: the
// scheduler pushes it as returned, so a batch in id order puts a priority 0
// task behind every priority 9 task claimed with it.
func TestClaimReturnsPriorityOrder(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	var want []int64
	for p := 9; p >= 0; p-- {
		id := insertRaw(t, b.env, "x", p, task.Pending, -time.Second)
		want = append([]int64{id}, want...)
	}
	got, err := st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, want, ids(got), "a batch comes back in claim (priority) order")
}

func TestClaimSetsAttemptAndStatus(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	id := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)

	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 1, msgs[0].Attempt)

	tk, err := st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Dispatched, tk.Status)
	require.Equal(t, 1, tk.Attempt)
	require.NotNil(t, tk.Dispatched)

	// A dispatched task is not claimed again.
	msgs, err = st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, msgs)

	// Back to pending (a hand back), the next claim is attempt 2.
	zero := time.Duration(0)
	ok, err := st.TaskTransition(b.ctx, []store.Transition{{ID: id, Attempt: 1, From: task.Dispatched, To: task.Pending, NextIn: &zero}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)
	msgs, err = st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 2, msgs[0].Attempt)
}

func TestMarkRunningFenced(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	id := insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	other := insertRaw(t, b.env, "x", 5, task.Pending, time.Hour) // never dispatched

	_, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)

	ok, err := st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: id, Attempt: 2}, {ID: other, Attempt: 0}})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, ok, "wrong attempt, or not dispatched")
	tk, err := st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Dispatched, tk.Status)

	ok, err = st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: id, Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)
	tk, err = st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Running, tk.Status)
	require.Equal(t, "w1", tk.WorkerID)
	require.NotNil(t, tk.StartedAt)

	// A duplicate message (second delivery) loses.
	ok, err = st.TaskMarkRunning(b.ctx, "w2", []store.Fence{{ID: id, Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, ok)
	tk, err = st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "w1", tk.WorkerID)
}

func TestTransitionFenced(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	id := insertRaw(t, env, "x", 5, task.Pending, -time.Second)
	_, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	ok, err := st.TaskMarkRunning(b.ctx, "w1", []store.Fence{{ID: id, Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)

	run := func() *store.RunRecord {
		return &store.RunRecord{Code: "x", Queue: "x", WorkerID: "w1", Node: "n1", Outcome: task.OutcomeSucceeded, Duration: time.Second}
	}
	// Wrong attempt, wrong from-status: nothing changes, no run row.
	applied, err := st.TaskTransition(b.ctx, []store.Transition{
		{ID: id, Attempt: 2, From: task.Running, To: task.Succeeded, SetResult: true, Result: "stale", Run: run()},
		{ID: id, Attempt: 1, From: task.Dispatched, To: task.Succeeded, SetResult: true, Result: "stale", Run: run()},
		{ID: id + 1000, Attempt: 1, From: task.Running, To: task.Succeeded, Run: run()},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false}, applied)
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_run`))
	tk, err := st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Running, tk.Status)
	require.Empty(t, tk.LastResult)

	// In one batch with a stale write, the right one applies and only its
	// run is recorded.
	applied, err = st.TaskTransition(b.ctx, []store.Transition{
		{ID: id, Attempt: 0, From: task.Running, To: task.Dead, Run: run()},
		{ID: id, Attempt: 1, From: task.Running, To: task.Succeeded, SetResult: true, Result: "ok", Run: run()},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, applied)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 1 AND outcome = 'succeeded' AND worker_id = 'w1'`, id))
	tk, err = st.TaskGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, task.Succeeded, tk.Status)
	require.Equal(t, "ok", tk.LastResult)

	// Replaying the same write is rejected: it is no longer running.
	applied, err = st.TaskTransition(b.ctx, []store.Transition{{ID: id, Attempt: 1, From: task.Running, To: task.Succeeded, Run: run()}})
	require.NoError(t, err)
	require.Equal(t, []bool{false}, applied)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_run`))
}

// TestClaimCostBounded checks DESIGN principle 6: the claim's cost does not
// grow with the number of future or finished rows. It counts the rows the
// server's handlers read for one claim (Handler_read_* of the claiming
// session) on a table of 400,000 irrelevant rows and 100 due ones.
func TestClaimCostBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("inserts 400,000 rows")
	}
	_, b := setup(t)
	env := b.env
	const bulk = 200000
	// A bulk insert can outlast the store's 30 s statement timeout on a
	// loaded machine.
	bulkDB, err := store.Open(b.ctx, env.DSN, store.Options{ReadTimeout: 5 * time.Minute, WriteTimeout: 5 * time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { bulkDB.Close() })
	exec := func(q string) {
		t.Helper()
		_, err := bulkDB.DB().ExecContext(b.ctx, q)
		require.NoError(t, err)
	}
	// Future pending and failed rows of every priority, and finished rows
	// long past due. Rows are generated in index order (status, priority,
	// due time) so the inserts append to every index: several times faster.
	exec(`INSERT INTO task_center (task_code, payload, priority, status, plan_next_run_at)
		SELECT 'x', '{}', (seq - 1) % 100000 DIV 10000, IF(seq <= 100000, 0, 4), NOW(3) + INTERVAL 1 HOUR + INTERVAL seq SECOND
		FROM seq_1_to_200000`)
	exec(`INSERT INTO task_center (task_code, payload, priority, status, plan_next_run_at)
		SELECT 'x', '{}', (seq - 1) DIV 20000, 3, NOW(3) - INTERVAL 1 HOUR - INTERVAL (200001 - seq) SECOND
		FROM seq_1_to_200000`)
	exec(`INSERT INTO task_center (task_code, payload, priority, status, plan_next_run_at)
		SELECT 'x', '{}', seq % 10, IF(seq % 4 = 0, 4, 0), NOW(3) - INTERVAL seq SECOND
		FROM seq_1_to_100`)
	require.Equal(t, 2*bulk+100, env.Count(t, `SELECT COUNT(*) FROM task_center`))
	exec(`ANALYZE TABLE task_center`)

	// One connection, so the session counters are the claim's.
	st, err := store.Open(b.ctx, env.DSN, store.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })

	reads := func() int64 { return handlerReads(t, st.DB()) }
	r0 := reads()
	overhead := reads() - r0 // SHOW STATUS reads its own rows
	r1 := reads()
	msgs, err := st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	claimReads := reads() - r1 - overhead
	require.Len(t, msgs, 100)
	t.Logf("one claim of 100 on %d rows read %d rows (SHOW STATUS overhead %d)", 2*bulk+100, claimReads, overhead)
	// Candidates (at most 100 per branch), the update and the read-back
	// by primary key: a few hundred reads. A scan of either bulk set would
	// be 200,000.
	require.Less(t, claimReads, int64(5000), "claim cost grows with future or finished rows")

	// The next claim, with nothing due, is as cheap.
	r2 := reads()
	msgs, err = st.TaskClaimDue(b.ctx, 100)
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Less(t, reads()-r2-overhead, int64(1000))

	// And the plan agrees: a branch of the candidate query reads one
	// bounded range of idx_lane.
	rows, err := st.DB().QueryContext(b.ctx, `EXPLAIN SELECT id FROM task_center FORCE INDEX (idx_lane)
		WHERE lane = 5 AND lane_at <= NOW(3) ORDER BY lane_at, id LIMIT 100`)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	require.True(t, rows.Next())
	raw := make([]any, len(cols))
	strs := make([][]byte, len(cols))
	for i := range raw {
		raw[i] = &strs[i]
	}
	require.NoError(t, rows.Scan(raw...))
	plan := map[string]string{}
	for i, c := range cols {
		plan[strings.ToLower(c)] = string(strs[i])
	}
	require.Equal(t, "idx_lane", plan["key"], "plan %v", plan)
	require.Equal(t, "range", plan["type"], "plan %v", plan)
	est, err := strconv.Atoi(plan["rows"])
	require.NoError(t, err)
	require.Less(t, est, 1000, "estimate must be bounded by the due rows, not the table: plan %v", plan)
}

// The server's trouble with its own files or memory is no rejection of the
// statement: a result batch that met it is written again, not split up.
func TestServerOwnErrorsAreNotRejections(t *testing.T) {
	wrap := func(n uint16, msg string) error {
		return fmt.Errorf("write 500 task transitions: %w", &mysql.MySQLError{Number: n, Message: msg})
	}
	require.False(t, store.IsRejected(wrap(6, "Error on delete of '/tmp/#sql-update-2ff7-d-a1.MAI' (Errcode: 2 \"No such file or directory\")")))
	require.False(t, store.IsRejected(wrap(1021, "Disk full")))
	require.False(t, store.IsRejected(wrap(1213, "Deadlock found when trying to get lock")))
	require.True(t, store.IsRejected(wrap(1366, "Incorrect string value")))
	require.True(t, store.IsRejected(wrap(1406, "Data too long for column")))
}

// Credentials the server refuses are a configuration error saying what
// to fix, whichever of its two errors the server gives: 1045 for a wrong
// password, or 1698 (ER_ACCESS_DENIED_NO_PASSWORD_ERROR). MariaDB answers
// some users it does not know with 1698, 'nobody' among them (it picks
// the answer from the name, so as not to tell which users exist), others
// with 1045.
func TestOpenRefusedCredentials(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*mysql.Config){
		"wrong password": func(c *mysql.Config) { c.Passwd = "wrong-" + c.Passwd },
		"unknown user":   func(c *mysql.Config) { c.User, c.Passwd = "taskd_nosuch_user", "pw" },
		"user nobody":    func(c *mysql.Config) { c.User, c.Passwd = "nobody", "pw" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := mysql.ParseDSN(testenv.BaseDSN())
			require.NoError(t, err)
			cfg.DBName = "taskd"
			edit(cfg)
			st, err := store.Open(context.Background(), cfg.FormatDSN(), store.Options{})
			if st != nil {
				st.Close()
			}
			require.Error(t, err)
			require.Equal(t, task.CodeConfig, task.ErrorCode(err), "error %q", err)
			require.Contains(t, err.Error(), "Access denied for user")
			require.True(t, strings.HasSuffix(err.Error(), ": fix the user or password in mysql.dsn"), "error %q", err)
		})
	}
}

// A connection refused for the account's connection limit is no refusal of
// the statement: a worker would otherwise replace the result it writes
// with a note of the error ("result not stored: ...").
func TestConnectionLimitIsNoRejection(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	admin := env.Store.DB()
	user := fmt.Sprintf("taskd_limit_%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := admin.Exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS 1", user)); err != nil {
		t.Skipf("the test account cannot create accounts: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	cfg, err := mysql.ParseDSN(testenv.BaseDSN())
	require.NoError(t, err)
	cfg.User, cfg.Passwd, cfg.DBName = user, "pw", ""
	open := func() *sql.DB {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	require.NoError(t, open().Ping(), "the account's one connection")
	err = open().Ping()
	requireNoRejection(t, err, 1226, "the statement was never sent")
	require.Contains(t, store.ErrorText(err), "(the account's own connection limit is reached; each taskd process may open mysql.max_open_conns)")

	// The password changed under a running node: its new connections are
	// refused, and neither is that a refusal of what it writes.
	cfg.Passwd = "changed"
	err = open().Ping()
	requireNoRejection(t, err, 1045, "a refused connection refuses no statement")
	require.Contains(t, store.ErrorText(err), "(the account's password changed, or it was dropped, since this process connected: fix mysql.dsn and restart it)")

	// A privilege revoked under a running node refuses the statement to
	// the account, not for what it holds: a GRANT lets it through.
	reader := user + "r"
	_, err = admin.Exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", reader))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", reader)) })
	_, err = admin.Exec(fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", env.Database, reader))
	require.NoError(t, err)
	cfg.User, cfg.Passwd, cfg.DBName = reader, "pw", env.Database
	_, err = open().Exec(`UPDATE task_center SET priority = 5 WHERE id = 0`)
	requireNoRejection(t, err, 1142, "the account lacks a privilege")
	require.Contains(t, store.ErrorText(err), "(the account of mysql.dsn lacks a privilege taskd needs: taskd doctor's mysql.grants says which to GRANT)")
}

// requireNoRejection checks that err is the server's error number, and
// that it refuses nothing the statement holds.
func requireNoRejection(t *testing.T, err error, number uint16, why string) {
	t.Helper()
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	require.EqualValues(t, number, me.Number, "%v", err)
	require.False(t, store.IsRejected(err), why)
}

// A table that cannot grow (1114, InnoDB's answer when the disk under it
// is full) refuses no statement for what it holds: a result written then
// was replaced by "result not stored: ... The table 'task_center' is
// full", and its history row was lost. The server's own 1114 comes here
// from a MEMORY table at its max_heap_table_size.
func TestFullTableIsNoRejection(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	conn, err := env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, q := range []string{`SET SESSION max_heap_table_size = 16384`,
		`CREATE TEMPORARY TABLE full_table (v CHAR(255)) ENGINE = MEMORY`} {
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for range 10000 {
		if _, err = conn.ExecContext(ctx, `INSERT INTO full_table VALUES (REPEAT('x', 255))`); err != nil {
			break
		}
	}
	requireNoRejection(t, err, 1114, "a full table refused nothing the statement holds")
	require.Contains(t, store.ErrorText(err), "(MySQL cannot store more: the disk under its data directory or its tmpdir is full, or the table reached a size limit: free space there)")
}

// A full disk under the server's tmpdir or data directory reaches a write
// under other numbers than 1114, with the OS's errno 28 in the text (the
// server's own wording, which no test here can provoke without filling a
// disk): it refuses nothing the statement holds, and says what to free.
// The same 1030 with another errno, a row too large, is a refusal.
func TestDiskFullIsNoRejection(t *testing.T) {
	for _, me := range []*mysql.MySQLError{
		{Number: 1030, Message: `Got error 28 "No space left on device" from storage engine InnoDB`},
		{Number: 1026, Message: `Error writing file '/tmp/MYfd=42' (Errcode: 28 "No space left on device")`},
		{Number: 3, Message: `Error writing file './binlog.000042' (errno: 28 - No space left on device)`},
	} {
		err := fmt.Errorf("write 3 task transitions: %w", me)
		require.False(t, store.IsRejected(err), "%v", me)
		require.Contains(t, store.ErrorText(err), "(MySQL cannot store more: the disk under its data directory or its tmpdir is full", "%v", me)
	}
	tooBig := &mysql.MySQLError{Number: 1030, Message: `Got error 139 "Too big row" from storage engine InnoDB`}
	require.True(t, store.IsRejected(tooBig))
	require.NotContains(t, store.ErrorText(tooBig), "cannot store more")
}

// A statement stopped before its end, by a KILL QUERY (a DBA's during an
// incident, pt-kill's) or by the server's time limit, was refused for how
// long it ran, not for what it holds: a result write stopped so was
// replaced by "result not stored: ... Query execution was interrupted".
func TestStoppedStatementIsNoRejection(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `CREATE TABLE stopped (id INT PRIMARY KEY, v INT)`)
	env.Exec(t, `INSERT INTO stopped VALUES (1, 0)`)
	tx, err := env.Store.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `UPDATE stopped SET v = 1 WHERE id = 1`) // holds the row
	require.NoError(t, err)

	conn, err := env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var id int64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id))
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, `UPDATE stopped SET v = 2 WHERE id = 1`)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'UPDATE stopped%'`, id) == 1
	}, 10*time.Second, 10*time.Millisecond)
	env.Exec(t, fmt.Sprintf(`KILL QUERY %d`, id))
	err = <-done
	requireNoRejection(t, err, 1317, "a KILL QUERY refused nothing the statement holds")

	_, err = conn.ExecContext(ctx, `SET STATEMENT max_statement_time = 0.2 FOR UPDATE stopped SET v = 3 WHERE id = 1`)
	requireNoRejection(t, err, 1969, "a time limit refused nothing the statement holds")
}

// A statement larger than the client may send is refused for what it
// holds, before it leaves: retried as is, it would fail forever (and a
// worker whose result write fails takes no new work), where a refusal
// has the completer split the batch and store a note for the one result
// that cannot fit.
func TestStatementTooLargeIsRejected(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	cfg, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	cfg.MaxAllowedPacket = 1 << 20
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	// A literal, as the batched writes are.
	_, err = db.Exec(`SELECT LENGTH('` + strings.Repeat("x", 2<<20) + `')`)
	require.ErrorIs(t, err, mysql.ErrPktTooLarge)
	require.True(t, store.IsRejected(fmt.Errorf("write 1 task transitions: %w", err)))
}

// handlerReads is the sum of the Handler_read_* counters of db's session
// (open db with one connection); SHOW STATUS adds reads of its own.
func handlerReads(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	rows, err := db.Query(`SHOW SESSION STATUS LIKE 'Handler_read%'`)
	require.NoError(t, err)
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		require.NoError(t, rows.Scan(&name, &v))
		sum += v
	}
	require.NoError(t, rows.Err())
	return sum
}

// A DSN naming another charset (one copied from a PHP application's
// config) still talks utf8mb4: with charset=utf8 an emoji was refused
// with "Incorrect string value", with latin1 Chinese was stored as
// mojibake.
func TestOpenTalksUTF8MB4(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	sep := "?"
	if strings.Contains(env.DSN, "?") {
		sep = "&"
	}
	const payload = `{"m":"中文😀"}`
	for _, param := range []string{"charset=utf8", "charset=latin1", "charset=gbk", "charset=utf8,latin1",
		"collation=latin1_swedish_ci", "charset=utf8mb4&collation=utf8mb4_unicode_ci"} {
		st, err := store.Open(ctx, env.DSN+sep+param, store.Options{})
		require.NoError(t, err, param)
		res, err := st.DB().ExecContext(ctx, `INSERT INTO task_center (task_code, payload) VALUES (?, ?)`, "zh", payload)
		require.NoError(t, err, param)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		var got string
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT payload FROM task_center WHERE id = ?`, id).Scan(&got))
		require.Equal(t, payload, got, param)
		st.Close()
		tk, err := env.Store.TaskGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, payload, string(tk.Payload), param)
	}
}
