package ops_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/testenv"
)

// BenchmarkKillByFilter kills 2,000 pending tasks matched by a filter, as
// tasktop's "apply to all" does.
func BenchmarkKillByFilter(b *testing.B) {
	env := testenv.New(b)
	o := ops.New(env.Store, env.Broker)
	o.Known = func(string) bool { return true }
	env.Exec(b, `INSERT INTO task_center (task_code, task_type, payload, plan_next_run_at)
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
		SELECT 'bulk', 0, '{}', NOW(3) + INTERVAL 1 HOUR FROM n a, n b WHERE b.i <= 40`)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		env.Exec(b, `UPDATE task_center SET status = 0 WHERE task_code = 'bulk'`)
		b.StartTimer()
		c, err := o.Kill(ctx, ops.Target{Filter: &ops.Filter{Code: "bulk"}})
		require.NoError(b, err)
		require.Equal(b, 2000, c.Changed)
	}
}
