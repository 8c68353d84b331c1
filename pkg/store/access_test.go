package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The probes need what a running node writes with, and nothing more: an
// account without DELETE (retention purges) is refused at start, as a
// config error naming the grant to give.
func TestCheckWriteAccess(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	require.NoError(t, env.Store.CheckWriteAccess(ctx))

	limited, err := store.Open(ctx, env.Account(t, "SELECT, INSERT, UPDATE"), store.Options{})
	require.NoError(t, err)
	defer limited.Close()
	err = limited.CheckWriteAccess(ctx)
	require.Equal(t, task.CodeConfig, task.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "DELETE command denied")
	require.ErrorContains(t, err, "GRANT SELECT, INSERT, UPDATE, DELETE ON `"+env.Database+"`.* TO the user of mysql.dsn")
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center`), "the probes change nothing")
}
