package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/producer"
	"github.com/taskd/taskd/pkg/scheduler"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// groupedLayout is a layout whose queues have fixed limits.
type groupedLayout map[string]limit.Limit

func (groupedLayout) Shards(string) (int, int)     { return 1, 1 }
func (groupedLayout) Paused(string) bool           { return false }
func (groupedLayout) Changed() <-chan struct{}     { return nil }
func (l groupedLayout) Limit(q string) limit.Limit { return l[q] }
func (l groupedLayout) Grouped() map[string]limit.Limit {
	out := map[string]limit.Limit{}
	for q, lim := range l {
		if lim.Grouped() {
			out[q] = lim
		}
	}
	return out
}

// A per-group rate holds at claim: each group gets its burst at once,
// then a task per token, on the limiter's clock; tasks without a group
// are not grouped.
func TestGroupRate(t *testing.T) {
	t.Parallel()
	s, b := setup(t, scheduler.Config{})
	b.env.Broker.SetLayout(groupedLayout{"imp": {Rate: limit.Rate{N: 2, Period: time.Minute}, Burst: 2, Per: limit.PerGroup}})
	at := time.UnixMilli(1_700_000_000_000)
	b.env.Broker.SetLimitClock(func() time.Time { return at })
	var subs []producer.Submission
	for range 5 {
		subs = append(subs, producer.Submission{Code: "imp", Group: "A"}, producer.Submission{Code: "imp", Group: "B"})
	}
	subs = append(subs, producer.Submission{Code: "imp"}, producer.Submission{Code: "imp"})
	_, err := b.producer.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)

	dispatched := func(group string) int {
		return b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE group_key = ? AND status = ?`, group, int(task.Dispatched))
	}
	for range 3 { // the first round names the groups; more rounds add nothing
		_, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 2, dispatched("A"), "the burst")
	require.Equal(t, 2, dispatched("B"))
	require.Equal(t, 2, dispatched(""), "tasks without a group are not grouped")
	held, err := b.env.Broker.LimitedQueues(b.ctx, []string{"imp"})
	require.NoError(t, err)
	require.Equal(t, "group", held["imp"].By)
	require.EqualValues(t, 2, held["imp"].Groups)

	at = at.Add(30 * time.Second) // one token each
	_, err = s.RunOnce(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, dispatched("A"))
	require.Equal(t, 3, dispatched("B"))
}

// A serial group's next task is not claimed while one is in flight, by
// this scheduler or another.
func TestSerialAcrossSchedulers(t *testing.T) {
	t.Parallel()
	s1, b := setup(t, scheduler.Config{})
	st2, br2 := openHandles(t, b.env)
	lay := groupedLayout{"ledger": {Serial: limit.SerialOn}}
	b.env.Broker.SetLayout(lay)
	br2.SetLayout(lay)
	s2 := scheduler.New(scheduler.Config{Logger: quiet}, st2, br2)
	var subs []producer.Submission
	for range 4 {
		subs = append(subs, producer.Submission{Code: "ledger", Group: "acct-1"})
	}
	res, err := b.producer.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	for range 3 {
		for _, s := range []*scheduler.Scheduler{s1, s2} {
			_, err := s.RunOnce(b.ctx)
			require.NoError(t, err)
		}
	}
	inFlight := `SELECT COUNT(*) FROM task_center WHERE status IN (1, 2)`
	require.Equal(t, 1, b.env.Count(t, inFlight))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 1`, res[0].ID), "the oldest first")
	// It ends: the next one, once.
	_, err = b.env.Store.TaskTransition(b.ctx, []store.Transition{{ID: res[0].ID, Attempt: 1, From: task.Dispatched, To: task.Succeeded}})
	require.NoError(t, err)
	for _, s := range []*scheduler.Scheduler{s2, s1} {
		_, err := s.RunOnce(b.ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1, b.env.Count(t, inFlight))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 1`, res[1].ID))
}
