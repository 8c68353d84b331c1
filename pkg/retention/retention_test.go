package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/retention"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

func TestDeletesOnlyOldFinished(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	// 2,500 old succeeded, 10 old cancelled, 10 old dead (kept), 10 recent
	// succeeded (kept), 10 pending (kept).
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at)
		SELECT 'x', '{}', 3, NOW(3) - INTERVAL 8 DAY FROM seq_1_to_2500`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at)
		SELECT 'x', '{}', s.st, NOW(3) - INTERVAL s.age DAY FROM seq_1_to_10,
		(SELECT 6 AS st, 8 AS age UNION ALL SELECT 5, 8 UNION ALL SELECT 3, 1) s`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status) SELECT 'x', '{}', 0 FROM seq_1_to_10`)
	env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, queue, outcome, finished_at)
		SELECT seq, 1, 'x', 'x', 'succeeded', NOW(3) - INTERVAL IF(seq <= 1500, 40, 1) DAY FROM seq_1_to_2000`)

	r := retention.New(retention.Config{BatchSize: 1000}, env.Store, lock.NewRedis(env.Broker.Client(), env.Prefix))
	res, err := r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, retention.Result{Tasks: 2510, Runs: 1500}, res)
	require.Equal(t, 30, env.Count(t, `SELECT COUNT(*) FROM task_center`))
	require.Equal(t, 10, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 5`))
	require.Equal(t, 500, env.Count(t, `SELECT COUNT(*) FROM task_run`))
}

func TestOneNodeAtATime(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at)
		SELECT 'x', '{}', 3, NOW(3) - INTERVAL 8 DAY FROM seq_1_to_10`)
	locker := lock.NewRedis(env.Broker.Client(), env.Prefix)
	// Another node holds the retention lock: this one does nothing.
	lease, err := locker.Acquire(context.Background(), "retention", time.Minute)
	require.NoError(t, err)
	r := retention.New(retention.Config{}, env.Store, locker)
	res, err := r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Tasks)
	require.NoError(t, lease.Release(context.Background()))
	res, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 10, res.Tasks)
}

// Retention keeps what a later reader needs: the members of a batch still
// open, which its callback counts when the last one ends (a member
// deleted before was counted as cancelled), and a periodic task disabled
// while dead, whose end put it among the finished (its schedule was
// deleted a week later).
func TestKeepsOpenBatchesAndDisabledSchedules(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_batch (id, total, callback_code, callback_payload) VALUES (1, 4, 'done', '{}')`)
	env.Exec(t, `INSERT INTO task_batch (id, total, callback_code, callback_payload, finished_at) VALUES (2, 2, 'done', '{}', NOW(3) - INTERVAL 8 DAY)`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, finished_at, batch_id)
		SELECT 'x', '{}', 3, NOW(3) - INTERVAL 8 DAY, IF(seq <= 3, 1, 2) FROM seq_1_to_5`)
	env.Exec(t, `INSERT INTO task_center (task_code, payload, status, batch_id) VALUES ('x', '{}', 0, 1)`) // the open batch's last member
	env.Exec(t, `INSERT INTO task_center (task_code, payload, task_type, cron_expr, status, finished_at)
		VALUES ('tick', '{}', 1, '0 3 * * *', 5, NOW(3) - INTERVAL 8 DAY)`)
	tick := int64(env.Count(t, `SELECT id FROM task_center WHERE task_code = 'tick'`))
	disabled, err := env.Store.TaskDisable(ctx, store.TaskAction{Actor: store.Actor{User: "test"}, Action: "disable"}, []int64{tick})
	require.NoError(t, err)
	require.Equal(t, []int64{tick}, disabled)

	r := retention.New(retention.Config{BatchSize: 1000}, env.Store, lock.NewRedis(env.Broker.Client(), env.Prefix))
	res, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Tasks, "the finished batch's two members alone")
	require.Equal(t, 4, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE batch_id = 1`), "the open batch's members")
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 6`, tick), "the disabled schedule")
}
