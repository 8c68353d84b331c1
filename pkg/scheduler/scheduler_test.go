package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

type testBundle struct {
	env      *testenv.Env
	ctx      context.Context
	producer *producer.Client
}

var quiet = slog.New(slog.DiscardHandler)

func setup(t *testing.T, cfg scheduler.Config) (*scheduler.Scheduler, *testBundle) {
	t.Helper()
	env := testenv.New(t)
	cfg.Logger = quiet
	s := scheduler.New(cfg, env.Store, env.Broker)
	t.Cleanup(s.Stop)
	return s, &testBundle{
		env:      env,
		ctx:      context.Background(),
		producer: producer.New(env.Store, env.Broker, producer.Options{Logger: quiet}),
	}
}

// openHandles opens a second store and broker on the same environment, as
// another node would.
func openHandles(t *testing.T, env *testenv.Env) (*store.Store, *broker.Broker) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, env.DSN, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	br, err := broker.Open(ctx, env.BrokerOptions())
	require.NoError(t, err)
	t.Cleanup(func() { br.Close() })
	return st, br
}

func submit(t *testing.T, b *testBundle, n int) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		subs := make([]producer.Submission, min(1000, n-len(ids)))
		for i := range subs {
			subs[i] = producer.Submission{Code: "hello", Payload: []byte(fmt.Sprintf(`{"n":%d}`, len(ids)+i))}
		}
		res, err := b.producer.SubmitBatch(b.ctx, subs)
		require.NoError(t, err)
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func TestRunOnceRace(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	env := b.env
	const total = 5000
	submit(t, b, total)

	// No worker takes from the queue: the window must hold all of them.
	scheds := []*scheduler.Scheduler{
		scheduler.New(scheduler.Config{BatchSize: 100, Window: total, Logger: quiet}, env.Store, env.Broker),
	}
	for range 2 { // two more nodes, each with its own connections
		st, br := openHandles(t, env)
		scheds = append(scheds, scheduler.New(scheduler.Config{BatchSize: 100, Window: total, Logger: quiet}, st, br))
	}

	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	claimed := make([]int, len(scheds))
	errs := make([]error, len(scheds))
	var wg sync.WaitGroup
	for i, s := range scheds {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := s.RunOnce(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				claimed[i] += n
				if n == 0 {
					var due int
					if err := env.Store.DB().QueryRowContext(ctx,
						`SELECT COUNT(*) FROM task_center WHERE status IN (0, 4)`).Scan(&due); err != nil {
						errs[i] = err
						return
					}
					if due == 0 {
						return
					}
				}
			}
			errs[i] = ctx.Err()
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "scheduler %d", i)
	}
	t.Logf("claimed per scheduler: %v", claimed)
	sum := 0
	for _, n := range claimed {
		sum += n
	}
	require.Equal(t, total, sum, "every task claimed exactly once")
	require.Equal(t, total, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1 AND attempt = 1`))
	require.Equal(t, total, env.Count(t, `SELECT COUNT(*) FROM task_center`))
	var dispatched int64
	for _, s := range scheds {
		dispatched += s.Dispatched()
	}
	require.Equal(t, int64(total), dispatched)

	rdb := env.Broker.Client()
	key := env.Broker.Keys.Queue("hello", 0)
	n, err := rdb.LLen(b.ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, int64(total), n)
	raws, err := rdb.LRange(b.ctx, key, 0, -1).Result()
	require.NoError(t, err)
	seen := map[int64]bool{}
	for _, raw := range raws {
		m, err := task.DecodeMessage([]byte(raw))
		require.NoError(t, err)
		require.Equal(t, 1, m.Attempt)
		require.Equal(t, "hello", m.Queue)
		seen[m.ID] = true
	}
	require.Len(t, seen, total, "distinct task ids in the queue")
}

func TestPushFailureHandsBack(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	env := b.env
	ids := submit(t, b, 20)
	// Due a minute ago: a hand back keeps that, the age the oldest-due
	// alert and the claim's order read.
	env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) - INTERVAL 1 MINUTE`)
	due := map[int64]time.Time{}
	for _, id := range ids {
		tk, err := env.Store.TaskGet(b.ctx, id)
		require.NoError(t, err)
		due[id] = tk.PlanNextRun
	}

	// A Redis that answers but refuses every push: at maxmemory.
	br, err := broker.Open(b.ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: env.Prefix})
	require.NoError(t, err)
	defer br.Close()
	broken := scheduler.New(scheduler.Config{BatchSize: 100, Logger: quiet}, env.Store, br)
	n, err := broken.RunOnce(b.ctx)
	require.Error(t, err)
	require.Equal(t, 20, n)
	require.Zero(t, broken.Dispatched())

	for _, id := range ids {
		tk, err := env.Store.TaskGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, task.Pending, tk.Status, "task %d handed back", id)
		require.Equal(t, 1, tk.Attempt, "the attempt stays spent: a late push is fenced out")
		require.Empty(t, tk.WorkerID)
		require.True(t, due[id].Equal(tk.PlanNextRun), "task %d due at %v, handed back due at %v", id, due[id], tk.PlanNextRun)
	}
	require.Equal(t, 20, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0 AND plan_next_run_at <= NOW(3)`),
		"handed back due now")
	ql, err := env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.Zero(t, ql)

	// A healthy scheduler dispatches them again, as attempt 2.
	good := scheduler.New(scheduler.Config{BatchSize: 100, Logger: quiet}, env.Store, env.Broker)
	n, err = good.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 20, n)
	require.Equal(t, 20, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1 AND attempt = 2`))
	ql, err = env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.Equal(t, int64(20), ql)
}

// fullRedisBacklog submits 1,500 tasks of 2 KB and returns a broker on a
// private Redis of 2 MB (noeviction) that cannot hold them.
func fullRedisBacklog(t *testing.T, b *testBundle) *broker.Broker {
	t.Helper()
	addr := testenv.PrivateRedis(t, 0, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	br, err := broker.Open(b.ctx, broker.Options{Addr: addr, Prefix: b.env.Prefix})
	require.NoError(t, err)
	t.Cleanup(func() { br.Close() })
	pad := strings.Repeat("x", 2048)
	for range 3 {
		subs := make([]producer.Submission, 500)
		for i := range subs {
			subs[i] = producer.Submission{Code: "hello", Payload: []byte(fmt.Sprintf(`{"pad":%q}`, pad))}
		}
		_, err := b.producer.SubmitBatch(b.ctx, subs)
		require.NoError(t, err)
	}
	return br
}

// A Redis at maxmemory caps the window of the queue it refused: the
// scheduler does not claim, fail to push and hand back the same tasks
// many times a second (each round a read of their payloads and two
// writes), but waits for the queue's workers to drain it. Here none run,
// so after the first refusal no task is claimed again.
func TestFullRedisCapsTheWindow(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	env := b.env
	br := fullRedisBacklog(t, b)
	s := scheduler.New(scheduler.Config{BatchSize: 500, PollInterval: 50 * time.Millisecond, Logger: quiet}, env.Store, br)
	require.NoError(t, s.Start(b.ctx))
	defer s.Stop()
	handedBack := `SELECT COUNT(*) FROM task_center WHERE status = 0 AND attempt > 0`
	require.Eventually(t, func() bool { return env.Count(t, handedBack) > 0 }, 20*time.Second, 20*time.Millisecond,
		"Redis never refused a push")
	time.Sleep(2 * time.Second) // an absence: two seconds in which the scheduler may not claim again
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 1`),
		"tasks claimed again into a full Redis")
	ql, err := br.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.Equal(t, 1500-env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`), int(ql),
		"every task is pending or queued")
}

// A Redis full from the start refuses every push of a claim: the
// scheduler says so once, as a full Redis. It was also logged as a failed
// dispatch (an error) that "works again" a pass later, Redis still full.
func TestFullRedisSaidOnce(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	submit(t, b, 20)
	br, err := broker.Open(b.ctx, broker.Options{Addr: testenv.FullRedis(t), Prefix: b.env.Prefix})
	require.NoError(t, err)
	defer br.Close()
	var logs testenv.LogBuffer
	s := scheduler.New(scheduler.Config{BatchSize: 100, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, b.env.Store, br)
	require.NoError(t, s.Start(b.ctx))
	defer s.Stop()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `msg="redis is at maxmemory`) },
		10*time.Second, 20*time.Millisecond, "Redis never refused a push")
	time.Sleep(time.Second) // an absence: passes after the refusal
	s.Stop()
	require.Equal(t, 1, strings.Count(logs.String(), `msg="redis is at maxmemory`), logs.String())
	require.NotContains(t, logs.String(), "dispatch", "a full Redis is not a failed dispatch")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 1`),
		"claimed again into the full Redis: the error's backoff is gone, the window's cap holds the claims")
}

// A cap that ran its FullRedisWait while Redis is still past its
// maxmemory is renewed, not lifted: claiming the whole window again would
// be refused as surely, and each round spends an attempt of every task it
// took (an hour of a full Redis was 360 attempts of the same tasks, shown
// to their handlers as TASK_ATTEMPT=361).
func TestFullRedisStillFullKeepsTheCap(t *testing.T) {
	t.Parallel()
	_, b := setup(t, scheduler.Config{})
	env := b.env
	br := fullRedisBacklog(t, b)
	clk := clock.NewManual(time.Now())
	s := scheduler.New(scheduler.Config{BatchSize: 500, Clock: clk, Logger: quiet}, env.Store, br)
	defer s.Stop()
	handedBack := `SELECT COUNT(*) FROM task_center WHERE status = 0 AND attempt > 0`
	for i := 0; env.Count(t, handedBack) == 0; i++ {
		require.Less(t, i, 10, "Redis never refused a push")
		_, _ = s.RunOnce(b.ctx)
	}
	m, err := br.Memory(b.ctx)
	require.NoError(t, err)
	require.True(t, m.Full(), "Redis past its maxmemory: %+v", m)

	clk.Advance(scheduler.FullRedisWait + time.Second)
	for range 3 {
		_, _ = s.RunOnce(b.ctx)
	}
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 1`),
		"tasks claimed again into a Redis still full")

	// Memory freed (here: maxmemory raised), the next round claims again.
	require.NoError(t, br.Client().ConfigSet(b.ctx, "maxmemory", "64mb").Err())
	clk.Advance(scheduler.FullRedisWait + time.Second)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Positive(t, n)
}

func TestRunOnceNothingDue(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{})
	_, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello", Delay: time.Hour})
	require.NoError(t, err)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE attempt > 0`))
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{PollInterval: 50 * time.Millisecond})

	s.Stop() // without Start
	s.Stop()

	require.NoError(t, s.Start(b.ctx))
	require.Error(t, s.Start(b.ctx), "second Start")
	submit(t, b, 3)
	require.Eventually(t, func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1`) == 3
	}, 10*time.Second, 20*time.Millisecond)

	stopped := make(chan struct{})
	go func() {
		s.Stop()
		s.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}

	// Concurrent Stops of a started scheduler, and a cancelled parent.
	ctx, cancel := context.WithCancel(b.ctx)
	s2 := scheduler.New(scheduler.Config{Logger: quiet}, b.env.Store, b.env.Broker)
	require.NoError(t, s2.Start(ctx))
	cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(s2.Stop)
	}
	wg.Wait()
}

func TestWakeDispatchesBeforePoll(t *testing.T) {
	t.Parallel()
	// No probe: only the wake may find the second task before the poll.
	s, b := setup(t, scheduler.Config{PollInterval: 10 * time.Second, ProbeInterval: -1})
	// A task inserted without a wakeup: the first scan dispatches it, which
	// tells us the loop is past its first scan and on its way to sleep.
	silent := producer.New(b.env.Store, nil, producer.Options{Logger: quiet})
	first, err := silent.Submit(b.ctx, producer.Submission{Code: "hello"})
	require.NoError(t, err)
	require.NoError(t, s.Start(b.ctx))

	// Wait for the scheduler's wake subscription, so the publish below
	// cannot race it.
	rdb := b.env.Broker.Client()
	require.Eventually(t, func() bool {
		m, err := rdb.PubSubNumSub(b.ctx, b.env.Broker.Keys.Wake()).Result()
		return err == nil && m[b.env.Broker.Keys.Wake()] >= 1
	}, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		tk, err := b.env.Store.TaskGet(b.ctx, first.ID)
		return err == nil && tk.Status == task.Dispatched
	}, 5*time.Second, 10*time.Millisecond, "first scan")

	start := time.Now()
	res, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello"})
	require.NoError(t, err)
	// Liveness, not performance: far below the 10 s poll interval.
	require.Eventually(t, func() bool {
		tk, err := b.env.Store.TaskGet(b.ctx, res.ID)
		return err == nil && tk.Status == task.Dispatched
	}, 2*time.Second, 10*time.Millisecond, "a wake must dispatch without waiting for the poll")
	t.Logf("dispatched %s after submit", time.Since(start))
	// The counter follows the push, which follows the claim.
	require.Eventually(t, func() bool { return s.Dispatched() == 2 }, 5*time.Second, 10*time.Millisecond)
}

// A row INSERTed the seed's way, with no wakeup, is dispatched long before
// the poll: the scheduler sees the new id at a probe.
func TestProbeFindsRowsInsertedWithoutWakeup(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{PollInterval: time.Hour, ProbeInterval: 20 * time.Millisecond})
	seed := func(code string) int64 {
		res := b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES (?, '{}', NOW())`, code)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		return id
	}
	dispatched := func(id int64) func() bool {
		return func() bool {
			tk, err := b.env.Store.TaskGet(b.ctx, id)
			return err == nil && tk.Status == task.Dispatched
		}
	}
	// The first claim takes the row there at the start; then the loop
	// sleeps for its hour.
	first := seed("hello")
	require.NoError(t, s.Start(b.ctx))
	require.Eventually(t, dispatched(first), 5*time.Second, 10*time.Millisecond, "first claim")

	later := seed("hello")
	// Liveness: far below the hour of the poll.
	require.Eventually(t, dispatched(later), 10*time.Second, 10*time.Millisecond, "the probe must find the new row")
	// A row due later is found too, and claimed when due.
	delayed := b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('hello', '{}', NOW() + INTERVAL 1 SECOND)`)
	id, err := delayed.LastInsertId()
	require.NoError(t, err)
	require.Eventually(t, dispatched(id), 10*time.Second, 10*time.Millisecond, "the probe must find the delayed row and its due time")
}

// TestCancelDuringClaimStrandsNothing stops a scheduler (cancels RunOnce's
// context) while its claim's compare-and-set is in flight. The server
// finishes the statement anyway, so the claim must be seen through (read
// back and pushed, or handed back): otherwise the task sits in dispatched
// with no message until recovery's dispatch window.
func TestCancelDuringClaimStrandsNothing(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{})
	env := b.env
	ids := submit(t, b, 1)

	// Hold a table lock so the claim's transaction waits on it (a row
	// lock would not do: the claim skips locked rows).
	lock, err := env.Store.DB().Conn(b.ctx)
	require.NoError(t, err)
	defer lock.Close()
	_, err = lock.ExecContext(b.ctx, `LOCK TABLES task_center READ`)
	require.NoError(t, err)
	unlock := func() {
		_, err := lock.ExecContext(b.ctx, `UNLOCK TABLES`)
		require.NoError(t, err)
	}
	defer unlock()
	// The claim's first write: its locking read, or where the server has
	// a zero lock wait, its compare-and-set.
	const claiming = `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = ? AND (INFO LIKE 'SELECT id FROM task_center FORCE INDEX (PRIMARY) WHERE id IN%FOR UPDATE%'
			OR INFO LIKE 'SET STATEMENT innodb_lock_wait_timeout = 0 FOR UPDATE task_center%')`

	ctx, cancel := context.WithCancel(b.ctx)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.RunOnce(ctx)
		done <- result{n, err}
	}()
	require.Eventually(t, func() bool { return env.Count(t, claiming, env.Database) == 1 },
		5*time.Second, 10*time.Millisecond, "claim waiting on the table lock")
	cancel() // Stop, or SIGTERM
	unlock()
	r := <-done

	// The claim runs to its end now that the lock is free.
	require.Eventually(t, func() bool { return env.Count(t, claiming, env.Database) == 0 },
		10*time.Second, 10*time.Millisecond)
	tk, err := env.Store.TaskGet(b.ctx, ids[0])
	require.NoError(t, err)
	ql, err := env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	t.Logf("RunOnce returned n=%d err=%v; task status %s attempt %d; queue length %d", r.n, r.err, tk.Status, tk.Attempt, ql)
	require.False(t, tk.Status == task.Dispatched && ql == 0,
		"a cancelled RunOnce stranded task %d in dispatched (attempt %d) with no queued message", tk.ID, tk.Attempt)
	// Either the claim did not happen, or it was pushed.
	if tk.Status == task.Dispatched {
		require.Equal(t, int64(1), ql)
	} else {
		require.Equal(t, task.Pending, tk.Status)
	}
}

// A row INSERTed with a task code or queue that is not a name (none, or
// Chinese text) is dead at its claim, with why; the others of the claim
// are pushed.
func TestUnrunnableTaskIsDead(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{})
	b.env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) VALUES
		('', '', '{}'), ('发送短信', '', '{}'), ('hello', '短信 队列', '{}'), ('hello', '', '{}')`)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, int64(1), s.Dispatched())
	results := map[string]string{}
	rows, err := b.env.Store.DB().Query(`SELECT CONCAT(task_code, '/', queue), status, last_result FROM task_center WHERE status <> 1 ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var key, result string
		var status int
		require.NoError(t, rows.Scan(&key, &status, &result))
		require.Equal(t, int(task.Dead), status, key)
		results[key] = result
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"/":           "task_code must not be empty: no handler can run it; submit it again with a valid code",
		"发送短信/":       `task_code "发送短信" may only contain ASCII letters, digits and _ . : - (Chinese and other text can go in the payload, a group or a unique key): no handler can run it; submit it again with a valid code`,
		"hello/短信 队列": `queue "短信 队列" may only contain ASCII letters, digits and _ . : - (Chinese and other text can go in the payload, a group or a unique key): no worker takes from it; submit it again with a valid queue`,
	}, results)
	lens, err := b.env.Broker.QueueLens(b.ctx, []string{"", "发送短信", "短信 队列", "hello"})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"": 0, "发送短信": 0, "短信 队列": 0, "hello": 1}, lens, "nothing pushed for them")
}

// A payload that is not JSON (an adopted seed table whose payload column
// is TEXT takes one) cannot be put in a message: its task is dead at its
// claim, with why. It was handed back at every claim, never run and never
// dead, and the others of its push went on.
func TestPayloadNotJSONIsDead(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{})
	b.env.Exec(t, `ALTER TABLE task_center MODIFY payload LONGTEXT NOT NULL`)
	b.env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) VALUES ('hello', '', 'not json'), ('hello', '', '{}')`)
	n, err := s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, int64(1), s.Dispatched())
	var status int
	var result string
	require.NoError(t, b.env.Store.DB().QueryRow(`SELECT status, last_result FROM task_center WHERE id = 1`).Scan(&status, &result))
	require.Equal(t, int(task.Dead), status, result)
	require.Contains(t, result, "payload is not JSON")
	_, err = s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Dispatched(), "not claimed again")

	// Alone in its claim, it is no failure of the scheduler's.
	b.env.Exec(t, `INSERT INTO task_center (task_code, queue, payload) VALUES ('hello', '', '{oops')`)
	n, err = s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 5`))
}

// pausedLayout is a layout whose named queues are paused.
type pausedLayout map[string]bool

func (pausedLayout) Shards(string) (int, int)        { return 1, 1 }
func (l pausedLayout) Paused(q string) bool          { return l[q] }
func (l pausedLayout) PausedSet() map[string]bool    { return l }
func (pausedLayout) Changed() <-chan struct{}        { return nil }
func (pausedLayout) Limit(string) limit.Limit        { return limit.Limit{} }
func (pausedLayout) Grouped() map[string]limit.Limit { return nil }

// A paused queue's due tasks do not hold back a task that falls due
// without a wakeup (a retry's backoff, a periodic task's next run): the
// scheduler sleeps until it is due, not for its poll.
func TestPausedQueueDelaysNothingElse(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{PollInterval: time.Hour, ProbeInterval: -1})
	b.env.Broker.SetLayout(pausedLayout{"held": true})
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('held', '{}', NOW(3))`)
	res := b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('hello', '{}', NOW(3) + INTERVAL 1 SECOND)`)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	require.NoError(t, s.Start(b.ctx))
	// Liveness, not performance: far below the hour of the poll.
	require.Eventually(t, func() bool {
		tk, err := b.env.Store.TaskGet(b.ctx, id)
		return err == nil && tk.Status == task.Dispatched
	}, 10*time.Second, 10*time.Millisecond, "the task due in a second must be dispatched when due")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'held' AND status = 0`))
}

// A due task whose row another transaction holds does not make the
// scheduler read it again every few milliseconds: after claims that did
// not take it, the loop sleeps until the next task falls due.
func TestLockedDueRowIsNotPolledInASpin(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{PollInterval: time.Hour, ProbeInterval: -1})
	res := b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('hello', '{}', NOW(3) - INTERVAL 5 SECOND)`)
	locked, err := res.LastInsertId()
	require.NoError(t, err)
	tx, err := b.env.Store.DB().BeginTx(b.ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback() })
	_, err = tx.Exec(`SELECT id FROM task_center WHERE id = ? FOR UPDATE`, locked)
	require.NoError(t, err)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES ('hello', '{}', NOW(3) + INTERVAL 30 SECOND)`)

	var waits []time.Duration
	for range 3 {
		n, err := s.ClaimRound(b.ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the locked row is left out")
		waits = append(waits, s.UntilNextDue(b.ctx, n, 250*time.Millisecond))
	}
	require.Equal(t, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}, waits[:2],
		"at first, as if another scheduler were claiming it")
	require.Greater(t, waits[2], 25*time.Second, "then until the next task is due, not a 10 ms spin on the locked one")
	require.LessOrEqual(t, waits[2], 30*time.Second)
}
