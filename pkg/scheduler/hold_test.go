package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/clock"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/task"
)

// skewedDB is a database clock that stands skew from a driven local clock
// and answers rtt after it read itself, as a server over a link does.
type skewedDB struct {
	local     *clock.Manual
	skew, rtt time.Duration
}

func (d skewedDB) Now(context.Context) (time.Time, error) {
	t := d.local.Now().Add(d.skew).Truncate(time.Millisecond) // NOW(3)
	d.local.Advance(d.rtt)
	return t, nil
}

// A task claimed ahead is held until the database clock reaches its due
// time, whatever the local clock says, and pushed then: never before, and
// late by no more than the clock read's round trip.
func TestClaimAheadHoldsUntilDue(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{-3 * time.Second, 0, 3 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			t.Parallel()
			local := clock.NewManual(time.Time{})
			s, b := setup(t, scheduler.Config{ClaimAhead: time.Minute, Clock: local})
			db := skewedDB{local: local, skew: skew, rtt: 2 * time.Millisecond}
			s.UseDatabaseClock(db)
			real, err := b.env.Store.Now(b.ctx)
			require.NoError(t, err)
			local.Set(real.Add(-skew)) // the driven database clock starts at the real one

			now, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello"})
			require.NoError(t, err)
			soon, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello", Delay: 10 * time.Second})
			require.NoError(t, err)
			_, err = b.producer.Submit(b.ctx, producer.Submission{Code: "hello", Delay: time.Hour})
			require.NoError(t, err)
			tk, err := b.env.Store.TaskGet(b.ctx, soon.ID)
			require.NoError(t, err)
			due := tk.PlanNextRun

			// One claim takes the task due now and the one due in 10 s;
			// only the first is pushed.
			n, err := s.ClaimRound(b.ctx)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1 AND id IN (?, ?)`, now.ID, soon.ID))
			requireQueued(t, b, 1)
			require.EqualValues(t, 1, s.Dispatched())

			pushed, wait, err := s.ReleaseOnce(b.ctx)
			require.NoError(t, err)
			require.Zero(t, pushed)
			// It read the clock (standing rtt before the local clock now)
			// and waits until due by that reading.
			read := local.Now().Add(-db.rtt).Add(skew).Truncate(time.Millisecond)
			require.Equal(t, due.Sub(read), wait)
			require.Greater(t, wait, 9*time.Second)

			// Step the local clock through the due time.
			local.Advance(wait - 5*time.Millisecond)
			var pushedAt time.Time
			for range 20 {
				pushed, _, err := s.ReleaseOnce(b.ctx)
				require.NoError(t, err)
				dbNow := local.Now().Add(skew)
				if pushed == 0 {
					requireQueued(t, b, 1)
				} else {
					require.Equal(t, 1, pushed)
					require.False(t, dbNow.Before(due), "pushed at %s, before its due time %s", dbNow, due)
					pushedAt = dbNow
					break
				}
				local.Advance(time.Millisecond)
			}
			require.False(t, pushedAt.IsZero(), "not pushed 15 ms past its due time")
			require.LessOrEqual(t, pushedAt.Sub(due), db.rtt+time.Millisecond)
			requireQueued(t, b, 2)
			require.EqualValues(t, 2, s.Dispatched())
		})
	}
}

func requireQueued(t *testing.T, b *testBundle, n int64) {
	t.Helper()
	ql, err := b.env.Broker.QueueLen(b.ctx, "hello")
	require.NoError(t, err)
	require.Equal(t, n, ql)
}

// Held messages take room in their queue's window as if they were in
// Redis: a claim ahead does not overfill it.
func TestClaimAheadHeldFillWindow(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{ClaimAhead: time.Minute, Window: 2})
	for range 3 {
		_, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello", Delay: 30 * time.Second})
		require.NoError(t, err)
	}
	n, err := s.ClaimRound(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = s.ClaimRound(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the window is full of held messages")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 0`))
}

// A stop hands back the held tasks as they were: pending, due when they
// were due, with no message anywhere.
func TestStopHandsBackHeld(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{ClaimAhead: time.Minute})
	res, err := b.producer.Submit(b.ctx, producer.Submission{Code: "hello", Delay: 30 * time.Second})
	require.NoError(t, err)
	before, err := b.env.Store.TaskGet(b.ctx, res.ID)
	require.NoError(t, err)

	require.NoError(t, s.Start(b.ctx))
	require.Eventually(t, func() bool {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 1`) == 1
	}, 10*time.Second, 10*time.Millisecond, "claimed ahead")
	s.Stop()

	after, err := b.env.Store.TaskGet(b.ctx, res.ID)
	require.NoError(t, err)
	require.Equal(t, task.Pending, after.Status)
	require.Equal(t, 1, after.Attempt, "the attempt stays spent")
	require.Empty(t, after.WorkerID)
	require.True(t, before.PlanNextRun.Equal(after.PlanNextRun), "due at %s, handed back due at %s",
		before.PlanNextRun, after.PlanNextRun)
	requireQueued(t, b, 0)
	require.Zero(t, s.Dispatched())
}

func TestNextClaimIn(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, c := range []struct {
		d, ahead time.Duration
		claimed  int
		want     time.Duration
	}{
		{d: 300 * ms, ahead: 250 * ms, claimed: 5, want: 175 * ms}, // until the next is due within ahead/2
		{d: 300 * ms, ahead: 250 * ms, claimed: 0, want: 175 * ms}, //
		{d: 200 * ms, ahead: 250 * ms, claimed: 5, want: 0},        // one within ahead is unclaimed: claim again
		{d: 200 * ms, ahead: 250 * ms, claimed: 0, want: 10 * ms},  // ... held elsewhere: not in a spin
		{d: 5 * time.Second, ahead: 250 * ms, want: time.Second},   // the poll interval
		{d: 300 * ms, want: 300 * ms},                              // no claim ahead: until due
		{d: -ms, claimed: 1, want: 0},                              //
		{d: -ms, want: 10 * ms},                                    //
		{d: 0, ahead: 250 * ms, claimed: 3, want: 0},               //
	} {
		require.Equal(t, c.want, scheduler.NextClaimIn(c.d, c.ahead, c.claimed, time.Second), "%+v", c)
	}
}
