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
	f := &store.ClaimFilter{
		Paused: func(string) bool { return false },
		Room: func(q string) int {
			if q == "hello" {
				return room
			}
			return -1
		},
	}
	var claimed []int64
	for range 4 {
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, "c1", 10, f)
		require.NoError(t, err)
		claimed = append(claimed, ids(msgs)...)
	}
	require.Equal(t, []int64{other}, claimed, "three windows of the full queue, then the other queue's task")

	room = 3
	msgs, _, err := st.TaskClaimDueFiltered(b.ctx, "c1", 10, f)
	require.NoError(t, err)
	require.ElementsMatch(t, backlog[:3], ids(msgs), "room again: the oldest rows, from the head")
}

// Rows the claim had no room for in its batch are not walked past: the
// next claim starts at them, even deep behind a paused queue's rows, where
// a read from the head does not reach.
func TestFilteredClaimResumesWhereTheBatchEnded(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	due := -time.Minute
	next := func(code string, priority int) int64 {
		due += time.Millisecond
		return insertRaw(t, b.env, code, priority, task.Pending, due)
	}
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
		msgs, _, err := st.TaskClaimDueFiltered(b.ctx, "c1", 10, f)
		require.NoError(t, err)
		return ids(msgs)
	}
	batchOfY()
	require.Len(t, claim(), 10) // priority 1; the walk passes x's first ten
	require.Empty(t, claim())   // x's next ten
	batchOfY()
	require.Len(t, claim(), 10, "priority 1 fills the batch again, beside x's last three and y's seven")
	require.ElementsMatch(t, behind, claim(), "the rows the batch had no room for")
}
