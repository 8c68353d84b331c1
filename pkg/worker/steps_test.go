package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/handler"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// TestChainRuns: A then B then C, each run by the worker once, each with
// its parent's result as its payload; a failing step ends the chain.
func TestChainRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	got := map[string][]string{} // code -> payloads seen
	step := func(code, result string, err error) {
		b.reg.Register(code, handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
			mu.Lock()
			got[code] = append(got[code], string(r.Payload))
			mu.Unlock()
			return result, err
		}))
	}
	step("a", `{"rows": 3}`, nil)
	step("b", "plain text", nil)
	step("c", "", nil)
	step("fails", "", errors.New("boom"))
	step("never", "", nil)
	b.startWorker(t, nil)

	q := "q"
	chain := b.submit(t, producer.Submission{Code: "a", Children: []producer.Child{
		{Code: "b", Queue: q, Children: []producer.Child{{Code: "c", Queue: q}}},
	}})
	broken := b.submit(t, producer.Submission{Code: "fails", MaxRetry: intp(1), Children: []producer.Child{{Code: "never", Queue: q}}})

	count := func(q string, args ...any) int { return b.env.Count(t, q, args...) }
	b.dispatchUntil(t, "the chain", func() bool {
		return count(`SELECT COUNT(*) FROM task_center WHERE task_code = 'c' AND status = 3`) == 1 &&
			b.task(t, broken).Status == task.Dead
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{`{}`}, got["a"])
	require.Len(t, got["b"], 1)
	require.JSONEq(t, `{"rows": 3}`, got["b"][0])
	require.Equal(t, []string{`"plain text"`}, got["c"])
	require.Empty(t, got["never"], "a failed parent creates no child")
	require.Zero(t, count(`SELECT COUNT(*) FROM task_center WHERE task_code = 'never'`))

	kids, err := b.env.Store.TaskList(context.Background(), &store.TaskListParams{ParentID: chain})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	require.Equal(t, "b", kids[0].Code)
	require.Equal(t, 1, count(`SELECT COUNT(*) FROM task_center c JOIN task_center p ON c.parent_id = p.id WHERE c.task_code = 'c' AND p.parent_id = ?`, chain))
}

// An exec parent that logs on stderr and prints its result on stdout
// passes its stdout alone to its child: with its log line before it, the
// child got the whole output as one JSON string, and every chain whose
// parent logged broke. The parent's result keeps both.
func TestChainTakesStdoutNotLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("report", &handler.Exec{Argv: []string{"sh", "-c", `echo 'a log line' >&2; sleep 0.05; echo '{"report": 7}'`}})
	got := make(chan string, 1)
	b.reg.Register("mail", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		got <- string(r.Payload)
		return "", nil
	}))
	b.startWorker(t, nil)
	parent := b.submit(t, producer.Submission{Code: "report", Children: []producer.Child{{Code: "mail", Queue: "q"}}})
	b.dispatchUntil(t, "the child", func() bool { return len(got) == 1 })
	require.JSONEq(t, `{"report": 7}`, <-got)
	require.Equal(t, "a log line\n{\"report\": 7}\n", b.task(t, parent).LastResult)
}

// TestBatchCallbackCounts: a batch whose members succeed, fail after a
// retry, or die gets one callback with the counts once the last ended.
func TestBatchCallbackCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var callbacks []string
	tries := map[string]int{}
	b.reg.Register("member", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		var p struct{ Mode string }
		_ = json.Unmarshal(r.Payload, &p)
		mu.Lock()
		defer mu.Unlock()
		tries[p.Mode]++
		switch {
		case p.Mode == "die":
			return "", errors.New("always")
		case p.Mode == "flaky" && tries[p.Mode] == 1:
			return "", errors.New("once")
		}
		return "ok", nil
	}))
	b.reg.Register("report", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		mu.Lock()
		callbacks = append(callbacks, string(r.Payload))
		mu.Unlock()
		return "reported", nil
	}))
	b.startWorker(t, nil)

	member := func(mode string) producer.Submission {
		return producer.Submission{Code: "member", Queue: "q", MaxRetry: intp(1), Payload: []byte(`{"mode":"` + mode + `"}`)}
	}
	res, err := b.prod.Batch(context.Background(), producer.Batch{
		Members:  []producer.Submission{member("ok"), member("ok"), member("flaky"), member("die")},
		Callback: producer.Callback{Code: "report", Queue: "q", Payload: []byte(`{"month":"may"}`)},
	})
	require.NoError(t, err)
	b.dispatchUntil(t, "the callback", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(callbacks) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	require.JSONEq(t, `{"month":"may","batch":{"id":`+jsonInt(res.ID)+`,"total":4,"succeeded":3,"dead":1,"cancelled":0}}`, callbacks[0])
	bt, err := b.env.Store.BatchGet(context.Background(), res.ID)
	require.NoError(t, err)
	require.NotNil(t, bt.FinishedAt)
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A periodic parent whose run succeeded but whose next run cannot be
// computed (a cron_expr written by hand) passes its run's result to its
// child, not the note that says why the parent went dead.
func TestPeriodicParentWithoutANextRunPassesItsResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("tick", handler.Func(func(context.Context, *handler.Request) (string, error) { return `{"n": 1}`, nil }))
	got := make(chan string, 1)
	b.reg.Register("mail", handler.Func(func(_ context.Context, r *handler.Request) (string, error) {
		got <- string(r.Payload)
		return "", nil
	}))
	b.startWorker(t, nil)
	res, err := b.prod.CronAdd(context.Background(), producer.Cron{Code: "tick", Expr: "0 3 * * *", Queue: "q",
		Children: []producer.Child{{Code: "mail", Queue: "q"}}})
	require.NoError(t, err)
	b.env.Exec(t, `UPDATE task_center SET cron_expr = '0 3 * * * * * *', plan_next_run_at = NOW(3) WHERE id = ?`, res.ID)
	b.dispatchUntil(t, "the child", func() bool { return len(got) == 1 })
	require.JSONEq(t, `{"n": 1}`, <-got)
	tk := b.task(t, res.ID)
	require.Equal(t, task.Dead, tk.Status)
	require.Contains(t, tk.LastResult, "cannot schedule the next run")
}
