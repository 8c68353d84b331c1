package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// The dispatch scans read a bounded range of idx_claim: what they cost
// depends on the batch size and the due rows, never on the future and
// finished rows around them (DESIGN: scan cost must not grow with them).
// Checked two ways: EXPLAIN names idx_claim for every branch, and the
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
			require.Equal(t, "idx_claim", r["key"], "branch %v", r)
			require.Equal(t, "range", r["type"], "branch %v", r)
		}
	}
	require.Equal(t, 10, branches, "one idx_claim range per priority: %v", plan)

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
