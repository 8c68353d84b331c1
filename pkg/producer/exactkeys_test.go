package producer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// lookAlikes are pairs of unique keys that utf8mb4_general_ci took for one
// key: case, accents and ß, and any two characters outside the Basic
// Multilingual Plane (emoji, extension-plane Chinese).
var lookAlikes = [][2]string{
	{"order-abc", "order-ABC"},
	{"gift-🐶", "gift-😀"},
	{"名-𠮷", "名-𩸽"},
	{"café", "cafe"},
	{"straße", "strasse"},
}

// Keys compare exactly in every conflict mode: a look-alike key is a task
// of its own, and the same key again still finds its task.
func TestUniqueKeysCompareExactly(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	for _, c := range []store.Conflict{
		{Mode: store.Reject},
		{Mode: store.Replace},
		{Mode: store.Debounce, Debounce: time.Minute},
		{Mode: store.UntilDone},
	} {
		t.Run(c.Mode.String(), func(t *testing.T) {
			code := "exact_" + c.Mode.String()
			for _, pair := range lookAlikes {
				var ids [2]int64
				for i, key := range pair {
					r, err := cl.Submit(ctx, producer.Submission{Code: code, UniqueKey: key, OnConflict: c, Delay: time.Hour})
					require.NoError(t, err)
					require.False(t, r.Existing, "%q after %q", key, pair[0])
					ids[i] = r.ID
				}
				for i, key := range pair {
					r, err := cl.Submit(ctx, producer.Submission{Code: code, UniqueKey: key, OnConflict: c, Delay: time.Hour})
					require.NoError(t, err)
					require.True(t, r.Existing, "%q again", key)
					require.Equal(t, ids[i], r.ID, "%q again", key)
					tk, err := b.env.Store.TaskGet(ctx, ids[i])
					require.NoError(t, err)
					require.Equal(t, key, tk.UniqueKey)
				}
			}
			require.Equal(t, 2*len(lookAlikes), b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = ?`, code))
		})
	}
}

// until-done hands over exactly the ended task's key: the look-alike's
// task keeps its own, and released_key holds the key as it was.
func TestUntilDoneHandsOverTheExactKey(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	until := store.Conflict{Mode: store.UntilDone}
	dog, err := cl.Submit(ctx, producer.Submission{Code: "gift", UniqueKey: "gift-🐶", OnConflict: until})
	require.NoError(t, err)
	smile, err := cl.Submit(ctx, producer.Submission{Code: "gift", UniqueKey: "gift-😀", OnConflict: until})
	require.NoError(t, err)
	require.NotEqual(t, dog.ID, smile.ID)
	b.setStatus(t, dog.ID, task.Succeeded)

	next, err := cl.Submit(ctx, producer.Submission{Code: "gift", UniqueKey: "gift-🐶", OnConflict: until})
	require.NoError(t, err)
	require.False(t, next.Existing)
	old, err := b.env.Store.TaskGet(ctx, dog.ID)
	require.NoError(t, err)
	require.Equal(t, "gift-🐶", old.ReleasedKey)
	require.Empty(t, old.UniqueKey)
	kept, err := b.env.Store.TaskGet(ctx, smile.ID)
	require.NoError(t, err)
	require.Equal(t, "gift-😀", kept.UniqueKey, "the look-alike's task keeps its key")
	require.Empty(t, kept.ReleasedKey)

	// A look-alike of an ended task's key does not take it over.
	b.setStatus(t, next.ID, task.Succeeded)
	r, err := cl.Submit(ctx, producer.Submission{Code: "gift", UniqueKey: "gift-😀", OnConflict: until})
	require.NoError(t, err)
	require.Equal(t, smile.ID, r.ID)
	tk, err := b.env.Store.TaskGet(ctx, next.ID)
	require.NoError(t, err)
	require.Equal(t, "gift-🐶", tk.UniqueKey)
}

// Look-alike keys in one batch, and against rows already there, are
// separate tasks; an exact repeat is one.
func TestSubmitBatchExactKeys(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	first, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "order-abc"})
	require.NoError(t, err)
	rs, err := cl.SubmitBatch(ctx, []producer.Submission{
		{Code: "order", UniqueKey: "order-ABC"},
		{Code: "order", UniqueKey: "order-abc"},
		{Code: "order", UniqueKey: "gift-🐶"},
		{Code: "order", UniqueKey: "gift-😀"},
		{Code: "order", UniqueKey: "gift-😀"},
	})
	require.NoError(t, err)
	require.False(t, rs[0].Existing)
	require.Equal(t, producer.Result{ID: first.ID, Existing: true}, rs[1])
	require.False(t, rs[2].Existing)
	require.False(t, rs[3].Existing)
	require.Equal(t, producer.Result{ID: rs[3].ID, Existing: true}, rs[4])
	require.Equal(t, 4, b.rows(t))
}

// utf8mb4_bin pads with spaces: "k " would be "k". A key that starts or
// ends with whitespace is refused rather than taken for another.
func TestUniqueKeyEdgeWhitespaceRefused(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	for _, key := range []string{"order-42 ", " order-42", "order-42\t", "order-42\n", "\u3000订单", "订单\u00a0"} {
		_, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: key})
		require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%q: %v", key, err)
		require.ErrorContains(t, err, "starts or ends with whitespace")
	}
	require.Zero(t, b.rows(t))
	// Inside a key, spaces are characters like any other.
	_, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "order 42"})
	require.NoError(t, err)
}

// Task codes that differ only in case share uk_code_unique's keys (the
// column's collation folds case). A keyed submission of one, or a
// periodic task of the same name, is refused naming the other's task,
// not answered with that task (nor updating it), in every conflict mode.
func TestCodesOnlyCaseApartAreRefused(t *testing.T) {
	t.Parallel()
	cl, b := setup(t)
	ctx := context.Background()
	held, err := cl.Submit(ctx, producer.Submission{Code: "order", UniqueKey: "k1", Delay: time.Hour})
	require.NoError(t, err)
	for _, c := range []store.Conflict{{Mode: store.Reject}, {Mode: store.Replace}, {Mode: store.UntilDone}} {
		for _, code := range []string{"ORDER", "Order"} {
			_, err := cl.Submit(ctx, producer.Submission{Code: code, UniqueKey: "k1", OnConflict: c, Delay: time.Hour})
			require.Equal(t, task.CodeInvalid, task.ErrorCode(err), "%q %v: %v", code, c.Mode, err)
			require.ErrorContains(t, err, fmt.Sprintf(`unique key "k1" is held by task %d of code "order"`, held.ID))
		}
	}
	cron, err := cl.CronAdd(ctx, producer.Cron{Code: "order", Expr: "@daily", Name: "nightly"})
	require.NoError(t, err)
	_, err = cl.CronAdd(ctx, producer.Cron{Code: "Order", Expr: "@hourly", Name: "nightly"})
	require.ErrorContains(t, err, fmt.Sprintf(`is held by task %d of code "order"`, cron.ID))
	tk, err := b.env.Store.TaskGet(ctx, cron.ID)
	require.NoError(t, err)
	require.Equal(t, "@daily", tk.CronExpr, "the other code's periodic task is unchanged")
	require.Equal(t, 2, b.rows(t))
}
