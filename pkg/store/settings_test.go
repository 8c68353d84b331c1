package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

func TestRoutesRecordAndList(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	changes, err := st.RouteRecord(b.ctx, "node-a", map[string]string{"send_mail": "mail", "report": "report"})
	require.NoError(t, err)
	require.Empty(t, changes)
	// Another node agrees on one and moves the other.
	changes, err = st.RouteRecord(b.ctx, "node-b", map[string]string{"send_mail": "mail", "report": "slow"})
	require.NoError(t, err)
	require.Equal(t, []store.RouteChange{{Code: "report", Queue: "slow", Before: "report", BeforeNode: "node-a"}}, changes)
	routes, err := st.RouteList(b.ctx)
	require.NoError(t, err)
	require.Len(t, routes, 2)
	require.Equal(t, "report", routes[0].Code)
	require.Equal(t, "slow", routes[0].Queue)
	require.Equal(t, "node-b", routes[0].Node)
	require.Equal(t, "send_mail", routes[1].Code)
	require.Equal(t, "mail", routes[1].Queue)
	require.False(t, routes[1].SeenAt.IsZero())
}

func TestSettings(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	_, ok, err := st.SettingGet(b.ctx, store.SettingCronTimezone)
	require.NoError(t, err)
	require.False(t, ok)
	got, err := st.SettingInit(b.ctx, store.SettingCronTimezone, "Asia/Shanghai")
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", got)
	// The first value stays.
	got, err = st.SettingInit(b.ctx, store.SettingCronTimezone, "UTC")
	require.NoError(t, err)
	require.Equal(t, "Asia/Shanghai", got)
	require.NoError(t, st.SettingSet(b.ctx, store.SettingCronTimezone, "UTC"))
	v, ok, err := st.SettingGet(b.ctx, store.SettingCronTimezone)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "UTC", v)
}

// The task center tells a Redis that never had data (a first start) from
// one that lost it, and of the nodes seeing a new data set, one is told it
// was lost.
func TestRedisEpoch(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	seen, err := st.RedisEpoch(b.ctx, "p:", "100")
	require.NoError(t, err)
	require.Equal(t, store.EpochFirst, seen)
	seen, err = st.RedisEpoch(b.ctx, "p:", "100")
	require.NoError(t, err)
	require.Equal(t, store.EpochKnown, seen)
	// Another prefix is another data set.
	seen, err = st.RedisEpoch(b.ctx, "q:", "100")
	require.NoError(t, err)
	require.Equal(t, store.EpochFirst, seen)
	// Redis lost its data: a new epoch.
	seen, err = st.RedisEpoch(b.ctx, "p:", "200")
	require.NoError(t, err)
	require.Equal(t, store.EpochLost, seen)
	seen, err = st.RedisEpoch(b.ctx, "p:", "200")
	require.NoError(t, err)
	require.Equal(t, store.EpochKnown, seen)
}

// A row with no queue goes to the queue recorded for its code, in claims
// (both forms), recovery's scans, depths and task reads; a row with a
// queue of its own keeps it, and a code with no route keeps its name.
func TestRoutedQueue(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	_, err := st.RouteRecord(b.ctx, "n", map[string]string{"send_mail": "mail"})
	require.NoError(t, err)
	seed := insertRaw(t, b.env, "send_mail", 5, task.Pending, -time.Second)
	own := insertRaw(t, b.env, "send_mail", 5, task.Pending, -time.Second)
	b.env.Exec(t, `UPDATE task_center SET queue = 'urgent' WHERE id = ?`, own)
	plain := insertRaw(t, b.env, "other", 5, task.Pending, -time.Second)
	want := map[int64]string{seed: "mail", own: "urgent", plain: "other"}

	depths, _, err := st.QueueDepths(b.ctx)
	require.NoError(t, err)
	for _, q := range want {
		require.EqualValues(t, 1, depths[q].Due, q)
	}
	got, err := st.TaskGet(b.ctx, seed)
	require.NoError(t, err)
	require.Equal(t, "mail", got.Queue)
	list, err := st.TaskList(b.ctx, &store.TaskListParams{Queue: "mail", Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{seed}, []int64{list[0].ID})
	require.Len(t, list, 1)

	// The filtered claim (a queue paused) and the plain one.
	f := &store.ClaimFilter{Paused: func(q string) bool { return q == "urgent" }}
	msgs, _, err := st.TaskClaimDueFiltered(b.ctx, 10, f)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		require.Equal(t, want[m.ID], m.Queue)
	}
	msgs, err = st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "urgent", msgs[0].Queue)

	stuck, err := st.TaskListStuckDispatched(b.ctx, -time.Minute, store.InFlightCursor{}, 10) // dispatched before a minute from now
	require.NoError(t, err)
	require.Len(t, stuck, 3)
	for _, d := range stuck {
		require.Equal(t, want[d.ID], d.Queue)
	}
}

// A route is the one of the exact task code: a row whose code differs in
// case or trailing spaces from a routed one (a seed INSERT's PHP_EXEC)
// goes to its own queue, where no worker takes it for a handler that
// would not run it.
func TestRouteOfTheExactCode(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	_, err := st.RouteRecord(b.ctx, "node-a", map[string]string{"php_exec": "php"})
	require.NoError(t, err)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload) VALUES ('php_exec', '{}'), ('PHP_EXEC', '{}'), ('php_exec ', '{}')`)
	msgs, err := st.TaskClaimDue(b.ctx, 10)
	require.NoError(t, err)
	queues := map[string]string{}
	for _, m := range msgs {
		queues[m.Code] = m.Queue
	}
	require.Equal(t, map[string]string{"php_exec": "php", "PHP_EXEC": "PHP_EXEC", "php_exec ": "php_exec "}, queues)
}
