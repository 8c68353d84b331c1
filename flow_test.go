package taskd_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

type syncAccount struct {
	Account int `json:"account"`
	Version int `json:"version"`
}

func (syncAccount) Kind() string { return "sync_account" }

// The Go API's group and unique modes reach the task center: a second
// submission with Replace changes the waiting task; with UntilDone a new
// task follows an ended one.
func TestGroupAndUniqueModes(t *testing.T) {
	ctx := context.Background()
	client, st := clientAndStore(t)

	first, err := client.Submit(ctx, syncAccount{Account: 7, Version: 1}, taskd.Group("tenant-7"),
		taskd.UniqueKey("acct-7"), taskd.Delay(time.Hour))
	require.NoError(t, err)
	again, err := client.Submit(ctx, syncAccount{Account: 7, Version: 2}, taskd.UniqueKey("acct-7"), taskd.Replace())
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.True(t, again.Existing && again.Changed)
	tk, err := st.TaskGet(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, "tenant-7", tk.Group)
	require.JSONEq(t, `{"account":7,"version":2}`, string(tk.Payload))

	_, err = st.DB().ExecContext(ctx, `UPDATE task_center SET status = 3 WHERE id = ?`, first.ID)
	require.NoError(t, err)
	next, err := client.Submit(ctx, syncAccount{Account: 7, Version: 3}, taskd.UniqueKey("acct-7"), taskd.UntilDone())
	require.NoError(t, err)
	require.False(t, next.Existing)
	require.NotEqual(t, first.ID, next.ID)

	deb, err := client.Submit(ctx, syncAccount{Account: 8}, taskd.UniqueKey("acct-8"), taskd.Debounce(time.Minute, 0))
	require.NoError(t, err)
	tk, err = st.TaskGet(ctx, deb.ID)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Minute), tk.PlanNextRun, 10*time.Second, "due a debounce after it")

	_, err = client.Submit(ctx, syncAccount{}, taskd.Replace())
	require.ErrorContains(t, err, "needs a unique key")
}

type ping struct{ N int }

func (ping) Kind() string { return "ping" }

// The Go API dispatches a task due now itself: a worker-only server (no
// scheduler in the process or anywhere) runs it.
func TestSubmitRunsWithoutScheduler(t *testing.T) {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	cfg.Node.Roles = []string{"worker"}
	ran := make(chan int, 1)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[ping]) error {
		ran <- job.Args.N
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	client, st := clientAndStore(t)
	res, err := client.Submit(ctx, ping{N: 7})
	require.NoError(t, err)
	select {
	case n := <-ran:
		require.Equal(t, 7, n)
	case <-time.After(30 * time.Second):
		t.Fatal("the task did not run without a scheduler")
	}
	var attempt int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT attempt FROM task_center WHERE id = ?`, res.ID).Scan(&attempt))
	require.Equal(t, 1, attempt, "dispatched once, by the submit")
}

// A Config built in Go from nothing is refused by Start and NewClient
// with the first missing value, where a goroutine used to panic on a zero
// interval and take the whole program down; one from DefaultConfig runs.
func TestHandBuiltConfig(t *testing.T) {
	ctx := context.Background()
	bare := &taskd.Config{}
	bare.MySQL.DSN, bare.Redis.Addr, bare.Redis.Prefix = os.Getenv("TASKD_MYSQL_DSN"), os.Getenv("TASKD_REDIS_ADDR"), os.Getenv("TASKD_REDIS_PREFIX")
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[ping]) error { return nil })
	err := taskd.NewServer(bare, mux).Start(ctx)
	require.ErrorContains(t, err, "start from taskd.DefaultConfig() or taskd.LoadConfig")
	_, err = taskd.NewClient(ctx, bare)
	require.ErrorContains(t, err, "start from taskd.DefaultConfig()")

	cfg := taskd.DefaultConfig()
	cfg.MySQL.DSN, cfg.Redis.Addr, cfg.Redis.Prefix = bare.MySQL.DSN, bare.Redis.Addr, bare.Redis.Prefix
	srv := taskd.NewServer(cfg, mux)
	require.NoError(t, srv.Start(ctx))
	srv.Stop()
	c, err := taskd.NewClient(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

type gone struct{ ID int }

func (gone) Kind() string { return "gone" }

// A payload that does not decode, and a handler's Permanent error, make
// the task dead at its first attempt: no retry mends them.
func TestPermanentFailuresAreNotRetried(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	calls := make(chan int, 10)
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[ping]) error { return nil })
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[gone]) error {
		calls <- job.Args.ID
		return taskd.Permanent(fmt.Errorf("record %d no longer exists", job.Args.ID))
	})
	client, st := serve(t, mux)
	bad, err := client.SubmitJSON(ctx, "ping", json.RawMessage(`{"N":"not a number"}`), taskd.MaxRetry(3))
	require.NoError(t, err)
	missing, err := client.Submit(ctx, gone{ID: 7}, taskd.MaxRetry(3))
	require.NoError(t, err)
	for _, id := range []int64{bad.ID, missing.ID} {
		require.Eventually(t, func() bool {
			tk, err := st.TaskGet(ctx, id)
			return err == nil && tk.Status == task.Dead
		}, 20*time.Second, 50*time.Millisecond, "task %d dead", id)
		tk, err := st.TaskGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, 1, tk.Attempt, "no retry")
		require.Contains(t, tk.LastResult, "not retried")
	}
	require.Len(t, calls, 1)
}

type limited struct{}

func (limited) Kind() string { return "limited" }

// A handler's RetryAfter error plans its retry that far out, beyond the
// backoff, and the retry counts.
func TestRetryAfterPlansTheRetry(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[limited]) error {
		return taskd.RetryAfter(errors.New("rate limited until the next hour"), time.Hour)
	})
	client, st := serve(t, mux)
	before := time.Now()
	sub, err := client.Submit(ctx, limited{}, taskd.MaxRetry(3))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		tk, err := st.TaskGet(ctx, sub.ID)
		return err == nil && tk.Status == task.Failed
	}, 20*time.Second, 50*time.Millisecond, "task %d failed, waiting for its retry", sub.ID)
	tk, err := st.TaskGet(ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, 1, tk.RetryCount)
	require.Equal(t, "rate limited until the next hour", tk.LastResult)
	require.True(t, tk.PlanNextRun.After(before.Add(59*time.Minute)), "retry at %v, not an hour after %v", tk.PlanNextRun, before)
}

type stubborn struct{}

func (stubborn) Kind() string { return "stubborn" }

// A server used with Start and Stop hears the watchdog's exit through
// Fatal: a handler that ignores its cancellation past the grace.
func TestServerFatal(t *testing.T) {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	cfg.Watchdog.Interval, cfg.Watchdog.Grace = 100*time.Millisecond, 500*time.Millisecond
	release := make(chan struct{})
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[stubborn]) error {
		<-release // ignores ctx
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	require.Nil(t, srv.Fatal(), "not started")
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	t.Cleanup(func() { close(release) }) // before the Stop: the handler returns
	client, _ := clientAndStore(t)
	_, err = client.Submit(ctx, stubborn{}, taskd.Timeout(time.Second))
	require.NoError(t, err)
	select {
	case err := <-srv.Fatal():
		require.ErrorContains(t, err, "did not return")
	case <-time.After(30 * time.Second):
		t.Fatal("no word from the watchdog")
	}
}

// A client of a task center nobody migrated says so when it connects, as
// a server does, rather than at its first Submit.
func TestClientOfAnUnmigratedTaskCenter(t *testing.T) {
	ctx := context.Background()
	base, err := mysql.ParseDSN(testenv.BaseDSN())
	require.NoError(t, err)
	admin, err := sql.Open("mysql", base.FormatDSN())
	require.NoError(t, err)
	name := fmt.Sprintf("taskd_test_nomig_%d", time.Now().UnixNano())
	_, err = admin.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	// Dropped here: testenv's sweep finds only databases that have tables.
	t.Cleanup(func() {
		defer admin.Close()
		_, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name)
		require.NoError(t, err)
	})
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	base.DBName = name
	cfg.MySQL.DSN = base.FormatDSN()
	_, err = taskd.NewClient(ctx, cfg)
	require.ErrorContains(t, err, "the task center has no schema: run `taskd migrate`")
}

type flaky struct{}

func (flaky) Kind() string { return "flaky" }

// A handler knows which try of its retry budget it runs, and so whether a
// failure is final; Attempt counts every run.
func TestJobKnowsItsRetry(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	seen := make(chan [3]int, 4)
	scheduled := make(chan time.Time, 4)
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[flaky]) error {
		seen <- [3]int{job.Attempt, job.Retry, job.MaxRetry}
		scheduled <- job.ScheduledAt
		return fmt.Errorf("try %d failed", job.Retry)
	})
	client, _ := serve(t, mux)
	at := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
	_, err := client.Submit(ctx, flaky{}, taskd.MaxRetry(1), taskd.At(at))
	require.NoError(t, err)
	for _, want := range [][3]int{{1, 0, 1}, {2, 1, 1}} {
		select {
		case got := <-seen:
			require.Equal(t, want, got, "attempt, retry, max retry")
			require.Equal(t, at.UnixMilli(), (<-scheduled).UnixMilli(), "run %v: the time it was submitted for, its retry's too", want)
		case <-time.After(20 * time.Second):
			t.Fatalf("no run %v", want)
		}
	}
}

// Two handlers of one code in a mux is a bug: the second panics at
// registration instead of silently replacing the first.
func TestSecondHandlerOfACodePanics(t *testing.T) {
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[gone]) error { return nil })
	require.PanicsWithValue(t, `taskd: Handle: a handler of task code "gone" is already registered`, func() {
		taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[gone]) error { return nil })
	})
}

type patient struct{}

func (patient) Kind() string { return "patient" }

// A handler cancelled because its server stops can tell why.
func TestShutdownCause(t *testing.T) {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	cfg.Worker.ShutdownGrace = 100 * time.Millisecond
	started, cause := make(chan struct{}), make(chan error, 1)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[patient]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	srv := taskd.NewServer(cfg, mux)
	require.NoError(t, srv.Start(ctx))
	client, _ := clientAndStore(t)
	_, err = client.Submit(ctx, patient{})
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("not started")
	}
	srv.Stop()
	require.ErrorIs(t, <-cause, taskd.ErrShutdown)
}

// A client starts while Redis is down (it is only an accelerator): its
// submit lands in the task center, pending, for the schedulers' polls.
func TestClientWithoutRedis(t *testing.T) {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	cfg.Redis.Addr = "127.0.0.1:1"
	client, err := taskd.NewClient(ctx, cfg)
	require.NoError(t, err)
	defer client.Close()
	res, err := client.Submit(ctx, ping{N: 1})
	require.NoError(t, err)
	require.False(t, res.Dispatched)
	_, st := clientAndStore(t)
	tk, err := st.TaskGet(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, task.Pending, tk.Status)
}

// A deploy written in Go lists and removes its periodic tasks, as the
// CLI does (audit row included).
func TestCronListAndRemove(t *testing.T) {
	ctx := context.Background()
	client, st := clientAndStore(t)
	r, err := client.Cron(ctx, "nightly-ping", "0 3 * * *", "UTC", ping{N: 3})
	require.NoError(t, err)
	list, err := client.CronList(ctx)
	require.NoError(t, err)
	var found *taskd.CronTask
	for i := range list {
		if list[i].ID == r.ID {
			found = &list[i]
		}
	}
	require.NotNil(t, found)
	require.True(t, r.Next.Equal(found.Next), "next run %v, listed %v", r.Next, found.Next)
	found.Next = time.Time{}
	require.Equal(t, taskd.CronTask{ID: r.ID, Code: "ping", Name: "nightly-ping", Expr: "0 3 * * *", Timezone: "UTC"}, *found)
	id, err := client.CronRemove(ctx, "ping", "nightly-ping")
	require.NoError(t, err)
	require.Equal(t, r.ID, id)
	_, err = st.TaskGet(ctx, id)
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
	entries, err := st.AuditList(ctx, 0, 100)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(entries, func(e store.AuditEntry) bool {
		return e.Action == "cron remove" && e.Target == fmt.Sprintf("task %d", id)
	}))
	_, err = client.CronRemove(ctx, "ping", "nightly-ping")
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
}

// A caller tells errors apart without importing taskd's internals: bad
// input, a task that does not exist, and no error.
func TestErrorCodes(t *testing.T) {
	ctx := context.Background()
	client, _ := clientAndStore(t)
	_, err := client.SubmitJSON(ctx, "ping", json.RawMessage(`{not json`))
	require.Equal(t, taskd.CodeInvalid, taskd.ErrorCode(err))
	_, err = client.CronRemove(ctx, "ping", "no-such")
	require.Equal(t, taskd.CodeNotFound, taskd.ErrorCode(err))
	require.Equal(t, taskd.Code(""), taskd.ErrorCode(nil))
}

// worker.hand_back_wait bounds how long Stop waits, past the grace, for a
// handler that ignores its cancellation (10 s unless set).
func TestHandBackWait(t *testing.T) {
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	cfg.Worker.ShutdownGrace, cfg.Worker.HandBackWait = 100*time.Millisecond, 300*time.Millisecond
	release, started := make(chan struct{}), make(chan struct{})
	defer close(release)
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[stubborn]) error {
		close(started)
		<-release // ignores ctx
		return nil
	})
	srv := taskd.NewServer(cfg, mux)
	require.NoError(t, srv.Start(ctx))
	client, _ := clientAndStore(t)
	_, err = client.Submit(ctx, stubborn{})
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("not started")
	}
	begin := time.Now()
	srv.Stop()
	require.Less(t, time.Since(begin), 5*time.Second, "the grace and the hand-back wait, not 10 s")
}

type lingering struct{ Hold bool }

func (lingering) Kind() string { return "lingering" }

// A Go program follows a task it submitted, kills it while it runs and
// retries it, as `taskd show`, `kill` and `retry` do, without the CLI.
func TestGetKillRetry(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	started, stopped := make(chan int, 4), make(chan error, 4)
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[lingering]) error {
		started <- job.Attempt
		if !job.Args.Hold || job.Attempt > 1 {
			return nil
		}
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return ctx.Err()
	})
	client, st := serve(t, mux)
	res, err := client.Submit(ctx, lingering{Hold: true}, taskd.MaxRetry(0))
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("not started")
	}
	require.Eventually(t, func() bool {
		tk, err := client.Get(ctx, res.ID)
		require.NoError(t, err)
		return tk.Status == taskd.StatusRunning || tk.Status == taskd.StatusDispatched
	}, 10*time.Second, 20*time.Millisecond)

	ch, err := client.Kill(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{res.ID}, ch.IDs)
	select {
	case err := <-stopped:
		require.Error(t, err, "the handler's context is cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	tk, err := client.Get(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, taskd.StatusCancelled, tk.Status)
	require.True(t, tk.Status.Ended())

	ch, err = client.Retry(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, 1, ch.Changed)
	select {
	case attempt := <-started:
		require.Equal(t, 2, attempt)
	case <-time.After(30 * time.Second):
		t.Fatal("the retried task did not run")
	}
	require.Eventually(t, func() bool {
		tk, err := client.Get(ctx, res.ID)
		require.NoError(t, err)
		return tk.Status == taskd.StatusSucceeded
	}, 20*time.Second, 20*time.Millisecond)

	// A retry of a task that succeeded changes nothing, and says why.
	ch, err = client.Retry(ctx, res.ID)
	require.NoError(t, err)
	require.Zero(t, ch.Changed)
	require.Len(t, ch.Unchanged, 1)
	require.Contains(t, ch.Unchanged[0].Reason, "retry applies to")

	// Both actions are in the audit log, as the CLI's are; an admin page
	// names who clicked.
	later, err := client.Submit(ctx, lingering{}, taskd.Delay(time.Hour))
	require.NoError(t, err)
	_, err = client.As("alice", "web 198.51.100.7").Kill(ctx, later.ID)
	require.NoError(t, err)
	entries, err := st.AuditList(ctx, 0, 100)
	require.NoError(t, err)
	audited := func(action string, id int64, user string) bool {
		return slices.ContainsFunc(entries, func(e store.AuditEntry) bool {
			var d struct{ IDs []int64 }
			return e.Action == action && json.Unmarshal(e.Detail, &d) == nil && slices.Contains(d.IDs, id) &&
				(user == "" || e.Actor == user && e.Origin == "web 198.51.100.7")
		})
	}
	require.True(t, audited("kill", res.ID, ""), "audit row of the kill")
	require.True(t, audited("retry", res.ID, ""), "audit row of the retry")
	require.True(t, audited("kill", later.ID, "alice"), "audit row of alice's kill")

	// Ids that name no task are not found, and nothing changes.
	_, err = client.Get(ctx, 1<<50)
	require.Equal(t, taskd.CodeNotFound, taskd.ErrorCode(err))
	_, err = client.Kill(ctx, res.ID, 1<<50)
	require.Equal(t, taskd.CodeNotFound, taskd.ErrorCode(err))
	_, err = client.Retry(ctx, 1<<50)
	require.Equal(t, taskd.CodeNotFound, taskd.ErrorCode(err))
}
