package stats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/stats"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

// Attempts per minute and the success rate of a queue, read from Redis's
// per-minute counters, match the attempts the task center recorded in
// task_run; a worker's per-minute figure matches its attempts too.
func TestQueueFiguresMatchTaskRun(t *testing.T) {
	t.Parallel()
	// The figures of the last minute count the current minute whole and
	// the one before pro rata: the worker and the snapshot share a clock
	// pinned to one instant, so every attempt counts in the same minute.
	pinned := clock.NewManual(time.Now())
	env := testenv.New(t)
	ctx := context.Background()
	reg := handler.NewRegistry()
	reg.Register("ok", handler.Func(func(context.Context, *handler.Request) (string, error) { return "ok", nil }))
	reg.Register("bad", handler.Func(func(context.Context, *handler.Request) (string, error) { return "", errors.New("boom") }))
	w := worker.New(worker.Config{
		ID: "w1", Node: "test", Queues: map[string]int{"q": 4}, Handlers: reg,
		RetryBase: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		ShutdownGrace: 5 * time.Second, HeartbeatInterval: 50 * time.Millisecond, Clock: pinned,
	}, env.Store, env.Broker)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)

	prod := producer.New(env.Store, nil, producer.Options{})
	one := 1
	var subs []producer.Submission
	for range 7 {
		subs = append(subs, producer.Submission{Code: "ok", Queue: "q"})
	}
	for range 3 { // each fails, is retried once, and dies: 6 failed attempts
		subs = append(subs, producer.Submission{Code: "bad", Queue: "q", MaxRetry: &one})
	}
	_, err := prod.SubmitBatch(ctx, subs)
	require.NoError(t, err)

	sched := scheduler.New(scheduler.Config{}, env.Store, env.Broker)
	require.Eventually(t, func() bool {
		_, err := sched.RunOnce(ctx)
		require.NoError(t, err)
		return env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status IN (?, ?)`, task.Succeeded, task.Dead) == len(subs)
	}, 20*time.Second, 10*time.Millisecond, "tasks did not finish")
	runs := env.Count(t, `SELECT COUNT(*) FROM task_run WHERE queue = 'q'`)
	failed := env.Count(t, `SELECT COUNT(*) FROM task_run WHERE queue = 'q' AND outcome IN ('failed', 'dead', 'timeout', 'crashed')`)
	succeeded := env.Count(t, `SELECT COUNT(*) FROM task_run WHERE queue = 'q' AND outcome = 'succeeded'`)
	require.Equal(t, 13, runs)
	require.Equal(t, 6, failed)
	require.Equal(t, 7, succeeded)

	// The worker's own counters reach Redis with its next heartbeat; the
	// queue's with the ack that follows the results' write, so a task's
	// end can be seen in the task center before it is counted.
	var st *stats.Stats
	require.Eventually(t, func() bool {
		st, err = stats.Collect(ctx, stats.Source{Store: env.Store, Broker: env.Broker, Queues: []string{"q"}, Clock: pinned})
		require.NoError(t, err)
		return len(st.Workers) == 1 && st.Workers[0].ProcessedPerMin == int64(runs) &&
			len(st.Queues) == 1 && st.Queues[0].ProcessedPerMin >= int64(runs)
	}, 20*time.Second, 20*time.Millisecond, "the counters did not reach the runs written")
	require.Equal(t, env.Count(t, `SELECT COUNT(*) FROM task_run WHERE finished_at >= ?`, st.At.Truncate(time.Minute)), runs,
		"every attempt ended in the minute of the snapshot")
	require.Len(t, st.Queues, 1)
	q := st.Queues[0]
	require.Equal(t, "q", q.Name)
	require.EqualValues(t, runs, q.ProcessedPerMin)
	require.EqualValues(t, failed, q.FailedPerMin)
	require.NotNil(t, q.SuccessRate10m)
	require.InDelta(t, float64(succeeded)/float64(runs), *q.SuccessRate10m, 1e-9)
}

// A queue with no ended attempt has no success rate, and none per minute.
func TestQueueFiguresWithoutAttempts(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	st, err := stats.Collect(context.Background(), stats.Source{Store: env.Store, Broker: env.Broker, Queues: []string{"idle"}})
	require.NoError(t, err)
	require.Len(t, st.Queues, 1)
	require.Nil(t, st.Queues[0].SuccessRate10m)
	require.Zero(t, st.Queues[0].ProcessedPerMin)
}

// Due counts the waiting tasks due now, pending or failed, of every
// priority; Pending counts the delayed ones too.
func TestDueOfTheWaiting(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	prod := producer.New(env.Store, nil, producer.Options{})
	high, later := 1, time.Hour
	res, err := prod.SubmitBatch(ctx, []producer.Submission{{Code: "q"}, {Code: "q", Priority: &high}, {Code: "q", Delay: later}, {Code: "q"}})
	require.NoError(t, err)
	env.Exec(t, `UPDATE task_center SET status = 4, attempt = 1 WHERE id = ?`, res[3].ID) // failed, its retry due
	st, err := stats.Collect(ctx, stats.Source{Store: env.Store, Broker: env.Broker, Queues: []string{"q"}})
	require.NoError(t, err)
	require.Len(t, st.Queues, 1)
	q := st.Queues[0]
	require.EqualValues(t, 3, q.Pending)
	require.EqualValues(t, 1, q.Failed)
	require.EqualValues(t, 3, q.Due, "two pending and the failed one; not the delayed one")
}

// Waiting adds up what is due and what is queued, and drains with its
// slowest queue; a paused queue is left out, and a queue that waits
// with no attempt in the last minute leaves the time unknown.
func TestWaiting(t *testing.T) {
	t.Parallel()
	s := &stats.Stats{Queues: []stats.Queue{
		{Name: "import", Due: 46000, Backlog: []int64{600, 400}, ProcessedPerMin: 2000},
		{Name: "mail", Due: 3, Backlog: []int64{0}, ProcessedPerMin: 60},
		{Name: "held", Due: 500, Paused: true},
		{Name: "idle"},
	}}
	n, drain, drains := s.Waiting()
	require.EqualValues(t, 47003, n, "held is paused: its tasks wait on purpose")
	require.True(t, drains)
	require.Equal(t, 23*time.Minute+30*time.Second, drain, "import's 47,000 at 2,000 a minute")
	require.Equal(t, "24m", stats.Roughly(drain))
	require.Equal(t, "1s", stats.Roughly(100*time.Millisecond))
	require.Equal(t, "3h10m", stats.Roughly(3*time.Hour+10*time.Minute+20*time.Second))

	// A worker of import whose results wait to be written takes no work:
	// the last minute's rate says nothing of what comes.
	s.Workers = []stats.Worker{{ID: "w", Queues: []string{"import"}, ResultsStuckSeconds: 45}}
	_, _, drains = s.Waiting()
	require.False(t, drains, "import waits behind results waiting to be written")
	s.Workers = nil

	// At maxmemory nothing is dispatched: the rate drains what Redis
	// held, not the task center's due tasks.
	s.RedisMemory = &broker.Memory{Used: 101 << 20, Max: 100 << 20}
	_, _, drains = s.Waiting()
	require.False(t, drains, "Redis is full")
	s.RedisMemory = &broker.Memory{Used: 10 << 20, Max: 100 << 20}
	_, _, drains = s.Waiting()
	require.True(t, drains, "Redis has room")

	s.Queues[1].ProcessedPerMin = 0
	_, _, drains = s.Waiting()
	require.False(t, drains, "mail waits with no attempt in the last minute")

	_, _, drains = (&stats.Stats{Queues: []stats.Queue{{Name: "idle"}}}).Waiting()
	require.False(t, drains, "nothing waits: no time to give")
}

// A worker's BUSY is the number of tasks its RUNNING lists, even when its
// last heartbeat predates them, and the worker names its node.
func TestWorkerBusyAgreesWithRunning(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	require.NoError(t, env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w-1", Node: "web-1", Host: "h", PID: 1, Queues: []string{"q"}, Busy: 0}, time.Minute))
	prod := producer.New(env.Store, nil, producer.Options{})
	for range 3 {
		r, err := prod.Submit(ctx, producer.Submission{Code: "q"})
		require.NoError(t, err)
		env.Exec(t, `UPDATE task_center SET status = 2, worker_id = 'w-1', attempt = 1, dispatched_at = NOW(3), started_at = NOW(3) WHERE id = ?`, r.ID)
	}
	st, err := stats.Collect(ctx, stats.Source{Store: env.Store, Broker: env.Broker})
	require.NoError(t, err)
	require.Len(t, st.Workers, 1)
	w := st.Workers[0]
	require.Len(t, w.Current, 3)
	require.Equal(t, 3, w.Busy)
	require.Equal(t, "web-1", w.Node)
}

// An error names the server it came from: "context deadline exceeded"
// alone does not say where to look.
func TestErrorsNameTheirServer(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := stats.Collect(ctx, stats.Source{Store: env.Store, Broker: env.Broker})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "MySQL: "), err.Error())

}

// Only keeps the queues named and the workers that consume one of them.
func TestOnly(t *testing.T) {
	t.Parallel()
	s := &stats.Stats{
		Queues: []stats.Queue{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Workers: []stats.Worker{
			{ID: "w1", Queues: []string{"a"}},
			{ID: "w2", Queues: []string{"b", "c"}},
			{ID: "w3", Queues: []string{"c"}},
		},
	}
	s.Only([]string{"b", "a"})
	var queues, workers []string
	for _, q := range s.Queues {
		queues = append(queues, q.Name)
	}
	for _, w := range s.Workers {
		workers = append(workers, w.ID)
	}
	require.Equal(t, []string{"a", "b"}, queues)
	require.Equal(t, []string{"w1", "w2"}, workers)
}
