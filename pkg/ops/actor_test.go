package ops_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/ops"
	"github.com/taskd/taskd/pkg/store"
	"github.com/taskd/taskd/pkg/task"
)

// Actions taken As an SSH key's session are audited with the key's
// comment, the client's address and the key's fingerprint; the Ops they
// were derived from keeps its own actor; Changed hears of every action
// that changed something, and of no other.
func TestActionsAttributedToKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dead := b.submit(t, "send")
	b.setStatus(t, dead, task.Dead)

	var changes int
	b.ops.Changed = func() { changes++ }
	key := store.Actor{User: "alice@laptop", Origin: "ssh 203.0.113.7:51234", Key: "SHA256:0m6dBRO0k4M1l6Wc6Nf1X0lwV2oHwU2sN1dc5KbJ3Xc"}
	as := b.ops.As(key)
	require.Equal(t, key, as.Actor())
	require.NotEqual(t, key, b.ops.Actor(), "As leaves the original alone")

	c, err := as.Retry(ctx, ops.Target{IDs: []int64{dead}})
	require.NoError(t, err)
	require.Equal(t, 1, c.Changed)
	_, err = as.Retry(ctx, ops.Target{IDs: []int64{dead}}) // pending now: nothing to retry
	require.NoError(t, err)
	q, err := as.Pause(ctx, "send")
	require.NoError(t, err)
	require.Equal(t, 1, q.Changed)
	_, err = b.ops.Pause(ctx, "send") // already paused
	require.NoError(t, err)
	require.Equal(t, 2, changes, "one retry and one pause changed something")

	es, err := b.env.Store.AuditList(ctx, 0, 100)
	require.NoError(t, err)
	byKey := map[string]int{}
	for _, e := range es {
		if e.Key == "" {
			require.NotEqual(t, key.User, e.Actor, "row %d: the CLI's actor has no key", e.ID)
			continue
		}
		require.Equal(t, key, store.Actor{User: e.Actor, Origin: e.Origin, Key: e.Key}, "row %d", e.ID)
		byKey[e.Action] += e.Affected
	}
	require.Equal(t, map[string]int{"retry": 1, "pause": 1}, byKey)
}
