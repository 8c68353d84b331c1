package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// drivenDB is a database clock standing skew from a driven local clock.
// A read of it spends before on the way to the server and after on the
// way back, as over a link where one direction (or a pool's wait) is slow.
type drivenDB struct {
	local         *clock.Manual
	skew          time.Duration
	before, after time.Duration
	reads         int
}

func (d *drivenDB) Now(context.Context) (time.Time, error) {
	d.reads++
	d.local.Advance(d.before)
	t := d.truth().Truncate(time.Millisecond) // NOW(3)
	d.local.Advance(d.after)
	return t, nil
}

// truth is the database clock now.
func (d *drivenDB) truth() time.Time { return d.local.Now().Add(d.skew) }

// The bounds hold the database clock whichever part of the round trip came
// before the server read its clock; the middle of the round trip does not
// (it is half the round trip ahead when the way there is slow, behind when
// the way back is).
func TestClockBoundsHoldTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, c := range []struct{ before, after time.Duration }{
		{0, 0}, {20 * ms, 0}, {0, 20 * ms}, {3 * ms, 7 * ms}, {250 * time.Microsecond, 0},
	} {
		for _, skew := range []time.Duration{-3 * time.Second, 0, 1234567 * time.Microsecond} {
			t.Run(fmt.Sprint(c.before, "+", c.after, "/", skew), func(t *testing.T) {
				t.Parallel()
				local := clock.NewManual(time.Date(2030, 1, 2, 3, 4, 5, 678901234, time.UTC))
				db := &drivenDB{local: local, skew: skew, before: c.before, after: c.after}
				clk := store.NewClock(db, local)
				require.NoError(t, clk.Sync(context.Background()))
				for range 50 {
					truth := db.truth()
					lo, hi := clk.Earliest(), clk.Latest()
					require.False(t, lo.After(truth), "earliest %s after the database clock %s", lo, truth)
					require.True(t, hi.After(truth), "latest %s not after the database clock %s", hi, truth)
					require.LessOrEqual(t, hi.Sub(lo), c.before+c.after+ms, "wider than the round trip and NOW(3)'s millisecond")
					local.Advance(7*ms + 300*time.Microsecond)
				}
			})
		}
	}
}

// Before its first sync the clock is the local one; the scheduler's
// releaser syncs when its reading is older than its limit, when it has
// none, and when the local clock went back.
func TestClockSyncIfOlder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	local := clock.NewManual(at)
	db := &drivenDB{local: local, skew: time.Hour, after: time.Millisecond}
	clk := store.NewClock(db, local)
	require.Equal(t, at, clk.Earliest())
	require.Equal(t, at, clk.Latest())

	require.NoError(t, clk.SyncIfOlder(ctx, time.Second))
	require.Equal(t, 1, db.reads, "never synced")
	require.Equal(t, at.Add(time.Hour), clk.Earliest())
	local.Advance(999 * time.Millisecond)
	require.NoError(t, clk.SyncIfOlder(ctx, time.Second))
	require.Equal(t, 1, db.reads, "fresh")
	local.Advance(time.Millisecond)
	require.NoError(t, clk.SyncIfOlder(ctx, time.Second))
	require.Equal(t, 2, db.reads, "a second old")
	local.Advance(-time.Millisecond)
	require.NoError(t, clk.SyncIfOlder(ctx, time.Second))
	require.Equal(t, 3, db.reads, "the local clock went back")
}

// Against the real server: after each sync the bounds bracket a NOW(3)
// read between them, and a start stamped with Latest right after a
// dispatch is never before the dispatched_at the database stamped, nor
// after the finished_at of the result written with it.
func TestClockAgainstTheServer(t *testing.T) {
	t.Parallel()
	for _, slow := range testenv.SlowClocks {
		t.Run(slow.Name, func(t *testing.T) {
			t.Parallel()
			st, b := setup(t)
			clk := store.NewClock(slow.With(st), nil)
			for i := range 20 {
				require.NoError(t, clk.Sync(b.ctx))
				lo := clk.Earliest()
				db, err := st.Now(b.ctx)
				require.NoError(t, err)
				hi := clk.Latest()
				require.False(t, lo.Truncate(time.Millisecond).After(db), "round %d: earliest %s after NOW(3) %s", i, lo, db)
				require.False(t, hi.Before(db), "round %d: latest %s before NOW(3) %s", i, hi, db)

				runQuick(t, st, b, clk.Latest)
			}
			require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at < dispatched_at`), "started before dispatched")
			require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at > finished_at`), "started after finished")
			require.Equal(t, 20, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE started_at IS NOT NULL AND finished_at IS NOT NULL`))
		})
	}
}

// A start sent by a worker whose clock drifted since its last sync is held
// between the attempt's dispatch and its result: never before
// dispatched_at, never after finished_at.
func TestDriftedStartIsHeldToTheAttempt(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	for _, off := range []time.Duration{-time.Hour, time.Hour} {
		id := runQuick(t, st, b, func() time.Time { return time.Now().Add(off) })
		require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?
			AND started_at BETWEEN dispatched_at AND finished_at AND last_run_at = started_at`, id), "start sent %s off", off)
	}
}

// runQuick claims a new due task and writes its success straight from
// dispatched, with the start started() tells right after the claim, as a
// worker does for an attempt that ended before its running mark.
func runQuick(t *testing.T, st *store.Store, b *testBundle, started func() time.Time) int64 {
	t.Helper()
	insertRaw(t, b.env, "x", 5, task.Pending, -time.Second)
	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	ok, err := st.TaskTransition(b.ctx, []store.Transition{{ID: m.ID, Attempt: m.Attempt, From: task.Dispatched,
		To: task.Succeeded, StartedAt: started(), Run: &store.RunRecord{Code: "x", WorkerID: "w1", Outcome: task.OutcomeSucceeded}}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)
	return m.ID
}
