package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The log line of a result the fence rejects names the task: id, code and
// attempt, like every line about a task.
func TestStaleResultLogNamesTheTask(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	p := producer.New(env.Store, nil, producer.Options{})
	rs, err := p.SubmitBatch(ctx, []producer.Submission{{Code: "mail"}})
	require.NoError(t, err)
	_, err = env.Store.TaskClaimDue(ctx, "c", 10)
	require.NoError(t, err)

	var buf bytes.Buffer
	var stale atomic.Int64
	c := newCompleter(env.Store, env.Broker, "w", slog.New(slog.NewJSONHandler(&buf, nil)), &stale)
	// Attempt 7 was never dispatched: the fence rejects it.
	c.write([]completion{{code: "mail", queue: "mail", raw: "m", tr: store.Transition{ID: rs[0].ID, Attempt: 7,
		From: task.Running, To: task.Succeeded}}})
	require.EqualValues(t, 1, stale.Load())

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "stale result rejected by the fence", line["msg"])
	require.EqualValues(t, rs[0].ID, line["task_id"])
	require.Equal(t, "mail", line["task_code"])
	require.EqualValues(t, 7, line["attempt"])
}
