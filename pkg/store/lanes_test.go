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
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// oldIndexes are the indexes idx_lane replaces (migration 0011 drops them).
var oldIndexes = []string{"idx_claim", "idx_inflight", "idx_finished"}

// indexesOf returns the names of task_center's indexes in db.
func indexesOf(t *testing.T, db *sql.DB) map[string]bool {
	t.Helper()
	rows, err := db.Query(`SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center'`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out[n] = true
	}
	require.NoError(t, rows.Err())
	return out
}

// fillLanes puts tasks in every lane, enough of them that a full scan
// costs more than any index range: future waiting tasks of every priority,
// a few due, finished ones (old and new), dispatched and running ones
// dispatched an hour ago, and dead ones.
func fillLanes(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO task_center (task_code, payload, priority, plan_next_run_at)
			SELECT 'w', '{}', seq % 10, NOW(3) + INTERVAL seq MINUTE FROM seq_1_to_3000`,
		`INSERT INTO task_center (task_code, payload, priority, plan_next_run_at)
			SELECT 'w', '{}', seq % 10, NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_20`,
		`INSERT INTO task_center (task_code, payload, status, finished_at)
			SELECT 'f', '{}', 3, NOW(3) - INTERVAL seq MINUTE FROM seq_1_to_3000`,
		`INSERT INTO task_center (task_code, payload, status, attempt, dispatched_at, started_at)
			SELECT 'r', '{}', 1 + seq % 2, 1, NOW(3) - INTERVAL 1 HOUR, IF(seq % 2 = 1, NOW(3), NULL) FROM seq_1_to_40`,
		`INSERT INTO task_center (task_code, payload, status, finished_at)
			SELECT 'd', '{}', 5, NOW(3) - INTERVAL 2 DAY FROM seq_1_to_30`,
		`ANALYZE TABLE task_center`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
}

// requireLanePlans checks that each hot statement of this release reads
// task_center through idx_lane (or by primary key, or idx_held for the
// dead counts), never through one of the indexes it replaced, and never by
// a full scan.
func requireLanePlans(t *testing.T, db *sql.DB) {
	t.Helper()
	limits := make([]any, store.ClaimCandidateLimits)
	for i := range limits {
		limits[i] = 100
	}
	var window []any
	for range 10 {
		window = append(window, "1000-01-01 00:00:00.000", "1000-01-01 00:00:00.000", 0, true, 100)
	}
	old := float64(time.Now().Add(-time.Minute).UnixMilli()) / 1000
	for _, c := range []struct {
		name string
		q    string
		args []any
	}{
		{"claim", store.ClaimCandidatesSQL, limits},
		{"paused claim", store.ClaimWindowSQL, window},
		{"next due", store.NextDueSQL, nil},
		{"next future due", store.NextFutureDueSQL, nil},
		{"stuck dispatched", store.StuckDispatchedSQL, []any{int64(time.Minute / time.Microsecond), 946684800, 946684800, 0, 100}},
		{"dispatched before", store.DispatchedBeforeSQL, []any{old, 946684800, 946684800, 0, 100}},
		{"running", store.RunningSQL, []any{0, 946684800, 946684800, 0, 100}},
		{"stats in flight", store.StatsInflightSQL, nil},
		{"stats waiting", store.StatsWaitingSQL, nil},
		{"queue depths", store.QueueDepthSQL, nil},
		{"waiting codes", store.WaitingCodesSQL, nil},
		{"queue named", store.QueueNamedSQL, []any{"q", "q", "q", "q", "q"}},
		{"purge", store.PurgeTasksSQL, []any{int64(24 * time.Hour / time.Microsecond), 1000}},
	} {
		rows, err := db.Query("EXPLAIN "+c.q, c.args...)
		require.NoError(t, err, c.name)
		lanes := 0
		for _, r := range explain(t, rows) {
			if r["Extra"] == "Select tables optimized away" {
				// MIN(lane_at) of one lane: a dive into the one index
				// that starts with lane.
				lanes++
			}
			if r["table"] != "task_center" {
				continue
			}
			require.NotContains(t, oldIndexes, r["key"], "%s: %v", c.name, r)
			require.Contains(t, []string{"idx_lane", "PRIMARY", "idx_held"}, r["key"], "%s: %v", c.name, r)
			require.NotEqual(t, "ALL", r["type"], "%s: %v", c.name, r)
			if r["key"] == "idx_lane" {
				lanes++
			}
		}
		require.Positive(t, lanes, "%s reads idx_lane", c.name)
	}
}

// Every hot statement reads idx_lane: the claims, the next due time,
// recovery's scans, the waiting and in-flight counts and the purge.
func TestHotStatementsReadIdxLane(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	idx := indexesOf(t, env.Store.DB())
	require.True(t, idx["idx_lane"])
	for _, name := range oldIndexes {
		require.False(t, idx[name], "%s is dropped on a new task center", name)
	}
	fillLanes(t, env.Store.DB())
	requireLanePlans(t, env.Store.DB())
}

// A task's lane and lane_at through its life: its priority and due time
// while it waits, 10 and its dispatch time in flight, 11 and its end once
// finished; no lane while dead or disabled.
func TestLaneThroughTaskLife(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := b.ctx
	// lane_at is compared with the column it must equal, by the server.
	lane := func(id int64) (sql.NullInt64, string) {
		t.Helper()
		var l sql.NullInt64
		var at string
		require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT lane, CASE
			WHEN lane_at IS NULL THEN 'null'
			WHEN lane_at = plan_next_run_at AND lane_at <> COALESCE(dispatched_at, 0) THEN 'due'
			WHEN lane_at = dispatched_at AND lane_at <> COALESCE(finished_at, 0) THEN 'dispatched'
			WHEN lane_at = finished_at THEN 'finished' ELSE 'other' END
			FROM task_center WHERE id = ?`, id).Scan(&l, &at))
		return l, at
	}
	requireLane := func(id int64, want int64, at string) {
		t.Helper()
		l, got := lane(id)
		require.Equal(t, sql.NullInt64{Int64: want, Valid: true}, l)
		require.Equal(t, at, got)
	}
	requireNoLane := func(id int64) {
		t.Helper()
		l, got := lane(id)
		require.False(t, l.Valid, "lane %d", l.Int64)
		require.Equal(t, "null", got)
	}
	claim := func(id int64) int {
		t.Helper()
		msgs, err := st.TaskClaimDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{id}, ids(msgs))
		return msgs[0].Attempt
	}
	run := func(id int64, attempt int) {
		t.Helper()
		ok, err := st.TaskMarkRunning(ctx, "w1", []store.Fence{{ID: id, Attempt: attempt}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, ok)
	}
	end := func(tr store.Transition) {
		t.Helper()
		ok, err := st.TaskTransition(ctx, []store.Transition{tr})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, ok)
	}
	// Dispatch times a second after the due times, ends a second after
	// the dispatch: the columns lane_at follows are told apart.
	backdate := func(id int64) {
		t.Helper()
		b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = plan_next_run_at - INTERVAL 2 SECOND,
			dispatched_at = dispatched_at - INTERVAL 1 SECOND WHERE id = ?`, id)
	}
	zero := time.Duration(0)
	actor := store.TaskAction{Actor: store.Actor{User: "test"}}

	id := insertRaw(t, b.env, "life", 3, task.Pending, -time.Second)
	requireLane(id, 3, "due")
	a := claim(id)
	backdate(id)
	requireLane(id, 10, "dispatched")
	run(id, a)
	requireLane(id, 10, "dispatched")
	end(store.Transition{ID: id, Attempt: a, From: task.Running, To: task.Failed, Retry: store.RetryInc, NextIn: &zero})
	requireLane(id, 3, "due")
	a = claim(id)
	backdate(id)
	run(id, a)
	end(store.Transition{ID: id, Attempt: a, From: task.Running, To: task.Succeeded})
	requireLane(id, 11, "finished")

	// Dead: no lane (idx_held counts it); retried: waiting again.
	dead := insertRaw(t, b.env, "life", 7, task.Pending, -time.Second)
	a = claim(dead)
	backdate(dead)
	run(dead, a)
	end(store.Transition{ID: dead, Attempt: a, From: task.Running, To: task.Dead})
	requireNoLane(dead)
	_, err := st.TaskRetry(ctx, actor, []int64{dead})
	require.NoError(t, err)
	requireLane(dead, 7, "due")

	// Cancelled by an operator: finished, retention's to delete.
	gone := insertRaw(t, b.env, "life", 0, task.Pending, time.Hour)
	requireLane(gone, 0, "due")
	_, err = st.TaskCancel(ctx, actor, []int64{gone})
	require.NoError(t, err)
	requireLane(gone, 11, "finished")

	// A disabled periodic task is cancelled without an end: kept, no
	// lane; enabled again, it waits for its next run.
	cron := insertRaw(t, b.env, "life", 9, task.Pending, time.Hour)
	b.env.Exec(t, `UPDATE task_center SET task_type = 1, cron_expr = '0 * * * *' WHERE id = ?`, cron)
	_, err = st.TaskDisable(ctx, actor, []int64{cron})
	require.NoError(t, err)
	requireNoLane(cron)
	_, err = st.TaskEnable(ctx, actor, []int64{cron}, map[int64]time.Time{cron: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	requireLane(cron, 9, "due")
}

// Statements of the release before idx_lane, as its nodes run them during
// a rolling upgrade: they force the old indexes.
var previousRelease = []string{
	`SELECT id FROM task_center FORCE INDEX (idx_claim) WHERE priority = 5 AND claim_key <= NOW(3) ORDER BY claim_key LIMIT 10`,
	`SELECT COUNT(*) FROM task_center FORCE INDEX (idx_claim) WHERE priority = 5 AND claim_key IS NOT NULL`,
	`SELECT id FROM task_center FORCE INDEX (idx_inflight) WHERE inflight_at IS NOT NULL`,
	`SELECT id FROM task_center FORCE INDEX (idx_finished) WHERE finished_at < NOW(3) - INTERVAL 1 DAY AND status IN (3, 6) ORDER BY finished_at LIMIT 10`,
}

// Migration 0010 adds idx_lane beside the old indexes: with the contract
// step 0011 deferred, the previous release's statements still run and
// this release's read idx_lane. Once 0011 has run the old indexes are gone
// (the previous release's statements fail) and this release works on.
func TestLanesExpandThenContract(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	dsn, raw := sideDatabase(t, env, "_lanes")
	st, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer st.Close()
	migs, err := store.Migrations()
	require.NoError(t, err)
	var prev []store.Migration // the previous release's: up to 0009
	var contract store.Migration
	var later []int // the expand steps after 0009
	for _, m := range migs {
		if m.Version <= 9 {
			prev = append(prev, m)
		} else if m.Version != 11 {
			later = append(later, m.Version)
		}
		if m.Version == 11 {
			contract = m
		}
	}
	require.Equal(t, "0011_drop_old_indexes.sql", contract.Name)
	_, err = st.Migrate(ctx, store.MigrateParams{Migrations: prev})
	require.NoError(t, err)
	fillLanes(t, raw)

	res, err := st.Migrate(ctx, store.MigrateParams{MayContract: func(_ context.Context, m store.Migration) string {
		if m.Version != 11 {
			return "" // later contract steps, of later releases
		}
		return "node old-1 runs an older release"
	}})
	require.NoError(t, err)
	require.Equal(t, later, res.Applied, "the later expand steps are not held back")
	require.Contains(t, later, 12)
	require.Equal(t, []store.Deferred{{Version: 11, Name: contract.Name, Reason: "node old-1 runs an older release"}}, res.Deferred)
	require.NoError(t, st.CheckSchema(ctx))
	idx := indexesOf(t, raw)
	require.True(t, idx["idx_lane"])
	for _, name := range oldIndexes {
		require.True(t, idx[name], "%s is kept for the previous release", name)
	}
	for _, q := range previousRelease {
		_, err := raw.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	_, err = raw.ExecContext(ctx, `ANALYZE TABLE task_center`)
	require.NoError(t, err)
	requireLanePlans(t, raw)
	exercise := func() {
		t.Helper()
		msgs, err := st.TaskClaimDue(ctx, 100)
		require.NoError(t, err)
		require.NotEmpty(t, msgs)
		qs, _, err := st.StatsCounts(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(len(msgs)+20), qs["w"].ByStatus[task.Dispatched]+qs["r"].ByStatus[task.Dispatched])
		stuck, err := st.TaskListStuckDispatched(ctx, time.Minute, store.InFlightCursor{}, 100)
		require.NoError(t, err)
		require.Len(t, stuck, 20)
		running, err := st.TaskListRunning(ctx, 0, store.InFlightCursor{}, 100)
		require.NoError(t, err)
		require.Len(t, running, 20)
		n, err := st.TaskPurgeFinished(ctx, 90*time.Minute, 10)
		require.NoError(t, err)
		require.Equal(t, 10, n)
		// Back to the state before, for the next round.
		_, err = raw.ExecContext(ctx, `UPDATE task_center SET status = 0, dispatched_at = NULL WHERE status = 1 AND task_code = 'w'`)
		require.NoError(t, err)
	}
	exercise()

	res, err = st.Migrate(ctx, store.MigrateParams{MayContract: func(context.Context, store.Migration) string { return "" }})
	require.NoError(t, err)
	require.Equal(t, []int{11}, res.Applied)
	require.NoError(t, st.CheckSchema(ctx))
	pending, err := st.PendingContracts(ctx)
	require.NoError(t, err)
	require.Empty(t, pending)
	idx = indexesOf(t, raw)
	require.True(t, idx["idx_lane"])
	for _, name := range oldIndexes {
		require.False(t, idx[name], "%s is dropped by the contract step", name)
	}
	for _, q := range previousRelease {
		_, err := raw.ExecContext(ctx, q)
		var me *mysql.MySQLError
		require.True(t, errors.As(err, &me) && me.Number == 1176, "%s: %v", q, err) // key does not exist
	}
	requireLanePlans(t, raw)
	exercise()
}

// Retention deletes finished tasks (succeeded or cancelled) older than its
// cutoff and reads nothing else: not the recent ones, not the dead ones
// (which idx_finished held beside them), not the disabled periodic ones.
func TestPurgeReadsOnlyWhatItDeletes(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO task_center (task_code, payload, status, finished_at)
			SELECT 'old', '{}', IF(seq % 5 = 0, 6, 3), NOW(3) - INTERVAL 2 DAY - INTERVAL seq SECOND FROM seq_1_to_100`,
		`INSERT INTO task_center (task_code, payload, status, finished_at)
			SELECT 'new', '{}', 3, NOW(3) - INTERVAL seq SECOND FROM seq_1_to_300`,
		`INSERT INTO task_center (task_code, payload, status, finished_at)
			SELECT 'dead', '{}', 5, NOW(3) - INTERVAL 3 DAY FROM seq_1_to_300`,
		`INSERT INTO task_center (task_code, task_type, cron_expr, payload, status)
			SELECT 'disabled', 1, '0 * * * *', '{}', 6 FROM seq_1_to_50`,
		`INSERT INTO task_center (task_code, payload, plan_next_run_at)
			SELECT 'wait', '{}', NOW(3) - INTERVAL 3 DAY FROM seq_1_to_50`,
		`ANALYZE TABLE task_center`,
	} {
		env.Exec(t, q)
	}
	day := int64(24 * time.Hour / time.Microsecond)
	rows, err := env.Store.DB().QueryContext(ctx, "EXPLAIN "+store.PurgeTasksSQL, day, 1000)
	require.NoError(t, err)
	plan := explain(t, rows)
	// The task_batch lookup is a batch member's alone (an open batch keeps
	// its members), one dive by primary key.
	require.Len(t, plan, 2)
	require.Equal(t, "task_center", plan[0]["table"], "%v", plan)
	require.Equal(t, "idx_lane", plan[0]["key"], "%v", plan)
	require.Equal(t, "range", plan[0]["type"], "%v", plan)
	require.Equal(t, "b", plan[1]["table"], "%v", plan)
	require.Contains(t, plan[1]["possible_keys"], "PRIMARY", "%v", plan)

	// One connection, so the session counters are the purge's.
	st, err := store.Open(ctx, env.DSN, store.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer st.Close()
	reads := func() int64 { return handlerReads(t, st.DB()) }
	r0 := reads()
	overhead := reads() - r0 // SHOW STATUS reads its own rows
	for _, c := range []struct{ limit, want int }{{30, 30}, {1000, 70}} {
		r := reads()
		n, err := st.TaskPurgeFinished(ctx, 24*time.Hour, c.limit)
		require.NoError(t, err)
		got := reads() - r - overhead
		require.Equal(t, c.want, n)
		t.Logf("purge of %d (limit %d) read %d rows", n, c.limit, got)
		// The rows it deletes, and one read past the last of them at most.
		require.LessOrEqual(t, got, int64(n+1), "the purge reads rows it keeps")
	}
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'old'`))
	for code, n := range map[string]int{"new": 300, "dead": 300, "disabled": 50, "wait": 50} {
		require.Equal(t, n, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = ?`, code), code)
	}
}
