package recovery_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/recovery"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

type testBundle struct {
	env  *testenv.Env
	rec  *recovery.Recoverer
	prod *producer.Client
	rdb  redis.UniversalClient
	keys broker.Keys
}

func setup(t *testing.T, cfg recovery.Config) *testBundle {
	t.Helper()
	env := testenv.New(t)
	if cfg.DispatchWindow == 0 {
		cfg.DispatchWindow = time.Millisecond
	}
	if cfg.HeartbeatTTL == 0 {
		cfg.HeartbeatTTL = time.Second
	}
	if cfg.LossGrace == 0 {
		cfg.LossGrace = time.Millisecond
	}
	b := &testBundle{
		env:  env,
		rec:  recovery.New(cfg, env.Store, env.Broker),
		prod: producer.New(env.Store, nil, producer.Options{}),
		rdb:  env.Broker.Client(),
		keys: env.Broker.Keys,
	}
	return b
}

// oldEpoch makes Redis look like it has held its data for an hour, so
// heartbeats are trusted.
func (b *testBundle) oldEpoch(t *testing.T) {
	t.Helper()
	ms := time.Now().Add(-time.Hour).UnixMilli()
	require.NoError(t, b.rdb.Set(context.Background(), b.keys.Epoch(), strconv.FormatInt(ms, 10), 0).Err())
	// The task center has seen this data set: it is no first start.
	_, err := b.env.Store.RedisEpoch(context.Background(), b.env.Prefix, strconv.FormatInt(ms, 10))
	require.NoError(t, err)
}

func (b *testBundle) submit(t *testing.T, n int, s producer.Submission) []int64 {
	t.Helper()
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i] = s
		subs[i].Code = "job"
	}
	rs, err := b.prod.SubmitBatch(context.Background(), subs)
	require.NoError(t, err)
	ids := make([]int64, n)
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// claim dispatches every due task without pushing it: the push was lost.
func (b *testBundle) claim(t *testing.T) []*task.Message {
	t.Helper()
	msgs, err := b.env.Store.TaskClaimDue(context.Background(), 10000)
	require.NoError(t, err)
	return msgs
}

// run marks claimed tasks running on worker w.
func (b *testBundle) run(t *testing.T, w string, msgs []*task.Message) {
	t.Helper()
	fences := make([]store.Fence, len(msgs))
	for i, m := range msgs {
		fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
	}
	ok, err := b.env.Store.TaskMarkRunning(context.Background(), w, fences)
	require.NoError(t, err)
	for _, o := range ok {
		require.True(t, o)
	}
}

func (b *testBundle) status(t *testing.T, id int64) *task.Task {
	t.Helper()
	tk, err := b.env.Store.TaskGet(context.Background(), id)
	require.NoError(t, err)
	return tk
}

func (b *testBundle) beat(t *testing.T, w string) {
	t.Helper()
	require.NoError(t, b.env.Broker.Beat(context.Background(), &broker.Heartbeat{ID: w, Queues: []string{"job"}}, time.Minute))
}

func TestLostDispatchIsRedispatched(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	ids := b.submit(t, 3, producer.Submission{})
	b.claim(t)
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the dispatch

	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, res.Redispatched)
	for _, id := range ids {
		tk := b.status(t, id)
		require.Equal(t, task.Pending, tk.Status)
		require.Equal(t, 1, tk.Attempt, "the next dispatch makes it 2; the lost message carries 1")
		require.Equal(t, 0, tk.RetryCount)
	}
	// A second pass finds nothing.
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Redispatched)
}

func TestDispatchWaitingBehindBacklogIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	ids := b.submit(t, 2, producer.Submission{})
	msgs := b.claim(t)
	// Both messages are in the queue, waiting: nothing is lost.
	_, err := b.env.Broker.Push(context.Background(), msgs)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the dispatch
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Redispatched)
	require.Equal(t, task.Dispatched, b.status(t, ids[0]).Status)
}

// A poison message at the oldest end of the list hides nothing: the
// messages behind it are still waiting, not lost. Its list was skipped,
// the queue read as empty, and every waiting task handed back, to run
// twice once its first message was taken.
func TestDispatchWaitingBehindAPoisonMessageIsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	ids := b.submit(t, 2, producer.Submission{})
	msgs := b.claim(t)
	ctx := context.Background()
	_, err := b.env.Broker.Push(ctx, msgs)
	require.NoError(t, err)
	lane := b.env.Broker.Keys.Lane(msgs[0].Queue, 0, msgs[0].Priority)
	require.NoError(t, b.env.Broker.Client().RPush(ctx, lane, "{not json").Err())
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the dispatch
	res, err := b.rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Redispatched)
	require.Equal(t, task.Dispatched, b.status(t, ids[0]).Status)
}

// A slow queue's backlog, waiting in its list longer than the dispatch
// window, fills whole batches of the scan: a lost message dispatched after
// them is still found in the same pass, not once the backlog has drained.
func TestLostBehindAFullBatchOfWaitingIsRedispatched(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{BatchSize: 3})
	b.oldEpoch(t)
	waiting := b.submit(t, 7, producer.Submission{})
	msgs := b.claim(t)
	_, err := b.env.Broker.Push(context.Background(), msgs)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // dispatched after the backlog, by the database clock
	rs, err := b.prod.SubmitBatch(context.Background(), []producer.Submission{{Code: "other"}})
	require.NoError(t, err)
	lost := rs[0].ID
	require.Len(t, b.claim(t), 1) // its push is lost
	time.Sleep(5 * time.Millisecond)

	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Redispatched)
	require.Equal(t, task.Pending, b.status(t, lost).Status)
	for _, id := range waiting {
		require.Equal(t, task.Dispatched, b.status(t, id).Status, "task %d waits its turn in its queue", id)
	}
}

// A task that waited in its list past the dispatch window (behind a
// rate, a max_running) and was just taken by a live worker is still
// dispatched until its running mark: the queue behind it is empty, yet it
// is not lost. A message lost beside it still is.
func TestTakenAfterLongWaitIsNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	ids := b.submit(t, 2, producer.Submission{})
	msgs := b.claim(t)
	_, err := b.env.Broker.Push(context.Background(), msgs[:1])
	require.NoError(t, err)
	b.beat(t, "w1")
	got, err := b.env.Broker.TakeMany(context.Background(), "w1", []broker.TakeRequest{{Queue: "job", Max: 10}})
	require.NoError(t, err)
	require.Len(t, got[0].Msgs, 1)
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the dispatch

	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Redispatched, "only the lost message")
	require.Equal(t, task.Dispatched, b.status(t, ids[0]).Status, "the taken task stays with its worker")
	require.Equal(t, task.Pending, b.status(t, ids[1]).Status)
	// Once acked, a task still dispatched is lost again.
	require.NoError(t, b.env.Broker.Ack(context.Background(), "w1", map[string][]string{"job": got[0].Msgs}))
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Redispatched)
}

func TestRedisFlushRebuildsInFlight(t *testing.T) {
	t.Parallel()
	// A long window: only the detected reset makes recovery act, once its
	// grace has passed.
	const grace = time.Second
	b := setup(t, recovery.Config{DispatchWindow: time.Hour, LossGrace: grace, HeartbeatTTL: time.Minute})
	b.oldEpoch(t)
	ids := b.submit(t, 4, producer.Submission{})
	msgs := b.claim(t)
	_, err := b.env.Broker.Push(context.Background(), msgs)
	require.NoError(t, err)
	b.run(t, "alive-but-unbeaten", msgs[3:])

	// Redis loses everything.
	iter := b.rdb.Scan(context.Background(), 0, b.env.Prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		require.NoError(t, b.rdb.Del(context.Background(), iter.Val()).Err())
	}

	// Within the grace a dispatched task may be running unmarked on a live
	// worker: nothing is handed back yet.
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.True(t, res.RedisReset)
	require.Zero(t, res.Redispatched)
	// One of them ends meanwhile, straight over dispatched.
	ok, err := b.env.Store.TaskTransition(context.Background(), []store.Transition{{
		ID: msgs[2].ID, Attempt: msgs[2].Attempt, From: task.Dispatched, To: task.Succeeded}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)
	// A task dispatched after the loss is in the new Redis.
	after := b.submit(t, 1, producer.Submission{})
	_, err = b.env.Broker.Push(context.Background(), b.claim(t))
	require.NoError(t, err)

	time.Sleep(grace) // the grace is counted on the database clock, which a test cannot drive
	// Each pass measures that clock anew, to within a round trip: the pass
	// that acts may be the next one.
	require.Eventually(t, func() bool {
		res, err = b.rec.RunOnce(context.Background())
		require.NoError(t, err)
		require.False(t, res.RedisReset)
		return res.Redispatched > 0
	}, 10*time.Second, 20*time.Millisecond, "nothing handed back after the grace")
	require.Equal(t, 2, res.Redispatched)
	for _, id := range ids[:2] {
		require.Equal(t, task.Pending, b.status(t, id).Status)
	}
	require.Equal(t, task.Succeeded, b.status(t, ids[2]).Status)
	require.Equal(t, task.Dispatched, b.status(t, after[0]).Status)
	// The running task's worker has not beaten since the reset: it is not
	// judged dead on a missing heartbeat.
	require.Zero(t, res.Recovered)
	require.Equal(t, task.Running, b.status(t, ids[3]).Status)
}

// A first start on an empty Redis (a fresh prefix) is no Redis reset:
// the messages just pushed are still there, and nothing is dispatched a
// second time. The task center remembers the data set, so a later loss is
// still told apart.
func TestFirstStartIsNoReset(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	b := setup(t, recovery.Config{DispatchWindow: time.Hour, LossGrace: grace})
	b.submit(t, 4, producer.Submission{})
	msgs := b.claim(t)
	_, err := b.env.Broker.Push(context.Background(), msgs)
	require.NoError(t, err)

	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.False(t, res.RedisReset)
	require.Zero(t, res.Redispatched)
	require.Equal(t, 4, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1 AND attempt = 1`))
	// A second recoverer (another node starting at once) agrees.
	other := recovery.New(recovery.Config{DispatchWindow: time.Hour}, b.env.Store, b.env.Broker)
	res, err = other.RunOnce(context.Background())
	require.NoError(t, err)
	require.False(t, res.RedisReset)
	require.Zero(t, res.Redispatched)

	// Now Redis loses its data: that is a reset, seen by one node, which
	// hands back what was dispatched once the grace has passed.
	require.NoError(t, b.env.Broker.DeletePrefix(context.Background()))
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.True(t, res.RedisReset)
	res, err = other.RunOnce(context.Background())
	require.NoError(t, err)
	require.False(t, res.RedisReset)
	require.Zero(t, res.Redispatched)
	time.Sleep(grace) // the grace is counted on the database clock, which a test cannot drive
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 4, res.Redispatched)
}

func TestDeadWorkersTasksRecoveredThenPoison(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{CrashLimit: 3})
	b.oldEpoch(t)
	id := b.submit(t, 1, producer.Submission{})[0]
	for crash := 1; crash <= 3; crash++ {
		msgs := b.claim(t)
		require.Len(t, msgs, 1)
		b.run(t, "ghost-"+strconv.Itoa(crash), msgs)
		// Its node, as its heartbeats recorded it, and an attempt that ran
		// for 5 s before the worker died.
		require.NoError(t, b.env.Broker.Client().Set(context.Background(), b.env.Broker.Keys.WorkerNode("ghost-"+strconv.Itoa(crash)), "node-x", 0).Err())
		b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 5 SECOND WHERE id = ?`, id)
		res, err := b.rec.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, res.Recovered)
		events, err := b.env.Broker.Events(context.Background(), 1)
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.Equal(t, id, events[0].TaskID)
		require.Equal(t, "ghost-"+strconv.Itoa(crash), events[0].WorkerID)
		require.Equal(t, "node-x", events[0].Node, "the event names the dead worker's node")
		if crash < 3 {
			require.Equal(t, recovery.KindRecovered, events[0].Kind)
		} else {
			require.Equal(t, recovery.KindPoisoned, events[0].Kind)
		}
		tk := b.status(t, id)
		require.Equal(t, crash, tk.CrashCount)
		require.Equal(t, 0, tk.RetryCount, "a crash is not a handler failure")
		if crash < 3 {
			require.Equal(t, task.Pending, tk.Status)
			continue
		}
		require.Equal(t, 1, res.Poisoned)
		require.Equal(t, task.Dead, tk.Status)
		require.Contains(t, tk.LastResult, "poison task")
	}
	runs, err := b.env.Store.RunList(context.Background(), id, 10)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	for _, r := range runs {
		require.Equal(t, task.OutcomeCrashed, r.Outcome)
		require.Equal(t, "node-x", r.Node, "a crashed run names its worker's node")
		require.GreaterOrEqual(t, r.FinishedAt.Sub(r.StartedAt), 4*time.Second, "and when its attempt started")
	}
}

func TestLiveWorkerLongTaskIsNeverTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{RunningGrace: time.Second})
	b.oldEpoch(t)
	id := b.submit(t, 1, producer.Submission{Timeout: time.Hour})[0]
	b.beat(t, "w1")
	b.run(t, "w1", b.claim(t))
	// Running for a day by its start time, but within its timeout.
	b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 50 MINUTE, dispatched_at = NOW(3) - INTERVAL 50 MINUTE WHERE id = ?`, id)
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Recovered)
	require.Equal(t, task.Running, b.status(t, id).Status)
}

// A row INSERTed with a timeout of 0 or less (a PHP habit for "none")
// runs under the default timeout, and recovery reads it so too: it used
// to take such a task from its live worker once it had run for the grace.
func TestTimeoutNotAboveZeroIsTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{RunningGrace: time.Second})
	b.oldEpoch(t)
	ids := b.submit(t, 2, producer.Submission{})
	b.beat(t, "w1")
	b.run(t, "w1", b.claim(t))
	b.env.Exec(t, `UPDATE task_center SET timeout = 0 WHERE id = ?`, ids[0])
	b.env.Exec(t, `UPDATE task_center SET timeout = -1 WHERE id = ?`, ids[1])
	// Four minutes into the default five.
	b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 4 MINUTE WHERE id IN (?, ?)`, ids[0], ids[1])
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Recovered)
	// Past it, with the grace.
	b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 302 SECOND WHERE id IN (?, ?)`, ids[0], ids[1])
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, res.Recovered)
}

func TestHungTaskPastTimeoutIsTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{RunningGrace: time.Second})
	b.oldEpoch(t)
	id := b.submit(t, 1, producer.Submission{Timeout: 10 * time.Second})[0]
	b.beat(t, "w1")
	b.run(t, "w1", b.claim(t))
	b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 12 SECOND WHERE id = ?`, id)
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	tk := b.status(t, id)
	require.Equal(t, task.Pending, tk.Status)
	require.Contains(t, tk.LastResult, "past its timeout")
}

// A live worker whose heartbeat says results of its wait to be written
// (the task center was down) keeps its overdue tasks: their attempts may
// have ended, and taken as hung they would run again and their results
// be refused. Once it wrote them, what is still overdue is taken.
func TestOverdueTaskOfAWorkerHoldingResultsIsLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{RunningGrace: time.Second})
	b.oldEpoch(t)
	id := b.submit(t, 1, producer.Submission{Timeout: 10 * time.Second})[0]
	holding := &broker.Heartbeat{ID: "w1", Queues: []string{"job"}, ResultsWaitingMS: 400_000}
	require.NoError(t, b.env.Broker.Beat(context.Background(), holding, time.Minute))
	b.run(t, "w1", b.claim(t))
	b.env.Exec(t, `UPDATE task_center SET started_at = NOW(3) - INTERVAL 7 MINUTE WHERE id = ?`, id)
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Recovered)
	require.Equal(t, task.Running, b.status(t, id).Status)

	b.beat(t, "w1") // written: none waits
	res, err = b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	require.Contains(t, b.status(t, id).LastResult, "past its timeout")
}

func TestDeadWorkerOrphansHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{DispatchWindow: time.Hour, CrashLimit: 3})
	b.oldEpoch(t)
	ids := b.submit(t, 3, producer.Submission{})
	// The third killed its worker twice before: this is its last crash.
	b.env.Exec(t, `UPDATE task_center SET crash_count = 2 WHERE id = ?`, ids[2])
	poison := ids[2]
	ids = ids[:2]
	msgs := b.claim(t)
	ctx := context.Background()
	// Worker "ghost" took the messages, then died before marking them.
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "ghost", Node: "node-g", Queues: []string{"job"}}, time.Minute))
	for _, m := range msgs {
		raw, err := m.Encode()
		require.NoError(t, err)
		require.NoError(t, b.rdb.LPush(ctx, b.keys.Processing("job", "ghost"), raw).Err())
	}
	require.NoError(t, b.rdb.Del(ctx, b.keys.Worker("ghost")).Err())
	require.NoError(t, b.rdb.ZAdd(ctx, b.keys.Workers(), redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: "ghost"}).Err())

	res, err := b.rec.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadWorkers)
	require.Equal(t, 3, res.Orphans)
	require.Equal(t, 1, res.Poisoned, "the poison task is said to be one")
	for _, id := range ids {
		require.Equal(t, task.Pending, b.status(t, id).Status)
	}
	require.Equal(t, task.Dead, b.status(t, poison).Status)
	n, err := b.rdb.Exists(ctx, b.keys.Processing("job", "ghost"), b.keys.WorkerQueues("ghost")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, b.rdb.ZCard(ctx, b.keys.Workers()).Val())

	// Gone from the registry, it is still known as drained, by its node,
	// and the drain is an event operators see.
	gone, err := b.env.Broker.GoneWorkers(ctx, time.Hour)
	require.NoError(t, err)
	require.Len(t, gone, 1)
	require.Equal(t, "ghost", gone[0].ID)
	require.Equal(t, "node-g", gone[0].Node)
	require.True(t, gone[0].Drained)
	require.WithinDuration(t, time.Now().Add(-time.Minute), gone[0].LastBeat, 5*time.Second)
	gone, err = b.env.Broker.GoneWorkers(ctx, 30*time.Second)
	require.NoError(t, err)
	require.Empty(t, gone, "its last beat is older than that")
	events, err := b.env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, recovery.KindDrained, events[0].Kind, "newest first")
	require.Equal(t, "node-g", events[0].Node)
	require.Equal(t, "ghost", events[0].WorkerID)
	require.Contains(t, events[0].Detail, "3 attempts it had taken recovered, each counted as a crash")
	require.Equal(t, recovery.KindPoisoned, events[1].Kind)
	require.Equal(t, poison, events[1].TaskID)
}

func TestCompletedTaskIsNeverReverted(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	id := b.submit(t, 1, producer.Submission{})[0]
	msgs := b.claim(t)
	b.run(t, "ghost", msgs)
	// The worker finishes just before recovery looks.
	applied, err := b.env.Store.TaskTransition(context.Background(), []store.Transition{{
		ID: id, Attempt: msgs[0].Attempt, From: task.Running, To: task.Succeeded,
	}})
	require.NoError(t, err)
	require.True(t, applied[0])
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Recovered)
	require.Equal(t, task.Succeeded, b.status(t, id).Status)
}

func TestRecoversInBoundedBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{BatchSize: 100})
	b.oldEpoch(t)
	b.submit(t, 2500, producer.Submission{})
	msgs := b.claim(t)
	require.Len(t, msgs, 2500)
	b.run(t, "ghost", msgs[:1200])
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3), not drivable) moves past the dispatch
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1300, res.Redispatched)
	require.Equal(t, 1200, res.Recovered)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status <> 0`))
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{Interval: 10 * time.Millisecond})
	b.rec.Stop() // without Start
	require.NoError(t, b.rec.Start(context.Background()))
	require.Error(t, b.rec.Start(context.Background()))
	b.rec.Stop()
	b.rec.Stop()
}

// Rows INSERTed as dispatched or running, without a dispatch time, are
// handed back to pending: no scan of the in-flight lane by age reaches
// them, and nothing of taskd holds them.
func TestUndatedInFlightRowsHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{})
	b.oldEpoch(t)
	for _, st := range []int{1, 2} {
		b.env.Exec(t, `INSERT INTO task_center (task_code, payload, status, plan_next_run_at) VALUES ('job', '{}', ?, NOW(3))`, st)
	}
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, res.Redispatched)
	require.Len(t, b.claim(t), 2, "both pending and due again")
}

// A row written running with a dispatch time and no start (a producer
// copying its own states) is judged from its dispatch: a NULL start failed
// the running scan of every pass, and no dead worker's task was recovered.
func TestRunningRowWithoutStartIsRecovered(t *testing.T) {
	t.Parallel()
	b := setup(t, recovery.Config{RunningGrace: time.Millisecond})
	b.oldEpoch(t)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, status, attempt, worker_id, timeout, plan_next_run_at, dispatched_at)
		VALUES ('job', '{}', 2, 1, 'w-gone', 1, NOW(3) - INTERVAL 1 HOUR, NOW(3) - INTERVAL 1 HOUR)`)
	res, err := b.rec.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	require.Len(t, b.claim(t), 1, "pending and due again")
}
