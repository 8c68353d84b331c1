package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

type testBundle struct {
	env *testenv.Env
}

func setup(t *testing.T) (*producer.Client, *testBundle) {
	t.Helper()
	env := testenv.New(t)
	cl := producer.New(env.Store, env.Broker, producer.Options{})
	return cl, &testBundle{env: env}
}

func (b *testBundle) rows(t *testing.T) int {
	t.Helper()
	return b.env.Count(t, `SELECT COUNT(*) FROM task_center`)
}

func intp(i int) *int { return &i }

func TestSubmit(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	res, err := cl.Submit(ctx, producer.Submission{Code: "send_email", Payload: json.RawMessage(`{"to":"a@example.com"}`),
		Priority: intp(1), MaxRetry: intp(7), Timeout: 45 * time.Second})
	require.NoError(t, err)
	require.Positive(t, res.ID)
	require.False(t, res.Existing)

	tk, err := b.env.Store.TaskGet(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, "send_email", tk.Code)
	require.Equal(t, task.OneOff, tk.Type)
	require.Equal(t, task.Pending, tk.Status)
	require.Equal(t, 1, tk.Priority)
	require.Equal(t, 7, tk.MaxRetry)
	require.Equal(t, 45, tk.Timeout)
	require.JSONEq(t, `{"to":"a@example.com"}`, string(tk.Payload))
	require.Equal(t, "send_email", tk.QueueName())
	// Due now by the database clock.
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at <= NOW(3)`, res.ID))

	t.Run("defaults", func(t *testing.T) {
		res, err := cl.Submit(ctx, producer.Submission{Code: "defaults"})
		require.NoError(t, err)
		tk, err := b.env.Store.TaskGet(ctx, res.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{}`, string(tk.Payload))
		require.Equal(t, task.DefaultPriority, tk.Priority)
		require.Equal(t, task.DefaultMaxRetry, tk.MaxRetry)
		require.Equal(t, task.DefaultTimeout, tk.Timeout)
	})

	t.Run("delay is relative to the database clock", func(t *testing.T) {
		res, err := cl.Submit(ctx, producer.Submission{Code: "later", Delay: time.Hour})
		require.NoError(t, err)
		var diff int
		require.NoError(t, b.env.Store.DB().QueryRow(
			`SELECT TIMESTAMPDIFF(SECOND, NOW(3), plan_next_run_at) FROM task_center WHERE id = ?`, res.ID).Scan(&diff))
		require.InDelta(t, 3600, diff, 5)
	})

	t.Run("at is an absolute instant and makes a timed task", func(t *testing.T) {
		at := time.Date(2031, 4, 5, 6, 7, 8, 0, time.UTC)
		res, err := cl.Submit(ctx, producer.Submission{Code: "timed", At: at})
		require.NoError(t, err)
		tk, err := b.env.Store.TaskGet(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, task.Timed, tk.Type)
		require.True(t, at.Equal(tk.PlanNextRun), "want %s, got %s", at, tk.PlanNextRun)
	})

	t.Run("queue from options", func(t *testing.T) {
		cl := producer.New(b.env.Store, nil, producer.Options{QueueFor: func(code string) string {
			if code == "mail" {
				return "bulk"
			}
			return ""
		}})
		res, err := cl.Submit(ctx, producer.Submission{Code: "mail"})
		require.NoError(t, err)
		tk, err := b.env.Store.TaskGet(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, "bulk", tk.QueueName())

		res, err = cl.Submit(ctx, producer.Submission{Code: "mail", Queue: "urgent"})
		require.NoError(t, err)
		tk, err = b.env.Store.TaskGet(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, "urgent", tk.QueueName(), "an explicit queue wins")
	})
}

func TestSubmitInvalid(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	small := producer.New(b.env.Store, nil, producer.Options{MaxPayload: 16})
	// A limit raised past what the server takes in one statement: the
	// payload is refused saying so, not sent to have the connection reset.
	var packet int
	require.NoError(t, b.env.Store.DB().QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&packet))
	huge := producer.New(b.env.Store, nil, producer.Options{MaxPayload: 2 * packet})
	overPacket := json.RawMessage(`"` + strings.Repeat("x", packet) + `"`)

	for name, tc := range map[string]struct {
		cl  *producer.Client
		sub producer.Submission
	}{
		"empty code":         {cl, producer.Submission{}},
		"bad code":           {cl, producer.Submission{Code: "no spaces"}},
		"bad queue":          {cl, producer.Submission{Code: "ok", Queue: "a/b"}},
		"payload not JSON":   {cl, producer.Submission{Code: "ok", Payload: json.RawMessage(`{oops`)}},
		"payload too large":  {small, producer.Submission{Code: "ok", Payload: json.RawMessage(`{"k":"0123456789abcdef"}`)}},
		"over the packet":    {huge, producer.Submission{Code: "ok", Payload: overPacket}},
		"priority 10":        {cl, producer.Submission{Code: "ok", Priority: intp(10)}},
		"priority -1":        {cl, producer.Submission{Code: "ok", Priority: intp(-1)}},
		"timeout too short":  {cl, producer.Submission{Code: "ok", Timeout: 10 * time.Millisecond}},
		"timeout negative":   {cl, producer.Submission{Code: "ok", Timeout: -time.Second}},
		"max retry negative": {cl, producer.Submission{Code: "ok", MaxRetry: intp(-1)}},
		"max retry too many": {cl, producer.Submission{Code: "ok", MaxRetry: intp(task.MaxMaxRetry + 1)}},
		"negative delay":     {cl, producer.Submission{Code: "ok", Delay: -5 * time.Second}},
		"delay and at":       {cl, producer.Submission{Code: "ok", Delay: time.Second, At: time.Now().Add(time.Hour)}},
		"unique key too long": {cl, producer.Submission{Code: "ok",
			UniqueKey: string(make([]byte, task.MaxUniqueKeyLen+1))}},
	} {
		_, err := tc.cl.Submit(ctx, tc.sub)
		require.Error(t, err, name)
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%s: %v", name, err)
		if tc.cl == huge {
			require.ErrorContains(t, err, "the task center takes in one statement (its max_allowed_packet is")
		}
	}
	require.Zero(t, b.rows(t), "nothing written")
}

func TestSubmitBatchInvalidItemWritesNothing(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	subs := make([]producer.Submission, 50)
	for i := range subs {
		subs[i] = producer.Submission{Code: "batch", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	subs[37].Payload = json.RawMessage(`{"n":`)

	rs, err := cl.SubmitBatch(ctx, subs)
	require.Error(t, err)
	require.Nil(t, rs)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
	require.Contains(t, err.Error(), "submission 37")
	require.Zero(t, b.rows(t))

	// The last item invalid too (not only a middle one).
	subs[37].Payload = nil
	subs[49].Priority = intp(11)
	_, err = cl.SubmitBatch(ctx, subs)
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err))
	require.Contains(t, err.Error(), "submission 49")
	require.Zero(t, b.rows(t))
}

func TestSubmitBatch1000(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	const n = 1000
	subs := make([]producer.Submission, n)
	for i := range subs {
		subs[i] = producer.Submission{Code: "bulk", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Priority: intp(i % 10)}
	}
	rs, err := cl.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	require.Len(t, rs, n)

	seen := map[int64]bool{}
	for i, r := range rs {
		require.False(t, r.Existing)
		require.False(t, seen[r.ID], "id %d returned twice", r.ID)
		seen[r.ID] = true
		if i > 0 {
			require.Greater(t, r.ID, rs[i-1].ID, "ids follow submission order")
		}
	}
	require.Equal(t, n, b.rows(t))

	// Each returned id is the row of its own submission.
	rows, err := b.env.Store.DB().Query(`SELECT id, payload, priority FROM task_center`)
	require.NoError(t, err)
	defer rows.Close()
	byID := map[int64]int{}
	prio := map[int64]int{}
	for rows.Next() {
		var id int64
		var payload string
		var p int
		require.NoError(t, rows.Scan(&id, &payload, &p))
		var v struct{ N int }
		require.NoError(t, json.Unmarshal([]byte(payload), &v))
		byID[id] = v.N
		prio[id] = p
	}
	require.NoError(t, rows.Err())
	for i, r := range rs {
		got, ok := byID[r.ID]
		require.True(t, ok, "returned id %d is not in the table", r.ID)
		require.Equal(t, i, got, "id %d holds the payload of submission %d", r.ID, got)
		require.Equal(t, i%10, prio[r.ID])
	}
}

// On a server with auto_increment_increment > 1 (Galera, whose
// wsrep_auto_increment_control sets it to the cluster size, or Group
// Replication multi-primary), ids of one multi-row INSERT are not
// consecutive.
func TestSubmitBatchIDsWithAutoIncrementIncrement(t *testing.T) {
	t.Parallel()

	_, b := setup(t)
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["auto_increment_increment"] = "2"
	st, err := store.Open(ctx, cfg.FormatDSN(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	cl := producer.New(st, nil, producer.Options{})

	subs := make([]producer.Submission, 5)
	for i := range subs {
		subs[i] = producer.Submission{Code: "galera", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	rs, err := cl.SubmitBatch(ctx, subs)
	require.NoError(t, err)
	for i, r := range rs {
		tk, err := st.TaskGet(ctx, r.ID)
		require.NoError(t, err, "returned id %d of submission %d", r.ID, i)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, i), string(tk.Payload))
	}
}

func TestSubmitUniqueKey(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	first, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "order-42", Payload: json.RawMessage(`{"v":1}`)})
	require.NoError(t, err)
	require.False(t, first.Existing)

	t.Run("across calls", func(t *testing.T) {
		again, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "order-42", Payload: json.RawMessage(`{"v":2}`)})
		require.NoError(t, err)
		require.Equal(t, producer.Result{ID: first.ID, Existing: true}, again)
		tk, err := b.env.Store.TaskGet(ctx, first.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"v":1}`, string(tk.Payload), "the first task is kept as it was")
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'order'`))
	})

	t.Run("the same key under another code is another task", func(t *testing.T) {
		other, err := cl.Submit(ctx, producer.Submission{Code: "refund", UniqueKey: "order-42"})
		require.NoError(t, err)
		require.False(t, other.Existing)
		require.NotEqual(t, first.ID, other.ID)
	})

	t.Run("within a batch and against an existing row", func(t *testing.T) {
		before := b.rows(t)
		rs, err := cl.SubmitBatch(ctx, []producer.Submission{
			{Code: "order", UniqueKey: "order-7", Payload: json.RawMessage(`{"v":"a"}`)},
			{Code: "order"}, // no key: never deduplicated
			{Code: "order", UniqueKey: "order-7", Payload: json.RawMessage(`{"v":"b"}`)},
			{Code: "order", UniqueKey: "order-42"},
			{Code: "order"},
		})
		require.NoError(t, err)
		require.Len(t, rs, 5)
		require.False(t, rs[0].Existing)
		require.Equal(t, producer.Result{ID: rs[0].ID, Existing: true}, rs[2], "duplicate within the batch")
		require.Equal(t, producer.Result{ID: first.ID, Existing: true}, rs[3], "duplicate of an earlier call")
		require.False(t, rs[1].Existing)
		require.False(t, rs[4].Existing)
		require.NotEqual(t, rs[1].ID, rs[4].ID)
		require.Equal(t, before+3, b.rows(t))

		tk, err := b.env.Store.TaskGet(ctx, rs[0].ID)
		require.NoError(t, err)
		require.Equal(t, "order-7", tk.UniqueKey)
		require.JSONEq(t, `{"v":"a"}`, string(tk.Payload), "the first of the batch wins")
		for _, i := range []int{1, 4} {
			tk, err := b.env.Store.TaskGet(ctx, rs[i].ID)
			require.NoError(t, err)
			require.Empty(t, tk.UniqueKey)
		}
	})
}

func TestSubmitUniqueKeyRace(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	const racers = 8
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]producer.Result, racers)
		errs := make([]error, racers)
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = cl.Submit(ctx, producer.Submission{Code: "race", UniqueKey: key})
			}()
		}
		close(start)
		wg.Wait()

		created := 0
		for i := range racers {
			require.NoError(t, errs[i], "racer %d", i)
			require.Equal(t, results[0].ID, results[i].ID, "racer %d got another id", i)
			if !results[i].Existing {
				created++
			}
		}
		require.Equal(t, 1, created, "exactly one racer created the task")
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE unique_key = ?`, key))
	}
	require.Equal(t, 5, b.rows(t))
}

func TestCron(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	res, err := cl.CronAdd(ctx, producer.Cron{Code: "report", Expr: "0 2 * * *", Timezone: "Asia/Shanghai"})
	require.NoError(t, err)
	require.False(t, res.Updated)
	now, err := b.env.Store.Now(ctx)
	require.NoError(t, err)
	require.True(t, res.Next.After(now))
	require.LessOrEqual(t, res.Next.Sub(now), 24*time.Hour)
	require.Equal(t, 18, res.Next.UTC().Hour(), "02:00 in Shanghai")

	tk, err := b.env.Store.TaskGet(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, task.Periodic, tk.Type)
	require.Equal(t, "0 2 * * *", tk.CronExpr)
	require.Equal(t, "Asia/Shanghai", tk.Timezone)
	require.True(t, res.Next.Equal(tk.PlanNextRun))
	require.Equal(t, "report", producer.CronName(tk.UniqueKey))

	// Same code and name: updated in place.
	upd, err := cl.CronAdd(ctx, producer.Cron{Code: "report", Expr: "*/5 * * * *", Timezone: "UTC"})
	require.NoError(t, err)
	require.True(t, upd.Updated)
	require.Equal(t, res.ID, upd.ID)
	tk, err = b.env.Store.TaskGet(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, "*/5 * * * *", tk.CronExpr)
	require.True(t, upd.Next.Equal(tk.PlanNextRun))
	require.LessOrEqual(t, upd.Next.Sub(now), 6*time.Minute)

	// Another name: another task.
	other, err := cl.CronAdd(ctx, producer.Cron{Code: "report", Name: "weekly", Expr: "@weekly"})
	require.NoError(t, err)
	require.NotEqual(t, res.ID, other.ID)

	ts, err := cl.CronList(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 2)

	// Bad input writes nothing.
	before := b.rows(t)
	for _, c := range []producer.Cron{
		{Code: "report", Expr: "61 * * * *"},
		{Code: "report", Expr: "0 0 30 2 *"},
		{Code: "report", Expr: "* * * * *", Timezone: "Mars/Base"},
		{Code: "bad code", Expr: "* * * * *"},
		{Code: "report", Name: "p", Expr: "* * * * *", Priority: intp(10)},
		{Code: "report", Name: "j", Expr: "* * * * *", Payload: json.RawMessage(`nope`)},
	} {
		_, err := cl.CronAdd(ctx, c)
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%+v: %v", c, err)
	}
	require.Equal(t, before, b.rows(t))

	who := store.Actor{User: "deploy"}
	id, auditErr, err := cl.CronRemove(ctx, "report", "", who)
	require.NoError(t, err)
	require.NoError(t, auditErr)
	require.Equal(t, res.ID, id)
	_, err = b.env.Store.TaskGet(ctx, res.ID)
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
	_, _, err = cl.CronRemove(ctx, "report", "", who)
	require.Equal(t, task.CodeNotFound, task.ErrorCode(err))
	id, _, err = cl.CronRemove(ctx, "report", "weekly", who)
	require.NoError(t, err)
	require.Equal(t, other.ID, id)
	require.Zero(t, b.rows(t))
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'cron remove'`), "each removal audited")
}

// A periodic task records the zone it runs in: the one given, else its
// expression's CRON_TZ=, else Options.Timezone (cron.timezone), else the
// submitting host's (TZ here). Zones that disagree are refused.
func TestCronAddRecordsItsZone(t *testing.T) {
	t.Setenv("TZ", "Europe/Paris") // the host's zone; not parallel with Setenv
	env := testenv.New(t)
	ctx := context.Background()
	zoneOf := func(cl *producer.Client, c producer.Cron) string {
		t.Helper()
		res, err := cl.CronAdd(ctx, c)
		require.NoError(t, err)
		tk, err := env.Store.TaskGet(ctx, res.ID)
		require.NoError(t, err)
		return tk.Timezone
	}
	plain := producer.New(env.Store, nil, producer.Options{})
	configured := producer.New(env.Store, nil, producer.Options{Timezone: "Asia/Tokyo"})
	require.Equal(t, "America/Chicago", zoneOf(configured, producer.Cron{Code: "a", Expr: "0 2 * * *", Timezone: "America/Chicago"}))
	require.Equal(t, "UTC", zoneOf(configured, producer.Cron{Code: "b", Expr: "CRON_TZ=UTC 0 2 * * *"}))
	require.Equal(t, "Asia/Tokyo", zoneOf(configured, producer.Cron{Code: "c", Expr: "0 2 * * *"}))
	require.Equal(t, "Europe/Paris", zoneOf(plain, producer.Cron{Code: "d", Expr: "0 2 * * *"}))
	_, err := plain.CronAdd(ctx, producer.Cron{Code: "e", Expr: "CRON_TZ=UTC 0 2 * * *", Timezone: "Asia/Tokyo"})
	require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%v", err)
}

// TestCronListAll lists every periodic task however many there are: a
// cluster with more than 10,000 lost its oldest from the list, and a code
// whose tasks were among them listed none.
func TestCronListAll(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	first, err := cl.CronAdd(ctx, producer.Cron{Code: "report", Name: "daily", Expr: "0 3 * * *", Timezone: "UTC"})
	require.NoError(t, err)
	// 10,000 more, INSERTed as a producer of the seed design does.
	b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, unique_key)
		SELECT 'sync', 1, '{}', '0 4 * * *', CONCAT('cron:sync-', seq) FROM seq_1_to_10000`)

	ts, err := cl.CronList(ctx)
	require.NoError(t, err)
	require.Equal(t, 10001, len(ts))
	require.Equal(t, first.ID, ts[len(ts)-1].ID)
	seen := map[int64]bool{}
	for _, tk := range ts {
		require.False(t, seen[tk.ID], "task %d listed twice", tk.ID)
		seen[tk.ID] = true
	}
}

// TestSubmitUnicodeLimits counts a group's and a unique key's length in
// characters, as their columns do, and refuses bytes that are not UTF-8
// as invalid input before the task center sees them.
func TestSubmitUnicodeLimits(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()

	group := strings.Repeat("租", 64)
	key := strings.Repeat("😀", 191)
	res, err := cl.Submit(ctx, producer.Submission{Code: "send_sms", Group: group, UniqueKey: key,
		Payload: json.RawMessage(`{"内容":"你好 😀"}`)})
	require.NoError(t, err)
	tk, err := b.env.Store.TaskGet(ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, group, tk.Group)
	require.Equal(t, key, tk.UniqueKey)
	require.JSONEq(t, `{"内容":"你好 😀"}`, string(tk.Payload))

	before := b.rows(t)
	for _, s := range []producer.Submission{
		{Code: "send_sms", Group: group + "租"},
		{Code: "send_sms", UniqueKey: key + "😀"},
		{Code: "send_sms", Group: "\xc4\xe3\xba\xc3"}, // 你好 in GBK
		{Code: "send_sms", UniqueKey: "order-\xff"},
		{Code: "send_sms", Payload: json.RawMessage("{\"msg\":\"\xc4\xe3\xba\xc3\"}")},
	} {
		_, err := cl.Submit(ctx, s)
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%+v: %v", s, err)
	}
	require.Equal(t, before, b.rows(t))
}

// A batch whose unique keys make it go row by row (two rows of one key)
// says which rows were written when a later one fails: a row refused for
// itself fails alone; a failure that is not the row's (here a deadlock)
// stops the rest, which are not written. Nothing written is reported as
// failed, so a retry of the failed rows alone writes nothing twice.
func TestBatchWrittenInPartSaysWhich(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	b.env.Exec(t, `CREATE TRIGGER refuse BEFORE INSERT ON task_center FOR EACH ROW BEGIN
		IF NEW.task_code = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF;
		IF NEW.task_code = 'stuck' THEN SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'deadlock here', MYSQL_ERRNO = 1213; END IF;
		END`)

	rs, err := cl.SubmitBatch(ctx, []producer.Submission{
		{Code: "order", UniqueKey: "k1"},
		{Code: "order", UniqueKey: "k1"},
		{Code: "Order", UniqueKey: "k1"}, // the index folds case: held by another code
		{Code: "poison"},
		{Code: "order"},
		{Code: "stuck"},
		{Code: "after"},
	})
	var partial *producer.PartialError
	require.ErrorAs(t, err, &partial)
	require.Len(t, rs, 7)
	require.Positive(t, rs[0].ID)
	require.Equal(t, producer.Result{ID: rs[0].ID, Existing: true}, rs[1])
	require.NoError(t, partial.Errs[0])
	require.NoError(t, partial.Errs[1])
	require.ErrorContains(t, partial.Errs[2], `held by task`)
	require.ErrorContains(t, partial.Errs[3], "poison refused")
	require.NoError(t, partial.Errs[4])
	require.Positive(t, rs[4].ID)
	require.ErrorContains(t, partial.Errs[5], "deadlock here")
	require.ErrorContains(t, partial.Errs[6], "deadlock here", "not tried after a failure of the server's")
	require.Equal(t, "4 of 7 submissions not written, the others were (submission 2: "+partial.Errs[2].Error()+")", err.Error())
	require.NotEqual(t, task.CodeInvalid, task.ErrorCode(err), "the call wrote: not bad input as a whole")

	require.Equal(t, 2, b.rows(t), "what was written, once")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, rs[4].ID))

	// A row of an existing key changed (replace) is written before the
	// INSERT of the others: the INSERT's failure is theirs, not the call's.
	held, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "k9", Delay: time.Hour})
	require.NoError(t, err)
	replace := producer.Submission{Code: "order", UniqueKey: "k9", Payload: json.RawMessage(`{"v":2}`),
		OnConflict: store.Conflict{Mode: store.Replace}, Delay: time.Hour}
	rs, err = cl.SubmitBatch(ctx, []producer.Submission{replace, {Code: "poison"}, {Code: "order"}})
	require.ErrorAs(t, err, &partial, "a row refused: the others one by one")
	require.Equal(t, producer.Result{ID: held.ID, Existing: true, Changed: true}, rs[0])
	require.ErrorContains(t, partial.Errs[1], "poison refused")
	require.NoError(t, partial.Errs[2])
	require.Positive(t, rs[2].ID)
	rs, err = cl.SubmitBatch(ctx, []producer.Submission{replace, {Code: "stuck"}, {Code: "order"}})
	require.ErrorAs(t, err, &partial, "a failure of the server's: the others not written")
	require.Equal(t, producer.Result{ID: held.ID, Existing: true, Changed: true}, rs[0])
	require.ErrorContains(t, partial.Errs[1], "deadlock here")
	require.ErrorContains(t, partial.Errs[2], "deadlock here")
	require.Equal(t, 4, b.rows(t))

	// A failure of the one statement wrote nothing: the call fails as a
	// whole.
	_, err = cl.SubmitBatch(ctx, []producer.Submission{{Code: "stuck"}, {Code: "order"}})
	require.ErrorContains(t, err, "deadlock here")
	require.False(t, errors.As(err, &partial))
	require.Equal(t, 4, b.rows(t))
}
