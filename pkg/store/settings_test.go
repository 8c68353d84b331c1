package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/store"
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
