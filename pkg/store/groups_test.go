package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/limit"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// insertGrouped inserts a task of queue q in group g, due dueIn from now.
func insertGrouped(t *testing.T, env *testenv.Env, q, g string, status task.Status, dueIn time.Duration) int64 {
	t.Helper()
	res := env.Exec(t, `INSERT INTO task_center (task_code, queue, group_key, payload, status, plan_next_run_at)
		VALUES ('imp', ?, ?, '{}', ?, NOW(3) + INTERVAL ? MICROSECOND)`, q, g, int(status), dueIn.Microseconds())
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

func claimGroups(t *testing.T, st *store.Store, l limit.Limit, max int, groups ...string) store.GroupClaimResult {
	t.Helper()
	keys := make([]string, len(groups))
	for i, g := range groups {
		keys[i] = store.GroupKey("q", "imp", g)
	}
	res, err := st.TaskClaimGroups(t.Context(), store.GroupClaim{Queue: "q", Limit: l, Keys: keys, Max: max})
	require.NoError(t, err)
	return res
}

// end marks a claimed task ended (as a result write would).
func end(t *testing.T, env *testenv.Env, id int64, st task.Status, retryIn time.Duration) {
	t.Helper()
	env.Exec(t, `UPDATE task_center SET status = ?, plan_next_run_at = NOW(3) + INTERVAL ? MICROSECOND WHERE id = ?`,
		int(st), retryIn.Microseconds(), id)
}

func TestClaimGroupsSerial(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	serial := limit.Limit{Serial: limit.SerialOn}
	a := []int64{
		insertGrouped(t, env, "q", "A", task.Pending, 0),
		insertGrouped(t, env, "q", "A", task.Pending, 0),
		insertGrouped(t, env, "q", "A", task.Pending, 0),
	}
	bID := insertGrouped(t, env, "q", "B", task.Pending, 0)
	// A delayed task of group C does not hold back the one due after it.
	cLate := insertGrouped(t, env, "q", "C", task.Pending, time.Hour)
	cNow := insertGrouped(t, env, "q", "C", task.Pending, 0)

	res := claimGroups(t, st, serial, 100, "A", "B", "C")
	require.ElementsMatch(t, []int64{a[0], bID, cNow}, ids(res.Msgs), "the oldest due task of each group")
	for _, m := range res.Msgs {
		require.True(t, m.Grouped)
		require.Equal(t, 1, m.Attempt)
	}
	require.Equal(t, "A", res.Msgs[0].Group)

	// One in flight per group: nothing more.
	res = claimGroups(t, st, serial, 100, "A", "B", "C")
	require.Empty(t, res.Msgs)
	require.Equal(t, 3, res.Full)

	// A fails with a retry due later: it holds its group until it ends.
	end(t, env, a[0], task.Failed, time.Hour)
	end(t, env, bID, task.Succeeded, 0)
	res = claimGroups(t, st, serial, 100, "A", "B")
	require.Empty(t, res.Msgs, "the failed task holds group A")
	require.Equal(t, []string{store.GroupKey("q", "imp", "B")}, res.Gone, "group B has nothing left")

	// Its retry due: it goes again, before the tasks behind it.
	end(t, env, a[0], task.Failed, -time.Second)
	res = claimGroups(t, st, serial, 100, "A")
	require.Equal(t, []int64{a[0]}, ids(res.Msgs))
	require.Equal(t, 2, res.Msgs[0].Attempt)
	// It dies: the next one goes.
	end(t, env, a[0], task.Dead, 0)
	require.Equal(t, []int64{a[1]}, ids(claimGroups(t, st, serial, 100, "A").Msgs))

	// A task recovered from a dead worker (back to pending, due later than
	// the tasks behind it) still goes first: the order is the submit order.
	end(t, env, a[1], task.Pending, 0)
	env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) + INTERVAL 1 SECOND WHERE id = ?`, a[2])
	env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) WHERE id = ?`, a[1])
	require.Equal(t, []int64{a[1]}, ids(claimGroups(t, st, serial, 100, "A").Msgs))
	_ = cLate
}

func TestClaimGroupsSkipFailed(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	skip := limit.Limit{Serial: limit.SerialSkip}
	first := insertGrouped(t, env, "q", "A", task.Pending, 0)
	second := insertGrouped(t, env, "q", "A", task.Pending, 0)
	require.Equal(t, []int64{first}, ids(claimGroups(t, st, skip, 10, "A").Msgs))
	end(t, env, first, task.Failed, time.Hour)
	require.Equal(t, []int64{second}, ids(claimGroups(t, st, skip, 10, "A").Msgs), "a failed task does not hold its group")
	require.Empty(t, claimGroups(t, st, skip, 10, "A").Msgs, "still one at a time")
	end(t, env, second, task.Succeeded, 0)
	end(t, env, first, task.Failed, -time.Second)
	require.Equal(t, []int64{first}, ids(claimGroups(t, st, skip, 10, "A").Msgs), "its retry, when due")
}

// Per-group max_running: each group up to its room, served in turns
// within the room the queue has in Redis.
func TestClaimGroupsPerGroupRoom(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	l := limit.Limit{MaxRunning: 2, Per: limit.PerGroup}
	var big []int64
	for range 50 {
		big = append(big, insertGrouped(t, env, "q", "big", task.Pending, 0))
	}
	small := []int64{insertGrouped(t, env, "q", "small", task.Pending, 0), insertGrouped(t, env, "q", "small", task.Pending, 0)}

	res := claimGroups(t, st, l, 3, "big", "small")
	require.Len(t, res.Msgs, 3)
	require.Contains(t, ids(res.Msgs), small[0], "turns: the small group is served within the first round")
	res = claimGroups(t, st, l, 100, "big", "small")
	require.Equal(t, []int64{small[1]}, ids(res.Msgs), "the big group is at its room")
	require.Equal(t, 1, res.Full)
	res = claimGroups(t, st, l, 100, "big", "small")
	require.Empty(t, res.Msgs, "two of each in flight")
	require.Equal(t, 2, res.Full)
	for _, id := range big[:2] {
		end(t, env, id, task.Succeeded, 0)
	}
	got := ids(claimGroups(t, st, l, 100, "big", "small").Msgs)
	require.Equal(t, big[2:4], got, "oldest first")
}

// Tasks without a group, and other queues' groups, are not the group
// claim's; a paused or full queue's grouped rows are left out of the
// due-time claim and named.
func TestClaimFilterNamesGroups(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	grouped := insertGrouped(t, env, "q", "A", task.Pending, 0)
	plain := insertGrouped(t, env, "q", "", task.Pending, 0)
	other := insertGrouped(t, env, "other", "A", task.Pending, 0)
	f := &store.ClaimFilter{Paused: func(string) bool { return false }, Grouped: func(q string) bool { return q == "q" }}
	msgs, _, err := st.TaskClaimDueFiltered(t.Context(), 100, f)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{plain, other}, ids(msgs))
	require.Equal(t, map[string]map[string]bool{"q": {store.GroupKey("q", "imp", "A"): true}}, f.Groups)
	require.Zero(t, env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status <> 0`, grouped))
}

// Two groups whose names differ only in case are two groups.
func TestClaimGroupsCaseSensitive(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	upper := insertGrouped(t, env, "q", "Tenant", task.Pending, 0)
	lower := insertGrouped(t, env, "q", "tenant", task.Pending, 0)
	res := claimGroups(t, st, limit.Limit{Serial: limit.SerialOn}, 10, "Tenant", "tenant")
	require.ElementsMatch(t, []int64{upper, lower}, ids(res.Msgs))
}

// Schedulers racing for the same groups claim no more than their room.
func TestClaimGroupsRace(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	env := b.env
	for range 40 {
		insertGrouped(t, env, "q", "A", task.Pending, 0)
	}
	l := limit.Limit{MaxRunning: 2, Per: limit.PerGroup}
	got := make(chan int, 8)
	for range 8 {
		go func() {
			keys := []string{store.GroupKey("q", "imp", "A")}
			res, err := st.TaskClaimGroups(t.Context(), store.GroupClaim{Queue: "q", Limit: l, Keys: keys, Max: 100})
			if err != nil {
				t.Error(err)
			}
			got <- len(res.Msgs)
		}()
	}
	total := 0
	for range 8 {
		total += <-got
	}
	require.Equal(t, 2, total)
}

// A group is one group of its queue whatever its tasks' queue column
// holds: a task written with the queue's name (the Go producer) and one
// written with none and routed there (a seed-style INSERT) run one at a
// time in a serial queue, oldest first, however the scheduler learnt of
// the group.
func TestClaimGroupsOneGroupWhateverTheQueueColumn(t *testing.T) {
	t.Parallel()
	st, env := routedTo(t, "q")
	seed1 := insertGrouped(t, env, "", "A", task.Pending, 0)
	named := insertGrouped(t, env, "q", "A", task.Pending, 0)
	seed2 := insertGrouped(t, env, "", "A", task.Pending, 0)
	claim := func(keys ...string) store.GroupClaimResult { return claimSerial(t, st, "q", keys...) }
	named1, seeded := store.GroupKey("q", "imp", "A"), store.GroupKey("", "imp", "A")
	require.NotEqual(t, named1, seeded)

	res := claim(named1) // a scheduler that knows the group by one key
	require.Equal(t, []int64{seed1}, ids(res.Msgs), "the oldest task of the group, written with no queue")
	res = claim(named1, seeded)
	require.Empty(t, res.Msgs, "one in flight holds the group")
	require.Equal(t, 1, res.Full)

	end(t, env, seed1, task.Succeeded, 0)
	require.Equal(t, []int64{named}, ids(claim(seeded).Msgs))
	end(t, env, named, task.Succeeded, 0)
	require.Equal(t, []int64{seed2}, ids(claim(named1, seeded).Msgs))
	end(t, env, seed2, task.Succeeded, 0)
	require.ElementsMatch(t, []string{named1, seeded}, claim(named1, seeded).Gone)
}

// A group key learnt while its code was routed to a queue reads nothing
// there once the code is routed elsewhere: its tasks are the other
// queue's, and the key is forgotten once they end.
func TestClaimGroupsLeaveACodeRoutedElsewhere(t *testing.T) {
	t.Parallel()
	st, env := routedTo(t, "q2")
	id := insertGrouped(t, env, "", "A", task.Pending, 0)
	stale := store.GroupKey("", "imp", "A")
	claim := func(q string) store.GroupClaimResult { return claimSerial(t, st, q, stale) }
	res := claim("q")
	require.Empty(t, res.Msgs, "not q's task")
	require.Empty(t, res.Gone, "kept while the task waits")
	require.Equal(t, []int64{id}, ids(claim("q2").Msgs))
	end(t, env, id, task.Succeeded, 0)
	require.Equal(t, []string{stale}, claim("q").Gone)
}

// routedTo returns a store whose task code imp is routed to queue q.
func routedTo(t *testing.T, q string) (*store.Store, *testenv.Env) {
	t.Helper()
	st, b := setup(t)
	_, err := st.RouteRecord(t.Context(), "n1", map[string]string{"imp": q})
	require.NoError(t, err)
	return st, b.env
}

// claimSerial claims the groups keys of the serial queue q.
func claimSerial(t *testing.T, st *store.Store, q string, keys ...string) store.GroupClaimResult {
	t.Helper()
	res, err := st.TaskClaimGroups(t.Context(), store.GroupClaim{Queue: q, Limit: limit.Limit{Serial: limit.SerialOn}, Keys: keys, Max: 10})
	require.NoError(t, err)
	return res
}
