package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// The dispatch scans read a bounded range of idx_lane: what they cost
// depends on the batch size and the due rows, never on the future and
// finished rows around them (DESIGN: scan cost must not grow with them).
// Checked two ways: EXPLAIN names idx_lane for every branch, and the
// server's row-read counters for one run are the same with 20,000 and
// with 60,000 other rows in the table.
func TestClaimScanIsBounded(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_center (task_code, payload) SELECT 'due', '{}' FROM seq_1_to_300`)
	others := func(n string) {
		env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at) SELECT 'x', '{}', 3, NOW(3) FROM seq_1_to_`+n)
		env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, plan_next_run_at, cron_expr, priority)
			SELECT 'x', 1, '{}', NOW(3) + INTERVAL seq MINUTE, '* * * * *', seq % 10 FROM seq_1_to_`+n)
	}
	others("10000")
	env.Exec(t, `ANALYZE TABLE task_center`)

	const limit = 100
	args := make([]any, store.ClaimCandidateLimits)
	for i := range args {
		args[i] = limit
	}
	conn, err := env.Store.DB().Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	rows, err := conn.QueryContext(ctx, "EXPLAIN "+store.ClaimCandidatesSQL, args...)
	require.NoError(t, err)
	plan := explain(t, rows)
	branches := 0
	for _, r := range plan {
		if r["table"] == "task_center" && r["select_type"] != "PRIMARY" && r["key"] != "PRIMARY" {
			branches++
			require.Equal(t, "idx_lane", r["key"], "branch %v", r)
			require.Equal(t, "range", r["type"], "branch %v", r)
		}
	}
	require.Equal(t, 10, branches, "one idx_lane range per priority: %v", plan)

	reads := func(q string, args ...any) int64 {
		_, err := conn.ExecContext(ctx, "FLUSH STATUS")
		require.NoError(t, err)
		rs, err := conn.QueryContext(ctx, q, args...)
		require.NoError(t, err)
		n := 0
		for rs.Next() {
			n++
		}
		require.NoError(t, rs.Err())
		rs.Close()
		if strings.Contains(q, "LIMIT") {
			require.Equal(t, limit, n, "the claim reads a full batch")
		}
		var total int64
		st, err := conn.QueryContext(ctx, `SHOW SESSION STATUS LIKE 'Handler_read%'`)
		require.NoError(t, err)
		defer st.Close()
		for st.Next() {
			var name string
			var v int64
			require.NoError(t, st.Scan(&name, &v))
			total += v
		}
		return total
	}
	claim20k := reads(store.ClaimCandidatesSQL, args...)
	next20k := reads(store.NextDueSQL)
	others("20000")
	env.Exec(t, `ANALYZE TABLE task_center`)
	claim60k := reads(store.ClaimCandidatesSQL, args...)
	next60k := reads(store.NextDueSQL)
	t.Logf("rows read: claim of %d with 20,000 other rows %d, with 60,000 %d; next due %d, %d", limit, claim20k, claim60k, next20k, next60k)
	require.Equal(t, claim20k, claim60k)
	require.Equal(t, next20k, next60k)
	require.Less(t, claim20k, int64(12*limit), "a claim of %d reads about that many rows", limit)
	require.Less(t, next20k, int64(50))
}

// The waiting counts (stats, queue depths, doctor's codes, whether a queue
// is named) read idx_lane alone: a waiting task costs its index entry and
// no row lookup, however many wait in the future (migrations 0009, 0010). EXPLAIN
// says "Using index" for each priority's branch, and the counts agree with
// the rows, routes and due times, before and after a claim.
func TestWaitingCountsAreIndexOnly(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st := env.Store
	// qa: 30 due pending and 5 failed, due a minute ago; b: 2,000 future
	// tasks with no queue, routed to qb, and 1,000 succeeded ones.
	env.Exec(t, `INSERT INTO task_center (task_code, queue, payload, priority, plan_next_run_at)
		SELECT 'a', 'qa', '{}', seq % 10, NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_30`)
	env.Exec(t, `INSERT INTO task_center (task_code, queue, payload, status, plan_next_run_at, retry_count)
		SELECT 'a', 'qa', '{}', 4, NOW(3) - INTERVAL 1 MINUTE, 1 FROM seq_1_to_5`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at, priority)
		SELECT 'b', '{}', NOW(3) + INTERVAL seq MINUTE, seq % 10 FROM seq_1_to_2000`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at) SELECT 'b', '{}', 3, NOW(3) FROM seq_1_to_1000`)
	env.Exec(t, `INSERT INTO task_route (task_code, queue) VALUES ('b', 'qb')`)
	env.Exec(t, `ANALYZE TABLE task_center`)

	for name, q := range map[string]string{
		"stats": store.StatsWaitingSQL, "depths": store.QueueDepthSQL,
		"codes": store.WaitingCodesSQL, "named": store.QueueNamedSQL,
	} {
		var args []any
		if name == "named" {
			args = []any{"qb", "qb", "qb", "qb", "qb"}
		}
		rows, err := st.DB().QueryContext(ctx, "EXPLAIN "+q, args...)
		require.NoError(t, err)
		branches := 0
		for _, r := range explain(t, rows) {
			require.NotContains(t, []string{"idx_claim", "idx_inflight", "idx_finished"}, r["key"], "%s: %v", name, r)
			if r["key"] == "idx_lane" && strings.Contains(r["Extra"], "Using index") {
				branches++
			}
		}
		require.Equal(t, 10, branches, "%s: one index-only idx_lane range per priority", name)
	}

	check := func(qaPending, qaFailed, dispatched int64) {
		t.Helper()
		qs, _, err := st.StatsCounts(ctx)
		require.NoError(t, err)
		require.Equal(t, [7]int64{0: qaPending, 1: dispatched, 4: qaFailed}, qs["qa"].ByStatus)
		require.InDelta(t, 60, qs["qa"].OldestDueSeconds, 5)
		require.Equal(t, [7]int64{0: 2000}, qs["qb"].ByStatus)
		require.Zero(t, qs["qb"].OldestDueSeconds, "no task of qb is due")

		ds, _, err := st.QueueDepths(ctx)
		require.NoError(t, err)
		require.Equal(t, qaPending, ds["qa"].Pending)
		require.Equal(t, qaFailed, ds["qa"].Failed)
		require.Equal(t, qaPending+qaFailed, ds["qa"].Due)
		require.Equal(t, dispatched, ds["qa"].Dispatched)
		require.InDelta(t, 60, ds["qa"].OldestDue.Seconds(), 5)
		require.Equal(t, int64(2000), ds["qb"].Pending)
		require.Zero(t, ds["qb"].Due)
		require.Zero(t, ds["qb"].OldestDue)

		codes, err := st.WaitingCodes(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []store.WaitingCode{
			{Code: "a", Queue: "qa", Tasks: qaPending + qaFailed + dispatched}, {Code: "b", Queue: "qb", Tasks: 2000},
		}, codes)
	}
	check(30, 5, 0)
	for _, q := range []string{"qa", "qb"} {
		named, err := st.QueueNamed(ctx, q)
		require.NoError(t, err)
		require.True(t, named, q)
	}
	named, err := st.QueueNamed(ctx, "b")
	require.NoError(t, err)
	require.False(t, named, "b's tasks go to qb")

	// A claim takes tasks out of the waiting counts (the failed ones first:
	// due longest at their priority) and into the dispatched ones.
	msgs, err := st.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 10)
	var failed int64
	for _, m := range msgs {
		if m.RetryCount > 0 {
			failed++
		}
	}
	check(30-(10-failed), 5-failed, 10)
}

func explain(t *testing.T, rows *sql.Rows) []map[string]string {
	t.Helper()
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		r := map[string]string{}
		for i, c := range cols {
			r[c] = vals[i].String
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// A listing no index serves is stopped by the server at its time limit,
// with an error that says what to add, instead of reading on after its
// client gave up.
func TestListingStopsAtItsTimeLimit(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, attempt, finished_at, last_result)
		SELECT 'b', '{}', 3, 1, NOW(3), 'ok' FROM seq_1_to_50000`)
	st := env.Store
	st.CapScans(time.Millisecond)
	// The scan takes about 20 ms; the server's timer, a thread of its own,
	// may get no CPU for that long on a loaded machine, and the scan then
	// ends first. A few tries: one stop shows the limit works.
	stopped := func(read func() error) error {
		var err error
		for range 5 {
			if err = read(); err != nil {
				return err
			}
		}
		return err
	}
	err := stopped(func() error {
		_, err := st.TaskList(ctx, &store.TaskListParams{Search: "no such text"})
		return err
	})
	require.ErrorIs(t, err, store.ErrScanStopped)
	require.ErrorContains(t, err, "list tasks: read stopped after 1ms without an answer: no index serves this filter: narrow it by task code")
	err = stopped(func() error {
		_, err := st.TaskCount(ctx, store.TaskListParams{Queue: "no_such_queue"})
		return err
	})
	require.ErrorIs(t, err, store.ErrScanStopped)
	// A read that waits on a lock is stopped too, and not blamed on its
	// filter.
	conn, err := st.DB().Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `LOCK TABLES task_center WRITE`)
	require.NoError(t, err)
	unlocked := false
	defer func() { // a failed assertion must not leave the table locked for the cleanup
		if !unlocked {
			conn.ExecContext(ctx, `UNLOCK TABLES`)
		}
	}()
	st.CapScans(200 * time.Millisecond)
	_, err = st.TaskList(ctx, &store.TaskListParams{})
	require.ErrorIs(t, err, store.ErrScanStopped)
	require.ErrorContains(t, err, "a lock held elsewhere or a busy server kept it waiting")
	// A filter no index serves, stopped by the lock too: the lock is
	// named, not the filter.
	_, err = st.TaskList(ctx, &store.TaskListParams{Search: "no such text"})
	require.ErrorIs(t, err, store.ErrScanStopped)
	require.ErrorContains(t, err, "a lock held elsewhere or a busy server kept it waiting")
	_, err = conn.ExecContext(ctx, `UNLOCK TABLES`)
	require.NoError(t, err)
	unlocked = true

	st.CapScans(0)
	ts, err := st.TaskList(ctx, &store.TaskListParams{Search: "no such text"})
	require.NoError(t, err, "within the read timeout")
	require.Empty(t, ts)
}
