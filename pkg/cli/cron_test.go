package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskd/taskd/pkg/cli"
	"github.com/taskd/taskd/pkg/task"
)

// insertPeriodic INSERTs a periodic task the seed's way (no unique key,
// and no time zone unless tz), in status, next due at next.
func (b *testBundle) insertPeriodic(t *testing.T, code, expr, tz string, status task.Status, next time.Time) int64 {
	t.Helper()
	res := b.env.Exec(t, `INSERT INTO task_center (task_code, task_type, payload, cron_expr, timezone, status, plan_next_run_at)
		VALUES (?, 1, '{}', ?, ?, ?, FROM_UNIXTIME(?))`, code, expr, tz, status, next.Unix())
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

// nextRunOf is a task's plan_next_run_at.
func (b *testBundle) nextRunOf(t *testing.T, id int64) time.Time {
	t.Helper()
	var unix int64
	require.NoError(t, b.env.Store.DB().QueryRow(
		`SELECT FLOOR(UNIX_TIMESTAMP(plan_next_run_at)) FROM task_center WHERE id = ?`, id).Scan(&unix))
	return time.Unix(unix, 0)
}

// nineAfter is the first 09:00 in zone after now.
func nineAfter(t *testing.T, zone string, now time.Time) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	n := now.In(loc)
	at := time.Date(n.Year(), n.Month(), n.Day(), 9, 0, 0, 0, loc)
	if !at.After(n) {
		at = time.Date(n.Year(), n.Month(), n.Day()+1, 9, 0, 0, 0, loc)
	}
	return at.Local() // as nextRunOf reads it
}

// Changing the cluster's default zone moves the next run already planned
// for a waiting periodic task that names no zone: `0 9 * * *` planned at
// 09:00 Shanghai runs at 09:00 UTC once the default is Etc/UTC. A task in
// flight, one waiting for its retry, and one with a zone of its own keep
// theirs.
// cron add shows the two runs after the next: an expression that does not
// say what was meant shows it at once. "0 3 * * * *", a crontab line with
// a field too many, reads seconds first and runs every hour.
func TestCronAddShowsTheRunsAfterTheNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out := b.ok(t, "cron", "add", "hello", "0 3 * * * *", "--name", "six", "--tz", "UTC")
	m := regexp.MustCompile(`^added periodic task \d+; next run (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d), then (.+) and (.+)\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	next, err := time.ParseInLocation("2006-01-02 15:04:05", m[1], time.Local)
	require.NoError(t, err)
	for i, s := range m[2:] {
		want := next.Add(time.Duration(i+1) * time.Hour)
		if want.Format("2006-01-02") == next.Add(time.Duration(i)*time.Hour).Format("2006-01-02") {
			require.Equal(t, want.Format("15:04:05"), s, out)
		} else {
			require.Equal(t, want.Format("2006-01-02 15:04:05"), s, "a new day is dated: %s", out)
		}
	}

	out = b.ok(t, "cron", "add", "hello", "0 3 * * *", "--name", "five", "--tz", "UTC")
	m = regexp.MustCompile(`next run (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d), then (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) and (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)\n$`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, m[2], m[4], "daily: the same time each day")
	require.NotEqual(t, m[1], m[3])

	var ch change
	b.okJSON(t, &ch, "cron", "add", "hello", "@daily", "--name", "json")
	require.NotNil(t, ch.NextRun, "JSON keeps its shape")
}

func TestCronTimezoneMovesNextRunOfZonelessTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.ok(t, "cron", "timezone", "Asia/Shanghai")
	now, err := b.env.Store.Now(ctx)
	require.NoError(t, err)
	shanghai := nineAfter(t, "Asia/Shanghai", now)
	pending := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, shanghai)
	b.env.Exec(t, `UPDATE task_center SET scheduled_at = plan_next_run_at WHERE id = ?`, pending)
	running := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Running, shanghai)
	dispatched := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Dispatched, shanghai)
	failed := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Failed, now.Add(time.Minute))
	own := b.insertPeriodic(t, "report", "0 9 * * *", "Asia/Shanghai", task.Pending, shanghai)
	prefixed := b.insertPeriodic(t, "report", "CRON_TZ=Asia/Shanghai 0 9 * * *", "", task.Pending, shanghai)

	out := b.ok(t, "cron", "timezone", "Etc/UTC")
	require.Equal(t, "periodic tasks that name no time zone now run in Etc/UTC (was Asia/Shanghai); moved the next run of 1 periodic task\n", out)
	require.Equal(t, nineAfter(t, "Etc/UTC", now), b.nextRunOf(t, pending), "09:00 UTC, from now")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ? AND scheduled_at IS NOT NULL`, pending),
		"a new occurrence: no scheduled time of its own")
	for _, id := range []int64{running, dispatched, own, prefixed} {
		require.Equal(t, shanghai, b.nextRunOf(t, id), "task %d", id)
	}
	require.Equal(t, now.Add(time.Minute).Unix(), b.nextRunOf(t, failed).Unix(), "a retry keeps its time")
	require.Regexp(t, `(?m)^`+strconv.FormatInt(pending, 10)+` +report +0 9 \* \* \* +Etc/UTC +pending +`, b.ok(t, "cron", "list"))

	// JSON names the tasks moved, and the audit row too.
	var res struct {
		Timezone, Before string
		Moved            []int64
	}
	b.okJSON(t, &res, "cron", "timezone", "Asia/Shanghai")
	require.Equal(t, "Asia/Shanghai", res.Timezone)
	require.Equal(t, "Etc/UTC", res.Before)
	require.Equal(t, []int64{pending}, res.Moved)
	require.Equal(t, shanghai, b.nextRunOf(t, pending))
	require.Equal(t, 1, b.env.Count(t, `SELECT COUNT(*) FROM task_audit WHERE action = 'cron timezone'
		AND target = 'Asia/Shanghai' AND JSON_EXTRACT(detail, '$.moved[0]') = ?`, pending))

	// Setting the zone it has moves nothing: an overdue run stays due.
	b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?`, pending)
	overdue := b.nextRunOf(t, pending)
	require.Equal(t, "periodic tasks that name no time zone run in Asia/Shanghai\n", b.ok(t, "cron", "timezone", "Asia/Shanghai"))
	require.Equal(t, overdue, b.nextRunOf(t, pending))
	// Its JSON has the shape of a change's, for scripts.
	require.JSONEq(t, `{"timezone": "Asia/Shanghai", "before": "Asia/Shanghai", "moved": []}`,
		b.ok(t, "cron", "timezone", "Asia/Shanghai", "-o", "json"))
}

// The move is fenced: a task claimed, or whose next run changed, after it
// was read is left as it is now.
func TestCronZonelessMoveIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	st := b.env.Store
	now, err := st.Now(ctx)
	require.NoError(t, err)
	at := nineAfter(t, "Asia/Shanghai", now)
	claimed := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, at)
	runNow := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, at)
	readd := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, at)
	kept := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, at)
	zs, err := st.CronZonelessList(ctx)
	require.NoError(t, err)
	require.Len(t, zs, 4)

	// Claimed, run and back to pending; moved to now; re-added with a zone.
	b.env.Exec(t, `UPDATE task_center SET attempt = attempt + 1 WHERE id = ?`, claimed)
	b.env.Exec(t, `UPDATE task_center SET plan_next_run_at = FROM_UNIXTIME(?) WHERE id = ?`, now.Unix(), runNow)
	b.env.Exec(t, `UPDATE task_center SET timezone = 'Europe/Berlin' WHERE id = ?`, readd)
	to := nineAfter(t, "Etc/UTC", now)
	next := []time.Time{to, to, to, to}
	moved, err := st.CronZonelessMove(ctx, zs, next)
	require.NoError(t, err)
	require.Equal(t, []int64{kept}, moved)
	require.Equal(t, to, b.nextRunOf(t, kept))
	require.Equal(t, at, b.nextRunOf(t, claimed))
	require.Equal(t, now.Unix(), b.nextRunOf(t, runNow).Unix())
	require.Equal(t, at, b.nextRunOf(t, readd))
}

// Re-running cron add on a disabled periodic task updates it and says it
// stays disabled: no next run, in text or JSON.
func TestCronAddOnDisabledSaysDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := cronRE.FindStringSubmatch(b.ok(t, "cron", "add", "hello", "0 4 * * *"))
	require.NotNil(t, m)
	id := m[2]
	b.ok(t, "disable", id, "--yes")

	out := b.ok(t, "cron", "add", "hello", "0 4 * * *")
	require.Equal(t, "updated periodic task "+id+"; disabled: taskd enable "+id+" puts it back on its schedule\n", out)
	raw := b.ok(t, "cron", "add", "hello", "0 5 * * *", "-o", "json")
	var res change
	require.NoError(t, json.Unmarshal([]byte(raw), &res))
	require.Equal(t, "cron update", res.Action)
	require.Nil(t, res.NextRun, "output %s", raw)
	require.NotContains(t, raw, "next_run")
	require.Regexp(t, `(?m)^`+id+` +hello +hello +0 5 \* \* \* +\S+ +disabled +- `, b.ok(t, "cron", "list"))

	b.ok(t, "enable", id, "--yes")
	require.Regexp(t, `^updated periodic task `+id+`; next run \d{4}-`, b.ok(t, "cron", "add", "hello", "0 5 * * *"))
}

// A crontab line pasted with its command names the handler key that
// takes the command: exec.
func TestCronAddPastedCommandNamesExec(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "cron", "add", "hello", "0 9 * * 1-5 /usr/bin/backup.sh")
	requireOneLineError(t, r, cli.ExitUsage)
	require.Equal(t, `taskd: malformed cron expression "0 9 * * 1-5 /usr/bin/backup.sh": "/usr/bin/backup.sh" looks like a crontab line's command: give the schedule alone (the command is the handler's: handlers.CODE.exec)`+"\n", r.stderr)
	require.Zero(t, b.rows(t))
}

// Periodic tasks INSERTed the seed's way have no name: cron remove names
// them by id, and says what removes one, instead of listing empty names.
func TestCronRemoveNamesUnnamedByID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(time.Hour)
	one := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, at)
	s1 := strconv.FormatInt(one, 10)

	r := b.run(t, "cron", "remove", "report", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Equal(t, `taskd: no periodic task of code report named "report": its periodic task `+s1+
		` has no name (INSERTed without a unique key): taskd delete `+s1+` removes it`+"\n", r.stderr)

	two := b.insertPeriodic(t, "report", "0 10 * * *", "", task.Pending, at)
	three := b.insertPeriodic(t, "report", "0 11 * * *", "", task.Pending, at)
	ids := s1 + ", " + strconv.FormatInt(two, 10) + ", " + strconv.FormatInt(three, 10)
	r = b.run(t, "cron", "remove", "report", "--name", "", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Equal(t, `taskd: no periodic task of code report named "report": its periodic tasks `+ids+
		` have no name (INSERTed without a unique key): taskd delete ID removes one`+"\n", r.stderr)

	b.ok(t, "cron", "add", "report", "@daily", "--name", "nightly")
	r = b.run(t, "cron", "remove", "report", "--name", "weekly", "--yes")
	requireOneLineError(t, r, cli.ExitFailure)
	require.Equal(t, `taskd: no periodic task of code report named "weekly": its periodic task named "nightly" is picked with --name nightly, and `+
		ids+` have no name (INSERTed without a unique key): taskd delete ID removes one`+"\n", r.stderr)

	// The advice works.
	b.ok(t, "delete", s1, "--yes")
	require.Zero(t, b.env.Count(t, `SELECT COUNT(*) FROM task_center WHERE id = ?`, one))
	require.Equal(t, "removed periodic task", b.ok(t, "cron", "remove", "report", "--name", "nightly", "--yes")[:21])
}

// cron list -o json gives each periodic task's name, as the table shows
// it: "" for one INSERTed without a unique key.
func TestCronListJSONHasName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.ok(t, "cron", "add", "hello", "@hourly")
	b.ok(t, "cron", "add", "hello", "*/10 * * * * *", "--name", "every-10s")
	seed := b.insertPeriodic(t, "report", "0 9 * * *", "", task.Pending, time.Now().Add(time.Hour))

	var list []struct {
		ID        int64   `json:"id"`
		Name      *string `json:"name"`
		UniqueKey string  `json:"unique_key"`
	}
	b.okJSON(t, &list, "cron", "list")
	require.Len(t, list, 3)
	names := map[string]int64{}
	for _, c := range list {
		require.NotNil(t, c.Name, "task %d has a name field", c.ID)
		names[*c.Name] = c.ID
	}
	require.Contains(t, names, "hello")
	require.Contains(t, names, "every-10s")
	require.Equal(t, seed, names[""])
	for _, c := range list {
		if *c.Name != "" {
			require.Equal(t, "cron:"+*c.Name, c.UniqueKey)
		}
	}
}
