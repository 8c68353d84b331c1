package producer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

var quiet = slog.New(slog.DiscardHandler)

// dispatching returns a client that dispatches at once, following the
// queue state of the environment, with window w (0: the default), and
// the broker it pushes with.
func dispatching(t *testing.T, env *testenv.Env, b *broker.Broker, w int) *producer.Client {
	t.Helper()
	qc := queues.New(queues.Config{Logger: quiet}, env.Store, b)
	b.SetLayout(qc)
	return producer.New(env.Store, b, producer.Options{Queues: qc, Window: w, Logger: quiet})
}

// queued returns the messages waiting in queue q's default lane.
func queued(t *testing.T, env *testenv.Env, q string) []*task.Message {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr})
	defer rdb.Close()
	raws, err := rdb.LRange(context.Background(), env.Broker.Keys.Queue(q, 0), 0, -1).Result()
	require.NoError(t, err)
	out := make([]*task.Message, len(raws))
	for i, raw := range raws {
		out[len(raws)-1-i], err = task.DecodeMessage([]byte(raw)) // LPUSH: the oldest is last
		require.NoError(t, err)
	}
	return out
}

// requireDispatched checks that task id was inserted as a claim leaves it:
// dispatched, attempt 1, dispatched_at set, held by no worker yet.
func requireDispatched(t *testing.T, env *testenv.Env, id int64) {
	t.Helper()
	tk, err := env.Store.TaskGet(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, task.Dispatched, tk.Status, "task %d", id)
	require.Equal(t, 1, tk.Attempt)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND dispatched_at IS NOT NULL
		AND dispatched_at >= plan_next_run_at AND worker_id = ''`, id))
}

func requirePending(t *testing.T, env *testenv.Env, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND attempt = 0`, id), "task %d", id)
	}
}

// TestSubmitDispatchesAtOnce: a task due now is in the task center as
// dispatched and its message in its queue when Submit returns, with no
// scheduler anywhere; single, batched and batch-member submits alike.
func TestSubmitDispatchesAtOnce(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	cl := dispatching(t, env, env.Broker, 0)
	before := producer.ProcessCounts()

	res, err := cl.Submit(ctx, producer.Submission{Code: "now", Payload: []byte(`{"a":1}`), UniqueKey: "k1",
		Children: []producer.Child{{Code: "after"}}})
	require.NoError(t, err)
	require.True(t, res.Dispatched)
	requireDispatched(t, env, res.ID)
	msgs := queued(t, env, "now")
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, res.ID, m.ID)
	require.Equal(t, 1, m.Attempt)
	require.Equal(t, "now", m.Queue)
	require.Equal(t, "k1", m.UniqueKey)
	require.JSONEq(t, `{"a":1}`, string(m.Payload))
	require.NotEmpty(t, m.Then)
	require.Positive(t, m.DispatchedUnixMS)

	rs, err := cl.SubmitBatch(ctx, []producer.Submission{{Code: "now"}, {Code: "now", Queue: "other"}, {Code: "now", Delay: time.Hour}})
	require.NoError(t, err)
	requireDispatched(t, env, rs[0].ID)
	requireDispatched(t, env, rs[1].ID)
	requirePending(t, env, rs[2].ID)
	require.Equal(t, []bool{true, true, false}, []bool{rs[0].Dispatched, rs[1].Dispatched, rs[2].Dispatched})
	require.Len(t, queued(t, env, "now"), 2)
	again, err := cl.Submit(ctx, producer.Submission{Code: "now", UniqueKey: "k1"})
	require.NoError(t, err)
	require.True(t, again.Existing)
	require.False(t, again.Dispatched, "nothing new was dispatched")
	require.Equal(t, rs[1].ID, queued(t, env, "other")[0].ID)

	br, err := cl.Batch(ctx, producer.Batch{Members: []producer.Submission{{Code: "member"}, {Code: "member", Delay: time.Hour}},
		Callback: producer.Callback{Code: "done"}})
	require.NoError(t, err)
	requireDispatched(t, env, br.MemberIDs[0])
	requirePending(t, env, br.MemberIDs[1])
	got := queued(t, env, "member")
	require.Len(t, got, 1)
	require.Equal(t, br.ID, got[0].Batch)

	// A seed-style row names no queue: the route a node recorded decides.
	_, err = env.Store.RouteRecord(ctx, "node-1", map[string]string{"routed": "elsewhere"})
	require.NoError(t, err)
	time.Sleep(queues.RefreshDefault) // the client rereads routes every second
	res, err = cl.Submit(ctx, producer.Submission{Code: "routed"})
	require.NoError(t, err)
	requireDispatched(t, env, res.ID)
	require.Equal(t, res.ID, queued(t, env, "elsewhere")[0].ID)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND queue = ''`, res.ID))

	// The default client (no queue state) leaves every task to the
	// schedulers, as before.
	plain := producer.New(env.Store, env.Broker, producer.Options{Logger: quiet})
	res, err = plain.Submit(ctx, producer.Submission{Code: "plain"})
	require.NoError(t, err)
	requirePending(t, env, res.ID)
	require.False(t, res.Dispatched)

	// Five pushed: the client counts them, and so does the process (other
	// tests' clients too, hence at least).
	require.Equal(t, producer.Counts{Dispatched: 5}, cl.Counts())
	require.Zero(t, plain.Counts())
	require.GreaterOrEqual(t, producer.ProcessCounts().Dispatched-before.Dispatched, int64(5))
}

// TestSubmitLeavesClaimRulesToTheScheduler: tasks a claim applies a rule
// to (a delay, a due time, a debounce, a paused queue, a group of a
// serial or per-group queue, a full window) are inserted pending, and a
// scheduler dispatches them.
func TestSubmitLeavesClaimRulesToTheScheduler(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	env.Exec(t, `INSERT INTO task_queue (name, paused) VALUES ('held', 1)`)
	env.Exec(t, `INSERT INTO task_queue (name, serial, limit_source) VALUES ('ledger', 1, 'operator')`)
	env.Exec(t, `INSERT INTO task_queue (name, max_running, per, limit_source) VALUES ('tenants', 2, 'group', 'operator')`)
	cl := dispatching(t, env, env.Broker, 2)

	rs, err := cl.SubmitBatch(ctx, []producer.Submission{
		{Code: "later", Delay: 50 * time.Millisecond},
		{Code: "timed", At: time.Now().Add(-time.Second)},
		{Code: "debounced", UniqueKey: "d", OnConflict: store.Conflict{Mode: store.Debounce, Debounce: 50 * time.Millisecond}},
		{Code: "held"},
		{Code: "ledger", Group: "account-1"},
		{Code: "tenants", Group: "t1"},
		{Code: "full"}, {Code: "full"}, {Code: "full"}, // a window of 2
	})
	require.NoError(t, err)
	var ids []int64
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	requirePending(t, env, ids[:6]...)
	requireDispatched(t, env, ids[6])
	requireDispatched(t, env, ids[7])
	requirePending(t, env, ids[8])

	// A grouped queue's task without a group is not grouped.
	res, err := cl.Submit(ctx, producer.Submission{Code: "ledger"})
	require.NoError(t, err)
	requireDispatched(t, env, res.ID)

	// A scheduler claims the waiting ones as ever (the paused and the
	// grouped ones only with the layout and groups it follows, tested in
	// pkg/scheduler).
	time.Sleep(100 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the tasks' due times
	sch := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker)
	_, err = sch.RunOnce(ctx)
	require.NoError(t, err)
	for _, id := range []int64{ids[0], ids[1], ids[2]} {
		require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 1 AND attempt = 1`, id), "task %d", id)
	}
}

// TestSubmitWindowBytes: a submit dispatches at once only while its
// queue's messages, counted at its payload's size, stay within
// WindowBytes; into an empty queue it dispatches whatever the size.
func TestSubmitWindowBytes(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	qc := queues.New(queues.Config{Logger: quiet}, env.Store, env.Broker)
	env.Broker.SetLayout(qc)
	cl := producer.New(env.Store, env.Broker, producer.Options{Queues: qc, WindowBytes: 1 << 20, Logger: quiet})
	payload := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n) + `"`) }

	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i] = producer.Submission{Code: "fat", Payload: payload(200_000)}
	}
	rs, err := cl.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	var got []bool
	for _, r := range rs {
		got = append(got, r.Dispatched)
	}
	require.Equal(t, []bool{true, true, true, true, true, false, false, false}, got, "five of 200 KB fit in 1 MiB")
	require.Len(t, queued(t, env, "fat"), 5)

	res, err := cl.Submit(ctx, producer.Submission{Code: "alone", Payload: payload(1_000_000)})
	require.NoError(t, err)
	require.True(t, res.Dispatched, "an empty queue takes a payload of any size")
	res, err = cl.Submit(ctx, producer.Submission{Code: "alone", Payload: payload(10)})
	require.NoError(t, err)
	require.True(t, res.Dispatched, "a small one fits beside it")
	res, err = cl.Submit(ctx, producer.Submission{Code: "alone", Payload: payload(600_000)})
	require.NoError(t, err)
	require.False(t, res.Dispatched, "two more of 600 KB would not")
	requirePending(t, env, res.ID)
}

// TestSubmitDispatchedUniqueKeys: a task dispatched at once holds its key
// like any other: a second submit finds it in every mode and changes
// nothing, and until-done takes the key over (dispatched at once too) only
// after it ended.
func TestSubmitDispatchedUniqueKeys(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	cl := dispatching(t, env, env.Broker, 0)
	first, err := cl.Submit(ctx, producer.Submission{Code: "u", UniqueKey: "k"})
	require.NoError(t, err)
	requireDispatched(t, env, first.ID)
	for _, c := range []store.Conflict{{}, {Mode: store.Replace}, {Mode: store.UntilDone}} {
		again, err := cl.Submit(ctx, producer.Submission{Code: "u", UniqueKey: "k", OnConflict: c, Payload: []byte(`{"v":2}`)})
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID, c.Mode.String())
		require.True(t, again.Existing)
		require.False(t, again.Changed)
	}
	require.Len(t, queued(t, env, "u"), 1)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE JSON_EXTRACT(payload, '$.v') IS NULL`))

	env.Exec(t, `UPDATE task_center SET status = 3 WHERE id = ?`, first.ID)
	next, err := cl.Submit(ctx, producer.Submission{Code: "u", UniqueKey: "k", OnConflict: store.Conflict{Mode: store.UntilDone}})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, next.ID)
	requireDispatched(t, env, next.ID)
	require.Len(t, queued(t, env, "u"), 2)
}

// TestSubmitPushFailsHandsBack: Redis dies between the commit and the push
// (a real redis-server shut down): the task goes back to pending with its
// attempt spent, and a scheduler dispatches it as attempt 2.
func TestSubmitPushFailsHandsBack(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	addr := testenv.PrivateRedis(t, 0)
	b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	cl := dispatching(t, env, b, 0)
	producer.SetPush(cl, func(ctx context.Context, msgs []*task.Message) ([]*task.Message, error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		_ = rdb.Do(ctx, "SHUTDOWN", "NOSAVE").Err() // the connection drops as it dies
		return b.Push(ctx, msgs)
	})
	res, err := cl.Submit(ctx, producer.Submission{Code: "lost"})
	require.NoError(t, err, "the task is committed: the submit succeeded")
	require.False(t, res.Dispatched)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND attempt = 1`, res.ID))
	require.Equal(t, producer.Counts{HandedBack: 1}, cl.Counts())

	sch := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker)
	n, err := sch.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, queued(t, env, "lost")[0].Attempt)
}

// TestSubmitIntoFullRedis: after a Redis at maxmemory refused a push to
// a queue, the client's next submits to it leave their tasks to the
// schedulers (pending, attempt 0) instead of inserting them claimed,
// failing to push and handing them back, each time.
func TestSubmitIntoFullRedis(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	b, err := broker.Open(ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	cl := dispatching(t, env, b, 0)
	first, err := cl.Submit(ctx, producer.Submission{Code: "full"})
	require.NoError(t, err, "the task is committed: the submit succeeded")
	require.False(t, first.Dispatched)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND attempt = 1`, first.ID))
	var later []int64
	for range 5 {
		res, err := cl.Submit(ctx, producer.Submission{Code: "full"})
		require.NoError(t, err)
		later = append(later, res.ID)
	}
	requirePending(t, env, later...)
	require.Equal(t, producer.Counts{HandedBack: 1}, cl.Counts(), "one refusal, then the queue is left to the schedulers")
	other, err := cl.Submit(ctx, producer.Submission{Code: "other"})
	require.NoError(t, err)
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND attempt = 1`, other.ID),
		"another queue is still tried at once")
}

// TestSubmitIntoStillFullRedis: when the wait after a refusal runs out
// and Redis is still past its maxmemory, the queue is left to the
// schedulers for another wait, not tried with a task whose attempt the
// refusal would spend; once Redis has room, submits dispatch at once again.
func TestSubmitIntoStillFullRedis(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	addr := testenv.FullRedis(t)
	b, err := broker.Open(ctx, broker.Options{Addr: addr, Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	qc := queues.New(queues.Config{Logger: quiet}, env.Store, b)
	b.SetLayout(qc)
	clk := clock.NewManual(time.Now())
	cl := producer.New(env.Store, b, producer.Options{Queues: qc, Logger: quiet, Clock: clk})
	_, err = cl.Submit(ctx, producer.Submission{Code: "full"})
	require.NoError(t, err)
	require.Equal(t, producer.Counts{HandedBack: 1}, cl.Counts())

	clk.Advance(scheduler.FullRedisWait + time.Second)
	res, err := cl.Submit(ctx, producer.Submission{Code: "full"})
	require.NoError(t, err)
	requirePending(t, env, res.ID)
	require.Equal(t, producer.Counts{HandedBack: 1}, cl.Counts(), "not tried into a Redis still full")

	// The other application's keys go; the next wait's end finds room.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.Del(ctx, "other-app:blobs").Err())
	clk.Advance(scheduler.FullRedisWait + time.Second)
	res, err = cl.Submit(ctx, producer.Submission{Code: "full"})
	require.NoError(t, err)
	require.True(t, res.Dispatched)
	require.Equal(t, producer.Counts{HandedBack: 1, Dispatched: 1}, cl.Counts())
}

// TestSubmitterDiesBeforePush: a submitter that commits and never pushes
// nor hands back (it died) leaves a dispatched task with no message.
// Recovery leaves it alone within recovery.dispatch_window and hands it
// back after, and a scheduler dispatches it: the bound is the window plus
// one recovery interval.
func TestSubmitterDiesBeforePush(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	st, err := store.Open(ctx, env.DSN, store.Options{})
	require.NoError(t, err)
	qc := queues.New(queues.Config{Logger: quiet}, st, env.Broker)
	cl := producer.New(st, env.Broker, producer.Options{Queues: qc, Logger: quiet})
	producer.SetPush(cl, func(_ context.Context, msgs []*task.Message) ([]*task.Message, error) {
		st.Close() // its hand-back cannot reach the task center either
		return msgs, errors.New("killed")
	})
	res, err := cl.Submit(ctx, producer.Submission{Code: "orphan"})
	require.NoError(t, err)
	requireDispatched(t, env, res.ID)
	require.Empty(t, queued(t, env, "orphan"))
	require.False(t, res.Dispatched)
	require.Equal(t, producer.Counts{LeftToRecovery: 1}, cl.Counts())

	rec := func(window time.Duration) recovery.Result {
		r, err := recovery.New(recovery.Config{DispatchWindow: window, Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
		require.NoError(t, err)
		return r
	}
	require.Zero(t, rec(recovery.DispatchWindowDefault).Redispatched, "within the window: its push may be on the way")
	time.Sleep(20 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the 10 ms window
	require.Equal(t, 1, rec(10*time.Millisecond).Redispatched)
	requirePendingAt(t, env, res.ID, 1)
	sch := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker)
	n, err := sch.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, queued(t, env, "orphan")[0].Attempt)
}

func requirePendingAt(t *testing.T, env *testenv.Env, id int64, attempt int) {
	t.Helper()
	require.Equal(t, 1, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0 AND attempt = ?`, id, attempt))
}

// TestSubmitWhileRedisHangs: a Redis that takes connections and never
// answers holds one submit at most its step's bound; the next ones skip
// Redis for a while and leave their tasks to the schedulers' polls, all
// committed. (Each used to wait for the client's timeouts and retries,
// seconds per submit of a web request.)
func TestSubmitWhileRedisHangs(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	proxy := testenv.NewFreezeProxy(t, testenv.RedisAddr())
	b, err := broker.Open(ctx, broker.Options{Addr: proxy.Addr(), Prefix: env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	cl := dispatching(t, env, b, 0)
	proxy.Freeze()
	start := time.Now()
	var ids []int64
	for range 10 {
		res, err := cl.Submit(ctx, producer.Submission{Code: "slow"})
		require.NoError(t, err)
		require.False(t, res.Dispatched)
		ids = append(ids, res.ID)
	}
	require.Less(t, time.Since(start), 5*time.Second, "ten submits, not ten waits for Redis")
	requirePending(t, env, ids...)
}
