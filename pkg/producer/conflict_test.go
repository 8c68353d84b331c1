package producer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// race submits subs[i] from len(subs) goroutines released at once.
func race(t *testing.T, cl *producer.Client, subs []producer.Submission) []producer.Result {
	t.Helper()
	out := make([]producer.Result, len(subs))
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = cl.Submit(context.Background(), subs[i])
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "submitter %d", i)
	}
	return out
}

// setStatus puts task id in status st (as the task center would after a
// run), for the modes that look at it.
func (b *testBundle) setStatus(t *testing.T, id int64, st task.Status) {
	t.Helper()
	b.env.Exec(t, `UPDATE task_center SET status = ? WHERE id = ?`, int(st), id)
}

func TestOnConflictReplace(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	replace := store.Conflict{Mode: store.Replace}

	first, err := cl.Submit(ctx, producer.Submission{Code: "sync", UniqueKey: "u1", Payload: json.RawMessage(`{"v":0}`), Delay: time.Hour})
	require.NoError(t, err)

	// Eight submitters at once: one task, with one of their payloads, due
	// when that submitter said (now).
	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i] = producer.Submission{Code: "sync", UniqueKey: "u1", OnConflict: replace, Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i+1))}
	}
	for i, r := range race(t, cl, subs) {
		require.Equal(t, first.ID, r.ID, "submitter %d", i)
		require.True(t, r.Existing && r.Changed, "submitter %d: %+v", i, r)
	}
	tk, err := b.env.Store.TaskGet(ctx, first.ID)
	require.NoError(t, err)
	var p struct{ V int }
	require.NoError(t, json.Unmarshal(tk.Payload, &p))
	require.Positive(t, p.V, "a submitter's payload replaced the first")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at <= NOW(3)`, first.ID),
		"the due time is the replacing submit's (now), not the hour of the first")
	require.Equal(t, 1, b.rows(t))

	// A failed task waiting for its retry is waiting too.
	b.setStatus(t, first.ID, task.Failed)
	r, err := cl.Submit(ctx, producer.Submission{Code: "sync", UniqueKey: "u1", OnConflict: replace, Payload: json.RawMessage(`{"v":100}`)})
	require.NoError(t, err)
	require.True(t, r.Changed)

	// Dispatched or running: never changed, and the reason says so.
	for _, st := range []task.Status{task.Dispatched, task.Running} {
		b.setStatus(t, first.ID, st)
		r, err := cl.Submit(ctx, producer.Submission{Code: "sync", UniqueKey: "u1", OnConflict: replace, Payload: json.RawMessage(`{"v":-1}`)})
		require.NoError(t, err)
		require.True(t, r.Existing)
		require.False(t, r.Changed, st.String())
		require.Equal(t, st, r.Status)
		require.Contains(t, r.Reason, "never changed")
		tk, err := b.env.Store.TaskGet(ctx, first.ID)
		require.NoError(t, err)
		require.JSONEq(t, `{"v":100}`, string(tk.Payload), "a %s task keeps its payload", st)
	}
	// Ended: left alone, and the reason names until-done.
	b.setStatus(t, first.ID, task.Succeeded)
	r, err = cl.Submit(ctx, producer.Submission{Code: "sync", UniqueKey: "u1", OnConflict: replace})
	require.NoError(t, err)
	require.False(t, r.Changed)
	require.Contains(t, r.Reason, "until-done")
	require.Equal(t, 1, b.rows(t))
}

func TestOnConflictDebounce(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	deb := store.Conflict{Mode: store.Debounce, Debounce: 20 * time.Second, MaxWait: time.Minute}

	// The first submit is due a debounce from now.
	first, err := cl.Submit(ctx, producer.Submission{Code: "digest", UniqueKey: "d1", OnConflict: deb, Payload: json.RawMessage(`{"v":0}`)})
	require.NoError(t, err)
	dueIn := func() time.Duration {
		t.Helper()
		ms := b.env.Count(t, `SELECT TIMESTAMPDIFF(MICROSECOND, NOW(3), plan_next_run_at) DIV 1000 FROM task_center WHERE id = ?`, first.ID)
		return time.Duration(ms) * time.Millisecond
	}
	require.InDelta(t, (20 * time.Second).Seconds(), dueIn().Seconds(), 2)

	// Eight more at once: still one task, due a debounce after them.
	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i] = producer.Submission{Code: "digest", UniqueKey: "d1", OnConflict: deb, Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i+1))}
	}
	for i, r := range race(t, cl, subs) {
		require.Equal(t, first.ID, r.ID, "submitter %d", i)
		require.True(t, r.Changed, "submitter %d", i)
	}
	require.Equal(t, 1, b.rows(t))

	// The maximum wait holds: created two minutes ago with a one-minute
	// maximum, it is due no later than a minute after its creation (in the
	// past: at once), however often it is submitted again.
	b.env.Exec(t, `UPDATE task_center SET created_at = NOW(3) - INTERVAL 2 MINUTE, plan_next_run_at = NOW(3) - INTERVAL 70 SECOND WHERE id = ?`, first.ID)
	_, err = cl.Submit(ctx, producer.Submission{Code: "digest", UniqueKey: "d1", OnConflict: deb})
	require.NoError(t, err)
	require.Less(t, dueIn(), time.Duration(0), "past the maximum wait, a debounce does not push the task out")

	// A debounce never brings a task forward.
	b.env.Exec(t, `UPDATE task_center SET created_at = NOW(3), plan_next_run_at = NOW(3) + INTERVAL 50 SECOND WHERE id = ?`, first.ID)
	_, err = cl.Submit(ctx, producer.Submission{Code: "digest", UniqueKey: "d1", OnConflict: deb})
	require.NoError(t, err)
	require.Greater(t, dueIn(), 45*time.Second)

	// Running: never changed.
	b.setStatus(t, first.ID, task.Running)
	r, err := cl.Submit(ctx, producer.Submission{Code: "digest", UniqueKey: "d1", OnConflict: deb, Payload: json.RawMessage(`{"v":-1}`)})
	require.NoError(t, err)
	require.False(t, r.Changed)
	require.Contains(t, r.Reason, "never changed")
}

func TestOnConflictUntilDone(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	until := store.Conflict{Mode: store.UntilDone}

	// No task holds the key: eight submitters, one task.
	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i] = producer.Submission{Code: "export", UniqueKey: "e1", OnConflict: until}
	}
	rs := race(t, cl, subs)
	created := 0
	for _, r := range rs {
		require.Equal(t, rs[0].ID, r.ID)
		if !r.Existing {
			created++
		}
	}
	require.Equal(t, 1, created)
	first := rs[0].ID

	// While it has not ended (pending, failed, running), the key holds.
	for _, st := range []task.Status{task.Pending, task.Failed, task.Running} {
		b.setStatus(t, first, st)
		r, err := cl.Submit(ctx, producer.Submission{Code: "export", UniqueKey: "e1", OnConflict: until})
		require.NoError(t, err)
		require.Equal(t, first, r.ID, st.String())
		require.True(t, r.Existing)
	}

	// Ended: eight submitters at once make exactly one new task, which
	// takes the key; the ended task keeps it as released_key.
	for round, st := range []task.Status{task.Succeeded, task.Dead, task.Cancelled} {
		b.setStatus(t, first, st)
		rs := race(t, cl, subs)
		var newID int64
		for _, r := range rs {
			if !r.Existing {
				require.Zero(t, newID, "round %d: two submitters created a task", round)
				newID = r.ID
			}
		}
		require.NotZero(t, newID, "round %d: a %s task's key was not taken over", round, st)
		for i, r := range rs {
			require.Equal(t, newID, r.ID, "round %d submitter %d", round, i)
		}
		old, err := b.env.Store.TaskGet(ctx, first)
		require.NoError(t, err)
		require.Empty(t, old.UniqueKey)
		require.Equal(t, "e1", old.ReleasedKey)
		require.Equal(t, 2+round, b.rows(t))
		first = newID
	}

	// reject (the default) keeps the key of an ended task for ever.
	b.setStatus(t, first, task.Succeeded)
	r, err := cl.Submit(ctx, producer.Submission{Code: "export", UniqueKey: "e1"})
	require.NoError(t, err)
	require.Equal(t, first, r.ID)
	require.True(t, r.Existing)
}

func TestOnConflictRejectRace(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	subs := make([]producer.Submission, 8)
	for i := range subs {
		subs[i] = producer.Submission{Code: "once", UniqueKey: "r1", Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, i))}
	}
	rs := race(t, cl, subs)
	created := 0
	for _, r := range rs {
		require.Equal(t, rs[0].ID, r.ID)
		require.False(t, r.Changed)
		if !r.Existing {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, 1, b.rows(t))
}

func TestOnConflictBadInput(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	for _, s := range []string{"bogus", "debounce", "debounce=abc", "debounce=-5s", "replace=5s", "debounce=0s"} {
		_, err := producer.ParseConflict(s)
		require.Error(t, err, s)
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), s)
	}
	for s, want := range map[string]store.Conflict{
		"":               {},
		"reject":         {},
		"replace":        {Mode: store.Replace},
		"until-done":     {Mode: store.UntilDone},
		"debounce=30s":   {Mode: store.Debounce, Debounce: 30 * time.Second},
		"debounce 1m":    {Mode: store.Debounce, Debounce: time.Minute},
		" debounce=2s  ": {Mode: store.Debounce, Debounce: 2 * time.Second},
	} {
		got, err := producer.ParseConflict(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, sub := range []producer.Submission{
		{Code: "x", OnConflict: store.Conflict{Mode: store.Replace}}, // no key
		{Code: "x", UniqueKey: "k", OnConflict: store.Conflict{Mode: store.Debounce}},
		{Code: "x", UniqueKey: "k", OnConflict: store.Conflict{Mode: store.Debounce, Debounce: time.Minute, MaxWait: time.Second}},
		{Code: "x", UniqueKey: "k", OnConflict: store.Conflict{Mode: store.Replace, Debounce: time.Minute}},
		{Code: "x", Group: string(make([]byte, 65))},
		{Code: "x", Group: "tab\there"},
		{Code: "x", Group: " lead"},
	} {
		_, err := cl.Submit(ctx, sub)
		require.Error(t, err, "%+v", sub)
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%+v", sub)
	}
	require.Zero(t, b.rows(t), "bad input writes nothing")
}

func TestGroupStored(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	r, err := cl.Submit(ctx, producer.Submission{Code: "imp", Group: "tenant-7 (eu)"})
	require.NoError(t, err)
	tk, err := b.env.Store.TaskGet(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "tenant-7 (eu)", tk.Group)
	// A seed-style INSERT has no group.
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload) VALUES ('imp', '{}')`)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE group_key = ''`))
}

// Eight submitters racing on a key no task holds yet make one task in
// every mode, and each is told that task.
func TestOnConflictFreshKeyRace(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	for i, c := range []store.Conflict{
		{},
		{Mode: store.Replace},
		{Mode: store.Debounce, Debounce: time.Minute, MaxWait: 10 * time.Minute},
		{Mode: store.UntilDone},
	} {
		key := fmt.Sprintf("fresh-%d", i)
		subs := make([]producer.Submission, 8)
		for j := range subs {
			subs[j] = producer.Submission{Code: "once", UniqueKey: key, OnConflict: c, Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, j))}
		}
		rs := race(t, cl, subs)
		created := 0
		for j, r := range rs {
			require.Equal(t, rs[0].ID, r.ID, "%s: submitter %d", c.Mode, j)
			if !r.Existing {
				created++
			}
		}
		require.Equal(t, 1, created, c.Mode.String())
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE unique_key = ?`, key), c.Mode.String())
	}
}
