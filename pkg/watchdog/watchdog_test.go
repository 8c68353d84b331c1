package watchdog_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/metrics"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/watchdog"
	"github.com/taskd/taskd/pkg/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// A Go handler that ignores its context hangs its slot: the watchdog
// abandons the slot past timeout + grace, a new task runs in its place
// (the queue has one slot), the hung task is recovered and succeeds on its
// next attempt, and when the handler still has not returned a grace later
// the process is told to exit with ExitCode. The hung attempt's late
// result is rejected by the fence.
func TestHungHandlerIsHealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	reg := handler.NewRegistry()
	unblock := make(chan struct{})
	started := make(chan time.Time, 1)
	reg.Register("hang", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		if r.Attempt == 1 {
			started <- time.Now()
			<-unblock // ignores its context
		}
		return "ok", nil
	}))
	reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	m := metrics.New("test", "n1")
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"q": 1}, Handlers: reg, Logger: quiet,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Metrics: m}, env.Store, env.Broker)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	sched := scheduler.New(scheduler.Config{PollInterval: 50 * time.Millisecond, Logger: quiet}, env.Store, env.Broker)
	require.NoError(t, sched.Start(ctx))
	defer sched.Stop()
	exits := make(chan int, 1)
	const grace = time.Second
	wd := watchdog.New(watchdog.Config{Interval: 50 * time.Millisecond, IdleWindow: time.Hour, Grace: grace, Node: "n1",
		Logger: quiet, Metrics: m, Exit: func(code int, _ string) { exits <- code }}, w, env.Store, env.Broker)
	require.NoError(t, wd.Start(ctx))
	defer wd.Stop()

	prod := producer.New(env.Store, env.Broker, producer.Options{})
	hung, err := prod.Submit(ctx, producer.Submission{Code: "hang", Queue: "q", Timeout: time.Second})
	require.NoError(t, err)
	hangAt := <-started
	next, err := prod.Submit(ctx, producer.Submission{Code: "ok", Queue: "q"})
	require.NoError(t, err)

	get := func(id int64) *task.Task {
		tk, err := env.Store.TaskGet(ctx, id)
		require.NoError(t, err)
		return tk
	}
	var healedAt, recoveredAt time.Time
	require.Eventually(t, func() bool {
		if healedAt.IsZero() && get(hung.ID).Attempt >= 2 {
			healedAt = time.Now()
		}
		return get(hung.ID).Status == task.Succeeded && get(next.ID).Status == task.Succeeded
	}, 20*time.Second, 10*time.Millisecond)
	recoveredAt = time.Now()
	require.Equal(t, 2, get(hung.ID).Attempt)

	var exitAt time.Time
	select {
	case code := <-exits:
		exitAt = time.Now()
		require.Equal(t, watchdog.ExitCode, code)
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the abandoned handler kept its slot")
	}
	t.Logf("timeout 1s, grace %s: hang to healed %s, to recovered (attempt 2 succeeded) %s, to exit %s",
		grace, healedAt.Sub(hangAt).Round(10*time.Millisecond), recoveredAt.Sub(hangAt).Round(10*time.Millisecond),
		exitAt.Sub(hangAt).Round(10*time.Millisecond))
	require.GreaterOrEqual(t, healedAt.Sub(hangAt), time.Second+grace, "not before timeout + grace")

	// The frozen attempt finally returns: its result is fenced out.
	close(unblock)
	require.Eventually(t, func() bool { return w.Stats().Stale == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, env.Count(t, "SELECT COUNT(*) FROM task_run WHERE task_id = ? AND attempt = 1 AND outcome = 'crashed'", hung.ID))
	require.Equal(t, 2, env.Count(t, "SELECT COUNT(*) FROM task_run WHERE task_id = ?", hung.ID))
	require.Equal(t, task.Succeeded, get(hung.ID).Status)

	events, err := env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, watchdog.KindExit, events[0].Kind)
	require.Equal(t, watchdog.KindAbandoned, events[1].Kind)
	require.Equal(t, hung.ID, events[1].TaskID)
	require.Equal(t, 1, events[1].Attempt)
}

// A queue whose limit holds its backlog back is not idle: its worker has
// free slots and writes no result for as long as the limit says, on
// purpose. The same queue without its limit is.
func TestLimitedQueueIsNotIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	env.Broker.SetLayout(slowQueue{})
	reg := handler.NewRegistry()
	reg.Register("slow", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	clk := clock.NewManual(time.Now())
	m := metrics.New("test", "n1")
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"slow": 2}, Handlers: reg, Logger: quiet,
		Clock: clk, Metrics: m}, env.Store, env.Broker)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	prod := producer.New(env.Store, env.Broker, producer.Options{})
	for range 3 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "slow"})
		require.NoError(t, err)
	}
	sched := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker)
	_, err := sched.RunOnce(ctx)
	require.NoError(t, err)
	// One a minute: the first runs, two wait. The clock moves only once
	// the first result is written (and counted): a result written after
	// it would be progress within the idle window.
	require.Eventually(t, func() bool {
		n, err := env.Broker.QueueLen(ctx, "slow")
		return err == nil && n == 2 && completed(t, m) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		held, err := env.Broker.LimitedQueues(ctx, []string{"slow"})
		return err == nil && held["slow"].By == "rate"
	}, 10*time.Second, 10*time.Millisecond)

	exits := make(chan int, 1)
	wd := watchdog.New(watchdog.Config{IdleWindow: time.Minute, Grace: time.Second, Node: "n1", Clock: clk,
		Logger: quiet, Exit: func(code int, _ string) { exits <- code }}, w, env.Store, env.Broker)
	clk.Advance(2 * time.Minute)
	res, err := wd.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Idle, "a limited backlog is not idleness")
	require.False(t, res.Exit)

	// Without the limit's state (as before limits), the same is idle. The
	// worker is stopped first: its next refused take would write the
	// state again.
	w.Stop()
	require.NoError(t, env.Broker.Client().Del(ctx, env.Broker.Keys.Limited("slow")).Err())
	res, err = wd.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Idle)
}

// unwrittenResult starts a worker whose writes the task center takes
// and never answers, and returns once one result of it waits.
func unwrittenResult(t *testing.T, env *testenv.Env) *worker.Worker {
	ctx := context.Background()
	reg := handler.NewRegistry()
	reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	st := testenv.NewHungStore(env.Store)
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"quick": 2}, Handlers: reg, Logger: quiet}, st, env.Broker)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	t.Cleanup(func() { close(st.Release) })
	_, err := producer.New(env.Store, env.Broker, producer.Options{}).Submit(ctx, producer.Submission{Code: "quick"})
	require.NoError(t, err)
	_, err = scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.ResultsWaiting() > 0 }, 10*time.Second, 10*time.Millisecond)
	return w
}

// Over a link to Redis with a second added each way, the watchdog's
// events are still recorded: each write had a bound of 2 s of its own,
// less than one round trip takes there (FAULTS.md row 21).
func TestEventsRecordedOverASlowLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	w := unwrittenResult(t, env)

	slow, err := broker.Open(ctx, broker.Options{Addr: testenv.LatencyProxy(t, env.RedisAddr, time.Second), Prefix: env.Prefix})
	require.NoError(t, err)
	defer slow.Close()
	var logs testenv.LogBuffer
	exits := make(chan string, 1)
	wd := watchdog.New(watchdog.Config{IdleWindow: time.Millisecond, Grace: time.Millisecond, Node: "n1",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Exit:   func(_ int, reason string) { exits <- reason }}, w, env.Store, slow)
	time.Sleep(10 * time.Millisecond) // the result waited past the idle window
	for len(exits) == 0 {
		_, err := wd.RunOnce(ctx)
		require.NoError(t, err)
	}
	events, err := env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Len(t, events, 2, "the report and the exit: %s", logs.String())
	require.Equal(t, watchdog.KindExit, events[0].Kind)
	require.Equal(t, watchdog.KindIdle, events[1].Kind)
}

// A worker whose results the task center does not take is stuck however
// busy its slots look: the watchdog reports it once its oldest result has
// waited an idle window, and exits it a grace later.
func TestUnwrittenResultsExit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	w := unwrittenResult(t, env)

	const window = 300 * time.Millisecond
	exits := make(chan string, 1)
	wd := watchdog.New(watchdog.Config{IdleWindow: window, Grace: window, Node: "n1", Logger: quiet,
		Exit: func(_ int, reason string) { exits <- reason }}, w, env.Store, env.Broker)
	res, err := wd.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Idle, "a result waiting less than the idle window is no sign")
	require.Eventually(t, func() bool {
		res, err := wd.RunOnce(ctx)
		require.NoError(t, err)
		return res.Idle == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := wd.RunOnce(ctx)
		require.NoError(t, err)
		return len(exits) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, <-exits, "results unwritten for")
	events, err := env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, watchdog.KindExit, events[0].Kind)
	require.Equal(t, watchdog.KindIdle, events[1].Kind)
	require.Contains(t, events[1].Detail, "the task center does not answer")
}

// completed is the number of results m has counted.
func completed(t *testing.T, m *metrics.Metrics) float64 {
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() == "taskd_tasks_completed_total" {
			for _, c := range f.GetMetric() {
				n += c.GetCounter().GetValue()
			}
		}
	}
	return n
}

// slowQueue limits queue slow to one task a minute.
type slowQueue struct{}

func (slowQueue) Shards(string) (int, int) { return 1, 1 }
func (slowQueue) Paused(string) bool       { return false }
func (slowQueue) Changed() <-chan struct{} { return nil }
func (slowQueue) Limit(q string) limit.Limit {
	if q == "slow" {
		return limit.Limit{Rate: limit.Rate{N: 1, Period: time.Minute}, Burst: 1}
	}
	return limit.Limit{}
}

// A worker whose results the task center refuses (read-only during a
// maintenance or a failover) is not exited: the server answers, refuses
// every node alike, and a restart would only run the tasks again. The
// watchdog reports it with the server's reason, and the results are
// written once the server takes writes.
func TestRefusedResultsWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	reg := handler.NewRegistry()
	reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	// The task center refuses a success as a read-only server does.
	env.Exec(t, `CREATE TRIGGER read_only_results BEFORE UPDATE ON task_center FOR EACH ROW
		IF NEW.status = 3 THEN SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1290,
			MESSAGE_TEXT = 'The MariaDB server is running with the --read-only option so it cannot execute this statement';
		END IF`)
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"quick": 2}, Handlers: reg, Logger: quiet}, env.Store, env.Broker)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	id, err := producer.New(env.Store, env.Broker, producer.Options{}).Submit(ctx, producer.Submission{Code: "quick"})
	require.NoError(t, err)
	_, err = scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.ResultsRefused() != nil }, 10*time.Second, 10*time.Millisecond)

	requireWaits(t, env, w, "read-only")

	env.Exec(t, `DROP TRIGGER read_only_results`)
	require.Eventually(t, func() bool {
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 3`, id.ID) == 1
	}, 20*time.Second, 20*time.Millisecond, "the result is written once the server takes writes")
	require.Eventually(t, func() bool { return w.ResultsWaiting() == 0 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, w.ResultsRefused())
}

// A task center that cannot be reached at all (down, restarting, cut off:
// every connection refused) is no reason to exit either: every node sees
// it alike, a restart would not write the results, and the restarted
// process would leave their tasks to recovery, which runs them again.
// The watchdog reports it, and the worker keeps its results and waits.
func TestUnreachableTaskCenterWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	st, proxy := proxiedStore(t, env)
	started, release := make(chan struct{}, 1), make(chan struct{})
	reg := handler.NewRegistry()
	reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) {
		started <- struct{}{}
		<-release
		return "ok", nil
	}))
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"quick": 2}, Handlers: reg, Logger: quiet}, st, env.Broker)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	_, err := producer.New(env.Store, env.Broker, producer.Options{}).Submit(ctx, producer.Submission{Code: "quick"})
	require.NoError(t, err)
	_, err = scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
	require.NoError(t, err)
	<-started
	proxy.Down() // the task center goes away while the task runs
	close(release)
	require.Eventually(t, func() bool { return w.ResultsRefused() != nil }, 20*time.Second, 10*time.Millisecond,
		"a refused connection is told apart from a server that does not answer")
	require.ErrorContains(t, w.ResultsRefused(), "unreachable")
	// Its heartbeat says so, and recovery leaves its overdue tasks alone.
	require.Eventually(t, func() bool {
		h, err := env.Broker.HoldingResults(ctx, []string{w.ID()})
		require.NoError(t, err)
		return h[w.ID()]
	}, 20*time.Second, 50*time.Millisecond, "the heartbeat tells that results wait")

	requireWaits(t, env, w, "connection refused")
}

// proxiedStore opens env's task center through a proxy that can be taken
// down.
func proxiedStore(t *testing.T, env *testenv.Env) (*store.Store, *testenv.FreezeProxy) {
	t.Helper()
	dsn, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	proxy := testenv.NewFreezeProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr()
	st, err := store.Open(context.Background(), dsn.FormatDSN(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, proxy
}

// requireWaits checks that a watchdog of w, whose results the task center
// turns down, reports them unwritten (its event saying why) and does not
// exit the process past the idle window and the grace.
func requireWaits(t *testing.T, env *testenv.Env, w *worker.Worker, why string) {
	t.Helper()
	ctx := context.Background()
	const window = 300 * time.Millisecond
	exits := make(chan string, 1)
	wd := watchdog.New(watchdog.Config{IdleWindow: window, Grace: window, Node: "n1", Logger: quiet,
		Exit: func(_ int, reason string) { exits <- reason }}, w, env.Store, env.Broker)
	require.Eventually(t, func() bool {
		res, err := wd.RunOnce(ctx)
		require.NoError(t, err)
		return res.Idle == 1
	}, 10*time.Second, 20*time.Millisecond)
	time.Sleep(3 * window)
	res, err := wd.RunOnce(ctx)
	require.NoError(t, err)
	require.False(t, res.Exit, "no exit while the task center turns the results down")
	require.Empty(t, exits)
	events, err := env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, watchdog.KindIdle, events[0].Kind)
	require.Contains(t, events[0].Detail, why)
}

// A worker that holds a full batch of results the task center turns down
// takes no more work: its queue keeps a backlog and writes no result. It
// waits on the task center, as every node does, and is not idle: the
// watchdog neither reports the queue idle nor exits the process, which
// would lose the held results and, under a supervisor, restart into the
// same outage.
func TestUnreachableTaskCenterWithABacklogWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	st, proxy := proxiedStore(t, env)

	// More messages wait in Redis than the worker holds results of
	// before it stops taking (four batches being written, one queued).
	const tasks = 2800
	prod := producer.New(env.Store, env.Broker, producer.Options{})
	for range tasks / 100 {
		subs := make([]producer.Submission, 100)
		for i := range subs {
			subs[i] = producer.Submission{Code: "quick"}
		}
		_, err := prod.SubmitBatch(ctx, subs)
		require.NoError(t, err)
	}
	sched := scheduler.New(scheduler.Config{Window: 2 * tasks, Logger: quiet}, env.Store, env.Broker)
	require.Eventually(t, func() bool {
		_, err := sched.RunOnce(ctx)
		require.NoError(t, err)
		return backlog(t, env) == tasks
	}, 20*time.Second, 10*time.Millisecond)

	proxy.Down() // the task center goes away before the worker starts
	reg := handler.NewRegistry()
	reg.Register("quick", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	w := worker.New(worker.Config{Node: "n1", Queues: map[string]int{"quick": 4}, Handlers: reg, Logger: quiet,
		FlushWait: time.Millisecond}, st, env.Broker)
	require.NoError(t, w.Start(ctx))
	defer w.Stop()
	// It runs what it takes, holds the results, and stops taking.
	last := int64(-1)
	require.Eventually(t, func() bool {
		n := backlog(t, env)
		stalled := n == last && len(w.Running()) == 0 && w.ResultsRefused() != nil
		last = n
		return stalled
	}, 20*time.Second, 200*time.Millisecond)
	require.Positive(t, last, "a backlog is left")

	const window = 300 * time.Millisecond
	exits := make(chan string, 1)
	var logs testenv.LogBuffer
	wd := watchdog.New(watchdog.Config{IdleWindow: window, Grace: window, Node: "n1", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Exit: func(_ int, reason string) { exits <- reason }}, w, env.Store, env.Broker)
	idle := 0
	require.Never(t, func() bool {
		res, err := wd.RunOnce(ctx)
		require.NoError(t, err)
		idle += res.Idle
		return res.Exit
	}, 10*window, 20*time.Millisecond, "no exit while the task center cannot be reached")
	require.Empty(t, exits)
	require.Equal(t, 1, idle, "the unwritten results are reported, the queue is not")
	events, err := env.Broker.Events(ctx, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Contains(t, events[0].Detail, "connection refused")
	require.Equal(t, last, backlog(t, env), "the worker took nothing meanwhile")
	require.Equal(t, 1, strings.Count(logs.String(), "queue backlog waits for the task center"), "said once, not every check")
}

// backlog is the number of messages waiting in queue quick.
func backlog(t *testing.T, env *testenv.Env) int64 {
	n, err := env.Broker.QueueLen(context.Background(), "quick")
	require.NoError(t, err)
	return n
}

// While the task center turns a worker's results down, its queues' quiet
// is no idleness; once it takes writes again each queue gets a whole idle
// window before it counts as idle (the worker resumes taking a moment
// later), and a queue that still takes nothing then is reported and
// exits the process as any stuck one.
func TestIdleWindowStartsOverAfterTheTaskCenterWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	for range 2 {
		_, err := producer.New(env.Store, env.Broker, producer.Options{}).Submit(ctx, producer.Submission{Code: "quick"})
		require.NoError(t, err)
	}
	_, err := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, backlog(t, env))

	clk := clock.NewManual(time.Now())
	w := &waitingSlots{progress: clk.Now()}
	w.setRefused(errors.New("unreachable: dial tcp 127.0.0.1:3306: connect: connection refused"))
	const window, grace = time.Minute, 30 * time.Second
	check, exits := checker(t, env, w, watchdog.Config{IdleWindow: window, Grace: grace, Clock: clk})

	clk.Advance(10 * time.Minute) // a long outage
	require.Equal(t, watchdog.Result{}, check(), "waiting on the task center")
	w.setRefused(nil) // it takes writes again; the worker has not taken yet
	require.Equal(t, watchdog.Result{}, check(), "a whole window after the wait")
	clk.Advance(window + time.Second)
	require.Equal(t, watchdog.Result{Idle: 1}, check(), "a queue that takes nothing after the wait is idle")
	clk.Advance(grace)
	require.True(t, check().Exit)
	require.Contains(t, <-exits, "queue quick idle with a backlog")
}

// waitingSlots is a worker of queue quick with two free slots that has
// written no result since progress; its one waiting result is turned down
// while refused is set.
type waitingSlots struct {
	progress time.Time
	refused  atomic.Pointer[error]
}

func (w *waitingSlots) setRefused(err error) { w.refused.Store(&err) }

func (*waitingSlots) ID() string                  { return "w1" }
func (*waitingSlots) Running() []worker.Running   { return nil }
func (*waitingSlots) Abandon(worker.Running) bool { return false }
func (*waitingSlots) AckAbandoned(context.Context, worker.Running) error {
	return nil
}
func (w *waitingSlots) QueueSlots() []worker.QueueSlots {
	return []worker.QueueSlots{{Name: "quick", Capacity: 2, Progress: w.progress}}
}
func (*waitingSlots) ResultsWaiting() time.Duration { return time.Second }
func (w *waitingSlots) ResultsRefused() error       { return *w.refused.Load() }

// Group limits hold tasks back at claim, not messages at take: a serial
// queue's groups are at their limit while their dispatched tasks wait in
// Redis, and a worker that takes none of them (its fetcher stalled, every
// slot free) is idle as on any other queue.
func TestStalledSerialQueueIsIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	env.Broker.SetLayout(serialLedger{})
	var subs []producer.Submission
	for _, g := range []string{"acct-1", "acct-1", "acct-2", "acct-2"} {
		subs = append(subs, producer.Submission{Code: "ledger", Group: g})
	}
	_, err := producer.New(env.Store, env.Broker, producer.Options{}).SubmitBatch(ctx, subs)
	require.NoError(t, err)
	sched := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker)
	for range 3 {
		_, err := sched.RunOnce(ctx)
		require.NoError(t, err)
	}
	n, err := env.Broker.QueueLen(ctx, "ledger")
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "one task of each group waits in Redis")
	held, err := env.Broker.LimitedQueues(ctx, []string{"ledger"})
	require.NoError(t, err)
	require.Equal(t, "group", held["ledger"].By, "both groups are at their limit")

	clk := clock.NewManual(time.Now())
	w := &stubSlots{queue: "ledger", capacity: 2, progress: clk.Now()}
	const window, grace = time.Minute, 30 * time.Second
	check, exits := checker(t, env, w, watchdog.Config{IdleWindow: window, Grace: grace, Clock: clk})
	require.Equal(t, watchdog.Result{}, check())
	clk.Advance(window + time.Second)
	require.Equal(t, watchdog.Result{Idle: 1}, check(), "groups at their limit hold back no message")
	clk.Advance(grace)
	require.True(t, check().Exit)
	require.Contains(t, <-exits, "queue ledger idle with a backlog")
}

// A result comes only as a task ends: a worker whose tasks run far longer
// than the idle window writes none meanwhile, and when one ends its slot
// is free a moment, with a backlog waiting, before the worker takes the
// next. A check in that moment finds no idleness (it would exit the
// process and its other running tasks); a slot left free for an idle
// window is idle.
func TestLongTasksAreNotIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	prod := producer.New(env.Store, env.Broker, producer.Options{})
	for range 6 {
		_, err := prod.Submit(ctx, producer.Submission{Code: "long"})
		require.NoError(t, err)
	}
	_, err := scheduler.New(scheduler.Config{Logger: quiet}, env.Store, env.Broker).RunOnce(ctx)
	require.NoError(t, err)
	n, err := env.Broker.QueueLen(ctx, "long")
	require.NoError(t, err)
	require.EqualValues(t, 6, n)

	clk := clock.NewManual(time.Now())
	start := clk.Now()
	w := &stubSlots{queue: "long", capacity: 4, progress: start}
	for i := range 4 {
		w.running = append(w.running, worker.Running{Timeout: time.Hour,
			Slot: broker.Slot{Queue: "long", TaskID: int64(i + 1), Code: "long", Attempt: 1, Since: start}})
	}
	const interval, window, grace = 5 * time.Second, 2 * time.Minute, 30 * time.Second
	check, exits := checker(t, env, w, watchdog.Config{Interval: interval, IdleWindow: window, Grace: grace, Clock: clk})
	// Five minutes of every slot busy, no result written.
	for clk.Now().Sub(start) < 5*time.Minute {
		clk.Advance(interval)
		require.Equal(t, watchdog.Result{}, check())
	}
	// One ends: its slot is free before its result is written.
	w.running = w.running[1:]
	clk.Advance(interval)
	require.Equal(t, watchdog.Result{}, check(), "a slot freed a moment ago")
	require.Empty(t, exits)

	// Its result is written, and the slot stays free: the worker takes
	// no more.
	w.progress = clk.Now()
	clk.Advance(window + time.Second)
	require.Equal(t, watchdog.Result{Idle: 1}, check())
	clk.Advance(grace)
	require.True(t, check().Exit)
	require.Contains(t, <-exits, "queue long idle with a backlog")
}

// serialLedger makes queue ledger serial per group.
type serialLedger struct{}

func (serialLedger) Shards(string) (int, int) { return 1, 1 }
func (serialLedger) Paused(string) bool       { return false }
func (serialLedger) Changed() <-chan struct{} { return nil }
func (serialLedger) Limit(q string) limit.Limit {
	if q == "ledger" {
		return limit.Limit{Serial: limit.SerialOn}
	}
	return limit.Limit{}
}
func (l serialLedger) Grouped() map[string]limit.Limit {
	return map[string]limit.Limit{"ledger": l.Limit("ledger")}
}

// stubSlots is a worker of one queue whose slots run running and which
// wrote its last result at progress; its results are all written.
type stubSlots struct {
	queue    string
	capacity int
	progress time.Time
	running  []worker.Running
}

func (*stubSlots) ID() string                  { return "w1" }
func (w *stubSlots) Running() []worker.Running { return w.running }
func (*stubSlots) Abandon(worker.Running) bool { return false }
func (*stubSlots) AckAbandoned(context.Context, worker.Running) error {
	return nil
}
func (w *stubSlots) QueueSlots() []worker.QueueSlots {
	return []worker.QueueSlots{{Name: w.queue, Capacity: w.capacity, Progress: w.progress}}
}
func (*stubSlots) ResultsWaiting() time.Duration { return 0 }
func (*stubSlots) ResultsRefused() error         { return nil }

// checker returns one check of a watchdog over w, configured by cfg (on
// node n1, quiet), that fails the test on an error, and the exits it asks
// for.
func checker(t *testing.T, env *testenv.Env, w watchdog.Slots, cfg watchdog.Config) (func() watchdog.Result, chan string) {
	exits := make(chan string, 1)
	cfg.Node, cfg.Logger = "n1", quiet
	cfg.Exit = func(_ int, reason string) { exits <- reason }
	wd := watchdog.New(cfg, w, env.Store, env.Broker)
	return func() watchdog.Result {
		t.Helper()
		res, err := wd.RunOnce(context.Background())
		require.NoError(t, err)
		return res
	}, exits
}
