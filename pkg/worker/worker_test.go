package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

type testBundle struct {
	env   *testenv.Env
	sched *scheduler.Scheduler
	prod  *producer.Client
	reg   *handler.Registry
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := testenv.New(t)
	return &testBundle{
		env:   env,
		sched: scheduler.New(scheduler.Config{}, env.Store, env.Broker),
		prod:  producer.New(env.Store, nil, producer.Options{}),
		reg:   handler.NewRegistry(),
	}
}

// startWorker starts a worker on queue "q" with fast retries.
func (b *testBundle) startWorker(t *testing.T, mod func(*worker.Config)) *worker.Worker {
	t.Helper()
	cfg := worker.Config{
		Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
		RetryBase: 20 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		ShutdownGrace: 5 * time.Second, HeartbeatInterval: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	w := worker.New(cfg, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	return w
}

func (b *testBundle) submit(t *testing.T, s producer.Submission) int64 {
	t.Helper()
	s.Queue = "q"
	r, err := b.prod.Submit(context.Background(), s)
	require.NoError(t, err)
	return r.ID
}

// startLogged starts a worker of one slot on queue "q" over st, and
// returns what it logs.
func (b *testBundle) startLogged(t *testing.T, st worker.Store) *testenv.LogBuffer {
	t.Helper()
	var logs testenv.LogBuffer
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 1}, Handlers: b.reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	return &logs
}

// submitN submits n tasks of code to queue "q" and returns their ids.
func (b *testBundle) submitN(t *testing.T, n int, code string) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = b.submit(t, producer.Submission{Code: code})
	}
	return ids
}

// dispatchUntil runs the scheduler until cond holds (bounded).
func (b *testBundle) dispatchUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		_, err := b.sched.RunOnce(context.Background())
		require.NoError(t, err)
		return cond()
	}, 20*time.Second, 10*time.Millisecond, "waiting for %s", what)
}

func (b *testBundle) task(t *testing.T, id int64) *task.Task {
	t.Helper()
	tk, err := b.env.Store.TaskGet(context.Background(), id)
	require.NoError(t, err)
	return tk
}

func (b *testBundle) outcomes(t *testing.T, id int64) []string {
	t.Helper()
	runs, err := b.env.Store.RunList(context.Background(), id, 100)
	require.NoError(t, err)
	var out []string
	for i := len(runs) - 1; i >= 0; i-- {
		out = append(out, string(runs[i].Outcome))
	}
	return out
}

func intp(i int) *int { return &i }

func TestRunningToSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var seen atomic.Value
	b.reg.Register("ok", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		seen.Store(*r)
		return "done " + string(r.Payload), nil
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "ok", Payload: []byte(`{"x":1}`), UniqueKey: "k1"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })

	tk := b.task(t, id)
	require.Equal(t, 1, tk.Attempt)
	require.Equal(t, `done {"x":1}`, tk.LastResult)
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, id))
	r := seen.Load().(handler.Request)
	require.Equal(t, id, r.ID)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, "k1", r.UniqueKey)
}

func TestFailedRetriesThenDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	b.reg.Register("bad", handler.Func(func(context.Context, *handler.Request) (string, error) {
		calls.Add(1)
		return "partial output", errors.New("boom")
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "bad", MaxRetry: intp(2)})

	// The first failure leaves it failed (4) with a retry due later.
	b.dispatchUntil(t, "first failure", func() bool { return b.task(t, id).Status == task.Failed })
	tk := b.task(t, id)
	require.GreaterOrEqual(t, tk.RetryCount, 1) // the retry may already have run and failed again
	require.Contains(t, tk.LastResult, "boom")
	require.Contains(t, tk.LastResult, "partial output")

	// 4 -> 1 -> 2 -> 4 -> ... -> 5 once retries are exhausted.
	b.dispatchUntil(t, "dead", func() bool { return b.task(t, id).Status == task.Dead })
	tk = b.task(t, id)
	require.Equal(t, 3, tk.Attempt)
	require.Equal(t, 2, tk.RetryCount)
	require.EqualValues(t, 3, calls.Load())
	require.Equal(t, []string{"failed", "failed", "dead"}, b.outcomes(t, id))
}

func TestTimeoutIsAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("slow", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "slow", Timeout: time.Second, MaxRetry: intp(0)})
	b.dispatchUntil(t, "dead after timeout", func() bool { return b.task(t, id).Status == task.Dead })
	require.Equal(t, []string{"timeout"}, b.outcomes(t, id))
	require.Contains(t, b.task(t, id).LastResult, "timed out after 1s")
}

// A handler's permanent failure stays permanent when it comes at its
// timeout (a pool process answering in the time its wait was credited):
// taken for a timeout, it was retried.
func TestPermanentFailureAtTheTimeoutIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("verdict", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		<-ctx.Done()
		return "", handler.Permanent(errors.New("card declined"))
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "verdict", Timeout: time.Second, MaxRetry: intp(3)})
	b.dispatchUntil(t, "ended", func() bool { st := b.task(t, id).Status; return st == task.Dead || st == task.Failed })
	require.Equal(t, task.Dead, b.task(t, id).Status, "no retry of a permanent failure")
	require.Contains(t, b.task(t, id).LastResult, "card declined")
}

// An error that quotes the first line of the output (an http handler's
// "http 500: <first line of body>") is recorded with the output once: the
// error's line whole, as the run lists show it, then the rest.
func TestFailureQuotingItsOutputIsNotRepeated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("quotes", handler.Func(func(context.Context, *handler.Request) (string, error) {
		return "db down\nstack trace", errors.New("http 500: db down")
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "quotes", MaxRetry: intp(0)})
	b.dispatchUntil(t, "dead", func() bool { return b.task(t, id).Status == task.Dead })
	require.Equal(t, "http 500: db down\nstack trace", b.task(t, id).LastResult)
}

// A failing command's output longer than the limit: the record keeps the
// error line first, then the output's tail with the number of bytes
// dropped, counted over the whole output (the handler truncated it once
// already, and its count used to be replaced by that of its own prefix).
func TestLongOutputOfAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("chatty", &handler.Exec{Argv: []string{"sh", "-c", "yes line | head -c 200000; echo END; exit 3"}})
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "chatty", MaxRetry: intp(0)})
	b.dispatchUntil(t, "dead", func() bool { return b.task(t, id).Status == task.Dead })
	res := b.task(t, id).LastResult
	require.True(t, strings.HasPrefix(res, "exit status 3: END\n…(truncated 134468 bytes)\n"), "%.80q", res) // stderr empty: stdout's last line
	require.True(t, strings.HasSuffix(res, "line\nEND\n"), "%.80q", res[len(res)-80:])
}

// A row INSERTed with a timeout of 0 or less (a PHP habit for "none")
// runs under the default timeout: -1 used to time every attempt out at
// once.
func TestTimeoutNotAboveZeroIsTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("nap", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-time.After(50 * time.Millisecond):
			return "napped", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "nap", MaxRetry: intp(0), Delay: time.Hour})
	b.env.Exec(t, `UPDATE task_center SET timeout = -1, plan_next_run_at = NOW(3) WHERE id = ?`, id)
	b.dispatchUntil(t, "ended", func() bool { return b.task(t, id).Status >= task.Succeeded })
	require.Equal(t, task.Succeeded, b.task(t, id).Status, b.task(t, id).LastResult)
}

func TestPanicFailsAttemptNotWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("panics", handler.Func(func(context.Context, *handler.Request) (string, error) { panic("kaboom") }))
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	b.startWorker(t, nil)
	bad := b.submit(t, producer.Submission{Code: "panics", MaxRetry: intp(0)})
	good := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "both done", func() bool {
		return b.task(t, bad).Status == task.Dead && b.task(t, good).Status == task.Succeeded
	})
	require.Contains(t, b.task(t, bad).LastResult, "handler panicked: kaboom")
}

func TestUnknownCodeFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "nobody", MaxRetry: intp(0)})
	b.dispatchUntil(t, "dead", func() bool { return b.task(t, id).Status == task.Dead })
	require.Contains(t, b.task(t, id).LastResult, `no handler for task code "nobody"`)
}

func TestPeriodicGoesBackToPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var fail atomic.Bool
	b.reg.Register("tick", handler.Func(func(context.Context, *handler.Request) (string, error) {
		if fail.Load() {
			return "", errors.New("tick failed")
		}
		return "tick", nil
	}))
	b.startWorker(t, nil)
	res, err := b.prod.CronAdd(context.Background(), producer.Cron{Code: "tick", Expr: "* * * * * *", Queue: "q", MaxRetry: intp(1)})
	require.NoError(t, err)
	id := res.ID

	b.dispatchUntil(t, "first run", func() bool { return len(b.outcomes(t, id)) >= 1 })
	tk := b.task(t, id)
	require.Equal(t, task.Pending, tk.Status, "a periodic task goes back to pending")
	now, err := b.env.Store.Now(context.Background())
	require.NoError(t, err)
	require.True(t, tk.PlanNextRun.After(now.Add(-time.Second)), "next run %v is not after the run (%v)", tk.PlanNextRun, now)
	require.Equal(t, 0, tk.RetryCount)

	// Exhausting retries records a dead run but the task moves on.
	fail.Store(true)
	b.dispatchUntil(t, "a dead run", func() bool {
		o := b.outcomes(t, id)
		return o[len(o)-1] == "dead"
	})
	tk = b.task(t, id)
	require.Equal(t, task.Pending, tk.Status, "periodic tasks never die")
	require.Equal(t, 0, tk.RetryCount)
	require.Equal(t, task.Periodic, tk.Type)
}

// A copy of a message with an attempt the task never had (one that
// surfaced late) runs, and its result is rejected by the fence; a
// duplicate of the live one (a push retried by the client) is dropped at
// launch, as the worker runs that attempt already. The live attempt holds
// its slot until both happened, and no attempt gets a running mark (the
// delay is an hour), so the order is the same on any machine.
func TestStaleMessageIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	var w atomic.Pointer[worker.Worker]
	id := b.submit(t, producer.Submission{Code: "ok"})
	msgs, err := b.env.Store.TaskClaimDue(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	live := msgs[0].Attempt
	b.reg.Register("ok", handler.Func(func(ctx context.Context, r *handler.Request) (string, error) {
		calls.Add(1)
		for r.Attempt == live && (w.Load() == nil || w.Load().Stats().Stale < 2) {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return "", nil
	}))
	old := *msgs[0]
	old.Attempt = live + 99
	_, err = b.env.Broker.Push(context.Background(), []*task.Message{&old, msgs[0], msgs[0]})
	require.NoError(t, err)

	w.Store(b.startWorker(t, func(c *worker.Config) { c.RunningMarkDelay = time.Hour }))
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.EqualValues(t, 2, w.Load().Stats().Stale)
	require.EqualValues(t, 2, calls.Load(), "the live attempt once, the stale one once")
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, id))
}

func TestPoisonMessageMovedAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	rdb := b.env.Broker.Client()
	q := b.env.Broker.Keys.Queue("q", 0)
	require.NoError(t, rdb.LPush(context.Background(), q, "not json", `{"id":"x"}`).Err())
	w := b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success after poison", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.EqualValues(t, 2, w.Stats().Poison)
	n, err := rdb.LLen(context.Background(), b.env.Broker.Keys.Poison("q")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

func TestShutdownHandsBackWithoutRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	b.reg.Register("long", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}))
	w := b.startWorker(t, func(c *worker.Config) { c.ShutdownGrace = 100 * time.Millisecond })
	id := b.submit(t, producer.Submission{Code: "long"})
	b.dispatchUntil(t, "running", func() bool { return b.task(t, id).Status == task.Running })
	<-started
	w.Stop()

	tk := b.task(t, id)
	require.Equal(t, task.Pending, tk.Status)
	require.Equal(t, 0, tk.RetryCount, "a hand-back is not a retry")
	require.Equal(t, []string{"interrupted"}, b.outcomes(t, id))
	n, err := b.env.Broker.Client().LLen(context.Background(), b.env.Broker.Keys.Processing("q", w.ID())).Result()
	require.NoError(t, err)
	require.Zero(t, n, "processing list drained")
	rdb, keys := b.env.Broker.Client(), b.env.Broker.Keys
	for _, k := range []string{keys.Worker(w.ID()), keys.WorkerQueues(w.ID())} {
		n, err = rdb.Exists(context.Background(), k).Result()
		require.NoError(t, err)
		require.Zero(t, n, "a stopped worker leaves no heartbeat or registration: %s", k)
	}
	require.Zero(t, rdb.ZScore(context.Background(), keys.Workers(), w.ID()).Val())
	gone, err := b.env.Broker.GoneWorkers(context.Background(), time.Hour)
	require.NoError(t, err)
	require.Empty(t, gone, "a clean stop is not a dead worker (tasktop would show it red)")
}

// An attempt its handler never started (a pool whose processes stayed busy
// past the task's timeout) is handed back: no failure, no retry counted.
func TestNotStartedIsHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	b.reg.Register("queued", handler.Func(func(context.Context, *handler.Request) (string, error) {
		if calls.Add(1) == 1 {
			return "", fmt.Errorf("pool queued: waiting for a free process: %w", handler.ErrNotStarted)
		}
		return "ran", nil
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "queued"})
	b.dispatchUntil(t, "succeeded", func() bool { return b.task(t, id).Status == task.Succeeded })
	tk := b.task(t, id)
	require.Zero(t, tk.RetryCount, "not a failure")
	require.Equal(t, []string{"interrupted", "succeeded"}, b.outcomes(t, id))
}

func TestShutdownWaitsForRunningTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{}, 1)
	b.reg.Register("short", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		started <- struct{}{}
		time.Sleep(300 * time.Millisecond) // work that outlasts the start of Stop
		return "finished", nil
	}))
	w := b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "short"})
	b.dispatchUntil(t, "started", func() bool { return len(started) > 0 })
	w.Stop()
	require.Equal(t, task.Succeeded, b.task(t, id).Status, "drained within the grace period")
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for retry, nominal := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		for range 50 {
			d := worker.Backoff(time.Second, 10*time.Second, retry)
			require.GreaterOrEqual(t, d, nominal/2, "retry %d", retry)
			require.LessOrEqual(t, d, nominal, "retry %d", retry)
		}
	}
	// Jitter: not every value the same.
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[worker.Backoff(time.Second, time.Hour, 3)] = true
	}
	require.Greater(t, len(seen), 1)
}

// faultyStore is the task center with injected failures: the next
// failMark claims fail, and failed result writes are counted.
type faultyStore struct {
	*store.Store
	failMark    atomic.Int32
	marks       atomic.Int32
	failWrite   atomic.Int32
	writeFailed atomic.Int32
	// stopBatches stops every write of more than one result as the
	// server's max_statement_time would; stopped counts them.
	stopBatches atomic.Bool
	stopped     atomic.Int32
	// lockWrites: the next writes find every row held by another
	// transaction.
	lockWrites atomic.Int32
}

var errInjected = errors.New("injected: connection refused")

func (f *faultyStore) TaskMarkRunning(ctx context.Context, w string, fences []store.Fence) ([]bool, error) {
	f.marks.Add(1)
	if f.failMark.Add(-1) >= 0 {
		return nil, errInjected
	}
	return f.Store.TaskMarkRunning(ctx, w, fences)
}

func (f *faultyStore) TaskTransition(ctx context.Context, ts []store.Transition) ([]bool, error) {
	if f.stopBatches.Load() && len(ts) > 1 {
		f.stopped.Add(1)
		return nil, &mysql.MySQLError{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"}
	}
	if f.lockWrites.Add(-1) >= 0 {
		all := make([]int, len(ts))
		for i := range all {
			all[i] = i
		}
		return make([]bool, len(ts)), &store.LockedError{Entries: all}
	}
	if f.failWrite.Add(-1) >= 0 {
		f.writeFailed.Add(1)
		return nil, errInjected
	}
	ok, err := f.Store.TaskTransition(ctx, ts)
	if err != nil {
		f.writeFailed.Add(1)
	}
	return ok, err
}

// A running mark (dispatched -> running) that fails while the task center
// is unreachable is retried while the attempt runs: the task runs once and
// succeeds.
func TestMarkRunningRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	st.failMark.Store(3)
	var calls atomic.Int32
	release := make(chan struct{})
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		calls.Add(1)
		<-release
		return "", nil
	}))
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 2}, Handlers: b.reg,
		RunningMarkDelay: time.Millisecond}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "running", func() bool { return b.task(t, id).Status == task.Running })
	close(release)
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.EqualValues(t, 4, st.marks.Load(), "three failed marks, then one that lands")
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, id))
}

// While the task center stays unreachable, a running attempt's mark is
// tried again on every marker pass (several a second), but said once, then
// once a minute, and once more when a mark lands: a MySQL outage of
// minutes is a few lines in the log, not thousands.
func TestMarkFailuresLoggedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	st.failMark.Store(1 << 30)
	release := make(chan struct{})
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		<-release
		return "", nil
	}))
	var logs testenv.LogBuffer
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 2}, Handlers: b.reg, RunningMarkDelay: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "marks tried", func() bool { return st.marks.Load() >= 20 })
	require.Equal(t, 1, strings.Count(logs.String(), "mark running failed"), "said once:\n%s", logs.String())

	st.failMark.Store(0)
	require.Eventually(t, func() bool { return b.task(t, id).Status == task.Running }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "running marks written again") }, 10*time.Second, 10*time.Millisecond)
	close(release)
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
}

// A result write that fails while the task center is unreachable is tried
// again with a growing delay, said once (then once a minute), and once
// more when it lands: an outage is a few lines, not one per try.
func TestWriteFailuresLoggedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	st.failWrite.Store(4)
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "done", nil }))
	logs := b.startLogged(t, st)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.EqualValues(t, 4, st.writeFailed.Load())
	// The line of the write that landed follows its commit.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `msg="results written again"`) }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(logs.String(), `msg="write results failed; retrying"`), logs.String())
	require.Contains(t, logs.String(), `failed_passes=4`)
}

// While its results cannot be written (a task center down, or one whose
// disk is full), a worker takes no new work: each task it took would run
// with no result stored, and run again if the node stopped before one was.
// Once a write lands, the rest run, each once.
func TestNoWorkTakenWhileWritesFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	st.failWrite.Store(1 << 30)
	var calls atomic.Int32
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		calls.Add(1)
		time.Sleep(100 * time.Millisecond) // 20 tasks take a second on two slots
		return "done", nil
	}))
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 2}, Handlers: b.reg}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	ids := b.submitN(t, 20, "ok")
	// Four failed writes take 0.7 s of retries.
	b.dispatchUntil(t, "writes failing", func() bool { return st.writeFailed.Load() >= 4 })
	// The first tasks' slots, and what they took before the first write.
	require.LessOrEqual(t, calls.Load(), int32(6), "tasks ran while their results could not be written")

	st.failWrite.Store(0)
	for _, id := range ids {
		b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	}
	require.EqualValues(t, 20, calls.Load(), "each task ran once")
}

// A batch of results the server stops at its time limit is split until
// its parts get through, each result as the handler returned it: neither
// retried as is forever (the worker would take no more work), nor
// replaced by a note.
func TestStoppedBatchSplit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	st.stopBatches.Store(true)
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "done", nil }))
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 8}, Handlers: b.reg}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	ids := b.submitN(t, 40, "ok")
	for _, id := range ids {
		b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
		require.Equal(t, "done", b.task(t, id).LastResult)
	}
	require.Positive(t, st.stopped.Load(), "no batch of more than one result was written")
}

// A result whose row another transaction holds is written again soon: a
// scheduler's claim that raced for the row holds it for milliseconds, and
// is not worth a line. Held past the first try (someone's long
// transaction), it is said once.
func TestLockedResultSaidOnceHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "done", nil }))
	logs := b.startLogged(t, st)
	const said = `msg="results of tasks locked by another transaction; writing them later"`

	st.lockWrites.Store(1)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.NotContains(t, logs.String(), said, "a row held for one try")

	st.lockWrites.Store(3)
	id = b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.Equal(t, 1, strings.Count(logs.String(), said), logs.String())
}

// A result write that fails (here: a row lock held by someone else's long
// transaction, the seed's "alive but idle" night) is retried until it
// lands; the task is neither lost nor run again.
func TestResultWriteRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The worker's sessions give up on a row lock after one second.
	db, err := store.Open(context.Background(), b.env.DSN, store.Options{LockWaitTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := &faultyStore{Store: db}

	release := make(chan struct{})
	var calls atomic.Int32
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		calls.Add(1)
		<-release
		return "written late", nil
	}))
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 1}, Handlers: b.reg}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	id := b.submit(t, producer.Submission{Code: "ok"})
	b.dispatchUntil(t, "running", func() bool { return b.task(t, id).Status == task.Running })

	// Someone else's report query holds the row until two writes failed.
	tx, err := b.env.Store.DB().BeginTx(context.Background(), nil)
	require.NoError(t, err)
	_, err = tx.Exec(`SELECT id FROM task_center WHERE id = ? FOR UPDATE`, id)
	require.NoError(t, err)
	close(release)
	require.Eventually(t, func() bool { return st.writeFailed.Load() >= 2 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, task.Running, b.task(t, id).Status, "the write is blocked")
	require.NoError(t, tx.Rollback())

	require.Eventually(t, func() bool { return b.task(t, id).Status == task.Succeeded }, 15*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, id))
	require.Equal(t, "written late", b.task(t, id).LastResult)
}

// Abort, the watchdog's last resort: the heartbeat is gone at once, the
// running attempt is cancelled, nothing is written and the processing list
// is left whole for recovery; a Stop after it returns at once.
func TestAbortLeavesTasksToRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started, cancelled := make(chan struct{}, 1), make(chan struct{})
	b.reg.Register("long", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		close(cancelled)
		return "", ctx.Err()
	}))
	w := b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "long"})
	b.dispatchUntil(t, "running", func() bool { return b.task(t, id).Status == task.Running })
	<-started
	w.Abort(5 * time.Second)
	<-cancelled
	w.Stop()

	ctx, rdb, keys := context.Background(), b.env.Broker.Client(), b.env.Broker.Keys
	require.Zero(t, rdb.Exists(ctx, keys.Worker(w.ID())).Val(), "heartbeat withdrawn")
	require.EqualValues(t, 1, rdb.LLen(ctx, keys.Processing("q", w.ID())).Val(), "message left for recovery")
	tk := b.task(t, id)
	require.Equal(t, task.Running, tk.Status, "no result written")
	require.Empty(t, b.outcomes(t, id))
}

// Output that is not valid UTF-8 (a binary dump, a truncated multibyte
// character) is stored, not refused by the utf8mb4 column: a refused write
// would hold back every result of the batch.
func TestBinaryOutputIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("bin", handler.Func(func(context.Context, *handler.Request) (string, error) {
		return "ok \xff\xfe\x00 caf\xc3", nil
	}))
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "bin"})
	b.dispatchUntil(t, "success", func() bool { return b.task(t, id).Status == task.Succeeded })
	require.Equal(t, `ok \xff\xfe`+"\x00"+` caf\xc3`, b.task(t, id).LastResult, "invalid bytes as \\xNN")
}

// One fetcher serves every queue: a queue whose only slot is held does not
// hold back the others, and once its slot is free a task pushed to it
// later still wakes the worker.
func TestOneFetcherServesManyQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	b.reg.Register("hold", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	}))
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
	b.startWorker(t, func(c *worker.Config) { c.Queues = map[string]int{"a": 1, "b": 1, "c": 1} })
	submit := func(code, q string) int64 {
		r, err := b.prod.Submit(context.Background(), producer.Submission{Code: code, Queue: q})
		require.NoError(t, err)
		return r.ID
	}
	held := submit("hold", "a")
	b.dispatchUntil(t, "a's slot held", func() bool { return b.task(t, held).Status == task.Running })
	waiting := submit("ok", "a")
	var others []int64
	for range 5 {
		others = append(others, submit("ok", "b"), submit("ok", "c"))
	}
	b.dispatchUntil(t, "b and c drained", func() bool {
		for _, id := range others {
			if b.task(t, id).Status != task.Succeeded {
				return false
			}
		}
		return true
	})
	require.Equal(t, task.Dispatched, b.task(t, waiting).Status, "a's second task waits for its slot")
	close(release)
	b.dispatchUntil(t, "a drained", func() bool {
		return b.task(t, held).Status == task.Succeeded && b.task(t, waiting).Status == task.Succeeded
	})
	late := submit("ok", "a")
	b.dispatchUntil(t, "a woken again", func() bool { return b.task(t, late).Status == task.Succeeded })
}

// An attempt that ends within the running-mark delay goes from dispatched
// straight to its result (no running mark written); one still running
// after it is marked running, with its worker, and ends as usual.
func TestRunningMarkOnlyForLongAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := &faultyStore{Store: b.env.Store}
	release := make(chan struct{})
	b.reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) { return "quick", nil }))
	b.reg.Register("long", handler.Func(func(context.Context, *handler.Request) (string, error) {
		<-release
		return "long", nil
	}))
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
		RunningMarkDelay: time.Hour}, st, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	quick := b.submit(t, producer.Submission{Code: "quick"})
	b.dispatchUntil(t, "quick done", func() bool { return b.task(t, quick).Status == task.Succeeded })
	require.Zero(t, st.marks.Load(), "no running mark for an attempt that ended first")
	tk := b.task(t, quick)
	require.Empty(t, tk.WorkerID, "no worker holds a task once its attempt ended")
	runs, err := b.env.Store.RunList(context.Background(), quick, 10)
	require.NoError(t, err)
	require.Equal(t, w.ID(), runs[0].WorkerID, "its run records its worker")
	require.NotNil(t, tk.StartedAt, "and the task its start")
	// (The start comes from the worker's synced database clock: it may lead
	// created_at by the sync's error, so it is not compared with it.)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND started_at <= finished_at
		AND last_run_at = started_at`, quick))
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, quick))

	fast := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
		RunningMarkDelay: 20 * time.Millisecond}, st, b.env.Broker)
	w.Stop()
	require.NoError(t, fast.Start(context.Background()))
	t.Cleanup(fast.Stop)
	long := b.submit(t, producer.Submission{Code: "long"})
	b.dispatchUntil(t, "long marked running", func() bool { return b.task(t, long).Status == task.Running })
	require.Equal(t, fast.ID(), b.task(t, long).WorkerID)
	close(release)
	b.dispatchUntil(t, "long done", func() bool { return b.task(t, long).Status == task.Succeeded })
	require.Empty(t, b.task(t, long).WorkerID, "emptied when the attempt ended")
	require.Equal(t, []string{"succeeded"}, b.outcomes(t, long))
	fast.Stop()

	// On a driven clock: an attempt started 25 ms ago is marked, one
	// started 10 ms ago is not, in the same pass of the marker.
	mc := clock.NewManual(time.Now())
	entered := make(chan int64, 2)
	hold := make(chan struct{})
	b.reg.Register("held", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		entered <- r.ID
		<-hold
		return "", nil
	}))
	driven := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
		RunningMarkDelay: 20 * time.Millisecond, Clock: mc}, st, b.env.Broker)
	require.NoError(t, driven.Start(context.Background()))
	t.Cleanup(driven.Stop)
	t.Cleanup(func() { close(hold) })
	older := b.submit(t, producer.Submission{Code: "held"})
	b.dispatchUntil(t, "older started", func() bool { return len(entered) == 1 })
	mc.Advance(15 * time.Millisecond)
	younger := b.submit(t, producer.Submission{Code: "held"})
	b.dispatchUntil(t, "younger started", func() bool { return len(entered) == 2 })
	mc.Advance(10 * time.Millisecond)
	b.dispatchUntil(t, "older marked running", func() bool { return b.task(t, older).Status == task.Running })
	require.Equal(t, task.Dispatched, b.task(t, younger).Status, "not marked before its delay")
}

// A worker whose results cannot be written stops taking work once a full
// batch of them waits behind its writers: what it took meanwhile would
// only wait too, and run again after recovery if the task center is gone.
// When the writes land it takes again, and every task runs once.
func TestHungResultWritesStopTaking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	// More than the worker holds while its writes hang: its writers'
	// batches and a full batch queued, 2,500.
	const total = 2800
	b.sched = scheduler.New(scheduler.Config{Window: total}, b.env.Store, b.env.Broker)
	subs := make([]producer.Submission, total)
	for i := range subs {
		subs[i] = producer.Submission{Code: "quick", Queue: "q"}
	}
	_, err := b.prod.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	b.dispatchUntil(t, "all dispatched", func() bool {
		n, err := b.env.Broker.QueueLen(ctx, "q")
		return err == nil && n == total
	})

	var calls atomic.Int32
	b.reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) {
		calls.Add(1)
		return "", nil
	}))
	st := testenv.NewHungStore(b.env.Store)
	w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 2}, Handlers: b.reg}, st, b.env.Broker)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	// It runs what it took, then nothing more while messages wait.
	last := int32(-1)
	require.Eventually(t, func() bool {
		n := calls.Load()
		settled := n == last && n > 0
		last = n
		return settled
	}, 20*time.Second, 500*time.Millisecond, "the worker stops taking")
	waiting, err := b.env.Broker.QueueLen(ctx, "q")
	require.NoError(t, err)
	require.Positive(t, waiting, "messages left in the queue (ran %d of %d)", calls.Load(), total)
	require.Positive(t, w.ResultsWaiting())

	close(st.Release)
	require.Eventually(t, func() bool {
		return b.env.Count(t, "SELECT COUNT(*) FROM task_center WHERE status = ?", task.Succeeded) == total
	}, 30*time.Second, 50*time.Millisecond)
	require.EqualValues(t, total, calls.Load(), "each task ran once")
	// A writer clears its mark after its commit returns, which the count
	// above can see first.
	require.Eventually(t, func() bool { return w.ResultsWaiting() == 0 }, 10*time.Second, 10*time.Millisecond,
		"results still waiting after they were written")
}

// The start a worker records for an attempt that ends before its running
// mark is never before the task's dispatched_at, stamped by the database
// at the claim, nor after its finished_at, however slow either way of the
// worker's reads of the database clock is (it rereads it every 12 beats:
// many syncs).
func TestStartNotBeforeDispatch(t *testing.T) {
	t.Parallel()
	for _, slow := range testenv.SlowClocks {
		t.Run(slow.Name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", nil }))
			w := worker.New(worker.Config{Node: "test", Queues: map[string]int{"q": 4}, Handlers: b.reg,
				HeartbeatInterval: 10 * time.Millisecond}, slow.With(b.env.Store), b.env.Broker)
			require.NoError(t, w.Start(context.Background()))
			t.Cleanup(w.Stop)
			const total = 40
			for i := range total {
				b.submit(t, producer.Submission{Code: "quick"})
				b.dispatchUntil(t, fmt.Sprint("task ", i+1, " done"), func() bool {
					return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = ?`, task.Succeeded) == i+1
				})
			}
			require.Equal(t, total, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at IS NOT NULL AND finished_at IS NOT NULL`))
			require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at < dispatched_at`), "started before dispatched")
			require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at > finished_at`), "started after finished")
		})
	}
}

// Attempts that follow one another in a slot run on the goroutine the
// first one started (parked between them), not on one goroutine each.
func TestAttemptsReuseRunners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	goroutines := map[string]bool{}
	b.reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) {
		buf := make([]byte, 64)
		id, _, _ := strings.Cut(strings.TrimPrefix(string(buf[:runtime.Stack(buf, false)]), "goroutine "), " ")
		mu.Lock()
		goroutines[id] = true
		mu.Unlock()
		return "", nil
	}))
	b.startWorker(t, func(c *worker.Config) { c.Queues = map[string]int{"q": 1} })
	const n = 20
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = b.submit(t, producer.Submission{Code: "ok"})
	}
	b.dispatchUntil(t, "all succeeded", func() bool {
		for _, id := range ids {
			if b.task(t, id).Status != task.Succeeded {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	// A runner parks a moment after its slot is freed, so the next
	// attempt may start one more; one each would be n.
	require.LessOrEqual(t, len(goroutines), 4, "goroutines that ran %d attempts in one slot", n)
}

// runningUntilCancelled starts a worker whose handler runs until its
// attempt is cancelled, submits a task to it, and returns once the task
// runs, with the worker's log.
func (b *testBundle) runningUntilCancelled(t *testing.T) (*worker.Worker, int64, *testenv.LogBuffer) {
	t.Helper()
	started := make(chan struct{})
	b.reg.Register("slow", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}))
	logs := &testenv.LogBuffer{}
	w := b.startWorker(t, func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	id := b.submit(t, producer.Submission{Code: "slow"})
	b.dispatchUntil(t, "the start", func() bool {
		select {
		case <-started:
			return true
		default:
			return false
		}
	})
	return w, id, logs
}

// An attempt an operator kills is the operator's doing: logged as a kill,
// not as the handler's failure, and not counted among the worker's
// failures (its per-minute failed series).
func TestKillIsNoFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, id, logs := b.runningUntilCancelled(t)
	o := ops.New(b.env.Store, b.env.Broker)
	_, err := o.Kill(context.Background(), ops.Target{IDs: []int64{id}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "task attempt killed by operator") },
		10*time.Second, 10*time.Millisecond)
	require.NotContains(t, logs.String(), "task attempt failed")
	require.Zero(t, w.Stats().Failed)
}

// A kill whose publish this worker missed (its subscription was down) is
// read from the kept requests and kills the attempt it runs, as a heard
// one does.
func TestKeptKillKillsARunningAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, id, logs := b.runningUntilCancelled(t)
	// Kept, not published: what a worker whose subscription was down finds.
	ctx := context.Background()
	require.NoError(t, b.env.Broker.Client().ZAdd(ctx, b.env.Broker.Keys.Killed(),
		redis.Z{Score: float64(time.Now().UnixMilli()), Member: fmt.Sprintf("%d:1", id)}).Err())
	worker.RereadKills(ctx, w)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "task attempt killed by operator") },
		10*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), "killing task on operator request")
}

// An http endpoint's Retry-After holds the retry back that long, beyond
// the backoff (20-40ms here): retrying a rate-limited endpoint sooner only
// spends the retries.
func TestRetryAfterDelaysTheRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	b.reg.Register("limited", &handler.HTTP{URL: srv.URL})
	b.startWorker(t, nil)
	before := time.Now()
	id := b.submit(t, producer.Submission{Code: "limited", MaxRetry: intp(3)})
	b.dispatchUntil(t, "the failure", func() bool { return b.task(t, id).Status == task.Failed })
	tk := b.task(t, id)
	require.Equal(t, 1, tk.Attempt)
	require.Equal(t, "http 429: slow down", tk.LastResult)
	require.True(t, tk.PlanNextRun.After(before.Add(59*time.Minute)), "retry at %v, not an hour after %v", tk.PlanNextRun, before)
}

// A failing endpoint's body that is not UTF-8 (a Latin-1 error page) is
// quoted in the error as stored, invalid bytes as \xNN rather than
// dropped, and its first line is not repeated after the error.
func TestFailureQuotingNonUTF8Body(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("Fehler: M\xfcller\nstack trace\n"))
	}))
	t.Cleanup(srv.Close)
	b.reg.Register("latin1", &handler.HTTP{URL: srv.URL})
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "latin1", MaxRetry: intp(0)})
	b.dispatchUntil(t, "dead", func() bool { return b.task(t, id).Status == task.Dead })
	require.Equal(t, `http 500: Fehler: M\xfcller`+"\nstack trace", b.task(t, id).LastResult)
}

// A handler's own timeout (handlers.CODE.timeout) ends an attempt before
// its task's, as a timeout: an endpoint that hangs holds the slot that
// long, not the task's five minutes.
func TestHandlerTimeoutCapsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handler
	b.reg.Register("hangs", &handler.HTTP{URL: srv.URL, Timeout: 300 * time.Millisecond})
	b.startWorker(t, nil)
	id := b.submit(t, producer.Submission{Code: "hangs", MaxRetry: intp(0), Timeout: 5 * time.Minute})
	b.dispatchUntil(t, "the timeout", func() bool { return b.task(t, id).Status == task.Dead })
	tk := b.task(t, id)
	require.True(t, strings.HasPrefix(tk.LastResult, "timed out after 300ms"), tk.LastResult)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_run WHERE task_id = ? AND outcome = ?`, id, string(task.OutcomeTimeout)))
}

// A message that waited in its queue longer than kill notices are sure to
// be kept (a queue no worker took from for a day) is confirmed against
// the task center before it runs: one of a task killed meanwhile is
// dropped unrun, one still dispatched runs.
func TestOldMessageIsConfirmedBeforeItRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ran sync.Map
	b.reg.Register("ok", handler.Func(func(ctx context.Context, r *handler.Request) (string, error) {
		ran.Store(r.ID, true)
		return "", nil
	}))
	killed := b.submit(t, producer.Submission{Code: "ok"})
	live := b.submit(t, producer.Submission{Code: "ok"})
	msgs, err := b.env.Store.TaskClaimDue(ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	// Cancelled in the task center, its notice long gone from Redis.
	b.env.Exec(t, `UPDATE task_center SET status = ? WHERE id = ?`, int(task.Cancelled), killed)
	for _, m := range msgs {
		m.DispatchedUnixMS = time.Now().Add(-26 * time.Hour).UnixMilli()
	}
	_, err = b.env.Broker.Push(ctx, msgs)
	require.NoError(t, err)

	w := b.startWorker(t, nil)
	b.dispatchUntil(t, "the live task's success", func() bool { return b.task(t, live).Status == task.Succeeded })
	require.Eventually(t, func() bool { return w.Stats().Stale > 0 }, 10*time.Second, 10*time.Millisecond)
	_, did := ran.Load(killed)
	require.False(t, did, "the killed task's handler did not run")
	require.Equal(t, task.Cancelled, b.task(t, killed).Status)
	require.Empty(t, b.outcomes(t, killed))
	n, err := b.env.Broker.Client().LLen(ctx, b.env.Broker.Keys.Queue("q", 0)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "its message is gone from the queue")
	require.EqualValues(t, 1, w.Stats().Stale, "one message dropped, counted once")
}
