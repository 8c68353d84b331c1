package batch_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/batch"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/testenv"
)

// TestRunOnce: a pass finishes the batches whose members all ended, once,
// and leaves the others open.
func TestRunOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	insert := func(n int) store.BatchInsertResult {
		ms := make([]store.TaskInsertParams, n)
		for i := range ms {
			ms[i] = store.TaskInsertParams{Code: "m", Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60}
		}
		res, err := env.Store.BatchInsert(ctx, store.BatchInsertParams{Members: ms,
			Callback: store.BatchCallback{Code: "cb", Priority: 5, Timeout: 60, Payload: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		return res
	}
	ended, open := insert(3), insert(2)
	env.Exec(t, `UPDATE task_center SET status = 3 WHERE batch_id = ?`, ended.ID)
	env.Exec(t, `UPDATE task_center SET status = 6 WHERE id = ?`, open.MemberIDs[0]) // cancelled by an operator

	f := batch.New(batch.Config{}, env.Store)
	n, err := f.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'cb'`))

	// Started, it finishes the other once its last member ends.
	require.NoError(t, f.Start(ctx))
	defer f.Stop()
	env.Exec(t, `UPDATE task_center SET status = 5 WHERE id = ?`, open.MemberIDs[1])
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'cb'`) == 2
	}, 20*time.Second, 50*time.Millisecond)
	f.Stop()
	f.Stop()
}

// downStore is a task center that fails every read while down is set.
type downStore struct {
	mu     sync.Mutex
	down   bool
	passes int
}

func (s *downStore) BatchListFinishable(context.Context, int) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passes++
	if s.down {
		return nil, errors.New("list finishable batches: dial tcp 127.0.0.1:3306: connect: connection refused")
	}
	return nil, nil
}

func (s *downStore) BatchFinish(context.Context, []int64) ([]int64, error) { return nil, nil }

func (s *downStore) set(down bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	return s.passes
}

// TestOutageLogsOnce: while MySQL is down, a pass a second does not log a
// line a second (a MySQL restart filled each node's log with them): the
// first failure is logged, then a line a minute, and one when a pass works
// again.
func TestOutageLogsOnce(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	s := &downStore{down: true}
	f := batch.New(batch.Config{Interval: 2 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, s)
	require.NoError(t, f.Start(context.Background()))
	defer f.Stop()
	require.Eventually(t, func() bool { return s.set(true) >= 50 }, 10*time.Second, time.Millisecond)
	passes := s.set(false)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "works again") }, 10*time.Second, time.Millisecond)
	f.Stop()

	out := logs.String()
	require.Equal(t, 1, strings.Count(out, `msg="batch pass failed"`), "one line for %d failed passes:\n%s", passes, out)
	require.Contains(t, out, "connection refused", "the line says why")
	require.Equal(t, 1, strings.Count(out, `msg="batch pass works again"`), out)
}
