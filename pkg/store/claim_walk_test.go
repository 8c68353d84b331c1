package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// The filtered claim walks the due rows a window at a time, past those of
// a queue with no room, and reads from the lanes' head every other claim
// only while a queue it left rows of has room: a task of another queue
// due behind a full queue's backlog is reached in as many claims as the
// backlog has windows, and the full queue's oldest rows are the ones
// claimed once it has room again.
func TestFilteredClaimWalksPastAFullQueue(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	var backlog []int64
	for i := range 30 {
		backlog = append(backlog, insertRaw(t, b.env, "hello", 5, task.Pending, -time.Minute+time.Duration(i)*time.Millisecond))
	}
	other := insertRaw(t, b.env, "other", 5, task.Pending, -time.Second)

	room := 0
	f := helloRoom(&room)
	var claimed []int64
	for range 4 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		claimed = append(claimed, ids(msgs)...)
	}
	require.Equal(t, []int64{other}, claimed, "three windows of the full queue, then the other queue's task")

	room = 3
	msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
	require.NoError(t, err)
	require.ElementsMatch(t, backlog[:3], ids(msgs), "room again: the oldest rows, from the head")
}

// Rows the claim had no room for in its batch are not walked past: the
// next claim starts at them, even deep behind a paused queue's rows, where
// a read from the head does not reach.
func TestFilteredClaimResumesWhereTheBatchEnded(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	next := dueInTurn(t, b)
	batchOfY := func() {
		for range 10 {
			next("y", 1)
		}
	}
	for range 23 {
		next("x", 5)
	}
	var behind []int64
	for range 7 {
		behind = append(behind, next("y", 5))
	}
	for range 20 {
		next("x", 5)
	}
	f := &store.ClaimFilter{Paused: func(q string) bool { return q == "x" }}
	claim := func() []int64 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		return ids(msgs)
	}
	batchOfY()
	require.Len(t, claim(), 10) // priority 1; the walk passes x's first ten, its next window twice as long
	batchOfY()
	require.Len(t, claim(), 10, "priority 1 fills the batch again, beside x's next thirteen and y's seven")
	require.ElementsMatch(t, behind, claim(), "the rows the batch had no room for")
}

// The walk's windows double while every row of them is left out, so a
// task due behind a full queue's backlog of 1,000 rows is reached in 7
// claims of 10, not 101; once the queue has room its oldest rows go
// first, read from the head in a window of the claim's size. The windows
// read idx_lane alone, with no row lookup.
func TestFilteredClaimWindowsGrowPastABacklog(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, priority, plan_next_run_at)
		SELECT 'hello', '{}', 5, NOW(3) - INTERVAL 1 MINUTE + INTERVAL seq MICROSECOND FROM seq_1_to_1000`)
	other := insertRaw(t, b.env, "other", 5, task.Pending, -time.Second)

	room := 0
	f := helloRoom(&room)
	claims := 0
	for claims < 20 {
		claims++
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		if len(msgs) > 0 {
			require.Equal(t, []int64{other}, ids(msgs))
			break
		}
	}
	require.Equal(t, 7, claims, "windows of 10, 20, 40 ... 640 reach the 1,001st row")

	room = 3
	msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
	require.NoError(t, err)
	require.Len(t, msgs, 3, "room again: from the head")
	require.Equal(t, 3, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE task_code = 'hello' AND status = 1
		AND id IN (SELECT id FROM (SELECT id FROM task_center WHERE task_code = 'hello' ORDER BY id LIMIT 3) o)`),
		"the oldest three")

	var window []any
	for range 10 {
		window = append(window, "1000-01-01 00:00:00.000", "1000-01-01 00:00:00.000", 0, true, 100)
	}
	rows, err := st.DB().Query("EXPLAIN "+store.ClaimWindowSQL, window...)
	require.NoError(t, err)
	for _, r := range explain(t, rows) {
		if r["table"] == "task_center" {
			require.Contains(t, r["Extra"], "Using index", "a window reads idx_lane alone: %v", r)
		}
	}
}

// helloRoom is a filter that gives queue hello *room and every other queue
// room without bound.
func helloRoom(room *int) *store.ClaimFilter {
	return &store.ClaimFilter{
		Paused: func(string) bool { return false },
		Room: func(q string) int {
			if q == "hello" {
				return *room
			}
			return -1
		},
	}
}

// A full queue's priorities hold while it drains: once it has room, its
// higher-priority rows go before its lower-priority ones, whether the
// claim reads from the lanes' head or from the cursors that walked past
// both backlogs while the queue had none.
func TestFilteredClaimKeepsPriorityWhileAQueueDrains(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	prio := map[int64]int{}
	for i := range 25 {
		due := -time.Minute + time.Duration(i)*time.Millisecond
		prio[insertRaw(t, b.env, "hello", 9, task.Pending, due)] = 9
		prio[insertRaw(t, b.env, "hello", 5, task.Pending, due)] = 5
	}
	room := 0
	f := helloRoom(&room)
	claim := func() []int64 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		return ids(msgs)
	}
	for range 3 {
		require.Empty(t, claim(), "no room: the cursors walk past both backlogs")
	}
	room = 2
	left5 := 25
	for i := 0; i < 60 && left5 > 0; i++ {
		for _, id := range claim() {
			if prio[id] == 9 {
				require.Zero(t, left5, "claim %d took priority-9 task %d while %d of priority 5 wait", i, id, left5)
			}
			if prio[id] == 5 {
				left5--
			}
		}
	}
	require.Zero(t, left5, "every priority-5 task claimed")
}

// Rows of a grouped queue that wait for their group's turn hold back
// nothing: the queue's lower-priority rows outside any group are still
// claimed while it drains, however often the cursors pass the grouped
// rows.
func TestFilteredClaimPriorityIgnoresGroupedRows(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	var loose []int64
	for i := range 25 {
		due := -time.Minute + time.Duration(i)*time.Millisecond
		g := insertRaw(t, b.env, "hello", 1, task.Pending, due)
		b.env.Exec(t, `UPDATE task_center SET group_key = 'tenant-1' WHERE id = ?`, g)
		loose = append(loose, insertRaw(t, b.env, "hello", 5, task.Pending, due))
	}
	room := 0
	f := helloRoom(&room)
	f.Grouped = func(q string) bool { return q == "hello" }
	claim := func() []int64 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		return ids(msgs)
	}
	for range 3 {
		require.Empty(t, claim())
	}
	room = 2
	var claimed []int64
	for i := 0; i < 60 && len(claimed) < len(loose); i++ {
		claimed = append(claimed, claim()...)
	}
	require.ElementsMatch(t, loose, claimed, "every row outside a group, and none of the grouped ones (their groups claim them)")
}

// Rows the walk passed deeper in their lane than a head read reaches
// (behind more than a claim's worth of another full queue's rows) hold
// back their queue's lower priorities for a bounded time only: they wait
// for the windows' reset, the lower priorities do not wait with them.
func TestFilteredClaimPriorityHoldIsBounded(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	next := dueInTurn(t, b)
	for range 30 {
		next("other", 5)
	}
	for range 5 {
		next("hello", 5)
	}
	for range 100 {
		next("other", 5)
	}
	var low []int64
	for range 5 {
		low = append(low, next("hello", 9))
	}
	room := 0
	now := time.Now()
	f := &store.ClaimFilter{
		Paused: func(string) bool { return false },
		Room: func(q string) int {
			if q == "hello" {
				return room
			}
			return 0 // full for good
		},
		Now: func() time.Time { return now },
	}
	claim := func() []int64 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
		require.NoError(t, err)
		return ids(msgs)
	}
	for range 5 {
		require.Empty(t, claim(), "no room: the walk passes hello's priority-5 rows among other's")
	}
	room = 2
	for range 6 {
		require.Empty(t, claim(), "hello's priority 9 waits behind its priority-5 rows")
	}
	now = now.Add(3 * time.Second)
	var got []int64
	for range 2 {
		got = append(got, claim()...)
	}
	require.Len(t, got, 4, "two claims with room for two each")
	require.Subset(t, low, got, "after a while, hello's priority-9 rows run")
}

// dueInTurn inserts pending tasks each due a millisecond after the one
// before, starting a minute ago.
func dueInTurn(t *testing.T, b *testBundle) func(code string, priority int) int64 {
	due := -time.Minute
	return func(code string, priority int) int64 {
		due += time.Millisecond
		return insertRaw(t, b.env, code, priority, task.Pending, due)
	}
}
