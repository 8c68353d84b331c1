package taskd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/pkg/node"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

type stepBuild struct {
	Month string `json:"month"`
}

func (stepBuild) Kind() string { return "step_build" }

type stepMail struct {
	Report int `json:"report"`
}

func (stepMail) Kind() string { return "step_mail" }

type stepArchive struct {
	Report int `json:"report"`
}

func (stepArchive) Kind() string { return "step_archive" }

type stepAudit struct{}

func (stepAudit) Kind() string { return "step_audit" }

// ran is a handler's record of one run.
type ran[A any] struct {
	id   int64
	args A
}

// record registers a handler for A that sends each run to the returned
// channel and sets result as its result.
func record[A taskd.Args](mux *taskd.Mux, result func(A) any) <-chan ran[A] {
	ch := make(chan ran[A], 16)
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[A]) error {
		ch <- ran[A]{id: job.ID, args: job.Args}
		if result != nil {
			return job.SetResultJSON(result(job.Args))
		}
		return nil
	})
	return ch
}

func wait[A any](t *testing.T, ch <-chan ran[A]) ran[A] {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		var zero A
		t.Fatalf("no %T ran in 30 s", zero)
		return ran[A]{}
	}
}

// clientAndStore returns a client of the test's task center, and the
// task center.
func clientAndStore(t *testing.T) (*taskd.Client, *store.Store) {
	t.Helper()
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	client, err := taskd.NewClient(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	st, err := node.OpenStore(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return client, st
}

// serve starts a Server with mux and returns a client and the task center.
func serve(t *testing.T, mux *taskd.Mux) (*taskd.Client, *store.Store) {
	t.Helper()
	ctx := context.Background()
	cfg, err := taskd.LoadConfig("")
	require.NoError(t, err)
	srv := taskd.NewServer(cfg, mux)
	require.NoError(t, srv.Start(ctx))
	t.Cleanup(srv.Stop)
	return clientAndStore(t)
}

// A chain submitted through the Go API runs in a Server: each child gets
// its parent's result decoded into its Args, with its own options, and
// sibling children all run.
func TestThenChildrenRunThroughServer(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	builds := record(mux, func(a stepBuild) any { return stepMail{Report: len(a.Month)} })
	mails := record(mux, func(a stepMail) any { return stepArchive(a) })
	archives := record[stepArchive](mux, nil)
	audits := record[stepAudit](mux, nil)
	client, st := serve(t, mux)

	res, err := client.Submit(ctx, stepBuild{Month: "2026-05"},
		taskd.Then[stepMail](taskd.Priority(2), taskd.MaxRetry(7), taskd.Then[stepArchive]()),
		taskd.Then[stepAudit]())
	require.NoError(t, err)

	require.Equal(t, res.ID, wait(t, builds).id)
	mail := wait(t, mails)
	require.Equal(t, stepMail{Report: 7}, mail.args, "the child's payload is its parent's result")
	archive := wait(t, archives)
	require.Equal(t, stepArchive{Report: 7}, archive.args)
	audit := wait(t, audits)

	for _, c := range []struct {
		id, parent  int64
		prio, retry int
	}{{mail.id, res.ID, 2, 7}, {archive.id, mail.id, task.DefaultPriority, task.DefaultMaxRetry}, {audit.id, res.ID, task.DefaultPriority, task.DefaultMaxRetry}} {
		tk, err := st.TaskGet(ctx, c.id)
		require.NoError(t, err)
		require.Equal(t, c.parent, tk.ParentID, "parent of task %d", c.id)
		require.Equal(t, c.prio, tk.Priority, "priority of task %d", c.id)
		require.Equal(t, c.retry, tk.MaxRetry, "retries of task %d", c.id)
	}
	require.Eventually(t, func() bool {
		tk, err := st.TaskGet(ctx, audit.id)
		return err == nil && tk.Status == task.Succeeded
	}, 30*time.Second, 50*time.Millisecond)
}

type batchMember struct {
	N      int  `json:"n"`
	Bounce bool `json:"bounce,omitempty"`
}

func (batchMember) Kind() string { return "batch_member" }

type batchDone struct {
	Campaign int               `json:"campaign"`
	Batch    taskd.BatchCounts `json:"batch"`
}

func (batchDone) Kind() string { return "batch_done" }

// A batch submitted through the Go API runs in a Server: the callback
// runs once, after every member ended, with the counts and its own fields
// and options.
func TestBatchCallbackRunsThroughServer(t *testing.T) {
	ctx := context.Background()
	mux := taskd.NewMux()
	taskd.Handle(mux, func(ctx context.Context, job *taskd.Job[batchMember]) error {
		if job.Args.Bounce {
			return errors.New("bounced")
		}
		return nil
	})
	dones := record[batchDone](mux, nil)
	client, st := serve(t, mux)

	b, err := client.Batch(ctx, []taskd.Args{batchMember{N: 1}, batchMember{N: 2, Bounce: true}, batchMember{N: 3}},
		batchDone{Campaign: 7}, taskd.MaxRetry(0), taskd.ForCallback(taskd.Priority(1), taskd.MaxRetry(9)))
	require.NoError(t, err)
	require.Len(t, b.MemberIDs, 3)

	done := wait(t, dones)
	require.Equal(t, batchDone{Campaign: 7, Batch: taskd.BatchCounts{ID: b.ID, Total: 3, Succeeded: 2, Dead: 1}}, done.args)
	for _, id := range b.MemberIDs {
		m, err := st.TaskGet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, b.ID, m.BatchID)
		require.Equal(t, 0, m.MaxRetry)
	}
	bt, err := st.BatchGet(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, done.id, bt.CallbackID)
	cb, err := st.TaskGet(ctx, done.id)
	require.NoError(t, err)
	require.Equal(t, 1, cb.Priority)
	require.Equal(t, 9, cb.MaxRetry)
	all, err := st.TaskList(ctx, &store.TaskListParams{Code: batchDone{}.Kind(), Limit: 10})
	require.NoError(t, err)
	require.Len(t, all, 1, "one callback per batch")
}

type badCode struct{}

func (badCode) Kind() string { return "no spaces allowed" }

// Each option applies where it means something; elsewhere it is a clear
// error, and nothing is submitted.
func TestOptionsWhereTheyApply(t *testing.T) {
	ctx := context.Background()
	client, st := clientAndStore(t)
	count := func() (n int) {
		require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM task_center").Scan(&n))
		return n
	}
	before := count()
	members := []taskd.Args{batchMember{N: 1}}

	for name, c := range map[string]struct {
		call func() error
		want string
	}{
		"unique key of a child": {func() error {
			_, err := client.Submit(ctx, stepBuild{}, taskd.Then[stepMail](taskd.UniqueKey("k")))
			return err
		}, "then step_mail: taskd.UniqueKey does not apply to a chain's child"},
		"time of a grandchild": {func() error {
			_, err := client.Submit(ctx, stepBuild{}, taskd.Then[stepMail](taskd.Then[stepArchive](taskd.At(time.Now()))))
			return err
		}, "then step_mail: then step_archive: taskd.At does not apply to a chain's child"},
		"bad child code": {func() error {
			_, err := client.Submit(ctx, stepBuild{}, taskd.Then[badCode]())
			return err
		}, "child no spaces allowed"},
		"child priority": {func() error {
			_, err := client.SubmitMany(ctx, []taskd.Args{stepBuild{}}, taskd.Then[stepMail](taskd.Priority(10)))
			return err
		}, "priority 10 is out of range"},
		"callback outside a batch": {func() error {
			_, err := client.SubmitJSON(ctx, "step_build", []byte(`{}`), taskd.ForCallback())
			return err
		}, "taskd.ForCallback does not apply to a submission"},
		"delay of a periodic task": {func() error {
			_, err := client.Cron(ctx, "c", "@hourly", "UTC", stepBuild{}, taskd.Delay(time.Second))
			return err
		}, "taskd.Delay does not apply to a periodic task"},
		"zero option": {func() error {
			_, err := client.Submit(ctx, stepBuild{}, taskd.Option{})
			return err
		}, "a zero taskd.Option"},
		"delay of a callback": {func() error {
			_, err := client.Batch(ctx, members, batchDone{}, taskd.ForCallback(taskd.Delay(time.Second)))
			return err
		}, "taskd.Delay does not apply to a batch's callback"},
		"children of a callback": {func() error {
			_, err := client.Batch(ctx, members, batchDone{}, taskd.ForCallback(taskd.Then[stepMail]()))
			return err
		}, "taskd.Then does not apply to a batch's callback"},
		"unique key of a member": {func() error {
			_, err := client.Batch(ctx, members, batchDone{}, taskd.UniqueKey("k"))
			return err
		}, "task 1 of the batch: a batch member cannot have a unique key"},
		"no members": {func() error {
			_, err := client.Batch(ctx, nil, batchDone{})
			return err
		}, "a batch needs at least one task"},
		"no callback": {func() error {
			_, err := client.Batch(ctx, members, nil)
			return err
		}, "callback: no task arguments"},
		"nil member": {func() error {
			_, err := client.Batch(ctx, []taskd.Args{batchMember{}, nil}, batchDone{})
			return err
		}, "task 2 of the batch: no task arguments"},
		"counts given": {func() error {
			_, err := client.Batch(ctx, members, batchDone{Batch: taskd.BatchCounts{Total: 1}})
			return err
		}, `callback payload must not have a "batch" key`},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.call()
			require.ErrorContains(t, err, c.want)
			require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%v", err)
		})
	}
	require.Equal(t, before, count(), "a refused submission submits nothing")
}
