package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// task_run has no index on finished_at (migration 17): the throughput
// series finds its first run by a search of the primary key, and counts
// the runs of each minute from there, a result written late among them.
func TestRunSeriesByPrimaryKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	var now int64
	require.NoError(t, env.Store.DB().QueryRowContext(ctx, `SELECT UNIX_TIMESTAMP(NOW())`).Scan(&now))
	minute := now/60 - 5
	// 5,000 runs an hour old, then 3 a minute in the last five minutes
	// (one failed in each), then one written late: it ended in the
	// series' first minute but its row came after the others.
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at)
		SELECT seq, 1, 'x', 'mail', 'succeeded', FROM_UNIXTIME(? * 60) - INTERVAL 1 HOUR FROM seq_1_to_5000`, minute)
	for m := minute; m < minute+5; m++ {
		env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at) VALUES
			(1, 1, 'x', 'mail', 'succeeded', FROM_UNIXTIME(? * 60 + 1)), (2, 1, 'x', 'mail', 'failed', FROM_UNIXTIME(? * 60 + 20)),
			(3, 1, 'x', 'mail', 'succeeded', FROM_UNIXTIME(? * 60 + 59))`, m, m, m)
	}
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at)
		VALUES (4, 1, 'x', 'mail', 'succeeded', FROM_UNIXTIME(? * 60 + 30))`, minute)

	got, err := env.Store.RunSeries(ctx, minute)
	require.NoError(t, err)
	byMinute := map[int64]store.RunMinute{}
	for _, r := range got {
		require.Equal(t, "mail", r.Queue)
		byMinute[r.Minute] = r
	}
	require.Len(t, byMinute, 5, "the hour-old runs are not read")
	require.Equal(t, store.RunMinute{Queue: "mail", Minute: minute, Ended: 4, Failed: 1}, byMinute[minute], "the late row counted")
	for m := minute + 1; m < minute+5; m++ {
		require.Equal(t, store.RunMinute{Queue: "mail", Minute: m, Ended: 3, Failed: 1}, byMinute[m])
	}
	got, err = env.Store.RunSeries(ctx, minute+3)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = env.Store.RunSeries(ctx, now/60+10)
	require.NoError(t, err)
	require.Empty(t, got, "nothing ended after now")
}

// Retention deletes old runs among the oldest ids, a batch at a time, and
// stops at the first batch that holds none: the runs to keep.
func TestRunPurgeByPrimaryKey(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at)
		SELECT seq, 1, 'x', 'mail', 'succeeded', NOW(3) - INTERVAL IF(seq <= 250, 40, 1) DAY FROM seq_1_to_400`)
	// A result written late: an old run after the recent ones.
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at)
		VALUES (401, 1, 'x', 'mail', 'succeeded', NOW(3) - INTERVAL 40 DAY)`)
	age := 30 * 24 * time.Hour
	for _, want := range []int{100, 100, 50, 0} {
		n, err := env.Store.RunPurge(ctx, age, 100)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	require.Equal(t, 151, env.Count(t, `SELECT COUNT(*) FROM task_run`), "the recent runs and the late one (behind them) stay")
	n, err := env.Store.RunPurge(ctx, age, 1000)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a batch that reaches it deletes it")
}
