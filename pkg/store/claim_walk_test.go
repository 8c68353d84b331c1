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
