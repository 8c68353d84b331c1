package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/queues"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/worker"
)

// auditOne returns the only audit row of action, failing unless there is
// exactly one.
func (b *testBundle) auditOne(t *testing.T, action string) store.AuditEntry {
	t.Helper()
	es, err := b.env.Store.AuditList(context.Background(), 0, 1000)
	require.NoError(t, err)
	var got []store.AuditEntry
	for _, e := range es {
		if e.Action == action {
			got = append(got, e)
		}
	}
	require.Len(t, got, 1, "audit rows of %s", action)
	return got[0]
}

type auditDetail struct {
	Requested int            `json:"requested"`
	IDs       []int64        `json:"ids"`
	Before    map[string]int `json:"before"`
	After     string         `json:"after"`
}

func detailOf(t *testing.T, e store.AuditEntry) auditDetail {
	t.Helper()
	var d auditDetail
	require.NoError(t, json.Unmarshal(e.Detail, &d))
	return d
}

// Every task action leaves exactly one audit row, in the transaction of
// its change, with the right counts and the status before and after.
func TestTaskActionsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p1, p2, failed, dead := b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x")
	b.setStatus(t, failed, task.Failed)
	b.setStatus(t, dead, task.Dead)
	b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) + INTERVAL 1 HOUR WHERE id = ?`, p1)

	c, err := b.ops.RunNow(ctx, ops.Target{IDs: []int64{p1, failed, dead}})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{p1, failed}, c.IDs)
	require.Equal(t, []ops.Skipped{{ID: dead, Status: "dead", Reason: "run applies to pending and failed tasks"}}, c.Unchanged)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at <= NOW(3)`, p1))
	d := detailOf(t, b.auditOne(t, "run"))
	require.Equal(t, map[string]int{"pending": 1, "failed": 1}, d.Before)
	require.Equal(t, 3, d.Requested)

	// An overdue task run now keeps its due time: its place in the backlog.
	b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?`, p2)
	_, err = b.ops.RunNow(ctx, ops.Target{IDs: []int64{p2}})
	require.NoError(t, err)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at < NOW(3) - INTERVAL 50 MINUTE`, p2))

	c, err = b.ops.Delete(ctx, ops.Target{IDs: []int64{p2}})
	require.NoError(t, err)
	require.Equal(t, []int64{p2}, c.IDs)
	require.Equal(t, 0, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, p2))
	e := b.auditOne(t, "delete")
	require.Equal(t, 1, e.Affected)
	require.Equal(t, "deleted", detailOf(t, e).After)

	// By filter: the audit row names the filter, not the ids.
	st := task.Dead
	c, err = b.ops.Retry(ctx, ops.Target{Filter: &ops.Filter{Status: &st}})
	require.NoError(t, err)
	require.Equal(t, []int64{dead}, c.IDs)
	e = b.auditOne(t, "retry")
	require.Equal(t, "filter status=dead", e.Target)
	require.Equal(t, map[string]int{"dead": 1}, detailOf(t, e).Before)
	require.NotEmpty(t, e.Actor)
	require.WithinDuration(t, time.Now(), e.CreatedAt, time.Minute)
}

// A filter that matches thousands of tasks is applied in chunks, each in
// its own transaction, and still leaves exactly one audit row whose count
// is the total.
func TestBulkActionOneAuditRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	subs := make([]producer.Submission, 2500)
	for i := range subs {
		subs[i] = producer.Submission{Code: "bulk", Delay: time.Hour}
	}
	_, err := b.prod.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	c, err := b.ops.Delete(ctx, ops.Target{Filter: &ops.Filter{Code: "bulk"}})
	require.NoError(t, err)
	require.Equal(t, 2500, c.Changed)
	e := b.auditOne(t, "delete")
	require.Equal(t, 2500, e.Affected)
	require.Equal(t, 2500, detailOf(t, e).Before["pending"])
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center`))
}

// dailyAndOneOff adds a periodic task of code periodicCode run daily at
// 03:00 and submits a one-off task of oneOffCode; it returns their ids.
func (b *testBundle) dailyAndOneOff(t *testing.T, periodicCode, oneOffCode string) (periodic, oneOff int64) {
	t.Helper()
	r, err := b.prod.CronAdd(context.Background(), producer.Cron{Code: periodicCode, Expr: "0 3 * * *"})
	require.NoError(t, err)
	return r.ID, b.submit(t, oneOffCode)
}

func TestDisableEnablePeriodic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	periodic, oneoff := b.dailyAndOneOff(t, "tick", "x")

	c, err := b.ops.Disable(ctx, ops.Target{IDs: []int64{periodic, oneoff}})
	require.NoError(t, err)
	require.Equal(t, []int64{periodic}, c.IDs, "only periodic tasks are disabled")
	require.Equal(t, task.Cancelled, b.get(t, periodic).Status)
	// Disabled is not finished: retention keeps it.
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND finished_at IS NULL`, periodic))

	c, err = b.ops.Enable(ctx, ops.Target{IDs: []int64{periodic, oneoff}})
	require.NoError(t, err)
	require.Equal(t, []int64{periodic}, c.IDs)
	tk := b.get(t, periodic)
	require.Equal(t, task.Pending, tk.Status)
	require.Equal(t, 3, tk.PlanNextRun.Hour(), "back on its schedule, not due now")
	require.True(t, tk.PlanNextRun.After(time.Now()))
	b.auditOne(t, "disable")
	e := b.auditOne(t, "enable")
	require.Equal(t, fmt.Sprintf("tasks %d,%d", periodic, oneoff), e.Target, "the audit row names every task asked for")
	require.Equal(t, 2, detailOf(t, e).Requested)
}

// A retry of cancelled tasks, after an incident, brings back the killed
// one-off tasks and leaves the disabled periodic ones to enable: it
// switched them back on and ran them at once.
func TestRetryLeavesDisabledPeriodicAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	periodic, oneoff := b.dailyAndOneOff(t, "x", "x")
	_, err := b.ops.Disable(ctx, ops.Target{IDs: []int64{periodic}})
	require.NoError(t, err)
	_, err = b.ops.Kill(ctx, ops.Target{IDs: []int64{oneoff}})
	require.NoError(t, err)

	cancelled := task.Cancelled
	c, err := b.ops.Retry(ctx, ops.Target{Filter: &ops.Filter{Status: &cancelled}})
	require.NoError(t, err)
	require.Equal(t, []int64{oneoff}, c.IDs)
	require.Equal(t, task.Pending, b.get(t, oneoff).Status)
	require.Equal(t, task.Cancelled, b.get(t, periodic).Status, "still disabled")
	require.Equal(t, []ops.Skipped{{ID: periodic, Status: "cancelled",
		Reason: "disabled; retry leaves a disabled periodic task alone (taskd enable puts it back on its schedule)"}}, c.Unchanged)
}

// An enable that changes nothing (the task is not disabled) is still
// audited with the tasks asked for.
func TestEnableOfEnabledAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r, err := b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 3 * * *"})
	require.NoError(t, err)
	c, err := b.ops.Enable(ctx, ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Zero(t, c.Changed)
	e := b.auditOne(t, "enable")
	require.Equal(t, fmt.Sprintf("tasks %d", r.ID), e.Target)
	require.Equal(t, 1, detailOf(t, e).Requested)
}

// runFleet runs a scheduler and a worker (Go handler counting runs per
// task) that follow the queue state, until the test ends.
func (b *testBundle) runFleet(t *testing.T, queue string, slots int, h handler.Handler) *queues.Cache {
	t.Helper()
	cache := queues.New(queues.Config{Refresh: 200 * time.Millisecond}, b.env.Store, b.env.Broker)
	require.NoError(t, cache.Start(context.Background()))
	t.Cleanup(cache.Stop)
	b.env.Broker.SetLayout(cache)
	b.startWorker(t, queue, slots, h)
	s := scheduler.New(scheduler.Config{PollInterval: 100 * time.Millisecond, Window: b.window}, b.env.Store, b.env.Broker)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return cache
}

func (b *testBundle) startWorker(t *testing.T, queue string, slots int, h handler.Handler) {
	t.Helper()
	reg := handler.NewRegistry()
	reg.Register(queue, h)
	w := worker.New(worker.Config{Node: "n", Queues: map[string]int{queue: slots}, Handlers: reg}, b.env.Store, b.env.Broker)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
}

type runCounter struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (c *runCounter) handler(d time.Duration) handler.Func {
	return func(ctx context.Context, r *handler.Request) (string, error) {
		c.mu.Lock()
		c.runs[r.ID]++
		c.mu.Unlock()
		time.Sleep(d) // the task's own work, which takes time
		return "", nil
	}
}

func (c *runCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// Pause while tasks flow: running tasks finish, nothing new starts (or is
// dispatched) while paused, another queue keeps running, and after resume
// everything runs exactly once.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rc := &runCounter{runs: map[int64]int{}}
	cache := b.runFleet(t, "pq", 4, rc.handler(20*time.Millisecond))
	subs := make([]producer.Submission, 200)
	for i := range subs {
		subs[i] = producer.Submission{Code: "pq"}
	}
	_, err := b.prod.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rc.count() >= 10 }, 10*time.Second, 10*time.Millisecond)

	c, err := b.ops.Pause(ctx, "pq")
	require.NoError(t, err)
	require.Equal(t, 1, c.Changed)
	require.True(t, c.Queue.After.Paused)
	require.Eventually(t, func() bool { return cache.Paused("pq") }, 5*time.Second, 10*time.Millisecond)
	// Let what was taken before the pause finish, then nothing moves.
	time.Sleep(500 * time.Millisecond) // nothing to wait for: time for what was taken to run (20 ms each)
	before := rc.count()
	_, err = b.prod.SubmitBatch(ctx, subs[:50])
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // an absence: time in which nothing may start
	require.Equal(t, before, rc.count(), "nothing starts on a paused queue")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 2`), "running tasks finished")
	require.Less(t, before, 250)
	// Of the new tasks none was dispatched: the schedulers skip the queue.
	require.Equal(t, 50, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0 AND id > (SELECT MAX(id) - 50 FROM task_center)`))

	_, err = b.ops.Resume(ctx, "pq")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rc.count() == 250 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 3`) == 250
	}, 10*time.Second, 20*time.Millisecond)
	rc.mu.Lock()
	for id, n := range rc.runs {
		require.Equal(t, 1, n, "task %d", id)
	}
	rc.mu.Unlock()
	require.Equal(t, 1, b.auditOne(t, "pause").Affected)
	b.auditOne(t, "resume")
	// Pausing twice changes nothing (and says so).
	c, err = b.ops.Resume(ctx, "pq")
	require.NoError(t, err)
	require.Zero(t, c.Changed)
}

// A paused queue's due backlog in front of another queue's tasks of the
// same priority does not starve them: the claim's window moves past it.
func TestPausedBacklogDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.ops.Pause(ctx, "held")
	require.NoError(t, err)
	subs := make([]producer.Submission, 1200)
	for i := range subs {
		subs[i] = producer.Submission{Code: "held"}
	}
	_, err = b.prod.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the database clock (NOW(3)) moves on: the free task is due after the held ones
	other := b.submit(t, "free")
	rc := &runCounter{runs: map[int64]int{}}
	b.runFleet(t, "free", 1, rc.handler(0))
	require.Eventually(t, func() bool { return b.get(t, other).Status == task.Succeeded }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, 1200, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0 AND task_code = 'held'`))
}

// A delete by filter clears a backlog and keeps the periodic tasks it
// matched; a periodic task named by its id is deleted.
func TestDeleteByFilterKeepsPeriodic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	oneoff := b.submit(t, "x")
	r, err := b.prod.CronAdd(ctx, producer.Cron{Code: "x", Expr: "0 3 * * *"})
	require.NoError(t, err)
	st := task.Pending
	c, err := b.ops.Delete(ctx, ops.Target{Filter: &ops.Filter{Code: "x", Status: &st}})
	require.NoError(t, err)
	require.Equal(t, []int64{oneoff}, c.IDs)
	require.Equal(t, []ops.Skipped{{ID: r.ID, Status: "pending",
		Reason: "periodic; a delete by filter keeps periodic tasks (taskd cron remove, or delete it by id)"}}, c.Unchanged)
	require.Equal(t, task.Pending, b.get(t, r.ID).Status)
	e := b.auditOne(t, "delete")
	require.Equal(t, 1, e.Affected)
	require.Equal(t, 2, detailOf(t, e).Requested)

	c, err = b.ops.Delete(ctx, ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, c.IDs)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center`))
}

// A lenient target (tasktop's selection) counts a task deleted meanwhile
// as unchanged instead of failing the action on the others.
func TestLenientTargetSkipsGoneTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.submit(t, "x")
	_, err := b.ops.Delete(ctx, ops.Target{IDs: []int64{id, 999999}})
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err), "a script's ids are checked")
	c, err := b.ops.Delete(ctx, ops.Target{IDs: []int64{id, 999999}, Lenient: true})
	require.NoError(t, err)
	require.Equal(t, []int64{id}, c.IDs)
	require.Equal(t, []ops.Skipped{{ID: 999999, Reason: "not found (deleted meanwhile)"}}, c.Unchanged)
}

// A periodic task killed while it waits is disabled, not finished:
// retention keeps it, and enable puts it back on its schedule.
func TestKilledPeriodicIsDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r, err := b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 3 * * *"})
	require.NoError(t, err)
	c, err := b.ops.Kill(ctx, ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, c.IDs)
	require.Equal(t, task.Cancelled, b.get(t, r.ID).Status)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND finished_at IS NULL`, r.ID), "out of retention's reach")
	c, err = b.ops.Enable(ctx, ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, c.IDs)
	require.Equal(t, task.Pending, b.get(t, r.ID).Status)
}

// A deploy re-running `cron add` changes the definition, not what an
// operator or a failure did: a disabled task stays disabled, a failed run
// keeps its retry, and an overdue occurrence of the same schedule stays
// due (a changed schedule moves it to its own next occurrence).
func TestCronReAddKeepsState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r, err := b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 3 * * *"})
	require.NoError(t, err)
	_, err = b.ops.Disable(ctx, ops.Target{IDs: []int64{r.ID}})
	require.NoError(t, err)
	_, err = b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 4 * * *"})
	require.NoError(t, err)
	require.Equal(t, task.Cancelled, b.get(t, r.ID).Status, "still disabled")
	require.Equal(t, "0 4 * * *", b.get(t, r.ID).CronExpr)

	b.env.Exec(t, `UPDATE task_center SET status = 4, retry_count = 1, plan_next_run_at = NOW(3) + INTERVAL 1 MINUTE WHERE id = ?`, r.ID)
	retryAt := b.get(t, r.ID).PlanNextRun
	_, err = b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 5 * * *"})
	require.NoError(t, err)
	got := b.get(t, r.ID)
	require.Equal(t, task.Failed, got.Status, "the retry waits")
	require.Equal(t, 1, got.RetryCount)
	require.True(t, retryAt.Equal(got.PlanNextRun), "at its time: %v, not %v", retryAt, got.PlanNextRun)

	b.env.Exec(t, `UPDATE task_center SET status = 0, retry_count = 0, plan_next_run_at = NOW(3) - INTERVAL 1 MINUTE WHERE id = ?`, r.ID)
	overdue := b.get(t, r.ID).PlanNextRun
	five := 5
	_, err = b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 5 * * *", MaxRetry: &five})
	require.NoError(t, err)
	got = b.get(t, r.ID)
	require.True(t, overdue.Equal(got.PlanNextRun), "the same schedule's overdue run stays due")
	require.Equal(t, 5, got.MaxRetry)
	_, err = b.prod.CronAdd(ctx, producer.Cron{Code: "tick", Expr: "0 6 * * *"})
	require.NoError(t, err)
	got = b.get(t, r.ID)
	require.Equal(t, task.Pending, got.Status)
	zone := time.Local
	if got.Timezone != "" {
		zone, err = time.LoadLocation(got.Timezone)
		require.NoError(t, err)
	}
	require.Equal(t, 6, got.PlanNextRun.In(zone).Hour(), "the new schedule's next run")
}

// TestActionFencedByAttemptShown: an action confirmed on what the
// operator saw (task dead at attempt 3) does not act on the task once it
// ran again meanwhile (retried by someone else, dead again at attempt 4):
// the retry would run it once more than anyone meant. It says why.
func TestActionFencedByAttemptShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	stale, fresh, running := b.submit(t, "x"), b.submit(t, "x"), b.submit(t, "x")
	b.env.Exec(t, `UPDATE task_center SET status = 5, attempt = 4 WHERE id = ?`, stale)
	b.env.Exec(t, `UPDATE task_center SET status = 5, attempt = 3 WHERE id = ?`, fresh)
	b.env.Exec(t, `UPDATE task_center SET status = 0, attempt = 2 WHERE id = ?`, running)

	c, err := b.ops.Retry(ctx, ops.Target{IDs: []int64{stale, fresh}, Lenient: true, Attempts: map[int64]int{stale: 3, fresh: 3}})
	require.NoError(t, err)
	require.Equal(t, []int64{fresh}, c.IDs)
	require.Equal(t, []ops.Skipped{{ID: stale, Status: "dead",
		Reason: "attempt 4 now, not the attempt 3 shown: it ran or was retried meanwhile"}}, c.Unchanged)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 5`, stale))
	require.Equal(t, []int64{fresh}, detailOf(t, b.auditOne(t, "retry")).IDs, "the audit row names what changed")

	// A kill confirmed on attempt 1 leaves attempt 2 alone.
	c, err = b.ops.Kill(ctx, ops.Target{IDs: []int64{running}, Lenient: true, Attempts: map[int64]int{running: 1}})
	require.NoError(t, err)
	require.Zero(t, c.Changed)
	require.Contains(t, c.Sentence(), "not changed, pending: attempt 2 now, not the attempt 1 shown")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, running))
}
