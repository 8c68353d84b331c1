package store_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

func holdLocks(t *testing.T, b *testBundle, ids ...int64) (release func()) {
	t.Helper()
	return testenv.HoldRowLocks(t, b.env.DSN, ids...)
}

// Rows another transaction holds with SELECT ... FOR UPDATE hold back only
// themselves: the claim takes the others, the running mark and result
// writes apply to the others and report the held ones as locked, and once
// the lock is gone the held ones go through. Both ways of locking without
// waiting: SKIP LOCKED, and NOWAIT bisected.
func TestLockedRowsHoldBackOnlyThemselves(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"skip-locked", "nowait"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			st, b := setup(t)
			if mode == "nowait" {
				st.UseNoWait()
			}
			var all []int64
			for range 12 {
				all = append(all, insertRaw(t, b.env, "x", 5, task.Pending, -time.Second))
			}
			locked := []int64{all[1], all[4], all[5], all[11]}
			isLocked := map[int64]bool{}
			for _, id := range locked {
				isLocked[id] = true
			}
			release := holdLocks(t, b, locked...)

			msgs, err := st.TaskClaimDue(b.ctx, 100)
			require.NoError(t, err)
			require.Len(t, msgs, 8)
			for _, m := range msgs {
				require.False(t, isLocked[m.ID], "claimed a locked row")
			}
			// The claim leaves the locked rows out for a while.
			again, err := st.TaskClaimDue(b.ctx, 100)
			require.NoError(t, err)
			require.Empty(t, again)

			// Lock two of the claimed rows too: the mark of the batch
			// applies to the rest.
			release()
			fences := make([]store.Fence, len(msgs))
			for i, m := range msgs {
				fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
			}
			release = holdLocks(t, b, msgs[0].ID, msgs[5].ID)
			ok, err := st.TaskMarkRunning(b.ctx, "w", fences)
			require.Equal(t, []int{0, 5}, store.LockedEntries(err), "err: %v", err)
			require.Equal(t, []bool{false, true, true, true, true, false, true, true}, ok)

			ts := make([]store.Transition, 0, len(fences))
			for _, f := range fences[1:5] {
				ts = append(ts, store.Transition{ID: f.ID, Attempt: f.Attempt, From: task.Running, To: task.Succeeded,
					Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded}})
			}
			release2 := holdLocks(t, b, fences[2].ID)
			applied, err := st.TaskTransition(b.ctx, ts)
			require.Equal(t, []int{1}, store.LockedEntries(err), "err: %v", err)
			require.Equal(t, []bool{true, false, true, true}, applied)
			require.Equal(t, 3, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))

			// Released, the held ones go through.
			release()
			release2()
			ok, err = st.TaskMarkRunning(b.ctx, "w", []store.Fence{fences[0], fences[5]})
			require.NoError(t, err)
			require.Equal(t, []bool{true, true}, ok)
			applied, err = st.TaskTransition(b.ctx, ts[1:2])
			require.NoError(t, err)
			require.Equal(t, []bool{true}, applied)
			require.Equal(t, 4, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
		})
	}
}

// A filtered claim (some queue paused) skips locked rows the same way.
func TestLockedRowsFilteredClaim(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	var all []int64
	for i := range 6 {
		code := "x"
		if i%2 == 1 {
			code = "paused"
		}
		all = append(all, insertRaw(t, b.env, code, 5, task.Pending, -time.Second))
	}
	holdLocks(t, b, all[0], all[2])
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	f := &store.ClaimFilter{Paused: func(q string) bool { return q == "paused" }}
	msgs, _, err := st.TaskClaimDueFiltered(ctx, 100, f)
	require.NoError(t, err)
	require.Equal(t, []int64{all[4]}, ids(msgs))
}

// openPatient opens a second store on b's database whose session lock wait
// timeout is an hour, so that a statement that waited on a held row would
// hang the test to its context's deadline instead of failing fast.
func openPatient(t *testing.T, b *testBundle, preRead bool) *store.Store {
	t.Helper()
	st, err := store.Open(b.ctx, b.env.DSN, store.Options{LockWaitTimeout: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	if preRead {
		st.UsePreRead()
	} else if !st.ZeroWait() {
		t.Skip("the server has no zero lock wait")
	}
	return st
}

// inWriteModes runs test, in parallel, once with batches written at once
// under a zero lock wait (skipped where the server has none) and once with
// every batch locked first, each on a store of its own from openPatient.
func inWriteModes(t *testing.T, test func(t *testing.T, b *testBundle, st *store.Store, preRead bool)) {
	for _, mode := range []string{"zero-wait", "pre-read"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t)
			preRead := mode == "pre-read"
			test(t, b, openPatient(t, b, preRead), preRead)
		})
	}
}

// A row another transaction holds, in the middle of a batch, holds back
// only itself whether the batch is written at once with a zero lock wait
// and again after a locking read, or only after one: the claim, the
// running mark and the results apply to the others and report the held
// one, without waiting on its lock. The zero-wait try takes the locking
// read only for the batches that met the held row; the rows its failed
// statement had locked are written by the second try all the same.
func TestHeldRowAmongABatch(t *testing.T) {
	t.Parallel()
	inWriteModes(t, func(t *testing.T, b *testBundle, st *store.Store, preRead bool) {
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		var all []int64
		for range 9 {
			all = append(all, insertRaw(t, b.env, "x", 5, task.Pending, -time.Second))
		}
		release := holdLocks(t, b, all[4])
		reads := st.PreReads()
		msgs, err := st.TaskClaimDue(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, append(slices.Clone(all[:4]), all[5:]...), ids(msgs))
		require.Equal(t, int64(1), st.PreReads()-reads)
		release()

		fences := make([]store.Fence, len(msgs))
		for i, m := range msgs {
			fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
		}
		release = holdLocks(t, b, fences[3].ID)
		ok, err := st.TaskMarkRunning(ctx, "w", fences)
		require.Equal(t, []int{3}, store.LockedEntries(err), "err: %v", err)
		require.Equal(t, []bool{true, true, true, false, true, true, true, true}, ok)
		release()

		ts := make([]store.Transition, 0, len(fences))
		for i, f := range fences {
			if i != 3 {
				ts = append(ts, store.Transition{ID: f.ID, Attempt: f.Attempt, From: task.Running, To: task.Succeeded,
					Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded}})
			}
		}
		release = holdLocks(t, b, ts[2].ID)
		applied, err := st.TaskTransition(ctx, ts)
		require.Equal(t, []int{2}, store.LockedEntries(err), "err: %v", err)
		require.Equal(t, []bool{true, true, false, true, true, true, true}, applied)
		require.Equal(t, 6, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
		require.Equal(t, 6, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = ?`, int(task.Succeeded)))
		release()
	})
}

// A batch larger than one statement whose held row is in its second
// statement: the first statement's rows, already written when the second
// failed, are written once, by the second try, and reported applied.
func TestHeldRowInALaterStatement(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	st := openPatient(t, b, false)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	n := store.MaxBatchRows + 20
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, priority, status, plan_next_run_at)
		SELECT 'x', '{}', 5, 0, NOW(3) - INTERVAL 1 SECOND FROM seq_1_to_`+strconv.Itoa(n))
	msgs, err := st.TaskClaimDue(ctx, n)
	require.NoError(t, err)
	require.Len(t, msgs, n)
	fences := make([]store.Fence, n)
	ts := make([]store.Transition, n)
	for i, m := range msgs {
		fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
		ts[i] = store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Running, To: task.Succeeded,
			Run: &store.RunRecord{Code: "x", Queue: "x", Outcome: task.OutcomeSucceeded}}
	}
	_, err = st.TaskMarkRunning(ctx, "w", fences)
	require.NoError(t, err)

	held := n - 1
	release := holdLocks(t, b, ts[held].ID)
	reads := st.PreReads()
	applied, err := st.TaskTransition(ctx, ts)
	require.Equal(t, []int{held}, store.LockedEntries(err), "err: %v", err)
	require.Equal(t, int64(1), st.PreReads()-reads)
	for i, a := range applied {
		require.Equal(t, i != held, a, "entry %d", i)
	}
	require.Equal(t, n-1, b.env.Count(t, `SELECT COUNT(*) FROM task_run`))
	release()
}

// Where the server has a zero lock wait, batches that meet no held row
// run no locking read; elsewhere each batch runs one.
func TestFreeBatchesSkipTheLockingRead(t *testing.T) {
	t.Parallel()
	inWriteModes(t, func(t *testing.T, b *testBundle, st *store.Store, preRead bool) {
		for range 5 {
			insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
		}
		msgs, err := st.TaskClaimDue(b.ctx, 100)
		require.NoError(t, err)
		require.Len(t, msgs, 5)
		fences := make([]store.Fence, len(msgs))
		ts := make([]store.Transition, len(msgs))
		for i, m := range msgs {
			fences[i] = store.Fence{ID: m.ID, Attempt: m.Attempt}
			ts[i] = store.Transition{ID: m.ID, Attempt: m.Attempt, From: task.Running, To: task.Succeeded}
		}
		ok, err := st.TaskMarkRunning(b.ctx, "w", fences)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true, true, true}, ok)
		// A stale fence misses without a lock error.
		stale := append(slices.Clone(ts), store.Transition{ID: ts[0].ID, Attempt: ts[0].Attempt - 1, From: task.Running, To: task.Failed})
		applied, err := st.TaskTransition(b.ctx, stale)
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, true, true, true, false}, applied)
		want := int64(0)
		if preRead {
			want = 3
		}
		require.Equal(t, want, st.PreReads())
	})
}
