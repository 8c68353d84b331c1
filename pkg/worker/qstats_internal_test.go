package worker

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// The completer counts, in the queue's per-minute counters, the attempts
// whose result was applied, by outcome class; a result the fence rejects
// is no run and is not counted.
func TestCompleterCountsAppliedAttempts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	p := producer.New(env.Store, nil, producer.Options{})
	rs, err := p.SubmitBatch(ctx, []producer.Submission{{Code: "x"}, {Code: "x"}, {Code: "x"}, {Code: "x"}})
	require.NoError(t, err)
	msgs, err := env.Store.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	var fences []store.Fence
	for _, m := range msgs {
		fences = append(fences, store.Fence{ID: m.ID, Attempt: m.Attempt})
	}
	_, err = env.Store.TaskMarkRunning(ctx, "w", fences)
	require.NoError(t, err)

	var stale atomic.Int64
	c := newCompleter(env.Store, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c.now = func() time.Time { return at }
	end := func(id int64, attempt int, to task.Status, o task.Outcome) completion {
		return completion{queue: "x", raw: "m", tr: store.Transition{ID: id, Attempt: attempt, From: task.Running,
			To: to, Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: o}}}
	}
	c.write(ctx, []completion{
		end(rs[0].ID, 1, task.Succeeded, task.OutcomeSucceeded),
		end(rs[1].ID, 1, task.Dead, task.OutcomeDead),
		end(rs[2].ID, 7, task.Succeeded, task.OutcomeSucceeded), // never dispatched: fenced off
		end(rs[3].ID, 1, task.Dead, task.OutcomeCancelled),      // killed by an operator
	})
	require.EqualValues(t, 1, stale.Load())
	require.Equal(t, 3, env.Count(t, `SELECT COUNT(*) FROM task_run`))

	fields, err := env.Broker.Client().HGetAll(ctx, env.Broker.Keys.QueueStats("x")).Result()
	require.NoError(t, err)
	m := at.Unix() / 60
	require.Equal(t, map[string]string{
		itoa(m) + ":s": "1",
		itoa(m) + ":f": "1",
		itoa(m) + ":o": "1",
	}, fields)
	ttl, err := env.Broker.Client().TTL(ctx, env.Broker.Keys.QueueStats("x")).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Hour)

	runs, err := env.Broker.QueueRuns(ctx, []string{"x", "other"}, at)
	require.NoError(t, err)
	require.InDelta(t, 3, runs["x"].Processed1m, 1e-9)
	require.InDelta(t, 1, runs["x"].Failed1m, 1e-9)
	require.InDelta(t, 1, runs["x"].Succeeded10m, 1e-9)
	// A kill is an operator's decision, not a failure: it does not lower
	// the success rate.
	require.InDelta(t, 2, runs["x"].Ended10m, 1e-9)
	require.Zero(t, runs["other"].Ended10m)
	// A minute later the last minute holds the ended one pro rata; the
	// ten minutes still hold it whole.
	runs, err = env.Broker.QueueRuns(ctx, []string{"x"}, at.Add(90*time.Second))
	require.NoError(t, err)
	require.InDelta(t, 3*(1-35.0/60), runs["x"].Processed1m, 1e-9)
	require.InDelta(t, 2, runs["x"].Ended10m, 1e-9)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
