package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// A result the server refuses (here: bytes a utf8mb4 column rejects) does
// not hold back the others of its batch, and its task is still finished,
// with a note in place of the output.
func TestRefusedResultDoesNotJamTheBatch(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	p := producer.New(env.Store, nil, producer.Options{})
	rs, err := p.SubmitBatch(ctx, []producer.Submission{{Code: "x"}, {Code: "x"}})
	require.NoError(t, err)
	msgs, err := env.Store.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	fences := []store.Fence{{ID: msgs[0].ID, Attempt: msgs[0].Attempt}, {ID: msgs[1].ID, Attempt: msgs[1].Attempt}}
	_, err = env.Store.TaskMarkRunning(ctx, "w", fences)
	require.NoError(t, err)

	var stale atomic.Int64
	c := newCompleter(env.Store, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	done := func(id int64, attempt int, result string) completion {
		return completion{queue: "x", raw: "m", tr: store.Transition{ID: id, Attempt: attempt, From: task.Running,
			To: task.Succeeded, SetResult: true, Result: result,
			Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded, Result: result}}}
	}
	c.write(ctx, []completion{done(rs[0].ID, 1, "fine"), done(rs[1].ID, 1, "bad \xff\xfe")})

	t0, err := env.Store.TaskGet(ctx, rs[0].ID)
	require.NoError(t, err)
	require.Equal(t, task.Succeeded, t0.Status)
	require.Equal(t, "fine", t0.LastResult)
	t1, err := env.Store.TaskGet(ctx, rs[1].ID)
	require.NoError(t, err)
	require.Equal(t, task.Succeeded, t1.Status)
	require.Contains(t, t1.LastResult, "result not stored")
	require.Equal(t, 2, env.Count(t, `SELECT COUNT(*) FROM task_run`))
}

// A parent whose result the server refuses is finished with a note; its
// children are created dead, saying why, not run with the note as their
// payload.
func TestRefusedResultKillsTheChildren(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	m := claimedTasks(t, env, 1)[0]
	then, err := task.EncodeChildren([]task.Child{{Code: "y"}})
	require.NoError(t, err)

	var stale atomic.Int64
	c := newCompleter(env.Store, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	cp := quickDone(m)
	cp.tr.SetResult, cp.tr.Result, cp.tr.Run.Result, cp.tr.Then = true, "bad \xff\xfe", "bad \xff\xfe", then
	c.write(ctx, []completion{cp})

	parent, err := env.Store.TaskGet(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, task.Succeeded, parent.Status)
	var status int
	var payload, result string
	require.NoError(t, env.Store.DB().QueryRowContext(ctx, `SELECT status, CAST(payload AS CHAR), COALESCE(last_result, '')
		FROM task_center WHERE parent_id = ?`, m.ID).Scan(&status, &payload, &result))
	require.Equal(t, int(task.Dead), status, "payload %q", payload)
	require.Contains(t, result, fmt.Sprintf("the result of parent task %d", m.ID))
	require.Contains(t, result, "was not stored")
	require.NotContains(t, payload, "result not stored")
}

// countingStore counts the transition writes reaching the task center.
type countingStore struct {
	Store
	writes atomic.Int64
}

func (s *countingStore) TaskTransition(ctx context.Context, ts []store.Transition) ([]bool, error) {
	s.writes.Add(1)
	return s.Store.TaskTransition(ctx, ts)
}

// claimedTasks submits n tasks of code x and claims them all.
func claimedTasks(t *testing.T, env *testenv.Env, n int) []*task.Message {
	t.Helper()
	ctx := context.Background()
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i].Code = "x"
	}
	_, err := producer.New(env.Store, nil, producer.Options{}).SubmitBatch(ctx, subs)
	require.NoError(t, err)
	msgs, err := env.Store.TaskClaimDue(ctx, n)
	require.NoError(t, err)
	require.Len(t, msgs, n)
	return msgs
}

// quickDone is the success of m's attempt, ended before its running mark.
func quickDone(m *task.Message) completion {
	return completion{queue: m.Queue, raw: "m", tr: store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched,
		To: task.Succeeded, Run: &store.RunRecord{Code: m.Code, Queue: m.Queue, Outcome: task.OutcomeSucceeded}}}
}

// A refused result in a large batch is found by halving the batch: a few
// writes, not one per result (a refused batch of 500 cost 500 writes), and
// every other result of the batch is written.
func TestRefusedResultFoundInFewWrites(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	const n = 64
	msgs := claimedTasks(t, env, n)

	cs := &countingStore{Store: env.Store}
	var stale atomic.Int64
	c := newCompleter(cs, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	batch := make([]completion, n)
	for i, m := range msgs {
		result := "fine"
		if i == n/3 {
			result = "bad \xff\xfe"
		}
		batch[i] = quickDone(m)
		batch[i].tr.SetResult, batch[i].tr.Result, batch[i].tr.Run.Result = true, result, result
	}
	c.write(ctx, batch)

	// The batch, two halves at each of log2(64) = 6 levels, the note.
	require.LessOrEqual(t, cs.writes.Load(), int64(1+2*6+1))
	require.Equal(t, n, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`))
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE last_result LIKE 'result not stored%'`))
	require.Equal(t, n, env.Count(t, `SELECT COUNT(*) FROM task_run`))
}

// The log line of a result the fence rejects names the task: id, code and
// attempt, like every line about a task.
func TestStaleResultLogNamesTheTask(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	id, _ := dispatchedMail(t, env)
	// Attempt 7 was never dispatched: the fence rejects it.
	line := writeRejected(t, env, store.Transition{ID: id, Attempt: 7, From: task.Running, To: task.Succeeded})
	require.Equal(t, "stale result rejected by the fence", line["msg"])
	require.EqualValues(t, id, line["task_id"])
	require.Equal(t, "mail", line["task_code"])
	require.EqualValues(t, 7, line["attempt"])
}

// A result whose task was deleted while it ran (taskd cron remove of a
// periodic task mid-run) is said so, not as a stale result, which reads
// as a task run twice.
func TestResultOfADeletedTaskIsSaidSo(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	id, attempt := dispatchedMail(t, env)
	require.NoError(t, env.Store.TaskDelete(context.Background(), id))
	line := writeRejected(t, env, store.Transition{ID: id, Attempt: attempt, From: task.Dispatched, To: task.Succeeded})
	require.Equal(t, "result dropped: the task was deleted while it ran (taskd cron remove, or delete)", line["msg"])
	require.Equal(t, "INFO", line["level"])
	require.EqualValues(t, id, line["task_id"])
}

// dispatchedMail submits a task of code mail and dispatches it.
func dispatchedMail(t *testing.T, env *testenv.Env) (id int64, attempt int) {
	t.Helper()
	ctx := context.Background()
	rs, err := producer.New(env.Store, nil, producer.Options{}).SubmitBatch(ctx, []producer.Submission{{Code: "mail"}})
	require.NoError(t, err)
	msgs, err := env.Store.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	return rs[0].ID, msgs[0].Attempt
}

// writeRejected writes tr, which the fence rejects, and returns the line
// the completer logged of it.
func writeRejected(t *testing.T, env *testenv.Env, tr store.Transition) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	var stale atomic.Int64
	c := newCompleter(env.Store, env.Broker, "w", slog.New(slog.NewJSONHandler(&buf, nil)), &stale)
	c.write(context.Background(), []completion{{code: "mail", queue: "mail", raw: "m", tr: tr}})
	require.EqualValues(t, 1, stale.Load())
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	return line
}

// Results that end a moment apart share a write: the first waits for the
// others (up to the linger) instead of a transaction of its own each.
func TestResultsEndingApartShareAWrite(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	msgs := claimedTasks(t, env, 5)

	cs := &countingStore{Store: env.Store}
	var stale atomic.Int64
	c := newCompleter(cs, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	c.linger = time.Second
	require.NoError(t, c.Start(ctx))
	defer c.stop(time.Second)
	c.add(quickDone(msgs[0]))
	require.Eventually(t, func() bool { return len(c.in) == 0 }, 10*time.Second, time.Millisecond, "a writer takes the first")
	for _, m := range msgs[1:] {
		c.add(quickDone(m))
	}
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`) == 5
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, cs.writes.Load())
}

// firstHung holds the first transition write until release is closed.
type firstHung struct {
	countingStore
	calls   atomic.Int64
	release chan struct{}
}

func (s *firstHung) TaskTransition(ctx context.Context, ts []store.Transition) ([]bool, error) {
	if s.calls.Add(1) == 1 {
		<-s.release
	}
	return s.countingStore.TaskTransition(ctx, ts)
}

// While one write is in flight, the results that end meanwhile gather into
// one batch (up to completerBatchMax) instead of going out as soon as a
// hundred of them are there: under load, full statements.
func TestResultsGatherWhileAWriteIsInFlight(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	const n = 301
	msgs := claimedTasks(t, env, n)

	hs := &firstHung{countingStore: countingStore{Store: env.Store}, release: make(chan struct{})}
	var stale atomic.Int64
	c := newCompleter(hs, env.Broker, "w", slog.New(slog.NewTextHandler(io.Discard, nil)), &stale)
	c.linger = time.Millisecond
	require.NoError(t, c.Start(ctx))
	defer c.stop(time.Second)
	c.add(quickDone(msgs[0]))
	require.Eventually(t, func() bool { return c.writingNow() }, 10*time.Second, time.Millisecond, "the first write is in flight")
	// Two waves of 150, each taken by the other writer before the next.
	for _, wave := range [][]*task.Message{msgs[1:151], msgs[151:]} {
		for _, m := range wave {
			c.add(quickDone(m))
		}
		require.Eventually(t, func() bool { return len(c.in) == 0 }, 10*time.Second, time.Millisecond)
	}
	close(hs.release)
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`) == n
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 2, hs.writes.Load(), "the held write and one of the 300 results after it")
}
