package ops_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/config"
	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
	"github.com/taskd/taskd/pkg/worker"
)

// TestMain reaps the orphans of killed exec handlers, as `taskd run` does,
// and checks that no goroutine outlives the tests but the reaper's.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := handler.StartReaper(ctx); err != nil {
		panic(err)
	}
	code := m.Run()
	cancel()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("os/signal.signal_recv")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

type testBundle struct {
	env  *testenv.Env
	ops  *ops.Ops
	prod *producer.Client
	// window is the scheduler's Window in runFleet (0: the default).
	window int
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := testenv.New(t)
	o := ops.New(env.Store, env.Broker)
	o.Known = func(string) bool { return true } // every queue of these tests is configured
	return &testBundle{env: env, ops: o, prod: producer.New(env.Store, nil, producer.Options{})}
}

func (b *testBundle) submit(t *testing.T, code string) int64 {
	t.Helper()
	r, err := b.prod.Submit(context.Background(), producer.Submission{Code: code})
	require.NoError(t, err)
	return r.ID
}

func (b *testBundle) setStatus(t *testing.T, id int64, st task.Status) {
	t.Helper()
	b.env.Exec(t, `UPDATE task_center SET status = ?, retry_count = 3, crash_count = 2 WHERE id = ?`, int(st), id)
}

func (b *testBundle) get(t *testing.T, id int64) *task.Task {
	t.Helper()
	tk, err := b.env.Store.TaskGet(context.Background(), id)
	require.NoError(t, err)
	return tk
}

func TestRetryDeadFailedCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead, failed, cancelled, running := b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x")
	b.setStatus(t, dead, task.Dead)
	b.setStatus(t, failed, task.Failed)
	b.setStatus(t, cancelled, task.Cancelled)
	b.setStatus(t, running, task.Running)

	c, err := b.ops.Retry(context.Background(), ops.Target{IDs: []int64{dead, failed, cancelled, running}})
	require.NoError(t, err)
	require.Equal(t, 4, c.Requested)
	require.Equal(t, 3, c.Changed)
	require.ElementsMatch(t, []int64{dead, failed, cancelled}, c.IDs)
	for _, id := range c.IDs {
		tk := b.get(t, id)
		require.Equal(t, task.Pending, tk.Status)
		require.Zero(t, tk.RetryCount)
		require.Zero(t, tk.CrashCount)
	}
	require.Equal(t, task.Running, b.get(t, running).Status, "a running task is not retried")
	// Exactly one audit row, with the right count.
	entries, err := b.env.Store.AuditList(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "retry", entries[0].Action)
	require.Equal(t, 3, entries[0].Affected)
	require.NotEmpty(t, entries[0].Actor)
}

func TestRetryByFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []int64
	for i := range 6 {
		id := b.submit(t, "code"+strconv.Itoa(i%2))
		b.setStatus(t, id, task.Dead)
		if i%2 == 0 {
			want = append(want, id)
		}
	}
	st := task.Dead
	ids, err := b.ops.Select(context.Background(), ops.Filter{Status: &st, Code: "code0"})
	require.NoError(t, err)
	require.ElementsMatch(t, want, ids)
}

func TestCancelIdleTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pending, failed, done := b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x")
	b.setStatus(t, failed, task.Failed)
	b.setStatus(t, done, task.Succeeded)
	c, err := b.ops.Kill(context.Background(), ops.Target{IDs: []int64{pending, failed, done}})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{pending, failed}, c.IDs)
	require.Equal(t, task.Cancelled, b.get(t, pending).Status)
	require.Equal(t, task.Succeeded, b.get(t, done).Status, "a finished task stays finished")
}

// An exec handler sleeping 60 s is killed within 2 s, wherever it runs; its
// whole process group is gone and the task is cancelled.
func TestKillRunningExec(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	reg := handler.NewRegistry()
	reg.Register("sleepy", &handler.Exec{Argv: []string{"sh", "-c", "echo $$ > " + pidFile + "; sleep 60 & sleep 60; wait"}, KillGrace: time.Second})
	w := worker.New(worker.Config{Node: "n", Queues: map[string]int{"sleepy": 1}, Handlers: reg}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	s := scheduler.New(scheduler.Config{}, b.env.Store, b.env.Broker)
	id := b.submit(t, "sleepy")
	require.Eventually(t, func() bool {
		s.RunOnce(context.Background())
		_, err := os.Stat(pidFile)
		return b.get(t, id).Status == task.Running && err == nil
	}, 10*time.Second, 20*time.Millisecond)
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pgid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)

	start := time.Now()
	c, err := b.ops.Kill(context.Background(), ops.Target{IDs: []int64{id}})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, []int64{id}, c.IDs)
	tk := b.get(t, id)
	require.Equal(t, task.Cancelled, tk.Status)
	require.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "the process group is gone")
	runs, err := b.env.Store.RunList(context.Background(), id, 5)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, task.OutcomeCancelled, runs[0].Outcome)
}

// A running periodic task killed has that run cancelled and goes on to its
// next occurrence: the kill says it changed it.
func TestKillRunningPeriodic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := handler.NewRegistry()
	reg.Register("tick", &handler.Exec{Argv: []string{"sleep", "60"}, KillGrace: time.Second})
	w := worker.New(worker.Config{Node: "n", Queues: map[string]int{"tick": 1}, Handlers: reg}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	s := scheduler.New(scheduler.Config{}, b.env.Store, b.env.Broker)
	r, err := b.prod.CronAdd(context.Background(), producer.Cron{Code: "tick", Expr: "0 3 * * *"})
	require.NoError(t, err)
	b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) WHERE id = ?`, r.ID)
	require.Eventually(t, func() bool {
		s.RunOnce(context.Background())
		return b.get(t, r.ID).Status == task.Running
	}, 10*time.Second, 20*time.Millisecond)

	d, err := b.ops.Disable(context.Background(), ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Zero(t, d.Changed)
	require.Contains(t, d.Sentence(), "a run is under way; disable applies to pending, failed and dead periodic tasks: kill ends this run, then disable")

	c, err := b.ops.Kill(context.Background(), ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, c.IDs, "the kill changed it: %s", c.Sentence())
	require.Equal(t, 1, c.Changed)
	require.Equal(t, task.Pending, b.get(t, r.ID).Status, "on to its next occurrence")
	d, err = b.ops.Disable(context.Background(), ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Equal(t, 1, d.Changed, "then disable")
	runs, err := b.env.Store.RunList(context.Background(), r.ID, 5)
	require.NoError(t, err)
	require.Equal(t, task.OutcomeCancelled, runs[0].Outcome)
}

// A running task whose worker is gone is taken by a fenced write.
func TestKillRunningWithoutWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ops.KillWait = 200 * time.Millisecond
	id := b.submit(t, "x")
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1, worker_id = 'gone' WHERE id = ?`, id)
	c, err := b.ops.Kill(context.Background(), ops.Target{IDs: []int64{id}})
	require.NoError(t, err)
	require.Equal(t, []int64{id}, c.IDs)
	require.Equal(t, task.Cancelled, b.get(t, id).Status)
	entries, err := b.env.Store.AuditList(context.Background(), 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "kill", entries[0].Action)
	require.Equal(t, 1, entries[0].Affected)
	d := detailOf(t, entries[0])
	require.Equal(t, 1, d.Requested, "the running task was asked for")
	require.Equal(t, map[string]int{"running": 1}, d.Before)
	require.Equal(t, []int64{id}, d.IDs)
}

// A running periodic task whose worker does not answer is taken as its
// worker would have ended it: its run cancelled, the task on to its next
// occurrence. Taken to cancelled, it was a disabled task with a finish
// time, which retention deletes: the schedule would have gone.
func TestKillRunningPeriodicWithoutWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.runningPeriodicWithoutWorker(t, "0 3 * * *")
	c, err := b.ops.Kill(ctx, ops.Target{IDs: []int64{id}})
	require.NoError(t, err)
	require.Equal(t, []int64{id}, c.IDs)
	tk := b.get(t, id)
	require.Equal(t, task.Pending, tk.Status, "on to its next occurrence")
	require.Equal(t, 3, tk.PlanNextRun.In(time.Local).Hour(), "the schedule's next 03:00, %s", tk.PlanNextRun)
	require.True(t, tk.PlanNextRun.After(time.Now()))
	require.Equal(t, 0, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND finished_at IS NOT NULL`, id), "out of retention's reach")
	runs, err := b.env.Store.RunList(ctx, id, 5)
	require.NoError(t, err)
	require.Equal(t, task.OutcomeCancelled, runs[0].Outcome)
	require.Equal(t, "killed by operator (its worker did not answer)", runs[0].Result)
}

// A running periodic task whose next run cannot be computed (a schedule
// that never fires) is taken dead, as its worker would have ended it,
// and the kill of the others goes on: an error there failed them all.
func TestKillRunningPeriodicThatCannotBeScheduled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	never := b.runningPeriodicWithoutWorker(t, "0 0 30 2 *")
	other := b.submit(t, "x")
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1, worker_id = 'gone', dispatched_at = NOW(3), started_at = NOW(3) WHERE id = ?`, other)
	c, err := b.ops.Kill(context.Background(), ops.Target{IDs: []int64{never, other}})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{never, other}, c.IDs)
	require.Equal(t, task.Dead, b.get(t, never).Status)
	require.Contains(t, b.get(t, never).LastResult, "cannot schedule the next run")
	require.Equal(t, task.Cancelled, b.get(t, other).Status)
}

// runningPeriodicWithoutWorker adds a periodic task of schedule expr and
// makes it run on a worker that is gone, due a minute ago; kills wait
// 200 ms for an answer.
func (b *testBundle) runningPeriodicWithoutWorker(t *testing.T, expr string) int64 {
	t.Helper()
	b.ops.KillWait = 200 * time.Millisecond
	r, err := b.prod.CronAdd(context.Background(), producer.Cron{Code: "tick", Expr: "0 3 * * *"})
	require.NoError(t, err)
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1, worker_id = 'gone', dispatched_at = NOW(3), started_at = NOW(3),
		plan_next_run_at = NOW(3) - INTERVAL 1 MINUTE, cron_expr = ? WHERE id = ?`, expr, r.ID)
	return r.ID
}

// A search filter matches a substring of the code, queue, unique key or
// last result, literally (% and _ are not wildcards); Count and Select
// agree, and a bulk action on it writes one audit row naming it.
func TestSearchFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	byCode := b.submit(t, "always_fail")
	byResult := b.submit(t, "mail")
	b.env.Exec(t, `UPDATE task_center SET last_result = 'exit status 1: SMTP 550' WHERE id = ?`, byResult)
	byKey := b.submit(t, "mail")
	b.env.Exec(t, `UPDATE task_center SET unique_key = 'order_42%' WHERE id = ?`, byKey)
	b.submit(t, "other")
	// utf8mb4_general_ci, the table's, takes every emoji for every other
	// one: a bulk kill --search 😱 would have taken this task too.
	byEmoji := b.submit(t, "notify")
	b.env.Exec(t, `UPDATE task_center SET last_result = '错误：超时 😱' WHERE id = ?`, byEmoji)
	// unique_key compares exactly (utf8mb4_bin); a search still ignores case.
	byExactKey := b.submit(t, "notify")
	b.env.Exec(t, `UPDATE task_center SET unique_key = 'Gift-🐶' WHERE id = ?`, byExactKey)

	for search, want := range map[string][]int64{
		"fail": {byCode}, "SMTP 5": {byResult}, "smtp": {byResult}, "42%": {byKey}, "_4": {byKey}, "%": {byKey}, "zzz": nil,
		"😱": {byEmoji}, "🐶": {byExactKey}, "😀": nil, "超时": {byEmoji}, "gift-🐶": {byExactKey}, "GIFT": {byExactKey},
	} {
		f := ops.Filter{Search: search}
		ids, err := b.ops.Select(ctx, f)
		require.NoError(t, err)
		require.ElementsMatch(t, want, ids, "search %q", search)
		n, err := b.ops.Count(ctx, f)
		require.NoError(t, err)
		require.Equal(t, len(want), n, "count %q", search)
	}
	c, err := b.ops.Delete(ctx, ops.Target{Filter: &ops.Filter{Code: "mail", Search: "order"}})
	require.NoError(t, err)
	require.Equal(t, []int64{byKey}, c.IDs)
	e := b.auditOne(t, "delete")
	require.Equal(t, `filter code=mail search="order"`, e.Target)
}

// Unknown tasks and queues are not found and leave no trace; a queue is
// known by its configuration, its tasks, or a live worker consuming it.
func TestUnknownTargetsWriteNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ops.Known = func(q string) bool { return q == "configured" }
	ctx := context.Background()
	id := b.submit(t, "x")
	for name, act := range map[string]func() (ops.Change, error){
		"retry":           func() (ops.Change, error) { return b.ops.Retry(ctx, ops.Target{IDs: []int64{999999}}) },
		"kill":            func() (ops.Change, error) { return b.ops.Kill(ctx, ops.Target{IDs: []int64{id, 999999}}) },
		"enable":          func() (ops.Change, error) { return b.ops.Enable(ctx, ops.Target{IDs: []int64{999999}}) },
		"pause":           func() (ops.Change, error) { return b.ops.Pause(ctx, "nosuch") },
		"reshard":         func() (ops.Change, error) { return b.ops.Reshard(ctx, "nosuch", 2) },
		"filter on queue": func() (ops.Change, error) { return b.ops.Retry(ctx, ops.Target{Filter: &ops.Filter{Queue: "nosuch"}}) },
		"retry by code":   func() (ops.Change, error) { return b.ops.Retry(ctx, ops.Target{Filter: &ops.Filter{Code: "nosuch"}}) },
		"kill by code":    func() (ops.Change, error) { return b.ops.Kill(ctx, ops.Target{Filter: &ops.Filter{Code: "nosuch"}}) },
		"run by code":     func() (ops.Change, error) { return b.ops.RunNow(ctx, ops.Target{Filter: &ops.Filter{Code: "nosuch"}}) },
		"delete by code":  func() (ops.Change, error) { return b.ops.Delete(ctx, ops.Target{Filter: &ops.Filter{Code: "nosuch"}}) },
		"resolve for a UI": func() (ops.Change, error) {
			_, err := b.ops.Resolve(ctx, ops.Target{IDs: []int64{999999}})
			return ops.Change{}, err
		},
	} {
		_, err := act()
		require.Equal(t, task.CodeNotFound, task.ErrorCode(err), "%s: %v", name, err)
	}
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_audit`))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_queue`))
	require.Equal(t, task.Pending, b.get(t, id).Status)

	// A code is known by its tasks, its route or its handler.
	_, err := b.env.Store.RouteRecord(ctx, "n1", map[string]string{"routed": "q"})
	require.NoError(t, err)
	b.ops.Handled = func(code string) bool { return code == "handled" }
	for _, code := range []string{"x", "routed", "handled"} {
		c, err := b.ops.Retry(ctx, ops.Target{Filter: &ops.Filter{Code: code}})
		require.NoError(t, err, code)
		require.Zero(t, c.Changed, code)
	}
	b.ops.Handled = nil

	for _, q := range []string{"configured", "x"} { // configured; a task of code x waits in queue x
		_, err := b.ops.Pause(ctx, q)
		require.NoError(t, err, q)
	}
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w", Queues: []string{"consumed"}}, time.Minute))
	_, err = b.ops.Pause(ctx, "consumed")
	require.NoError(t, err)
	// A resumed queue without tasks or configuration is unknown again.
	_, err = b.ops.Resume(ctx, "configured")
	require.NoError(t, err)
	b.ops.Known = nil
	_, err = b.ops.Pause(ctx, "configured")
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
}

// Each task an action leaves alone comes with why.
func TestUnchangedReasons(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	done, running, dead, killed, failed := b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x")
	b.setStatus(t, done, task.Succeeded)
	b.setStatus(t, running, task.Running)
	b.setStatus(t, dead, task.Dead)
	b.setStatus(t, killed, task.Cancelled)
	b.setStatus(t, failed, task.Failed)
	// Dead and cancelled tasks are deleted too: an operator gives up on
	// them, and dead ones are otherwise kept for good.
	c, err := b.ops.Delete(ctx, ops.Target{IDs: []int64{done, running, dead, killed, failed}})
	require.NoError(t, err)
	require.Equal(t, 3, c.Changed)
	require.Equal(t, []ops.Skipped{
		{ID: done, Status: "succeeded", Reason: "delete applies to pending, failed, dead and cancelled tasks"},
		{ID: running, Status: "running", Reason: "delete applies to pending, failed, dead and cancelled tasks"},
	}, c.Unchanged)
	require.Equal(t, fmt.Sprintf("delete: 3 of 5 tasks deleted (%d, %d, %d); %d not changed, succeeded: delete applies to pending, failed, dead and cancelled tasks; "+
		"%d not changed, running: delete applies to pending, failed, dead and cancelled tasks", dead, killed, failed, done, running), c.Sentence())
	require.Zero(t, b.env.Count(t, fmt.Sprintf(`SELECT COUNT(*) FROM task_center WHERE id IN (%d, %d, %d)`, dead, killed, failed)))
	c, err = b.ops.Disable(ctx, ops.Target{IDs: []int64{done}})
	require.NoError(t, err)
	require.Equal(t, "not periodic; disable applies to periodic tasks only", c.Unchanged[0].Reason)
}

// A task killed while its message waits in the queue (dispatched, the
// slot busy) is not run when a worker takes it: the worker heard the kill
// and drops the message. Before, the handler ran once and only its result
// was rejected.
func TestKillDispatchedIsNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	var ran atomic.Int32
	reg := handler.NewRegistry()
	reg.Register("block", handler.Func(func(ctx context.Context, _ *handler.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	}))
	reg.Register("victim", handler.Func(func(context.Context, *handler.Request) (string, error) {
		ran.Add(1)
		return "", nil
	}))
	w := worker.New(worker.Config{Node: "n", Queues: map[string]int{"q": 1}, Handlers: reg}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	s := scheduler.New(scheduler.Config{}, b.env.Store, b.env.Broker)
	submit := func(code string) int64 {
		r, err := b.prod.Submit(context.Background(), producer.Submission{Code: code, Queue: "q"})
		require.NoError(t, err)
		return r.ID
	}
	blocker := submit("block")
	require.Eventually(t, func() bool {
		s.RunOnce(context.Background())
		return len(w.Running()) == 1
	}, 10*time.Second, 20*time.Millisecond, "the blocker holds the only slot")
	victim := submit("victim")
	require.Eventually(t, func() bool {
		s.RunOnce(context.Background())
		return b.get(t, victim).Status == task.Dispatched
	}, 10*time.Second, 20*time.Millisecond)

	// The kill takes a queued message out: one it cannot reach (held by
	// the worker's claim ahead, moved by a reshard meanwhile) is what the
	// notice is for, so a queued one is pushed back.
	ctx, lane := context.Background(), b.env.Broker.Keys.Lane("q", 0, task.DefaultPriority)
	queued, _ := b.env.Broker.Client().LRange(ctx, lane, 0, -1).Result()
	c, err := b.ops.Kill(ctx, ops.Target{IDs: []int64{victim}})
	require.NoError(t, err)
	require.Equal(t, []int64{victim}, c.IDs)
	require.Empty(t, c.Warning, "the workers were told")
	for _, m := range queued {
		require.NoError(t, b.env.Broker.Client().RPush(ctx, lane, m).Err())
	}
	time.Sleep(200 * time.Millisecond) // the notice is a publish: let it arrive before the slot frees
	close(release)

	require.Eventually(t, func() bool { return b.get(t, blocker).Status == task.Succeeded }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return w.Stats().Stale >= 1 }, 10*time.Second, 20*time.Millisecond,
		"the victim's message is taken and dropped")
	require.Zero(t, ran.Load(), "a task killed before it started is not run")
	require.Equal(t, task.Cancelled, b.get(t, victim).Status)
}

// A task killed while its message waited for a worker that was not
// running (all of them down or restarting during an incident) is not run
// by the worker that starts afterwards: the kill is kept in Redis, and a
// starting worker reads it. Before, the new worker ran it once.
func TestKillDispatchedBeforeTheWorkerStarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ran atomic.Int32
	reg := handler.NewRegistry()
	reg.Register("victim", handler.Func(func(context.Context, *handler.Request) (string, error) {
		ran.Add(1)
		return "", nil
	}))
	s := scheduler.New(scheduler.Config{}, b.env.Store, b.env.Broker)
	r, err := b.prod.Submit(context.Background(), producer.Submission{Code: "victim", Queue: "q"})
	require.NoError(t, err)
	victim := r.ID
	require.Eventually(t, func() bool {
		s.RunOnce(context.Background())
		return b.get(t, victim).Status == task.Dispatched
	}, 10*time.Second, 20*time.Millisecond)

	// The kill takes the message out of the queue; one it cannot reach
	// (moved by a reshard meanwhile, held by a claim ahead) is pushed back
	// here.
	ctx, lane := context.Background(), b.env.Broker.Keys.Lane("q", 0, task.DefaultPriority)
	msg, err := b.env.Broker.Client().LIndex(ctx, lane, 0).Result()
	require.NoError(t, err)
	c, err := b.ops.Kill(ctx, ops.Target{IDs: []int64{victim}})
	require.NoError(t, err)
	require.Equal(t, []int64{victim}, c.IDs)
	require.Empty(t, c.Warning)
	require.Zero(t, b.env.Broker.Client().LLen(ctx, lane).Val(), "the kill took its message out")
	require.NoError(t, b.env.Broker.Client().LPush(ctx, lane, msg).Err())

	w := worker.New(worker.Config{Node: "n", Queues: map[string]int{"q": 1}, Handlers: reg}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	require.Eventually(t, func() bool { return w.Stats().Stale >= 1 }, 10*time.Second, 20*time.Millisecond,
		"the victim's message is taken and dropped")
	require.Zero(t, ran.Load(), "a task killed before its worker started is not run")
	require.Equal(t, task.Cancelled, b.get(t, victim).Status)
}

// The messages of tasks killed while dispatched leave their queue: in a
// queue no worker takes from they stayed for good, and its backlog, the
// waiting count and the no-consumer alert went on counting them. A kill
// of a task already cancelled (by a release that left its message) takes
// its message out too; a retry's newer attempt keeps its own.
// dispatchUnconsumed submits n tasks of code x to queue q ("": the code's
// own), which no worker takes from, and dispatches them: their messages
// stay queued.
func (b *testBundle) dispatchUnconsumed(t *testing.T, n int, q string) []int64 {
	t.Helper()
	ctx := context.Background()
	s := scheduler.New(scheduler.Config{}, b.env.Store, b.env.Broker)
	var ids []int64
	for range n {
		r, err := b.prod.Submit(ctx, producer.Submission{Code: "x", Queue: q})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	require.Eventually(t, func() bool {
		s.RunOnce(ctx)
		got, err := b.env.Broker.QueueLen(ctx, task.QueueOf(q, "x"))
		return err == nil && got == int64(n)
	}, 10*time.Second, 20*time.Millisecond)
	return ids
}

func TestKillUnqueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	idsOf := b.dispatchUnconsumed(t, 3, "nobody")
	lane := b.env.Broker.Keys.Lane("nobody", 0, task.DefaultPriority)
	msgs, err := b.env.Broker.Client().LRange(ctx, lane, 0, -1).Result()
	require.NoError(t, err)

	c, err := b.ops.Kill(ctx, ops.Target{IDs: idsOf[:2]})
	require.NoError(t, err)
	require.Len(t, c.IDs, 2)
	require.Empty(t, c.Warning)
	left, err := b.env.Broker.Client().LRange(ctx, lane, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Contains(t, left[0], fmt.Sprintf(`{"id":%d,"attempt":1,`, idsOf[2]))

	// Left behind by an older release's kill, in a shard this process's
	// broker does not know of (the task center's reshard): a second kill
	// changes nothing and takes them out.
	_, err = b.ops.Reshard(ctx, "nobody", 3)
	require.NoError(t, err)
	far := b.env.Broker.Keys.Lane("nobody", 2, task.DefaultPriority)
	require.NoError(t, b.env.Broker.Client().RPush(ctx, far, msgs[1], msgs[2]).Err())
	c, err = b.ops.Kill(ctx, ops.Target{IDs: idsOf[:2]})
	require.NoError(t, err)
	require.Empty(t, c.IDs)
	require.Empty(t, c.Warning)
	require.Zero(t, b.env.Broker.Client().LLen(ctx, far).Val())
	require.EqualValues(t, 1, b.env.Broker.Client().LLen(ctx, lane).Val())
}

// A delete of cancelled tasks takes out the messages an older release's
// kill (or one that could not reach Redis) left queued: once the rows are
// gone, nothing else would, and a queue without workers kept them for good.
// Here in the code's own queue (the row's queue is empty).
func TestDeleteUnqueuesCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	idsOf := b.dispatchUnconsumed(t, 3, "")
	// Cancelled as a kill without Redis leaves them: messages queued.
	b.env.Exec(t, `UPDATE task_center SET status = 6, finished_at = NOW(3) WHERE id IN (?, ?)`, idsOf[0], idsOf[1])

	c, err := b.ops.Delete(ctx, ops.Target{IDs: idsOf[:2]})
	require.NoError(t, err)
	require.Len(t, c.IDs, 2)
	require.Empty(t, c.Warning)
	lane := b.env.Broker.Keys.Lane("x", 0, task.DefaultPriority)
	left, err := b.env.Broker.Client().LRange(ctx, lane, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Contains(t, left[0], fmt.Sprintf(`{"id":%d,"attempt":1,`, idsOf[2]))

	// In its code's own queue, whose name the row leaves empty, a kill
	// takes it out too: it looked in a queue named "".
	c, err = b.ops.Kill(ctx, ops.Target{IDs: idsOf[2:]})
	require.NoError(t, err)
	require.Len(t, c.IDs, 1)
	require.Zero(t, b.env.Broker.Client().LLen(ctx, lane).Val())
}

// A kill of a dispatched task whose notice to the workers cannot be sent
// (Redis gone, or never connected) still cancels it, and says that a
// worker may run it once.
func TestKillDispatchedWithoutRedisWarns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closed, err := broker.Open(context.Background(), b.env.BrokerOptions())
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	for name, br := range map[string]*broker.Broker{"closed": closed, "none": nil} {
		id := b.submit(t, "x")
		b.env.Exec(t, `UPDATE task_center SET status = 1, attempt = 1, dispatched_at = NOW(3) WHERE id = ?`, id)
		o := ops.New(b.env.Store, br)
		o.Known = b.ops.Known
		c, err := o.Kill(context.Background(), ops.Target{IDs: []int64{id}})
		require.NoError(t, err, name)
		require.Equal(t, []int64{id}, c.IDs, name)
		require.Equal(t, task.Cancelled, b.get(t, id).Status, name)
		require.Contains(t, c.Warning, "workers were not told of 1 task killed while dispatched ("+strconv.FormatInt(id, 10)+")", name)
		require.Contains(t, c.Sentence(), "; warning: workers were not told", name)
	}
}

// A kill waits for a running task's worker past the handlers' kill grace:
// a handler that ignores SIGTERM ends at SIGKILL, kill_grace later, and
// waiting less took its task as if its worker were dead while it ran on.
func TestKillWaitsPastTheKillGrace(t *testing.T) {
	t.Parallel()
	c := config.Default()
	for _, grace := range []time.Duration{time.Second, 5 * time.Second, 30 * time.Second} {
		c.Worker.KillGrace = grace
		require.Greater(t, ops.NewFromConfig(nil, nil, c).KillWait, grace)
	}
}

// A change's sentence lists its smallest ids first, whatever order its
// batches came in; JSON keeps the order of the change.
func TestSentenceListsTheSmallestIDs(t *testing.T) {
	t.Parallel()
	c := ops.Change{Action: "delete", Requested: 12, Changed: 12, IDs: []int64{11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	require.Equal(t, "delete: 12 of 12 tasks deleted (1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more)", c.Sentence())
	require.Equal(t, []int64{11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, c.IDs)
}
