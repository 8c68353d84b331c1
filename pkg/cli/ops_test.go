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

func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var sub struct{ ID int64 }
	b.okJSON(t, &sub, "submit", "hello", "--delay", "1h")
	id := strconv.FormatInt(sub.ID, 10)
	var c struct {
		Action    string
		Changed   int
		IDs       []int64
		Unchanged []int64
	}
	b.okJSON(t, &c, "run-now", id)
	require.Equal(t, []int64{sub.ID}, c.IDs)

	// delete is destructive: it needs --yes off a terminal.
	requireOneLineError(t, b.run(t, "delete", id), cli.ExitUsage)
	b.okJSON(t, &c, "delete", "--code", "hello", "--yes")
	require.Equal(t, 1, c.Changed)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center`))

	var q struct {
		Action  string
		Queue   string
		Changed bool
		Before  struct{ Paused bool }
		After   struct {
			Paused bool
			Shards int
			Span   int
		}
	}
	b.okJSON(t, &q, "pause", "hello")
	require.True(t, q.Changed)
	require.True(t, q.After.Paused)
	b.okJSON(t, &q, "resume", "hello")
	require.False(t, q.After.Paused)
	b.okJSON(t, &q, "reshard", "hello", "4")
	require.Equal(t, 4, q.After.Shards)
	b.okJSON(t, &q, "reshard", "hello", "2")
	require.Equal(t, 2, q.After.Shards)
	require.Equal(t, 4, q.After.Span, "retired shards stay consumed until emptied")
	requireOneLineError(t, b.run(t, "reshard", "hello", "0"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "reshard", "hello", "x"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "pause"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "pause", "bad queue!"), cli.ExitUsage)

	var audit []struct {
		Action   string
		Affected int
		Actor    string
	}
	b.okJSON(t, &audit, "audit")
	var actions []string
	for _, e := range audit {
		actions = append(actions, e.Action)
		require.NotEmpty(t, e.Actor)
	}
	require.Equal(t, []string{"reshard", "reshard", "resume", "pause", "delete", "run"}, actions)

	var st struct {
		Queues []struct {
			Queue   string
			Shards  int
			Backlog []int64
		}
		Workers []any
	}
	b.okJSON(t, &st, "stats")
	var found bool
	for _, sq := range st.Queues {
		if sq.Queue == "hello" {
			found = true
			require.Equal(t, 2, sq.Shards)
			require.Len(t, sq.Backlog, 4)
		}
	}
	require.True(t, found)
	require.Contains(t, b.ok(t, "stats"), "hello")
}
