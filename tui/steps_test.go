package tui

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/lock"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// stepsSetup is a model reading a real task center through the Loader.
func stepsSetup(t *testing.T) (*Model, *testBundle, *testenv.Env) {
	t.Helper()
	env := testenv.New(t)
	b := &testBundle{acts: &fakeActions{}}
	m := New(Options{Source: &Loader{Store: env.Store, Broker: env.Broker}, Actions: b.acts,
		Now: func() time.Time { return time.Now() }})
	m.noTick = true
	m.w, m.h = 100, 40
	b.settle(t, m, m.Init())
	return m, b, env
}

// TestDetailLinksParentAndChildren: a parent's detail lists its chain and
// children, c opens a child, whose detail names the parent, and p goes
// back up.
func TestDetailLinksParentAndChildren(t *testing.T) {
	t.Parallel()
	m, b, env := stepsSetup(t)
	ctx := context.Background()
	then, err := task.EncodeChildren([]task.Child{{Code: "mail", Priority: 5, Timeout: 60, Then: []task.Child{{Code: "archive", Priority: 5, Timeout: 60}}}})
	require.NoError(t, err)
	res, err := env.Store.TaskInsert(ctx, []store.TaskInsertParams{{Code: "build", Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60, Then: then}})
	require.NoError(t, err)
	parent := res[0].ID
	child := env.Exec(t, `INSERT INTO task_center (task_code, payload, parent_id) VALUES ('mail', '{"report":7}', ?)`, parent)
	childID, err := child.LastInsertId()
	require.NoError(t, err)

	b.settle(t, m, m.openDetail(parent))
	s := screen(m)
	require.Contains(t, s, "Steps")
	require.Contains(t, s, "then         mail → archive")
	require.Regexp(t, `children +#\d+ mail pending`, s)

	b.press(t, m, "c")
	require.Equal(t, childID, m.cur.detail.id, "c opens the child")
	require.Regexp(t, `parent +#\d+ build pending`, screen(m))
	b.press(t, m, "p")
	require.Equal(t, parent, m.cur.detail.id, "p opens the parent")
	b.press(t, m, "p")
	require.Equal(t, parent, m.cur.detail.id)
	require.Contains(t, screen(m), "this task has no parent")
}

// TestDetailShowsBatch: a member's detail shows its batch's progress and
// failed members, and f opens one.
func TestDetailShowsBatch(t *testing.T) {
	t.Parallel()
	m, b, env := stepsSetup(t)
	ctx := context.Background()
	ms := make([]store.TaskInsertParams, 3)
	for i := range ms {
		ms[i] = store.TaskInsertParams{Code: "send", Payload: json.RawMessage(`{}`), Priority: 5, Timeout: 60}
	}
	res, err := env.Store.BatchInsert(ctx, store.BatchInsertParams{Members: ms,
		Callback: store.BatchCallback{Code: "done", Priority: 5, Timeout: 60, Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	env.Exec(t, `UPDATE task_center SET status = 3 WHERE id = ?`, res.MemberIDs[0])
	env.Exec(t, `UPDATE task_center SET status = 5, last_result = 'no such mailbox' WHERE id = ?`, res.MemberIDs[1])

	b.settle(t, m, m.openDetail(res.MemberIDs[0]))
	s := screen(m)
	require.Regexp(t, `batch +member of batch \d+: 2 of 3 ended, 1 succeeded, 1 dead, 0 cancelled`, s)
	require.Contains(t, s, "done (runs when the last member has ended)")
	require.Regexp(t, `failed +#\d+ send dead +no such mailbox`, s)
	b.press(t, m, "f")
	require.Equal(t, res.MemberIDs[1], m.cur.detail.id, "f opens the failed member")
	b.press(t, m, "c")
	require.Contains(t, screen(m), "this task has no children")
}

// TestLocksPage: L on the workers view lists the held locks.
func TestLocksPage(t *testing.T) {
	t.Parallel()
	m, b, env := stepsSetup(t)
	ctx := context.Background()
	lease, err := lock.NewRedis(env.Broker.Client(), env.Prefix).Acquire(ctx, "nightly_report", time.Minute)
	require.NoError(t, err)
	defer lease.Release(ctx)

	b.settle(t, m, m.switchTo(viewWorkers))
	b.press(t, m, "L")
	require.NotNil(t, m.cur.locks)
	s := screen(m)
	require.Contains(t, s, "LOCK")
	require.Regexp(t, `nightly_report +redis .*`+itoa(lease.Token()), s)
	b.press(t, m, "esc")
	require.Nil(t, m.cur.locks)
	require.Equal(t, viewWorkers, m.view)
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
