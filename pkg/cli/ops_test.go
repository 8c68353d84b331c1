package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/broker"
	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/task"
	"github.com/taskd/taskd/pkg/testenv"
)

// submitID submits a task and returns its id, read from the JSON result.
func (b *testBundle) submitID(t *testing.T, args ...string) int64 {
	t.Helper()
	var c change
	b.okJSON(t, &c, append([]string{"submit"}, args...)...)
	require.Len(t, c.IDs, 1)
	return c.IDs[0]
}

// runDevNull runs the command line with standard input from /dev/null: a
// character device, but not a terminal.
func runDevNull(t *testing.T, cfgPath string, args ...string) result {
	t.Helper()
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.Execute(ctx, append([]string{"--config", cfgPath}, args...), &stdout, &stderr, null)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (b *testBundle) audits(t *testing.T) int {
	return b.env.Count(t, `SELECT COUNT(*) FROM task_audit`)
}

func TestKillAndRetryCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sub := b.submitID(t, "hello", "--delay", "1h") // pending
	id := strconv.FormatInt(sub, 10)

	// Not a terminal and no --yes: refused, nothing changed.
	r := b.run(t, "kill", id)
	requireOneLineError(t, r, cli.ExitUsage)
	require.Contains(t, r.stderr, "--yes")
	require.Equal(t, 0, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub))

	var c change
	b.okJSON(t, &c, "kill", id, "--yes")
	require.Equal(t, "kill", c.Action)
	require.Equal(t, []int64{sub}, c.IDs)
	require.Equal(t, 6, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub))

	requireOneLineError(t, b.run(t, "retry", "--status", "cancelled"), cli.ExitUsage)
	b.okJSON(t, &c, "retry", id, "--yes")
	require.Equal(t, 1, c.Changed)
	require.Equal(t, 0, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, sub))
	require.Equal(t, 2, b.audits(t), "one audit row per action")

	// Bad input.
	requireOneLineError(t, b.run(t, "retry"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "retry", "x1"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "retry", id, "--status", "dead"), cli.ExitUsage)
}

func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sub := b.submitID(t, "hello", "--delay", "1h")
	id := strconv.FormatInt(sub, 10)
	var c change
	b.okJSON(t, &c, "run-now", id, "--yes")
	require.Equal(t, []int64{sub}, c.IDs)

	requireOneLineError(t, b.run(t, "delete", id), cli.ExitUsage)
	b.okJSON(t, &c, "delete", "--code", "hello", "--yes")
	require.Equal(t, 1, c.Changed)
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center`))

	b.okJSON(t, &c, "pause", "hello", "--yes")
	require.Equal(t, "pause", c.Action)
	require.Equal(t, 1, c.Changed)
	require.Equal(t, "hello", c.Queue.Name)
	require.True(t, c.Queue.After.Paused)
	b.okJSON(t, &c, "resume", "hello", "--yes")
	require.False(t, c.Queue.After.Paused)
	b.okJSON(t, &c, "reshard", "hello", "4", "--yes")
	require.Equal(t, 4, c.Queue.After.Shards)
	b.okJSON(t, &c, "reshard", "hello", "2", "--yes")
	require.Equal(t, 2, c.Queue.After.Shards)
	require.Equal(t, 4, c.Queue.After.Span, "retired shards stay consumed until emptied")
	require.Equal(t, "resume: queue hello unchanged (running, 2 shards)\n", b.ok(t, "resume", "hello", "--yes"))
	requireOneLineError(t, b.run(t, "reshard", "hello", "0", "--yes"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "reshard", "hello", "x", "--yes"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "pause", "--yes"), cli.ExitUsage)
	requireOneLineError(t, b.run(t, "pause", "bad queue!", "--yes"), cli.ExitUsage)

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
	require.Equal(t, []string{"resume", "reshard", "reshard", "resume", "pause", "delete", "run"}, actions)
	var ids []struct{ ID int64 }
	b.okJSON(t, &ids, "audit", "--limit", "2")
	r := b.run(t, "audit", "--limit", "2")
	require.Equal(t, cli.ExitOK, r.code)
	require.Equal(t, fmt.Sprintf("taskd: 2 rows shown, more may match: the next page is --before %d (or --limit up to 10000)\n", ids[1].ID), r.stderr)
	require.Empty(t, b.run(t, "audit").stderr, "all of them")
	r = b.run(t, "audit", "--limit", "1")
	require.Equal(t, fmt.Sprintf("taskd: 1 row shown, more may match: the next page is --before %d (or --limit up to 10000)\n", ids[0].ID), r.stderr)

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

	// Named queues: those alone.
	require.Greater(t, len(st.Queues), 1)
	var one struct{ Queues []struct{ Queue string } }
	b.okJSON(t, &one, "stats", "hello")
	require.Len(t, one.Queues, 1)
	require.Equal(t, "hello", one.Queues[0].Queue)
}

// Every command that changes state takes --yes; it asks only on a
// terminal, and elsewhere (a pipe, /dev/null) refuses with exit 2 without
// changing anything.
func TestEveryStateChangeTakesYes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pending := strconv.FormatInt(b.submitID(t, "hello", "--delay", "1h"), 10)
	b.ok(t, "cron", "add", "report", "@hourly")
	periodic := b.env.Count(t, `SELECT id FROM task_center WHERE task_type = 1`)
	audits := b.audits(t)

	for _, args := range [][]string{
		{"retry", pending}, {"run-now", pending}, {"delete", pending}, {"kill", pending},
		{"disable", strconv.Itoa(periodic)}, {"enable", strconv.Itoa(periodic)},
		{"retry", "--status", "dead"}, {"kill", "--queue", "hello"},
		{"pause", "hello"}, {"resume", "hello"}, {"reshard", "hello", "4"},
		{"cron", "remove", "report"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			for _, r := range []result{runDevNull(t, b.cfgPath, args...), b.run(t, args...)} {
				requireOneLineError(t, r, cli.ExitUsage)
				require.Contains(t, r.stderr, "refusing without --yes (standard input is not a terminal)")
			}
		})
	}
	require.Equal(t, audits, b.audits(t), "nothing changed, nothing audited")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, pending))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_queue`))
	require.Equal(t, 2, b.rows(t))

	// With --yes each goes ahead; commands that only create accept it too.
	for _, args := range [][]string{
		{"submit", "hello", "--yes"}, {"cron", "add", "hello", "@daily", "--yes"}, {"migrate", "--yes"},
		{"run-now", pending, "--yes"}, {"retry", pending, "--yes"}, {"kill", pending, "--yes"},
		{"disable", strconv.Itoa(periodic), "--yes"}, {"enable", strconv.Itoa(periodic), "--yes"},
		{"pause", "hello", "-y"}, {"resume", "hello", "--yes"}, {"reshard", "hello", "4", "--yes"},
		{"cron", "remove", "report", "--yes"},
	} {
		r := runDevNull(t, b.cfgPath, args...)
		require.Equal(t, cli.ExitOK, r.code, "taskd %v: %s", args, r.stderr)
	}
}

// Queues whose names differ only in case are two queues: after a pause
// and resume of HELLO (made by a producer's stray rows), a pause of hello
// pauses hello, and HELLO stays as it was; each counts its own tasks.
func TestPauseTellsQueuesApartByCase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.env.Exec(t, `INSERT INTO task_center (task_code, payload, plan_next_run_at) VALUES
		('HELLO', '{}', NOW(3) + INTERVAL 1 HOUR), ('HELLO', '{}', NOW(3) + INTERVAL 1 HOUR)`)
	b.submit(t, "hello", "--delay", "1h")
	b.ok(t, "pause", "HELLO", "--yes")
	b.ok(t, "resume", "HELLO", "--yes")
	b.ok(t, "pause", "hello", "--yes")
	var st struct {
		Queues []struct {
			Queue   string
			Paused  bool
			Pending int
		}
	}
	b.okJSON(t, &st, "stats")
	type state struct {
		paused  bool
		pending int
	}
	got := map[string]state{}
	for _, q := range st.Queues {
		got[q.Queue] = state{q.Paused, q.Pending}
	}
	require.Equal(t, state{true, 1}, got["hello"])
	require.Equal(t, state{false, 2}, got["HELLO"])
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_queue WHERE name = BINARY 'hello' AND paused`))
}

// An unknown task or queue is exit 1 and writes nothing: no change, no
// audit row, no phantom queue.
func TestUnknownTaskOrQueueWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := strconv.FormatInt(b.submitID(t, "hello", "--delay", "1h"), 10) // pending
	audits := b.audits(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retry", "999999999"}, "task 999999999 not found"},
		{[]string{"kill", "999999999", "998"}, "tasks 999999999, 998 not found"},
		{[]string{"kill", id, "999999999"}, "task 999999999 not found"},
		{[]string{"run-now", "999999999"}, "task 999999999 not found"},
		{[]string{"delete", "999999999"}, "task 999999999 not found"},
		{[]string{"enable", "999999999"}, "task 999999999 not found"},
		{[]string{"disable", "999999999"}, "task 999999999 not found"},
		{[]string{"retry", "--queue", "no_such_queue"}, `unknown queue "no_such_queue"`},
		{[]string{"pause", "no_such_queue"}, `unknown queue "no_such_queue"`},
		{[]string{"resume", "no_such_queue"}, `unknown queue "no_such_queue"`},
		{[]string{"reshard", "no_such_queue", "4"}, `unknown queue "no_such_queue"`},
		{[]string{"cron", "remove", "nosuch"}, `unknown task code "nosuch"`},
		{[]string{"cron", "remove", "helo"}, `unknown task code "helo" (did you mean "hello"?)`},
		{[]string{"retry", "--code", "no_such_code"}, `unknown task code "no_such_code"`},
		{[]string{"kill", "--code", "no_such_code"}, `unknown task code "no_such_code"`},
		{[]string{"run-now", "--code", "no_such_code"}, `unknown task code "no_such_code"`},
		{[]string{"delete", "--code", "no_such_code"}, `unknown task code "no_such_code"`},
		{[]string{"pause", "helo"}, `unknown queue "helo" (did you mean "hello"?)`},
		{[]string{"retry", "--code", "helo"}, `unknown task code "helo" (did you mean "hello"?)`},
	} {
		r := b.run(t, append(tc.args, "--yes")...)
		requireOneLineError(t, r, cli.ExitFailure)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	r := b.run(t, "stats", "hello", "no_such_queue")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Contains(t, r.stderr, `unknown queue "no_such_queue"`)
	require.Equal(t, audits, b.audits(t))
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_queue`))
	require.Equal(t, 0, b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, id), "the known task of a half-unknown kill is left alone")
	var st struct{ Queues []struct{ Queue string } }
	b.okJSON(t, &st, "stats")
	for _, q := range st.Queues {
		require.NotEqual(t, "no_such_queue", q.Queue)
	}

	// A queue no handler configures is known while a task is in it.
	b.ok(t, "submit", "hello", "--queue", "side", "--yes")
	b.ok(t, "pause", "side", "--yes")
	// A code with a handler but no task matches nothing, which is no error.
	require.Contains(t, b.ok(t, "delete", "--code", "report", "--yes"), "delete: 0 of 0 tasks deleted")
}

// "0 of N changed" says, per task, why not.
func TestUnchangedSaysWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done, dead, oneoff := b.submitID(t, "hello"), b.submitID(t, "hello"), b.submitID(t, "hello")
	b.env.Exec(t, `UPDATE task_center SET status = 3 WHERE id = ?`, done)
	b.env.Exec(t, `UPDATE task_center SET status = 5 WHERE id = ?`, dead)

	var c change
	b.okJSON(t, &c, "retry", strconv.FormatInt(done, 10), strconv.FormatInt(dead, 10), "--yes")
	require.Equal(t, []int64{dead}, c.IDs)
	require.Equal(t, []skipped{{ID: done, Status: "succeeded", Reason: "retry applies to dead, failed and cancelled tasks"}}, c.Unchanged)

	out := b.ok(t, "retry", strconv.FormatInt(done, 10), "--yes")
	require.Equal(t, "retry: 0 of 1 task retried; "+strconv.FormatInt(done, 10)+
		" not changed, succeeded: retry applies to dead, failed and cancelled tasks\n", out)
	out = b.ok(t, "enable", strconv.FormatInt(oneoff, 10), "--yes")
	require.Contains(t, out, "not periodic; enable applies to periodic tasks only")
	out = b.ok(t, "kill", strconv.FormatInt(done, 10), strconv.FormatInt(oneoff, 10), "--yes")
	require.Equal(t, "kill: 1 of 2 tasks killed ("+strconv.FormatInt(oneoff, 10)+"); "+strconv.FormatInt(done, 10)+
		" not changed, succeeded: kill applies to pending, dispatched, running and failed tasks\n", out)
}

// --at more than a minute in the past is a typo until proven otherwise.
func TestSubmitAtInThePast(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "submit", "hello", "--at", "2020-01-01 00:00:00")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Regexp(t, `--at 2020-01-01 00:00:00 is \d+ days in the past`, r.stderr)
	require.Contains(t, r.stderr, "in the past (pass --allow-past")
	require.Zero(t, b.rows(t))

	id := b.submitID(t, "hello", "--at", "2020-01-01 00:00:00", "--allow-past")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND plan_next_run_at <= NOW(3)`, id))
	// A time typed for "now" is a little late when it arrives: accepted.
	b.submitID(t, "hello", "--at", time.Now().Add(-30*time.Second).Format(time.RFC3339))
}

// Every command on an unmigrated or outdated task center says to run
// taskd migrate, not the server's "table doesn't exist".
func TestUnmigratedSchemaSaysMigrate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, stmt := range []string{`DROP TABLE task_audit`, `DROP TABLE task_run`, `DROP TABLE task_center`, `DROP TABLE task_queue`, `DROP TABLE taskd_schema`} {
		b.env.Exec(t, stmt)
	}
	commands := [][]string{
		{"list"}, {"show", "1"}, {"stats"}, {"audit"}, {"submit", "hello"}, {"cron", "add", "hello", "@daily"},
		{"cron", "list"}, {"retry", "1", "--yes"}, {"kill", "1", "--yes"}, {"pause", "hello", "--yes"},
	}
	for _, args := range commands {
		r := b.run(t, args...)
		requireOneLineError(t, r, cli.ExitFailure)
		require.Equal(t, "taskd: the task center has no schema: run `taskd migrate`\n", r.stderr, args)
	}
	b.ok(t, "migrate")
	b.env.UnapplyLatest(t)
	r := b.run(t, "list")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Regexp(t, "older than this taskd's \\d+: run `taskd migrate`", r.stderr)
	b.ok(t, "migrate")
	// A newer taskd's ordinary step: this one runs on it (a rolling upgrade).
	b.env.Exec(t, `INSERT INTO taskd_schema (version, name) VALUES (999, 'from the future')`)
	b.ok(t, "list")
	require.Contains(t, b.ok(t, "migrate"), "migrations of a newer taskd [999], none a contract step")
	// A newer taskd's contract step: this one may use what it dropped.
	b.env.Exec(t, `UPDATE taskd_schema SET contract = 1 WHERE version = 999`)
	for _, args := range [][]string{{"list"}, {"migrate"}} {
		r = b.run(t, args...)
		requireOneLineError(t, r, cli.ExitFailure)
		require.Contains(t, r.stderr, "version 999, newer than this taskd's")
		require.Contains(t, r.stderr, "contract step 999 (from the future)")
	}
}

// Every action prints one JSON shape.
func TestOneResultShape(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := strconv.FormatInt(b.submitID(t, "hello"), 10)
	keys := regexp.MustCompile(`(?m)^  "([a-z_]+)":`)
	for _, args := range [][]string{
		{"submit", "hello"}, {"cron", "add", "hello", "@daily"}, {"retry", id, "--yes"}, {"kill", id, "--yes"},
		{"pause", "hello", "--yes"}, {"reshard", "hello", "2", "--yes"}, {"cron", "remove", "hello", "--yes"},
	} {
		out := b.ok(t, append(args, "-o", "json")...)
		var got []string
		for _, m := range keys.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		require.Subset(t, got, []string{"action", "requested", "changed", "ids", "unchanged"}, "%v: %s", args, out)
		require.NotContains(t, out, "0001-01-01", args)
	}
	// The audit rows too: no zero time for a queue never changed before,
	// and ids a list when nothing changed (the retry of a pending task).
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE detail LIKE '%0001-01-01%' OR detail LIKE '%"ids":null%'`))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE affected = 0 AND detail LIKE '%"ids":[]%'`))
}

// Text output has one time format, the node next to each worker, plurals,
// and the backlog as one number.
func TestTextOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submitID(t, "hello", "--delay", "1h")
	b.ok(t, "cron", "add", "report", "0 2 * * *")
	b.env.Exec(t, `UPDATE task_center SET worker_id = 'vm-1-42-7b2c' WHERE id = ?`, id)
	b.env.Exec(t, `INSERT INTO task_run (task_id, attempt, task_code, worker_id, node, queue, outcome, started_at, finished_at, duration_ms)
		VALUES (?, 1, 'hello', 'vm-1-42-7b2c', 'web-1', 'hello', 'failed', NOW(3), NOW(3), 12)`, id)
	b.ok(t, "pause", "hello", "--yes")

	local := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d[:.\dZ+-]*`)
	for _, args := range [][]string{{"list"}, {"show", strconv.FormatInt(id, 10)}, {"cron", "list"}, {"audit"}, {"cron", "add", "report", "0 3 * * *"}} {
		out := b.ok(t, args...)
		for _, s := range stamp.FindAllString(out, -1) {
			require.Regexp(t, "^"+local+"$", s, "taskd %v: %s", args, out)
		}
	}
	show := b.ok(t, "show", strconv.FormatInt(id, 10))
	require.Regexp(t, `worker\s+vm-1-42-7b2c \(node web-1\)`, show)
	require.Regexp(t, `NODE\s+WORKER`, show)

	stats := b.ok(t, "stats")
	require.Regexp(t, `(?m)^hello\s+1\s+0\s+0\s+0\s+0\s+0\s+0\s+.*PAUSED, 1 shard\s`, stats)
	require.Regexp(t, `(?m)^hello(\s+\d+){10}\s+\S+\s+-\s+PAUSED`, stats, "OLDEST DUE of a queue with nothing due")
	require.Contains(t, stats, "WORKER  NODE")
	require.NotContains(t, stats, "1 shards")
	require.NotContains(t, stats, "waiting", "nothing is due")
	require.NotContains(t, b.ok(t, "retry", strconv.FormatInt(id, 10), "--yes"), "1 tasks")

	// A task due now, in a queue no worker takes from.
	b.submitID(t, "report")
	stats = b.ok(t, "stats")
	require.Contains(t, stats, "\nwaiting 1 (DUE and BACKLOG); no time to drain: no live worker takes from report (NO CONSUMER: no running node has its handler)\n",
		"says which queue stands still, and why")
	require.Regexp(t, `(?m)^report\s+1\s.*\s1\s.*NO CONSUMER, 1 shard\s+0$`, stats, "dispatched at submit: in Redis, taken by no one")
	require.Regexp(t, `(?m)^hello\s.*\sPAUSED, 1 shard\s`, stats, "a paused queue has no consumer on purpose")
	// One due in the paused queue is not waiting: it is held, and said so.
	b.submitID(t, "hello")
	stats = b.ok(t, "stats")
	require.Contains(t, stats, "\nwaiting 1 (DUE and BACKLOG)")
	require.Contains(t, stats, "\nheld 1 in paused queue (hello); taskd resume QUEUE lets them run\n")

	// A worker whose results the task center does not take (a full disk):
	// its queues stand still, and stats says why.
	require.NoError(t, b.env.Broker.Beat(context.Background(), &broker.Heartbeat{ID: "w-full", Node: "web-2", Queues: []string{"hello"},
		ResultsWaitingMS: 45_000}, time.Minute))
	require.Contains(t, b.ok(t, "stats"), "\nwarning: worker w-full has results waiting 45s to be written: the task center refuses them or does not answer "+
		"(its node's log says why); it takes no new work until they are written\n")
	require.Contains(t, b.ok(t, "stats", "-o", "json"), `"results_stuck_seconds": 45`)
	// On a terminal of 80 columns the long lines wrap between words.
	var narrow, stderr bytes.Buffer
	a := &cli.App{Stdout: &narrow, Stderr: &stderr, Stdin: strings.NewReader(""), Width: 80}
	require.Equal(t, cli.ExitOK, a.Execute(context.Background(), []string{"--config", b.cfgPath, "stats"}), stderr.String())
	for _, l := range strings.Split(narrow.String(), "\n") {
		require.LessOrEqual(t, uniseg.StringWidth(l), 80, "%q", l)
	}
	require.Contains(t, narrow.String(), "\nwarning: worker w-full has results waiting 45s to be written: the task center\n         refuses them")
	require.Contains(t, narrow.String(), "\nwaiting 1 (DUE and BACKLOG); no time to drain: no live worker takes from report\n(NO CONSUMER")
}

// With Redis down an operator can still act on what the task center
// holds: the audit log, retries, pauses. What needs Redis (stopping a
// running task, stats) fails saying why, and the rest of a kill is done.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead, running, waiting := b.submitID(t, "hello"), b.submitID(t, "hello"), b.submitID(t, "hello", "--delay", "1h")
	b.env.Exec(t, `UPDATE task_center SET status = 5, attempt = 1 WHERE id = ?`, dead)
	b.env.Exec(t, `UPDATE task_center SET status = 2, attempt = 1, worker_id = 'w1' WHERE id = ?`, running)
	down := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: \"127.0.0.1:1\"\n  prefix: %q\n%s",
		b.env.DSN, b.env.Prefix, handlersYAML))
	status := func(id int64) int {
		return b.env.Count(t, `SELECT status FROM task_center WHERE id = ?`, id)
	}
	warned := func(r result, args ...string) {
		t.Helper()
		require.Equal(t, cli.ExitOK, r.code, "taskd %v: stderr %q", args, r.stderr)
		require.Regexp(t, `^taskd: warning: connect to redis 127\.0\.0\.1:1: .*; going on with the task center alone\n$`, r.stderr)
	}
	for _, args := range [][]string{
		{"retry", itoa(dead), "--yes"}, {"pause", "hello", "--yes"}, {"resume", "hello", "--yes"},
	} {
		warned(runCLI(t, down, "", args...), args...)
	}
	require.Zero(t, status(dead), "retried")
	r := runCLI(t, down, "", "audit")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr, "the audit log is the task center's alone")
	require.Equal(t, 4, strings.Count(r.stdout, "\n"), "a header and the three actions: %s", r.stdout)

	r = runCLI(t, down, "", "kill", itoa(running), itoa(waiting), "--yes")
	require.Equal(t, cli.ExitPartial, r.code, "part of it done: %s", r.stderr)
	require.Equal(t, fmt.Sprintf("kill: 1 of 2 tasks killed (%d)\n", waiting), r.stdout, "what it did, as on success")
	require.Contains(t, r.stderr, fmt.Sprintf("taskd: kill running 1 task (%d): no connection to Redis", running))
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: no warning that it goes on, before the error that it could not: %q", r.stderr)
	require.Equal(t, 2, status(running), "a running task is not cancelled behind its worker's back")
	require.Equal(t, 6, status(waiting), "the waiting task is killed")

	// stats shows what the task center knows (what waits, what is dead),
	// with ? for what only Redis knows, and fails after it with one line:
	// it used to show nothing at all.
	partial := func(r result) {
		t.Helper()
		require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
		require.Regexp(t, `^taskd: connect to redis 127\.0\.0\.1:1: .*: the backlog in Redis, throughput and workers are not shown \(\?\)\n$`, r.stderr)
	}
	r = runCLI(t, down, "", "stats")
	partial(r)
	require.Regexp(t, `(?m)^hello +1 +1 +0 +1 +0 +0 +1 +\? +\? +\? +\? `, r.stdout, "the retried task pending and due, the running one, the killed one")
	require.Contains(t, r.stdout, "WORKERS: ? (Redis did not answer)")
	r = runCLI(t, down, "", "stats", "-o", "json")
	partial(r)
	var st struct {
		Queues []struct {
			Queue   string `json:"queue"`
			Pending int    `json:"pending"`
		} `json:"queues"`
		RedisError string `json:"redis_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Contains(t, st.RedisError, "127.0.0.1:1")
	require.Contains(t, st.Queues, struct {
		Queue   string `json:"queue"`
		Pending int    `json:"pending"`
	}{"hello", 1})
}

// With MySQL down, stats still shows what Redis holds (each queue's
// backlog, the workers and the tasks their heartbeats run), with ? for
// the task center's counts, and fails after it with one line; with both
// down it fails as before. A password the task center refuses is not an
// outage: it fails at once.
func TestStatsWithMySQLDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, b.env.Broker.Beat(ctx, &broker.Heartbeat{ID: "w-1", Node: "web-1", Host: "h", PID: 7, Queues: []string{"hello"},
		Busy: 1, Slots: []broker.Slot{{Queue: "hello", TaskID: 41, Code: "hello", Since: time.Now()}}, ResultsWaitingMS: 30_000}, time.Minute))
	_, err := b.env.Broker.Push(ctx, []*task.Message{{ID: 42, Attempt: 1, Code: "hello", Queue: "hello", Payload: json.RawMessage(`{}`)},
		{ID: 43, Attempt: 1, Code: "hello", Queue: "hello", Payload: json.RawMessage(`{}`)}})
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	cfg.Addr = "127.0.0.1:1"
	down := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s",
		cfg.FormatDSN(), b.env.RedisAddr, b.env.Prefix, handlersYAML))
	r := runCLI(t, down, "", "stats")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `^taskd: MySQL: connect to mysql 127\.0\.0\.1:1: .*: the task center's counts are not shown \(\?\)\n$`, r.stderr)
	require.Regexp(t, `(?m)^hello +\? +\? +\? +\? +\? +\? +\? +2 +0 +0 +- +\? +paused \?, 1 shard +1$`, r.stdout)
	require.Regexp(t, `(?m)^w-1 +web-1 +h +7 +.* 1 +41 +hello$`, r.stdout)
	require.Contains(t, r.stdout, "warning: worker w-1 has results waiting 30s to be written")
	r = runCLI(t, down, "", "stats", "-o", "json")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	var st struct {
		MySQLError string `json:"mysql_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Contains(t, st.MySQLError, "127.0.0.1:1")
	r = runCLI(t, down, "", "stats", "hello")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `(?m)^hello +\? .* 2 +0 +0 `, r.stdout)
	// A typo prints no empty table: the queue is unknown to all that answered.
	r = runCLI(t, down, "", "stats", "helo")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Empty(t, r.stdout)
	require.Regexp(t, `^taskd: unknown queue "helo" \(did you mean "hello"\?\): .* \(MySQL: connect to mysql 127\.0\.0\.1:1: .*: whether a task names it is not known\)\n$`, r.stderr)

	both := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: \"127.0.0.1:1\"\n%s", cfg.FormatDSN(), handlersYAML))
	r = runCLI(t, both, "", "stats")
	require.Equal(t, cli.ExitFailure, r.code)
	require.Empty(t, r.stdout)
	require.Regexp(t, `^taskd: connect to mysql 127\.0\.0\.1:1: .*\n$`, r.stderr)
	require.Contains(t, r.stderr, "; Redis: ", "both named")

	cfg, err = mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	cfg.Passwd = "wrong"
	refused := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s",
		cfg.FormatDSN(), b.env.RedisAddr, b.env.Prefix, handlersYAML))
	r = runCLI(t, refused, "", "stats")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Empty(t, r.stdout)
	require.Regexp(t, `^taskd: mysql 127\.0\.0\.1:\d+: Access denied .*: fix the user or password in mysql.dsn \(from `+regexp.QuoteMeta(refused)+`\)\n$`, r.stderr)
}

// A wrong credential is named with where it came from: a variable in the
// daemon's environment (Supervisor's environment=, a systemd unit)
// overrides the file an operator keeps correcting. t.Setenv: not parallel.
func TestRefusedCredentialsNameTheirSource(t *testing.T) {
	b := setup(t)
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	cfg.Passwd = "wrong"
	t.Setenv("TASKD_MYSQL_DSN", cfg.FormatDSN())
	r := b.run(t, "stats")
	require.Equal(t, cli.ExitFailure, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `: fix the user or password in mysql.dsn \(from environment variable TASKD_MYSQL_DSN\)\n$`, r.stderr)

	r = b.run(t, "--mysql-dsn", cfg.FormatDSN(), "stats")
	require.Regexp(t, `: fix the user or password in mysql.dsn \(from flag --mysql-dsn\)\n$`, r.stderr)
}

// With mysql.read_dsn set, the commands that only read (stats, list,
// show, audit, cron list) read the replica and nothing of the primary:
// they answer while a failover leaves the primary unreachable (stats
// checked its queue names there first; audit and cron list read the
// primary alone).
func TestReadsUseTheReplicaAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submitID(t, "hello", "--delay", "1h")
	b.ok(t, "cron", "add", "report", "@hourly")
	b.ok(t, "pause", "hello", "--yes")
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	replica := cfg.FormatDSN()
	cfg.Addr = "127.0.0.1:1"
	primaryDown := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\n  read_dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s",
		cfg.FormatDSN(), replica, b.env.RedisAddr, b.env.Prefix, handlersYAML))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stats", "hello"}, `(?m)^hello +1 +0 +0 +0 +0 +0 +0 +0 `},
		{[]string{"list", "--code", "hello"}, fmt.Sprintf(`(?m)^%d +hello `, id)},
		{[]string{"show", strconv.FormatInt(id, 10)}, `(?m)^status +pending$`},
		{[]string{"audit"}, `(?m) pause +queue hello `},
		{[]string{"cron", "list"}, `(?m) report +@hourly `},
		{[]string{"limit", "hello"}, `(?m)^queue hello: no limit$`},
		{[]string{"cron", "timezone"}, `(?m)time zone`},
	} {
		r := runCLI(t, primaryDown, "", c.args...)
		require.Equal(t, cli.ExitOK, r.code, "taskd %v: stderr %q", c.args, r.stderr)
		require.Regexp(t, c.want, r.stdout, "taskd %v, read from the replica", c.args)
	}
	r := runCLI(t, primaryDown, "", "stats", "helo")
	require.Equal(t, cli.ExitFailure, r.code)
	require.Contains(t, r.stderr, `unknown queue "helo" (did you mean "hello"?)`)
}

// taskd stats, polled every second by scripts, opens one connection to
// the task center when no mysql.read_dsn is set: it used to open a second
// pool, and check the schema again, for its reads.
func TestStatsOpensOneConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := mysql.ParseDSN(b.env.DSN)
	require.NoError(t, err)
	proxy := testenv.NewFreezeProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	viaProxy := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s",
		cfg.FormatDSN(), b.env.RedisAddr, b.env.Prefix, handlersYAML))
	r := runCLI(t, viaProxy, "", "stats")
	require.Equal(t, cli.ExitOK, r.code, "stderr %q", r.stderr)
	require.Regexp(t, `(?m)^hello `, r.stdout)
	require.Equal(t, 1, proxy.Accepted(), "connections to the task center")
}

// A submit into a Redis at maxmemory keeps its task (pending, for the
// schedulers) and says so as the command's own warning: the producer's
// log record used to come out as a JSON line.
func TestSubmitIntoFullRedis(t *testing.T) {
	t.Parallel()
	b := setup(t)
	addr := testenv.FullRedis(t)
	full := writeConfig(t, fmt.Sprintf("mysql:\n  dsn: %q\nredis:\n  addr: %q\n  prefix: %q\n%s",
		b.env.DSN, addr, b.env.Prefix, handlersYAML))
	r := runCLI(t, full, "", "submit", "hello")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	m := submittedRE.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	require.Regexp(t, `^taskd: warning: redis is at maxmemory: push refused, tasks handed back to the schedulers, which dispatch them as workers make room \(tasks=1, err=push 1 messages: OOM .*\)\n$`, r.stderr)
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND status = 0`, m[1]), "pending, for a scheduler")

	// stats says why nothing is queued while the task waits: a full Redis
	// showed as a backlog of 0 beside a growing oldest due.
	r = runCLI(t, full, "", "stats", "hello")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^warning: Redis is full, it uses [0-9.]+ MiB of its maxmemory of 2\.0 MiB \(1[0-9][0-9]%\): pushes are refused`, r.stdout)
	require.Contains(t, strings.Join(strings.Fields(r.stdout), " "), "find what fills Redis: the queues' backlog (taskd stats), or other keys (redis-cli --bigkeys)",
		"the same fix as doctor's")
	var st struct {
		Memory struct {
			Used int64 `json:"used_bytes"`
			Max  int64 `json:"max_bytes"`
		} `json:"redis_memory"`
	}
	r = runCLI(t, full, "", "stats", "-o", "json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	require.EqualValues(t, 2<<20, st.Memory.Max)
	require.Greater(t, st.Memory.Used, st.Memory.Max)
	// The shared test Redis has no maxmemory: no warning.
	require.NotContains(t, b.ok(t, "stats"), "warning")
}

// --since and --until select by the time a task's row last changed: the
// tasks that died in an incident are retried, those that died days before
// are not.
func TestSelectByTimeChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var old, recent []int64
	for i := range 4 {
		id := b.submitID(t, "hello", "--delay", "1h")
		if i < 2 {
			old = append(old, id)
		} else {
			recent = append(recent, id)
		}
	}
	b.env.Exec(t, `UPDATE task_center SET status = 5, last_result = 'connection refused'`)
	b.env.Exec(t, fmt.Sprintf(`UPDATE task_center SET updated_at = NOW(3) - INTERVAL 3 DAY WHERE id IN (%d, %d)`, old[0], old[1]))

	var ts []listed
	b.okJSON(t, &ts, "list", "--status", "dead", "--since", "2h")
	require.ElementsMatch(t, recent, ids(ts))
	b.okJSON(t, &ts, "list", "--until", "1d")
	require.ElementsMatch(t, old, ids(ts))
	day := time.Now().Add(-3 * 24 * time.Hour)
	b.okJSON(t, &ts, "list", "--since", day.Add(-time.Hour).Format("2006-01-02 15:04"), "--until", day.Add(time.Hour).Format(time.RFC3339))
	require.ElementsMatch(t, old, ids(ts))

	var c change
	b.okJSON(t, &c, "retry", "--status", "dead", "--since", "2h", "--yes")
	require.ElementsMatch(t, recent, c.IDs)
	require.Equal(t, 2, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE status = 5`), "the old ones stay dead")
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE target LIKE '%since=%'`), "the audit log names the window")

	for _, args := range [][]string{
		{"list", "--since", "yesterday"},
		{"list", "--since", "-2h"},
		{"list", "--since", "1h", "--until", "2h"},
		{"retry", "--since", "2x", "--yes"},
		{"retry", "1", "--since", "2h", "--yes"},
	} {
		requireOneLineError(t, b.run(t, args...), cli.ExitUsage, "%v", args)
	}
}
