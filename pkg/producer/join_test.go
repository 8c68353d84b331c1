package producer_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// holdInserts starts a transaction whose locking read of the whole table
// keeps every INSERT into task_center waiting until release is called.
func holdInserts(t *testing.T, b *testBundle) (release func()) {
	t.Helper()
	tx, err := b.env.Store.DB().BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	_, err = tx.Exec(`SELECT id FROM task_center WHERE id > 0 FOR UPDATE`)
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Commit()) }) }
	t.Cleanup(release)
	return release
}

// behind submits n tasks of code prefix_0 ... while the write of another
// is held, and returns the first's result and the others'.
func behind(t *testing.T, cl *producer.Client, b *testBundle, prefix string, n int) (release func(), first <-chan submitted, rest []<-chan submitted) {
	t.Helper()
	release = holdInserts(t, b)
	first = submitAsync(context.Background(), cl, producer.Submission{Code: "first"})
	waitJoined(t, cl, 0)
	for i := range n {
		rest = append(rest, submitAsync(context.Background(), cl, producer.Submission{Code: fmt.Sprintf("%s_%d", prefix, i)}))
	}
	return release, first, rest
}

// waitJoined waits until n calls wait behind a write in flight.
func waitJoined(t *testing.T, cl *producer.Client, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		waiting, writing, _ := producer.Joined(cl)
		return writing && waiting == n
	}, 10*time.Second, time.Millisecond)
}

// requireWritten requires that the calls first and rest each wrote a task.
func requireWritten(t *testing.T, first <-chan submitted, rest []<-chan submitted) {
	t.Helper()
	for _, ch := range append([]<-chan submitted{first}, rest...) {
		r := <-ch
		require.NoError(t, r.err)
		require.Positive(t, r.res.ID)
	}
}

type submitted struct {
	res producer.Result
	err error
}

// submitAsync submits s and sends what it returned.
func submitAsync(ctx context.Context, cl *producer.Client, s producer.Submission) <-chan submitted {
	ch := make(chan submitted, 1)
	go func() {
		r, err := cl.Submit(ctx, s)
		ch <- submitted{r, err}
	}()
	return ch
}

func TestConcurrentSubmitsShareAnInsert(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	release, first, rest := behind(t, cl, b, "next", 5)
	cctx, cancel := context.WithCancel(ctx)
	gone := submitAsync(cctx, cl, producer.Submission{Code: "gone"})
	waitJoined(t, cl, 6)
	cancel()
	require.ErrorIs(t, (<-gone).err, context.Canceled)
	waitJoined(t, cl, 5)

	release()
	r := <-first
	require.NoError(t, r.err)
	ids := map[int64]bool{r.res.ID: true}
	for _, ch := range rest {
		r := <-ch
		require.NoError(t, r.err)
		ids[r.res.ID] = true
	}
	require.Len(t, ids, 6, "every call has a task of its own")
	_, _, writes := producer.Joined(cl)
	require.EqualValues(t, 2, writes, "the five that waited share the second write")
	require.Equal(t, 6, b.rows(t))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'gone'`),
		"a call that ended while it waited wrote nothing")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(DISTINCT created_at) FROM task_center WHERE task_code LIKE 'next%'`),
		"one statement: one created_at")
}

func TestOneSubmitsFailureIsNotTheOthers(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	// A rule of the database that the client cannot check beforehand.
	b.env.Exec(t, `CREATE TRIGGER refuse_poison BEFORE INSERT ON task_center FOR EACH ROW
		IF NEW.task_code = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF`)
	release, first, good := behind(t, cl, b, "good", 3)
	poison := submitAsync(ctx, cl, producer.Submission{Code: "poison"})
	waitJoined(t, cl, 4)
	release()

	requireWritten(t, first, good)
	require.ErrorContains(t, (<-poison).err, "poison refused")
	require.Equal(t, 4, b.rows(t))
	_, _, writes := producer.Joined(cl)
	require.EqualValues(t, 6, writes, "the first, the shared one, then each of the four alone")
}

// A failure that is not about the rows (here a lock held elsewhere, past
// the session's lock wait) fails every call of the shared write at once,
// instead of each again alone, one after another.
func TestSharedWriteFailureIsEveryCallers(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	st, err := store.Open(context.Background(), env.DSN, store.Options{LockWaitTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	cl := producer.New(st, env.Broker, producer.Options{})
	b := &testBundle{env: env}
	release, first, rest := behind(t, cl, b, "held", 4)
	defer release()
	waitJoined(t, cl, 4)

	var me *mysql.MySQLError
	require.ErrorAs(t, (<-first).err, &me)
	require.EqualValues(t, 1205, me.Number, "lock wait timeout")
	for _, ch := range rest {
		r := <-ch
		require.ErrorAs(t, r.err, &me)
		require.EqualValues(t, 1205, me.Number)
	}
	_, _, writes := producer.Joined(cl)
	require.EqualValues(t, 2, writes, "the first and the shared one, none alone")
}

// A submission the task center refuses as invalid (its unique key held by
// a code spelt otherwise) fails its own caller, not the others that share
// its write.
func TestOneInvalidSubmitIsNotTheOthers(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	_, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "k1"})
	require.NoError(t, err)
	release, first, good := behind(t, cl, b, "good", 3)
	bad := submitAsync(ctx, cl, producer.Submission{Code: "Order", UniqueKey: "k1"})
	waitJoined(t, cl, 4)
	release()

	requireWritten(t, first, good)
	r := <-bad
	require.ErrorContains(t, r.err, `unique key "k1" is held by task`)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(r.err))
	require.Equal(t, 5, b.rows(t))
}
