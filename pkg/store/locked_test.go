package store_test

import (
	"context"
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

			msgs, err := st.TaskClaimDue(b.ctx, "c1", 100)
			require.NoError(t, err)
			require.Len(t, msgs, 8)
			for _, m := range msgs {
				require.False(t, isLocked[m.ID], "claimed a locked row")
			}
			// The claim leaves the locked rows out for a while.
			again, err := st.TaskClaimDue(b.ctx, "c2", 100)
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
	msgs, _, err := st.TaskClaimDueFiltered(ctx, "c1", 100, f)
	require.NoError(t, err)
	require.Equal(t, []int64{all[4]}, ids(msgs))
}
