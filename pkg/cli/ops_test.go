package cli_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
)

func TestKillAndRetryCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var sub struct{ ID int64 }
	b.okJSON(t, &sub, "submit", "hello")
	id := strconv.FormatInt(sub.ID, 10)

	// Not a terminal and no --yes: refused, nothing changed.
	r := b.run(t, "kill", id)
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "--yes")
	require.Equal(t, 0, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub.ID))

	var c struct {
		Action    string
		Requested int
		Changed   int
		IDs       []int64
	}
	b.okJSON(t, &c, "kill", id, "--yes")
	require.Equal(t, "kill", c.Action)
	require.Equal(t, []int64{sub.ID}, c.IDs)
	require.Equal(t, 6, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub.ID))

	// Retry by id needs no confirmation; by filter it does.
	requireOneLineError(t, b.run(t, "retry", "--status", "cancelled"), cli.ExitUsage)
	b.okJSON(t, &c, "retry", id)
	require.Equal(t, 1, c.Changed)
	require.Equal(t, 0, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub.ID))
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_audit`), "one audit row per action")

	// Bad input.
	requireOneLineError(t, b.run(t, "retry"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "retry", "x1"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "retry", id, "--status", "dead"), cli.ExitUsage)
}
